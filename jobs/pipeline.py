"""Run the configured chain of stages (``pipeline.stages``) in one SparkSession.

``python jobs/pipeline.py --conf conf/local.yaml`` or ``spark-submit jobs/pipeline.py ...``.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from collections.abc import Sequence

from jobs._cli import base_parser, parse_config

def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.session import get_spark
    from pipelines.stage import run_stage

    parser = base_parser("pipeline.py", "Run the Winnow chain of stages")
    args, cfg = parse_config(parser, argv)
    spark = get_spark("winnow-pipeline", cfg.spark)
    stages = cfg.pipeline.stages
    print(f"winnow: stages {stages} -> {cfg.run.root} (config {cfg.fingerprint()[:12]})", flush=True)
    for stage in stages:
        if not args.quiet:
            print(f"[{stage}] start", flush=True)
        report = run_stage(spark, cfg, stage)
        print(report.summary_line(), flush=True)
    print(f"winnow: done. Outputs under {cfg.run.root}/ (tables/, shards/, report/, config/)", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
