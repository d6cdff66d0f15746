"""spark-submit entry point of the pii stage: `spark-submit jobs/pii.py --conf conf/local.yaml [--set k=v]`.

Reads ``pii.input_table`` (default ``refs_checked``; ``--set pii.input_table=decontaminated`` after
decontam) and writes ``pii_redacted`` and the stage's ``removed`` rows.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from jobs._cli import parse_config, preflight_or_exit, spark_config, stage_parser


def main(argv: list[str] | None = None) -> int:
    from pipelines import pii
    from pipelines.session import get_spark
    from pipelines.stage import Timer

    parser = stage_parser("pii")
    args, cfg = parse_config(parser, argv)
    preflight_or_exit(parser, cfg, [])
    spark = get_spark("winnow-pii", spark_config(cfg, args.quiet))
    with Timer() as t:
        report = pii.run(spark, cfg)
    report.elapsed_s = t.elapsed
    print(report.check().summary_line(), flush=True)
    for name, loc in sorted(report.outputs.items()):
        print(f"  {name}: {loc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
