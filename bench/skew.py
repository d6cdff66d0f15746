"""Memory bound of dedup under skew: one LSH bucket of 100,000 near-copies of one template.

``python -m bench.skew [copies] [driver_memory]``; the ``make bench`` part ``skew`` reads
``BENCH_SKEW_COPIES`` (default 100,000) and ``BENCH_SKEW_DRIVER_MEMORY`` (default ``1g``, Spark's own
default, well under what a local run sets). The corpus is generated: ``copies`` documents that differ
from one ~100-word template only in an order number (every pair far above the Jaccard threshold, so all
land in the same bands) plus 1,000 unique documents, in one JSONL file. Ingest -> dedup run as
``jobs/pipeline.py`` on ``local[2]`` (:func:`bench.scale.run_chain`), the process tree sampled every
second; the figures are whether it finished, the survivors (expected: one template + the uniques) and
the peak RSS of driver JVM and Python workers.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench.corpus import generate_texts
from bench.scale import run_chain

UNIQUES = 1_000


def write_corpus(path: Path, copies: int) -> int:
    """One JSONL of ``copies`` template near-copies then :data:`UNIQUES` unique documents; returns rows."""
    body = generate_texts(1, seed=99, mean_words=100)[0]
    with open(path, "w") as f:
        for i in range(copies):
            f.write(json.dumps({"id": f"t{i:06d}", "text": f"{body} Order number {i * 7919 % 1000003} was received."}) + "\n")
        for i, t in enumerate(generate_texts(UNIQUES, seed=100, mean_words=80)):
            f.write(json.dumps({"id": f"u{i:04d}", "text": t}) + "\n")
    return copies + UNIQUES


def measure(copies: int, driver_memory: str, cores: int = 2) -> dict:
    work = Path(tempfile.mkdtemp(prefix="winnow-skew-"))
    try:
        rows = write_corpus(work / "skew.jsonl", copies)
        conf = json.dumps({"spark.driver.memory": driver_memory})
        chain = run_chain([str(work / "skew.jsonl")], work / "out", cores, stages=("ingest", "dedup"),
                          extra=["--set", f"spark.conf={conf}"])
        dedup = chain["stages"].get("dedup", {})
        return {"copies": copies, "uniques": UNIQUES, "rows": rows, "driver_memory": driver_memory, "cores": cores,
                "survivors": dedup.get("rows_out"), "expected_survivors": 1 + UNIQUES, **chain}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(n_docs: int = 0, seed: int = 0) -> dict:
    """The ``make bench`` part (``n_docs`` and ``seed`` unused: the corpus is fixed by the copies)."""
    return measure(int(os.environ.get("BENCH_SKEW_COPIES", 100_000)), os.environ.get("BENCH_SKEW_DRIVER_MEMORY", "1g"))


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(measure(int(a[0]) if a else 100_000, a[1] if len(a) > 1 else "1g"), indent=1))
