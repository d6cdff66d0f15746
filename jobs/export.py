"""Export a stage table to Parquet files.

``python jobs/export.py --conf conf/local.yaml --table tokenized --output out/hf --hf``:

``--hf`` lays the files out for the Hugging Face Hub (``data/train-00000-of-000NN.parquet`` of about
``--file-mb`` each and a dataset card ``README.md``); without it the table is written as plain Parquet,
optionally ``--partition-by`` columns.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

import argparse
from collections.abc import Sequence

from jobs._cli import base_parser, parse_config, spark_config
from pipelines.core.chain import CHAIN

TABLES = [*dict.fromkeys(t for s in CHAIN for t in s.outputs), "removed", "_runs"]
"""The Delta tables a run writes (pipelines/core/chain.py), the choices of ``--table``: a misspelt name fails
before Spark starts, listing them (it used to start Spark and then find no table)."""


def parser() -> argparse.ArgumentParser:
    """The export job's parser: the common options plus the table, the output and the layout."""
    p = base_parser("export.py", "Write a Winnow table as Parquet files (optionally for the HF Hub)")
    p.add_argument("--table", required=True, choices=TABLES, metavar="TABLE",
                   help=f"table of the run to export: one of {', '.join(TABLES)}")
    p.add_argument("--output", required=True, help="output folder (local path or URI); replaced")
    p.add_argument("--hf", action="store_true",
                   help="Hub layout: data/train-NNNNN-of-NNNNN.parquet files and a README.md dataset card")
    p.add_argument("--file-mb", type=int, default=500, help="--hf: target megabytes per file (default 500)")
    p.add_argument("--partition-by", action="append", default=[], metavar="COLUMN",
                   help="plain layout: partition by this column (repeatable)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Export one table; returns the exit status."""
    from pipelines.core.session import get_spark
    from pipelines.tools.export import export_table

    p = parser()
    args, cfg = parse_config(p, argv)
    if args.file_mb < 1:
        p.error(f"--file-mb must be >= 1; got {args.file_mb}")
    spark = get_spark("winnow-export", spark_config(cfg, args.quiet))
    try:
        res = export_table(spark, cfg, args.table, args.output, hf=args.hf, file_bytes=args.file_mb * 2**20,
                           partition_by=args.partition_by or None)
    except ValueError as e:
        p.exit(2, f"{p.prog}: {e}\n")
    print(res.summary_line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
