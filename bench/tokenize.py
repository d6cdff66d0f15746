"""Tokenize stage vs the raw tokenizers, on real text, in one run (tokens per CPU-second = per core).

Corpus: the shared web and Wikipedia samples repeated to ``BENCH_TOKENIZE_MB`` (default 50) MB
(:mod:`bench.tokenize_corpus`, path from ``$WINNOW_SHARED_DATA``), written as a ``refs_checked``-shaped
Delta table. Measured, each in CPU seconds of the process tree (driver, JVM, Python workers), so the
figures hold on a shared machine:

* raw ``tokenizers`` GPT-2 ``encode_batch`` on one thread, in 8 MB chunks of text like the stage's
  batches, and raw tiktoken (``Encoding.encode_ordinary``) on one thread, same chunks, with the ranks
  built from the same GPT-2 files (:mod:`udfs.tokenize_tiktoken`), and whether its ids equal HF's on
  every document; both measured before and again after the stages (the figure is the mean), so a
  change of the machine's load during the run weighs on both sides;
* raw ``encode_batch_fast`` (what the stage calls) once, and the stage's own per-batch work without
  Spark (:func:`udfs.tokenize_batch.encode_batch` over 8 MB Arrow batches, 1% audited) per engine:
  ``plain_batches_*``, the basis of ``spark_overhead``;
* the whole stage (``pipelines.tokenize.stage.run``: Delta read, encode, EOS, audit, ``tokenized`` and
  ``removed`` Delta writes) with ``tokenize.engine=hf`` and ``tiktoken`` on ``local[2]``, alternately,
  ``BENCH_TOKENIZE_REPS`` (default 2) times each after one warm-up run of each engine on the first
  ``BENCH_TOKENIZE_WARM_DOCS`` (default 1,000) documents; the figure is the mean over the runs, and
  ``first_pair`` keeps the ratios of the first measured pair (more of the JVM's JIT compilation in it).
  Whether the two ``tokenized`` tables are equal.

Goals: HF stage >= 0.8x raw HF ``encode_batch``; tiktoken stage >= 3x the HF stage.

``python -m bench.tokenize`` (or ``python -m bench.run --only tokenize``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from statistics import mean

CHUNK_BYTES = 8_000_000
"""Raw references and plain batches run in chunks of this much text, like the stage's ``tokenize.batch_mb``:
one call over all 50 MB keeps every ``Encoding`` alive at once (GBs) and costs more CPU per token."""


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
    from pipelines.core.config import load_config
    from pipelines.core.session import get_spark
    from pipelines.tokenize import stage
    from udfs.tokenize import load_tokenizer
    from udfs.tokenize_tiktoken import encoding_for

    mb = float(os.environ.get("BENCH_TOKENIZE_MB", "50"))
    reps = int(os.environ.get("BENCH_TOKENIZE_REPS", "2"))
    warm_docs = int(os.environ.get("BENCH_TOKENIZE_WARM_DOCS", "1000"))
    corpus = repeated_corpus(SHARED, int(mb * 1e6))
    texts = corpus.column("text").to_pylist()
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    tok = load_tokenizer("builtin:gpt2")
    enc = encoding_for(tok)
    tok.tokenizer.encode_batch(texts[:20], add_special_tokens=False)
    fig: dict = {"corpus": f"shared web_crawl + wikipedia JSONL samples repeated to {mb:g} MB", "docs": len(texts),
                 "mb": round(n_bytes / 1e6, 2), "cores": cores, "load1_start": loadavg()[0]}

    before = _raw_references(tok, enc, texts, first=True)
    n_tokens = before.pop("tokens")
    fig["tokens"] = n_tokens
    fig["raw_ids_equal_docs"] = before.pop("equal_docs")
    fig["raw_ids_equal"] = fig["raw_ids_equal_docs"] == len(texts)
    fig["raw_hf_encode_batch_fast"] = _rate(before.pop("hf_fast"), n_tokens)
    fig["plain_batches_hf"] = _rate(_plain_batches(corpus, tok, None), n_tokens)
    fig["plain_batches_tiktoken"] = _rate(_plain_batches(corpus, tok, enc), n_tokens)
    del texts

    root = tempfile.mkdtemp(prefix="winnow-bench-tokenize-")
    base = [f"spark.master=local[{cores}]", f"spark.shuffle_partitions={cores}", "pipeline.stages=[refs, tokenize]",
            "spark.conf={spark.ui.enabled: 'false'}"]
    # One run root per engine (same input table, written twice): each engine replaces its own tables.
    cfgs = {e: load_config(overrides=[*base, f"run.root={root}/{e}", f"tokenize.engine={e}"]) for e in ("hf", "tiktoken")}
    spark = get_spark("bench-tokenize", cfgs["hf"].spark)
    for engine, ecfg in cfgs.items():
        write_refs_checked(spark, corpus, ecfg.table_path("refs_checked"), partitions=cores * 4)
        # Warm the JVM (JIT) and the Python workers (tokenizer, tiktoken ranks) with both engines, so the
        # measured runs see what a long stage sees; the first measured pair still carries more JIT work.
        warm = load_config(overrides=[*base, f"run.root={root}/warm-{engine}", f"tokenize.engine={engine}"])
        write_refs_checked(spark, corpus.slice(0, warm_docs), warm.table_path("refs_checked"), partitions=cores)
        stage.run(spark, warm)
    runs: dict[str, list[dict]] = {"hf": [], "tiktoken": []}
    reports = {}
    for _ in range(reps):
        for engine, ecfg in cfgs.items():
            load0, t0 = loadavg()[0], time.time()
            with Measure() as m:
                reports[engine] = stage.run(spark, ecfg)
            runs[engine].append({"cpu_s": round(m.cpu_s, 4), "wall_s": round(m.wall_s, 4), "load1_before": load0,
                                 "load1_after": loadavg()[0], "started": t0})
    for engine, measured in runs.items():
        report = reports[engine]
        tokens = int(report.extra["tokens"])
        cpu = mean(r["cpu_s"] for r in measured)
        fig[f"stage_{engine}"] = {"cpu_s": round(cpu, 4), "wall_s": round(mean(r["wall_s"] for r in measured), 4),
                                  "runs": measured, "tokens": tokens, "tokens_per_cpu_s": tokens / cpu,
                                  "roundtrip_checked": report.extra["roundtrip_checked"],
                                  "engine": report.extra["engine"]}
    a, b = (spark.read.format("delta").load(c.table_path("tokenized")) for c in cfgs.values())
    fig["stage_tables_equal"] = a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0

    after = _raw_references(tok, enc, corpus.column("text").to_pylist(), first=False)
    for key, name in (("hf", "raw_hf_encode_batch"), ("tiktoken", "raw_tiktoken")):
        cpu_runs = [before[key]["cpu_s"], after[key]["cpu_s"]]
        fig[name] = {**_rate({"cpu_s": mean(cpu_runs), "wall_s": mean([before[key]["wall_s"], after[key]["wall_s"]])},
                             n_tokens), "cpu_s_before_after": cpu_runs, "chunk_mb": CHUNK_BYTES // 1_000_000}

    raw = fig["raw_hf_encode_batch"]["tokens_per_cpu_s"]
    hf_stage = fig["stage_hf"]["tokens_per_cpu_s"]
    tt_stage = fig["stage_tiktoken"]["tokens_per_cpu_s"]
    fig["ratio_hf_stage_vs_raw_encode_batch"] = hf_stage / raw
    fig["ratio_hf_stage_vs_raw_encode_batch_fast"] = hf_stage / fig["raw_hf_encode_batch_fast"]["tokens_per_cpu_s"]
    fig["ratio_tiktoken_stage_vs_hf_stage"] = tt_stage / hf_stage
    fig["ratio_tiktoken_stage_vs_raw_tiktoken"] = tt_stage / fig["raw_tiktoken"]["tokens_per_cpu_s"]
    fig["ratio_raw_tiktoken_vs_raw_encode_batch"] = fig["raw_tiktoken"]["tokens_per_cpu_s"] / raw
    fig["stage_over_plain_cpu_hf"] = fig["stage_hf"]["cpu_s"] / fig["plain_batches_hf"]["cpu_s"]
    fig["stage_over_plain_cpu_tiktoken"] = fig["stage_tiktoken"]["cpu_s"] / fig["plain_batches_tiktoken"]["cpu_s"]
    first_hf, first_tt = runs["hf"][0]["cpu_s"], runs["tiktoken"][0]["cpu_s"]
    fig["first_pair"] = {"ratio_hf_stage_vs_raw_encode_batch": fig["stage_hf"]["tokens"] / first_hf / raw,
                         "ratio_tiktoken_stage_vs_hf_stage": first_hf / first_tt}
    fig["goals"] = {"tokenize_vs_raw": fig["ratio_hf_stage_vs_raw_encode_batch"],
                    "tiktoken_vs_hf_stage": fig["ratio_tiktoken_stage_vs_hf_stage"],
                    # HF stage core-seconds / the same per-batch work without Spark (udfs.tokenize_batch)
                    "spark_overhead": fig["stage_over_plain_cpu_hf"]}
    return fig


def _measure(fn) -> dict:
    from bench.common import Measure

    with Measure() as m:
        fn()
    return {"cpu_s": round(m.cpu_s, 4), "wall_s": round(m.wall_s, 4)}


def _rate(m: dict, n_tokens: int) -> dict:
    return {"wall_s": round(m["wall_s"], 4), "cpu_s": round(m["cpu_s"], 4), "tokens_per_cpu_s": n_tokens / m["cpu_s"]}


def _raw_references(tok, enc, texts: list[str], *, first: bool) -> dict:
    """CPU of raw HF ``encode_batch`` and tiktoken ``encode_ordinary`` over the 8 MB chunks (and, when
    ``first``, raw ``encode_batch_fast``, the token count and the documents whose ids are equal)."""
    from bench.common import Measure

    out = {k: {"cpu_s": 0.0, "wall_s": 0.0} for k in ("hf", "tiktoken", "hf_fast")}
    n_tokens = equal_docs = 0
    for chunk in _chunks(texts, CHUNK_BYTES):
        with Measure() as m_hf:
            hf_ids = [e.ids for e in tok.tokenizer.encode_batch(chunk, add_special_tokens=False)]
        with Measure() as m_tt:
            tt_ids = [enc.encode_ordinary(t) for t in chunk]
        timed = [("hf", m_hf), ("tiktoken", m_tt)]
        if first:
            with Measure() as m_fast:
                fast_ids = [e.ids for e in tok.tokenizer.encode_batch_fast(chunk, add_special_tokens=False)]
            timed.append(("hf_fast", m_fast))
            n_tokens += sum(map(len, hf_ids))
            equal_docs += sum(a == b == c for a, b, c in zip(hf_ids, tt_ids, fast_ids, strict=True))
            del fast_ids
        for key, m in timed:
            out[key]["cpu_s"] += m.cpu_s
            out[key]["wall_s"] += m.wall_s
        del hf_ids, tt_ids
    if first:
        out["tokens"], out["equal_docs"] = n_tokens, equal_docs
    return out


def _plain_batches(corpus, tok, enc) -> dict:
    """CPU of the stage's per-batch work without Spark: :func:`udfs.tokenize_batch.encode_batch` over the
    corpus in 8 MB Arrow batches, every 100th document audited (the stage's 1% sample)."""
    import numpy as np
    import pyarrow as pa

    from udfs import tokenize_batch as B

    sizes = np.cumsum(pa.compute.binary_length(corpus.column("text")).to_numpy(zero_copy_only=False))
    table = corpus.append_column("_rt_sample", pa.array(np.arange(corpus.num_rows) % 100 == 0))
    cuts = [0, *np.searchsorted(sizes, np.arange(CHUNK_BYTES, int(sizes[-1]), CHUNK_BYTES)).tolist(), corpus.num_rows]
    batches = [b for lo, hi in zip(cuts, cuts[1:], strict=False) if hi > lo
               for b in table.slice(lo, hi - lo).combine_chunks().to_batches()]
    schema = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("tokens", pa.binary(), False),
                        ("n_tokens", pa.int32(), False), ("n_content_tokens", pa.int32(), False),
                        ("roundtrip_checked", pa.bool_(), False), ("roundtrip_mismatch", pa.bool_(), False),
                        ("roundtrip_error", pa.string())])
    spec = B.EncoderSpec(tokenizer="builtin:gpt2", allow_download=False, threads=1, vocab_size=tok.vocab_size,
                         eos_id=50256, bos_id=None, engine="hf" if enc is None else "tiktoken", keep_examples=5)
    return _measure(lambda: [B.encode_batch(b, spec, tok, enc, schema) for b in batches])


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
