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

from jobs._cli import run_single_stage, stage_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the filter stage (``--decide-only`` re-decides from stored signals); returns the exit status."""
    parser = stage_parser("filter")
    parser.description = "Winnow filter stage: quality signals, language ID, quality classifier"
    parser.add_argument(
        "--decide-only",
        action="store_true",
        help="re-decide from the signals stored in `filtered` and `removed` (no signal recomputation)",
    )
    return run_single_stage("filter", argv, parser, lambda args: {"decide_only": args.decide_only})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
