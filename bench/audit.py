"""Cost of the tokenizer audit as a share of tokenizing the same text (CPU seconds, one thread).

Corpus: the shared web and Wikipedia samples (:mod:`bench.tokenize_corpus`, path from
``$WINNOW_SHARED_DATA``) repeated to ``BENCH_AUDIT_MB`` (default 16) MB, cut into 8 MB Arrow batches
like the stage's ``tokenize.batch_mb``. Per batch, in CPU seconds of this process (``process_time``, so the
figures hold on a shared machine), each the best of ``BENCH_AUDIT_REPS`` (default 3) rounds:

* ``encode_hf``: :func:`udfs.tokenize.encode_ids` with the Hugging Face tokenizer;
* ``encode_tiktoken``: the same with the tiktoken engine (what ``tokenize.engine: auto`` picks for GPT-2);
* ``stage_batch_*``: the stage's whole per-batch work without Spark (:func:`udfs.tokenize_batch.encode_batch`:
  encode, frame, range check, 1% round-trip sample), per engine: the denominator of the goal;
* ``audit_inline_*``: what the stage's worker adds per batch with ``audit.inline`` (the default),
  :func:`udfs.tokenizer_audit_batch.audit_encoded` on the encoder's output at the default ``audit``
  settings: the content ids out of the framed tokens, cost and coverage over every document, what follows
  the last ids of ``make run``'s prompt set (``sample_data/evals/trivia.jsonl``), special strings in every
  document, round trip on ``roundtrip_sample_fraction``, words, whitespace and digit runs on
  ``text_sample_fraction`` of them, and the engine comparison on ``engine_sample_fraction`` (drawn from
  the hash of the stage's own 1% round-trip sample, as the stage draws them);
* ``audit_full``: :func:`udfs.tokenizer_audit.audit_batch` with both fractions at 1 (every document scanned
  and decoded);
* ``vocab_tables_s``: the one-time table build per worker process (not per batch).

Goal: the inline audit <= 5 % of the tokenize stage's per-batch work (``audit_share_of_stage_*``).

``python -m bench.audit``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
CHUNK_BYTES = 8_000_000
"""Batch size in bytes of text, as ``tokenize.batch_mb``'s default."""


def _batches(table, chunk: int):  # noqa: ANN001, ANN202 - bench helper
    import pyarrow.compute as pc

    sizes = pc.binary_length(table.column("text")).to_numpy()
    start, acc = 0, 0
    for i, s in enumerate(sizes):
        acc += int(s)
        if acc >= chunk:
            yield table.slice(start, i + 1 - start).combine_chunks().to_batches()[0]
            start, acc = i + 1, 0
    if start < table.num_rows:
        yield table.slice(start).combine_chunks().to_batches()[0]


def _best(reps: int, fn, *args, **kwargs) -> float:  # noqa: ANN001, ANN002, ANN003 - bench helper
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        fn(*args, **kwargs)
        best = min(best, time.process_time() - t0)
    return best


def _flags(n: int, rng, acfg) -> dict[str, object]:  # noqa: ANN001 - bench helper
    """The stage's and the audit's sample flags of ``n`` rows, nested as the stage draws them (one hash
    for the round-trip and engine samples, another per other sample)."""
    import numpy as np

    h, other = rng.random(n), rng.random((2, n))
    return {"_rt_sample": h < 0.01, "_engine_sample": h < acfg.engine_sample_fraction,
            "_audit_rt_sample": other[0] < acfg.roundtrip_sample_fraction,
            "_text_sample": other[1] < acfg.text_sample_fraction, "all": np.ones(n, dtype=bool)}


