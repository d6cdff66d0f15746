"""Tokenize stage vs the raw tokenizers, on real text, in one run (tokens per CPU-second = per core).

Corpus: the shared web and Wikipedia samples repeated to ``BENCH_TOKENIZE_MB`` (default 50) MB
(:mod:`bench.tokenize_corpus`, path from ``$WINNOW_SHARED_DATA``), written as a ``refs_checked``-shaped
Delta table. Measured, each in CPU seconds of the process tree (driver, JVM, Python workers), so the
figures hold on a shared machine:

* raw ``tokenizers`` GPT-2 ``encode_batch`` on one thread, in 8 MB chunks of text like the stage's batches;
* raw tiktoken (``Encoding.encode_ordinary``) on one thread, same chunks, with the ranks built from the same
  GPT-2 files (:mod:`udfs.tokenize_tiktoken`), and whether its ids equal HF's on every document;
* the whole stage (``pipelines.tokenize.run``: Delta read, encode, EOS, audit, ``tokenized`` Delta
  write) with ``tokenize.engine=hf`` and ``tokenize.engine=tiktoken`` on ``local[2]``, and whether the
  two ``tokenized`` tables are equal.

Goals (issue 20): HF stage >= 0.8x raw HF ``encode_batch``; tiktoken stage >= 3x the HF stage.

``python -m bench.tokenize`` (or ``python -m bench.run --only tokenize``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time


def run(n_docs: int = 0, seed: int = 0, cores: int = 2) -> dict:
    """Measure every path on the real-text corpus; ``n_docs`` is ignored (the size is in MB).

    Returns:
        JSON-ready figures: corpus facts, ``*_tokens_per_cpu_s`` per path, ratios, ``goals``.
    """
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread: the per-core reference
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from bench.common import Measure, loadavg
    from bench.references import SHARED
    from bench.tokenize_corpus import repeated_corpus, write_refs_checked
    from pipelines import tokenize as stage
    from pipelines.config import load_config
    from pipelines.session import get_spark
    from udfs.tokenize import load_tokenizer
    from udfs.tokenize_tiktoken import encoding_for

    mb = float(os.environ.get("BENCH_TOKENIZE_MB", "50"))
    corpus = repeated_corpus(SHARED, int(mb * 1e6))
    texts = corpus.column("text").to_pylist()
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    tok = load_tokenizer("builtin:gpt2")
    enc = encoding_for(tok)
    tok.tokenizer.encode_batch(texts[:20], add_special_tokens=False)
    fig: dict = {"corpus": f"shared web_crawl + wikipedia JSONL samples repeated to {mb:g} MB", "docs": len(texts),
                 "mb": round(n_bytes / 1e6, 2), "cores": cores, "load1_start": loadavg()[0]}

    # The raw references run in 8 MB chunks, like the stage's batches (``tokenize.batch_mb``): one call
    # over all 50 MB keeps every ``Encoding`` alive at once (GBs) and costs more CPU per token.
    hf_s = tt_s = wall_hf = wall_tt = 0.0
    n_tokens = equal_docs = 0
    for chunk in _chunks(texts, 8_000_000):
        with Measure() as m:
            hf_ids = [e.ids for e in tok.tokenizer.encode_batch(chunk, add_special_tokens=False)]
        hf_s, wall_hf = hf_s + m.cpu_s, wall_hf + m.wall_s
        with Measure() as m:
            tt_ids = [enc.encode_ordinary(t) for t in chunk]
        tt_s, wall_tt = tt_s + m.cpu_s, wall_tt + m.wall_s
        n_tokens += sum(map(len, hf_ids))
        equal_docs += sum(a == b for a, b in zip(hf_ids, tt_ids, strict=True))
        del hf_ids, tt_ids
    fig["tokens"] = n_tokens
    fig["raw_hf_encode_batch"] = {"wall_s": round(wall_hf, 4), "cpu_s": round(hf_s, 4), "tokens_per_cpu_s": n_tokens / hf_s,
                                  "chunk_mb": 8}
    fig["raw_tiktoken"] = {"wall_s": round(wall_tt, 4), "cpu_s": round(tt_s, 4), "tokens_per_cpu_s": n_tokens / tt_s,
                           "chunk_mb": 8}
    fig["raw_ids_equal_docs"] = equal_docs
    fig["raw_ids_equal"] = equal_docs == len(texts)
    del texts

    root = tempfile.mkdtemp(prefix="winnow-bench-tokenize-")
    base = [f"run.root={root}", f"spark.master=local[{cores}]", f"spark.shuffle_partitions={cores}",
            "pipeline.stages=[refs, tokenize]", "spark.conf={spark.ui.enabled: 'false'}"]
    cfg = load_config(overrides=base)
    spark = get_spark("bench-tokenize", cfg.spark)
    write_refs_checked(spark, corpus, cfg.table_path("refs_checked"), partitions=cores * 4)
    # Warm the JVM and the Python workers on 300 documents, so neither engine's figure pays for it.
    warm = load_config(overrides=[*base, f"run.root={root}/warm", "tokenize.engine=hf"])
    write_refs_checked(spark, corpus.slice(0, 300), warm.table_path("refs_checked"), partitions=cores)
    stage.run(spark, warm)
    tables = {}
    for engine in ("hf", "tiktoken"):
        ecfg = load_config(overrides=[*base, f"tokenize.engine={engine}"])
        load0 = loadavg()[0]
        t0 = time.time()
        with Measure() as m:
            report = stage.run(spark, ecfg)
        tokens = int(report.extra["tokens"])
        fig[f"stage_{engine}"] = {**m.as_dict(), "tokens": tokens, "tokens_per_cpu_s": tokens / m.cpu_s,
                                  "load1_before": load0, "load1_after": loadavg()[0], "started": t0,
                                  "roundtrip_checked": report.extra["roundtrip_checked"],
                                  "engine": report.extra["engine"]}
        path = ecfg.table_path("tokenized")
        tables[engine] = spark.read.format("delta").load(path).localCheckpoint()
        tables[engine].count()
    a, b = tables["hf"], tables["tiktoken"]
    fig["stage_tables_equal"] = a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0

    raw = fig["raw_hf_encode_batch"]["tokens_per_cpu_s"]
    hf_stage = fig["stage_hf"]["tokens_per_cpu_s"]
    tt_stage = fig["stage_tiktoken"]["tokens_per_cpu_s"]
    fig["ratio_hf_stage_vs_raw_encode_batch"] = hf_stage / raw
    fig["ratio_tiktoken_stage_vs_hf_stage"] = tt_stage / hf_stage
    fig["ratio_tiktoken_stage_vs_raw_tiktoken"] = tt_stage / fig["raw_tiktoken"]["tokens_per_cpu_s"]
    fig["ratio_raw_tiktoken_vs_raw_encode_batch"] = fig["raw_tiktoken"]["tokens_per_cpu_s"] / raw
    fig["goals"] = {"tokenize_vs_raw": fig["ratio_hf_stage_vs_raw_encode_batch"],
                    "tiktoken_vs_hf_stage": fig["ratio_tiktoken_stage_vs_hf_stage"],
                    # stage core-seconds / raw encode_batch core-seconds for the same tokens
                    "spark_overhead": 1 / fig["ratio_hf_stage_vs_raw_encode_batch"]}
    return fig


def _chunks(texts: list[str], max_bytes: int) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for t in texts:
        if size >= max_bytes:
            out.append([])
            size = 0
        out[-1].append(t)
        size += len(t.encode("utf-8"))
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1, default=str))
