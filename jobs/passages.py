"""spark-submit entry point of the passages stage.

`spark-submit jobs/passages.py --conf conf/local.yaml [--set k=v]`
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

from jobs._cli import run_single_stage

if __name__ == "__main__":
    sys.exit(run_single_stage("passages", sys.argv[1:]))
