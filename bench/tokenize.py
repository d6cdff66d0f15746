"""Tokenize stage throughput vs the raw tokenizer on the same documents and cores.

Figures: tokens/s per core of (a) ``Tokenizer.encode_batch`` and ``encode_batch_fast`` called directly
with the Rust pool on all ``cores`` and (b) the Spark transform ``pipelines.tokenize.tokenize`` on
``local[cores]`` (one task per core, one Rust thread per task), written to Spark's ``noop`` sink so
only tokenisation, Arrow transfer and framing are timed. Goal: stage >= 0.8x raw ``encode_batch``.

``python -m bench.tokenize [n_docs]``
"""

from __future__ import annotations

import os
import sys
import time


def run(n_docs: int, seed: int = 0, cores: int = 2) -> dict:
    """Measure both paths on ``n_docs`` synthetic documents (bench.corpus); returns JSON-serialisable figures."""
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    os.environ["RAYON_NUM_THREADS"] = str(cores)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from bench.corpus import generate_batch
    from pipelines.config import SparkConfig, TokenizeConfig
    from pipelines.session import get_spark
    from pipelines.tokenize import tokenize
    from udfs.tokenize import load_tokenizer

    batch = generate_batch(n_docs, seed)
    texts = batch.column("text").to_pylist()
    tok = load_tokenizer("builtin:gpt2").tokenizer
    tok.encode_batch(texts[:50], add_special_tokens=False)  # warm the pool
    t0 = time.perf_counter()
    n_tokens = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
    raw_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tok.encode_batch_fast(texts, add_special_tokens=False)
    fast_s = time.perf_counter() - t0

    spark = get_spark("bench-tokenize", SparkConfig(master=f"local[{cores}]", shuffle_partitions=cores,
                                                    conf={"spark.ui.enabled": "false"}))
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    df = spark.createDataFrame(table.to_pandas()).repartition(cores * 4).cache()
    df.count()
    out = tokenize(df, TokenizeConfig(roundtrip_sample_fraction=0.01), seed)
    out.limit(10).write.format("noop").mode("overwrite").save()  # start the Python workers
    t0 = time.perf_counter()
    out.write.format("noop").mode("overwrite").save()
    stage_s = time.perf_counter() - t0
    df.unpersist()
    total = n_tokens + n_docs  # the stage also emits one EOS per document
    figures = {
        "n_docs": n_docs,
        "cores": cores,
        "tokens": n_tokens,
        "raw_encode_batch_tokens_per_s_per_core": n_tokens / raw_s / cores,
        "raw_encode_batch_fast_tokens_per_s_per_core": n_tokens / fast_s / cores,
        "stage_tokens_per_s_per_core": total / stage_s / cores,
    }
    figures["ratio_stage_vs_encode_batch"] = figures["stage_tokens_per_s_per_core"] / figures["raw_encode_batch_tokens_per_s_per_core"]
    figures["ratio_stage_vs_encode_batch_fast"] = figures["stage_tokens_per_s_per_core"] / figures["raw_encode_batch_fast_tokens_per_s_per_core"]
    figures["goal_ratio"] = 0.8
    return figures


if __name__ == "__main__":
    res = run(int(sys.argv[1]) if len(sys.argv) > 1 else 4000)
    for k, v in res.items():
        print(f"{k:48s} {v:,.3f}" if isinstance(v, float) else f"{k:48s} {v}")
