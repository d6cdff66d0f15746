"""spark-submit entry point of the filter stage.

``spark-submit jobs/filter.py --conf conf/local.yaml [--set k=v] [--decide-only]``; ``--decide-only``
re-decides keep/drop from the signals stored by an earlier full run, without recomputing them.
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
    from pipelines import filter as filter_stage
    from pipelines.session import get_spark
    from pipelines.stage import Timer

    parser = base_parser("filter.py", "Winnow filter stage: quality signals, language ID, quality classifier")
    parser.add_argument(
        "--decide-only",
        action="store_true",
        help="re-decide from the signals stored in `filtered` and `removed` (no signal recomputation)",
    )
    args, cfg = parse_config(parser, argv)
    spark = get_spark("winnow-filter", cfg.spark)
    if args.quiet:
        spark.sparkContext.setLogLevel("ERROR")
    with Timer() as t:
        report = filter_stage.run(spark, cfg, decide_only=args.decide_only)
    report.elapsed_s = t.elapsed
    report.check()
    print(report.summary_line(), flush=True)
    for name, loc in sorted(report.outputs.items()):
        print(f"  {name}: {loc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