def run(n_docs: int = 0, seed: int = 0, cores: int = 1) -> dict:
    """Measure encode, the stage's per-batch work and the inline audit on the real-text corpus.

    Returns:
        JSON-ready figures: corpus facts, CPU seconds per path, shares, ``goals``.
    """
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import numpy as np
    import pyarrow as pa

    from bench.references import SHARED
    from bench.tokenize_corpus import repeated_corpus
    from pipelines.audit.config import AuditConfig
    from pipelines.audit.prompts import boundary_ids, read_prompts
    from pipelines.core.config import EvalSetConfig
    from udfs import tokenize as tok_udfs
    from udfs import tokenize_batch as tb
    from udfs import tokenizer_audit as ta
    from udfs import tokenizer_audit_batch as tab
    from udfs.tokenize_tiktoken import encoding_for

    acfg = AuditConfig()  # the default sample fractions
    mb = float(os.environ.get("BENCH_AUDIT_MB", "16"))
    reps = int(os.environ.get("BENCH_AUDIT_REPS", "3"))
    table = repeated_corpus(SHARED, int(mb * 1_000_000))
    tok = tok_udfs.load_tokenizer(tok_udfs.BUILTIN_GPT2)
    fast = encoding_for(tok)
    t0 = time.process_time()
    tables = ta.vocab_tables(tok)
    vocab_s = time.process_time() - t0
    eos = tok.token_id("<|endoftext|>")
    trivia = EvalSetConfig(name="trivia", paths=[str(_REPO / "sample_data/evals/trivia.jsonl")],
                           fields=["question", "answer"], id_field="id")
    watch = boundary_ids(tok, [read_prompts(trivia, "bench")])
    aspec = tab.AuditSpec(tok.spec, False, bos=False, specials=("<|endoftext|>",), keep=acfg.examples,
                          engines=True, watch=watch)
    tab.cached_vocab_tables(tok)
    schema = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("tokens", pa.binary(), False),
                        ("n_tokens", pa.int32(), False), ("n_content_tokens", pa.int32(), False),
                        ("roundtrip_checked", pa.bool_(), False), ("roundtrip_mismatch", pa.bool_(), False),
                        ("roundtrip_error", pa.string())])
    keys = ("encode_hf", "encode_tiktoken", "stage_batch_hf", "stage_batch_tiktoken", "audit_inline_hf",
            "audit_inline_tiktoken", "audit_full")
    totals = dict.fromkeys(keys, 0.0)
    n_tokens = n_bytes = 0
    flags = None
    rng = np.random.default_rng(seed)
    for batch in _batches(table, CHUNK_BYTES):
        texts = tok_udfs.batch_texts(batch.column("text"))
        f = _flags(batch.num_rows, rng, acfg)
        staged = pa.RecordBatch.from_arrays(
            [batch.column("doc_id"), batch.column("text"), batch.column("source"),
             *(pa.array(f[k]) for k in ("_rt_sample", "_audit_rt_sample", "_text_sample", "_engine_sample"))],
            names=["doc_id", "text", "source", "_rt_sample", "_audit_rt_sample", "_text_sample", "_engine_sample"])
        for engine, enc in (("hf", None), ("tiktoken", fast)):
            spec = tb.EncoderSpec(tok.spec, False, 1, tok.vocab_size, eos, None, engine, 5)
            totals[f"encode_{engine}"] += _best(reps, tok_udfs.encode_ids, tok, texts, enc)
            totals[f"stage_batch_{engine}"] += _best(reps, tb.encode_batch, staged, spec, tok, enc, schema)
            encoded = tb.encode_batch(staged, spec, tok, enc, schema).batch
            totals[f"audit_inline_{engine}"] += _best(reps, tab.audit_encoded, staged, encoded, aspec, tok, enc)
            if engine == "tiktoken":
                part = tab.audit_encoded(staged, encoded, aspec, tok, enc)
                flags = part if flags is None else ta.merge(flags, part)
        ids = tok_udfs.encode_ids(tok, texts, fast)
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.concatenate(ids).astype(np.int64)
        full = dict(doc_ids=batch.column("doc_id"), sources=batch.column("source"), specials=("<|endoftext|>",),
                    watch=ta.watch_table(tok.vocab_size, watch))
        totals["audit_full"] += _best(reps, ta.audit_batch, tok, tables, batch.column("text"), lengths, flat, **full)
        n_tokens += int(lengths.sum())
        n_bytes += sum(len(t.encode("utf-8")) for t in texts)
    out = {
        "corpus": {"documents": table.num_rows, "bytes": n_bytes, "tokens": n_tokens, "batch_bytes": CHUNK_BYTES,
                   "sources": sorted(set(table.column("source").to_pylist())), "watched_ids": len(watch)},
        "cpu_s": {k: round(v, 4) for k, v in totals.items()},
        "vocab_tables_s": round(vocab_s, 4),
        "audit_share_of_stage_hf": round(totals["audit_inline_hf"] / totals["stage_batch_hf"], 4),
        "audit_share_of_stage_tiktoken": round(totals["audit_inline_tiktoken"] / totals["stage_batch_tiktoken"], 4),
        "audit_full_share_of_stage_hf": round(totals["audit_full"] / totals["stage_batch_hf"], 4),
        "audit_full_share_of_stage_tiktoken": round(totals["audit_full"] / totals["stage_batch_tiktoken"], 4),
        "roundtrip": flags.roundtrip if flags else {},
        "engines": flags.engines if flags else {},
    }
    out["goals"] = {"audit_share_of_stage": {"target": "<= 0.05", "hf": out["audit_share_of_stage_hf"],
                                             "tiktoken": out["audit_share_of_stage_tiktoken"]}}
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=1))
    sys.exit(0)
