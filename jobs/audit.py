"""spark-submit entry point of the tokenizer audit: `spark-submit jobs/audit.py --conf conf/local.yaml`.

Reads the run's ``tokenized`` table and the document table tokenize read, writes
``<run.root>/audit/audit.json`` and prints the top findings.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from collections.abc import Sequence

from jobs._cli import base_parser, parse_config, spark_config


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, build the session, audit, print the summary; returns the exit status (0; 2 when a prompt
    file is missing, unreadable or has no ``prompt`` field)."""
    from pipelines.audit.job import run, summary_lines
    from pipelines.audit.prompts import prompt_file_sets, read_prompts
    from pipelines.core.eval_sets import EvalSetError
    from pipelines.core.preflight import local_path
    from pipelines.core.session import get_spark

    p = base_parser("audit.py", "Winnow tokenizer audit: does the run's tokenizer fit its data?")
    p.add_argument("--prompts", action="append", default=[], metavar="FILE",
                   help="JSONL of evaluation prompts ({prompt, answer} per line; local, s3:// or a Hadoop "
                        "URI) to check besides decontam.eval_sets and audit.prompt_sets, named by the file's "
                        "stem; repeatable")
    args, cfg = parse_config(p, argv)
    extra = prompt_file_sets(args.prompts)
    try:
        for es in extra:  # local files are checked before Spark starts
            if all(local_path(path) is not None for path in es.paths):
                read_prompts(es, "--prompts")
        spark = get_spark("winnow-audit", spark_config(cfg, args.quiet))
        doc = run(spark, cfg, extra)
    except EvalSetError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    print("\n".join(summary_lines(doc, top=3 if args.quiet else 8)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
