"""spark-submit entry point of the decontam stage.

`spark-submit jobs/decontam.py --conf conf/local.yaml [--set k=v] [--join broadcast|shuffle]`
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from jobs._cli import run_single_stage, stage_parser


def parser():
    """The decontam job's parser: the common options plus ``--join``."""
    p = stage_parser("decontam")
    p.add_argument(
        "--join",
        choices=["broadcast", "shuffle"],
        default=None,
        help="force a join path (default: by decontam.broadcast_max_ngrams)",
    )
    return p


def main(argv=None) -> int:
    """Run the decontam stage (``--join`` forces a join path); returns the exit status."""
    return run_single_stage("decontam", argv, parser=parser(), options=lambda a: {"join": a.join})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
