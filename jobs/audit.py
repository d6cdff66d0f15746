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
    """Parse, build the session, audit, print the summary; returns the exit status (0)."""
    from pipelines.audit.job import run, summary_lines
    from pipelines.core.config import EvalSetConfig
    from pipelines.core.session import get_spark

    p = base_parser("audit.py", "Winnow tokenizer audit: does the run's tokenizer fit its data?")
    p.add_argument("--prompts", action="append", default=[], metavar="FILE",
                   help="JSONL of evaluation prompts ({prompt, answer} per line) to check besides "
                        "decontam.eval_sets and audit.prompt_sets; repeatable")
    args, cfg = parse_config(p, argv)
    extra = [EvalSetConfig(name=f"prompts_{i}", paths=[path], fields=["prompt", "answer"])
             for i, path in enumerate(args.prompts)]
    spark = get_spark("winnow-audit", spark_config(cfg, args.quiet))
    doc = run(spark, cfg, extra)
    print("\n".join(summary_lines(doc, top=3 if args.quiet else 8)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
