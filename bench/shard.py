"""Shard stage throughput: tokens/s and bytes/s of ``pipelines.shard.stage.run`` vs a plain sequential write.

The reference writes the same token bytes (uint16, the shard dtype) to one local file with
``ndarray.tofile`` in a single process: the floor cost of getting the bytes to disk, without the shuffle,
the balance plan, the ``.idx``/MDS encoding, sha256 or the manifest. Input: a ``tokenized`` Delta table of
``n_docs`` documents with ~700 random GPT-2 ids each (EOS-terminated), written before timing. The stage runs
twice: ``stage_cold_s`` includes starting the Python workers, the figures use the second (warm) run.

``python -m bench.shard [n_docs]``
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def run(n_docs: int, seed: int = 0, cores: int = 2) -> dict:
    """Time one shard-stage run and the sequential reference; returns JSON-serialisable figures."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import numpy as np
    import pandas as pd

    from pipelines.core import tables
    from pipelines.core.config import load_config
    from pipelines.core.session import get_spark
    from pipelines.shard.stage import run as shard_run
    from udfs.tokenize import load_tokenizer

    rng = np.random.default_rng(seed)
    lengths = np.maximum(2, rng.normal(700, 200, n_docs).astype(np.int64))
    docs = [np.append(rng.integers(0, 50_000, n - 1), 50256).astype(np.int32) for n in lengths]
    pdf = pd.DataFrame({"doc_id": [f"b{i:08d}" for i in range(n_docs)], "source": ["a" if i % 3 else "b" for i in range(n_docs)],
                        "tokens": [d.tolist() for d in docs], "n_tokens": lengths.astype(np.int32)})
    work = Path(tempfile.mkdtemp(prefix="winnow-bench-shard-"))
    cfg = load_config(files=[str(Path(__file__).resolve().parents[1] / "conf" / "local.yaml")], overrides=[f"run.root={work}", f"spark.shuffle_partitions={cores * 2}", "shard.num_shards=4",
                                 f"spark.master=local[{cores}]"])
    spark = get_spark("bench-shard", cfg.spark)
    tok = load_tokenizer("builtin:gpt2")
    props = {"tokenizer": "builtin:gpt2", "tokenizer_fingerprint": tok.fingerprint, "vocab_size": tok.vocab_size,
             "eos_id": 50256, "bos_id": None, "input_table": "documents", "input_version": 0}
    tables.write_table(spark.createDataFrame(pdf, "doc_id string, source string, tokens array<int>, n_tokens int"),
                       cfg, "tokenized", properties=props)
    t0 = time.perf_counter()
    report = shard_run(spark, cfg)
    cold_s = time.perf_counter() - t0
    # Second run: Python workers are warm (imports done), as for every stage after the first in a pipeline.
    t0 = time.perf_counter()
    report = shard_run(spark, cfg)
    stage_s = time.perf_counter() - t0
    n_tokens = int(lengths.sum())
    t0 = time.perf_counter()
    np.concatenate(docs).astype(np.uint16).tofile(work / "plain.bin")
    os.sync()
    plain_s = time.perf_counter() - t0
    bin_bytes = n_tokens * 2
    return {
        "n_docs": n_docs,
        "tokens": n_tokens,
        "cores": cores,
        "stage_cold_s": cold_s,
        "stage_s": stage_s,
        "stage_tokens_per_s": n_tokens / stage_s,
        "stage_bytes_per_s": report.extra["totals"]["bytes"] / stage_s,
        "plain_write_bytes_per_s": bin_bytes / plain_s,
        "ratio_stage_vs_plain_write_bytes_per_s": (report.extra["totals"]["bytes"] / stage_s) / (bin_bytes / plain_s),
    }


if __name__ == "__main__":
    res = run(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)
    for k, v in res.items():
        print(f"{k:48s} {v:,.3f}" if isinstance(v, float) else f"{k:48s} {v}")
