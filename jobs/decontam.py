"""spark-submit entry point of the decontam stage: `spark-submit jobs/decontam.py --conf conf/local.yaml [--set k=v]`."""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from jobs._cli import parse_config, preflight_or_exit, spark_config, stage_parser


def main(argv: list[str] | None = None) -> int:
    """Parse, check the evaluation sets, run :func:`pipelines.decontam.run`, print the summary."""
    from pipelines.decontam import run
    from pipelines.session import get_spark
    from pipelines.stage import Timer

    parser = stage_parser("decontam")
    parser.add_argument("--join", choices=["broadcast", "shuffle"], default=None,
                        help="force a join path (default: by decontam.broadcast_max_ngrams)")
    args, cfg = parse_config(parser, argv)
    preflight_or_exit(parser, cfg, ["decontam"])
    spark = get_spark("winnow-decontam", spark_config(cfg, args.quiet))
    with Timer() as t:
        report = run(spark, cfg, join=args.join)
    report.elapsed_s = t.elapsed
    report.check()
    print(report.summary_line(), flush=True)
    for name, s in report.extra.get("sets", {}).items():
        print(f"  {name}: {s['items_found']}/{s['items']} items found in {s['docs_matched']} documents", flush=True)
    for name, loc in sorted(report.outputs.items()):
        print(f"  {name}: {loc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
