"""Benchmark of MinHash signatures: (a) the Spark stage, (b) the same UDF on plain Arrow batches,
(c) datasketch ``MinHash.update_batch`` per document; all three in one run, on one generated corpus.

``python -m bench.dedup [n_docs] [cores]`` prints a table; :func:`run` returns the figures. Per-core
figures are cleanest with ``cores=1`` (the default); a pass-through ``mapInArrow`` is timed too, as it
caps any stage that runs Python workers.

* (a) ``pipelines.dedup.stage.signatures`` (one ``mapInArrow`` pass: shingles, signatures, band keys) over a
  cached DataFrame in a ``local[cores]`` session, forced with the ``noop`` sink; per core = / cores.
  Also the whole near-dedup ``annotate`` (exact key, signatures, buckets, edges, components) as
  ``a_full``, for scale.
* (b) ``udfs.minhash.signatures`` + ``udfs.lsh.band_keys`` on Arrow batches of ``spark.arrow_batch_rows``
  rows, one Python process, no Spark.
* (c) datasketch 2.0.0 ``MinHash(num_perm=128)``: per document, shingles built in Python (lowercase,
  punctuation stripped, word 5-grams joined by spaces, UTF-8), then ``update_batch`` (SHA-1 per shingle).

Goals: (a) >= 5x (c) per core; (a)/(b) time ratio <= 1.25 (Spark overhead).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pyarrow as pa

from bench.corpus import generate_batch

NUM_PERM = 128
SEED = 42


def _datasketch_rate(texts: list[str]) -> float:
    from datasketch import MinHash

    punct = re.compile(r"[^\w\s]+")
    t0 = time.perf_counter()
    for t in texts:
        w = punct.sub(" ", t.lower()).split()
        sh = [" ".join(w[i : i + 5]).encode("utf-8") for i in range(max(1, len(w) - 4))]
        m = MinHash(num_perm=NUM_PERM, seed=SEED)
        m.update_batch(sh)
    return len(texts) / (time.perf_counter() - t0)


def _arrow_rate(batch: pa.RecordBatch, rows: int, settings) -> float:
    from udfs import lsh, minhash

    t0 = time.perf_counter()
    for start in range(0, batch.num_rows, rows):
        texts = batch.column("text").slice(start, rows)
        sig = minhash.signatures(texts, settings.shingle, settings.num_perm, settings.seed, settings.scheme)
        lsh.band_keys(sig, settings.bands, settings.rows)
    return batch.num_rows / (time.perf_counter() - t0)


def _pass_through(batches):
    for batch in batches:
        yield batch.select(["doc_id"])


def run(n_docs: int, seed: int = 0, cores: int = 1) -> dict:
    """Measure (a), (b), (c) on ``n_docs`` generated ~3.5 KB documents.

    Returns:
        figures: docs/s/core and MB/s/core for each way, and the ratios a/c and b/a (time ratio a vs b).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import functions as F

    from pipelines.core.config import SparkConfig
    from pipelines.core.session import get_spark
    from pipelines.dedup import stage as dedup
    from pipelines.dedup.config import DedupConfig

    batch = generate_batch(n_docs, seed)
    mb = sum(len(t.encode()) for t in batch.column("text").to_pylist()) / 1e6
    d = DedupConfig()
    settings = dedup.SignatureSettings.from_config(d, SEED)
    rows = SparkConfig().arrow_batch_rows

    c_rate = _datasketch_rate(batch.column("text").to_pylist()[: max(200, n_docs // 10)])
    b_rate = _arrow_rate(batch, rows, settings)

    spark = get_spark("winnow-bench-dedup", SparkConfig(master=f"local[{cores}]", shuffle_partitions=cores * 2,
                                                        conf={"spark.ui.enabled": "false"}))
    df = spark.createDataFrame(batch.to_pandas()).repartition(cores * 4).cache()
    df.count()
    dedup.signatures(df, settings).write.format("noop").mode("overwrite").save()  # warm the workers
    t0 = time.perf_counter()
    df.select("doc_id", "text").mapInArrow(_pass_through, "doc_id string").write.format("noop").mode("overwrite").save()
    pass_rate = n_docs / (time.perf_counter() - t0) / cores
    t0 = time.perf_counter()
    dedup.signatures(df, settings).write.format("noop").mode("overwrite").save()
    a_time = time.perf_counter() - t0
    a_rate = n_docs / a_time / cores
    docs = df.withColumn("n_chars", F.length("text"))
    t0 = time.perf_counter()
    dedup.annotate(docs, d, SEED).write.format("noop").mode("overwrite").save()
    full_rate = n_docs / (time.perf_counter() - t0) / cores
    per_doc_mb = mb / n_docs
    return {
        "n_docs": n_docs,
        "cores": cores,
        "mean_doc_kb": round(per_doc_mb * 1000, 2),
        "a_spark_docs_per_s_core": round(a_rate, 1),
        "a_spark_mb_per_s_core": round(a_rate * per_doc_mb, 2),
        "a_full_annotate_docs_per_s_core": round(full_rate, 1),
        "spark_pass_through_docs_per_s_core": round(pass_rate, 1),
        "b_arrow_docs_per_s": round(b_rate, 1),
        "b_arrow_mb_per_s": round(b_rate * per_doc_mb, 2),
        "c_datasketch_docs_per_s": round(c_rate, 1),
        "c_datasketch_mb_per_s": round(c_rate * per_doc_mb, 2),
        "ratio_a_over_c": round(a_rate / c_rate, 2),
        "ratio_time_a_over_b": round(b_rate / a_rate, 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 20_000
    cores = int(argv[1]) if len(argv) > 1 else 1
    r = run(n, cores=cores)
    print(f"dedup signatures, {r['n_docs']} docs of {r['mean_doc_kb']} KB, {r['cores']} cores, load {r['load_avg_1m']}")
    print(f"{'way':<34}{'docs/s/core':>12}{'MB/s/core':>11}")
    print(f"{'(a) Spark stage (mapInArrow)':<34}{r['a_spark_docs_per_s_core']:>12}{r['a_spark_mb_per_s_core']:>11}")
    print(f"{'(b) same UDF, plain Arrow':<34}{r['b_arrow_docs_per_s']:>12}{r['b_arrow_mb_per_s']:>11}")
    print(f"{'(c) datasketch update_batch':<34}{r['c_datasketch_docs_per_s']:>12}{r['c_datasketch_mb_per_s']:>11}")
    print(f"(a)/(c) = {r['ratio_a_over_c']}x (goal >= 5)   time (a)/(b) = {r['ratio_time_a_over_b']} (goal <= 1.25)")
    print(f"pass-through mapInArrow (cap of any Python-worker stage): {r['spark_pass_through_docs_per_s_core']} docs/s/core")
    print(f"whole near-dedup annotate: {r['a_full_annotate_docs_per_s_core']} docs/s/core")
    print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
