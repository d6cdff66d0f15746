"""Decontam stage throughput: 100,000 evaluation n-grams against the bench corpus, MB/s per core.

``python -m bench.decontam [n_docs]``

Evaluation set: items of ~100 words cut from a second seeded corpus (:mod:`bench.corpus`, seed + 1),
as many as make :data:`EVAL_NGRAMS` distinct 13-grams; every 50th training document gets one item
pasted in, so matches exist and both sides must find the same documents.

Measured, all on the same documents, CPU seconds of the whole process tree (driver, JVM, Python
workers) turned into MB/s of training text (UTF-8) per core:

* ``python_set``: the tool a user would write instead: one process, each document lowercased, split
  into ``[^\\W_]+`` words, every 13-gram tuple looked up in a Python ``set`` of the evaluation 13-grams
  (the lm-evaluation-harness "janitor" / GPT-3 appendix C method without the hashing);
* ``kernel``: :func:`udfs.decontam.doc_hashes` over Arrow batches of 1024 in one process (the
  broadcast path's work without Spark);
* ``spark_broadcast`` / ``spark_shuffle``: :func:`pipelines.decontam.stage.find_matches` on ``local[1]``
  through the ``noop`` sink, each join path forced; warm runs (the Python workers have built their
  Unicode tables once).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

EVAL_NGRAMS = 100_000
N = 13
ITEM_WORDS = 100
PLANT_EVERY = 50
_WORD = re.compile(r"[^\W_]+")


def eval_items(seed: int) -> list[str]:
    """Items of :data:`ITEM_WORDS` words until their 13-grams reach :data:`EVAL_NGRAMS`."""
    from bench.corpus import iter_texts

    items, grams = [], 0
    for text in iter_texts(10**6, seed + 1):
        words = text.split()
        for i in range(0, len(words) - ITEM_WORDS + 1, ITEM_WORDS):
            items.append(" ".join(words[i:i + ITEM_WORDS]))
            grams += ITEM_WORDS - N + 1
            if grams >= EVAL_NGRAMS:
                return items
    return items


def corpus(n_docs: int, seed: int, items: list[str]) -> list[str]:
    """The bench corpus with one evaluation item pasted into every :data:`PLANT_EVERY`-th document."""
    from bench.corpus import generate_texts

    texts = generate_texts(n_docs, seed)
    return [t + "\n\n" + items[i % len(items)] if i % PLANT_EVERY == 0 else t for i, t in enumerate(texts)]


def python_set_matches(texts: list[str], items: list[str]) -> set[int]:
    """The plain-Python reference: documents (by index) holding any evaluation 13-gram."""
    grams = set()
    for it in items:
        w = _WORD.findall(it.lower())
        grams.update(tuple(w[i:i + N]) for i in range(len(w) - N + 1))
    hits = set()
    for d, t in enumerate(texts):
        w = _WORD.findall(t.lower())
        if any(tuple(w[i:i + N]) in grams for i in range(len(w) - N + 1)):
            hits.add(d)
    return hits


def run(n_docs: int, seed: int = 0) -> dict:
    """Figures as a JSON-serialisable dict (see the module docstring)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from bench.common import text_bytes, time_best, time_spark
    from pipelines.core.config import load_config
    from pipelines.core.session import get_spark
    from pipelines.decontam import stage as decontam
    from udfs import decontam as kernels

    items = eval_items(seed)
    texts = corpus(n_docs, seed, items)
    mb = text_bytes(texts) / 1e6
    out: dict = {"n_docs": n_docs, "mb": round(mb, 3), "eval_items": len(items), "planted": len(range(0, n_docs, PLANT_EVERY))}

    ref_hits: set[int] = set()

    def ref() -> None:
        ref_hits.clear()
        ref_hits.update(python_set_matches(texts, items))

    t = time_best(ref, warmup=1, repeat=2)
    out["python_set"] = {"cpu_s": t["best_cpu_s"], "mb_s_core": mb / t["best_cpu_s"], "docs_matched": len(ref_hits)}

    keys = np.unique(np.concatenate([k for k, _ in kernels.item_hashes(items, N)]))
    out["eval_ngrams"] = int(keys.size)
    kernel_hits: list[int] = []

    def kernel() -> None:
        kernel_hits.clear()
        for i in range(0, len(texts), 1024):
            got = kernels.doc_hashes(pa.array(texts[i:i + 1024], pa.string()), N, keys)
            kernel_hits.extend(i + j for j, h in enumerate(got.to_pylist()) if h)

    t = time_best(kernel, warmup=1, repeat=2)  # warm-up: Unicode tables, as in warm Spark workers
    out["kernel"] = {"cpu_s": t["best_cpu_s"], "mb_s_core": mb / t["best_cpu_s"], "docs_matched": len(kernel_hits)}
    out["kernel_vs_python_set"] = out["kernel"]["mb_s_core"] / out["python_set"]["mb_s_core"]

    work = Path(tempfile.mkdtemp(prefix="winnow-bench-decontam-"))
    evals = work / "eval.jsonl"
    evals.write_text("".join(f'{{"id": "e{i}", "text": "{t}"}}\n' for i, t in enumerate(items)), encoding="utf-8")
    sets = f'[{{name: bench, paths: ["{evals}"], fields: [text], id_field: id}}]'
    cfg = load_config(overrides=[f"run.root={work}", "spark.master=local[1]", "spark.shuffle_partitions=2",
                                 f"decontam.eval_sets={sets}", "spark.conf={spark.ui.enabled: 'false'}"])
    spark = get_spark("winnow-bench-decontam", cfg.spark)
    index = decontam.build_eval_ngrams(spark, cfg)
    df = spark.createDataFrame([(str(i), t) for i, t in enumerate(texts)], "doc_id string, text string")
    df = df.repartition(1).cache()
    df.count()
    for path in ("broadcast", "shuffle"):
        def job(path: str = path):
            return decontam.find_matches(df, index, cfg.decontam, path)

        t = time_spark(job, warmup=1, repeat=2)
        matched = job().count()
        out[f"spark_{path}"] = {"cpu_s": t["best_cpu_s"], "wall_s": t["best_s"], "mb_s_core": mb / t["best_cpu_s"],
                                "docs_matched": matched}
        out[f"spark_{path}_vs_python_set"] = out[f"spark_{path}"]["mb_s_core"] / out["python_set"]["mb_s_core"]
    df.unpersist()
    out["same_documents"] = (len(ref_hits) == len(kernel_hits) == out["spark_broadcast"]["docs_matched"]
                             == out["spark_shuffle"]["docs_matched"] and set(kernel_hits) == ref_hits)
    out["goals"] = {"spark_overhead": out["kernel"]["mb_s_core"] / out["spark_broadcast"]["mb_s_core"],
                    "decontam_vs_python_set": out["spark_broadcast_vs_python_set"]}
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 4000), indent=2))
