"""Cost of the tokenizer audit as a share of tokenizing the same text (CPU seconds, one thread).

Corpus: the shared web and Wikipedia samples (:mod:`bench.tokenize_corpus`, path from
``$WINNOW_SHARED_DATA``) repeated to ``BENCH_AUDIT_MB`` (default 16) MB, cut into 8 MB Arrow batches
like the stage's ``tokenize.batch_mb``. Per batch, in CPU seconds of this process (``process_time``, so the
figures hold on a shared machine), each the best of ``BENCH_AUDIT_REPS`` (default 3) rounds:

* ``encode_hf``: :func:`udfs.tokenize.encode_ids` with the Hugging Face tokenizer;
* ``encode_tiktoken``: the same with the tiktoken engine (what ``tokenize.engine: auto`` picks for GPT-2);
* ``stage_batch_*``: the stage's whole per-batch work without Spark (:func:`udfs.tokenize_batch.encode_batch`:
  encode, frame, range check, 1% round-trip sample), per engine: the denominator of the goal;
* ``audit``: :func:`udfs.tokenizer_audit.audit_batch` on the batch's ids at the default ``audit`` sample
  fractions (cost and coverage and follow histograms over every document, special strings in every
  document; round trip on ``roundtrip_sample_fraction``, words, whitespace and digit runs on
  ``text_sample_fraction`` of them), and ``audit_full`` with both fractions at 1 (every document scanned);
* ``vocab_tables_s``: the one-time table build per worker process (not per batch).

Goal: audit <= 5 % of the tokenize stage's per-batch work (``audit_share_of_stage_*``).

``python -m bench.audit``.
"""

from __future__ import annotations

import json
import os
import sys
import time

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


def run(n_docs: int = 0, seed: int = 0, cores: int = 1) -> dict:
    """Measure encode, the stage's per-batch work and the audit on the real-text corpus.

    Returns:
        JSON-ready figures: corpus facts, CPU seconds per path, shares, ``goals``.
    """
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import numpy as np
    import pyarrow as pa

    from bench.references import SHARED
    from bench.tokenize_corpus import repeated_corpus
    from pipelines.audit.config import AuditConfig
    from udfs import tokenize as tok_udfs
    from udfs import tokenize_batch as tb
    from udfs import tokenizer_audit as ta
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
    schema = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("tokens", pa.binary(), False),
                        ("n_tokens", pa.int32(), False), ("n_content_tokens", pa.int32(), False),
                        ("roundtrip_checked", pa.bool_(), False), ("roundtrip_mismatch", pa.bool_(), False),
                        ("roundtrip_error", pa.string())])
    totals = dict.fromkeys(("encode_hf", "encode_tiktoken", "stage_batch_hf", "stage_batch_tiktoken", "audit", "audit_full"), 0.0)
    n_tokens = n_bytes = 0
    flags = None
    rng = np.random.default_rng(seed)
    for batch in _batches(table, CHUNK_BYTES):
        texts = tok_udfs.batch_texts(batch.column("text"))
        staged = pa.RecordBatch.from_arrays(
            [batch.column("doc_id"), batch.column("text"), batch.column("source"),
             pa.array(rng.random(batch.num_rows) < 0.01)], names=["doc_id", "text", "source", "_rt_sample"])
        for engine, enc in (("hf", None), ("tiktoken", fast)):
            spec = tb.EncoderSpec(tok.spec, False, 1, tok.vocab_size, eos, None, engine, 5)
            totals[f"encode_{engine}"] += _best(reps, tok_udfs.encode_ids, tok, texts, enc)
            totals[f"stage_batch_{engine}"] += _best(reps, tb.encode_batch, staged, spec, tok, enc, schema)
        ids = tok_udfs.encode_ids(tok, texts, fast)
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.concatenate(ids).astype(np.int64)
        args = dict(doc_ids=batch.column("doc_id"), sources=batch.column("source"), specials=("<|endoftext|>",),
                    roundtrip_sample=rng.random(batch.num_rows) < acfg.roundtrip_sample_fraction,
                    text_sample=rng.random(batch.num_rows) < acfg.text_sample_fraction)
        text = batch.column("text")
        totals["audit"] += _best(reps, ta.audit_batch, tok, tables, text, lengths, flat, **args)
        full = {**args, "roundtrip_sample": None, "text_sample": None}
        totals["audit_full"] += _best(reps, ta.audit_batch, tok, tables, text, lengths, flat, **full)
        part, _ = ta.audit_batch(tok, tables, batch.column("text"), lengths, flat, **args)
        flags = part if flags is None else ta.merge(flags, part)
        n_tokens += int(lengths.sum())
        n_bytes += sum(len(t.encode("utf-8")) for t in texts)
    out = {
        "corpus": {"documents": table.num_rows, "bytes": n_bytes, "tokens": n_tokens, "batch_bytes": CHUNK_BYTES,
                   "sources": sorted(set(table.column("source").to_pylist()))},
        "cpu_s": {k: round(v, 4) for k, v in totals.items()},
        "vocab_tables_s": round(vocab_s, 4),
        "audit_share_of_stage_hf": round(totals["audit"] / totals["stage_batch_hf"], 4),
        "audit_share_of_stage_tiktoken": round(totals["audit"] / totals["stage_batch_tiktoken"], 4),
        "audit_full_share_of_stage_hf": round(totals["audit_full"] / totals["stage_batch_hf"], 4),
        "audit_full_share_of_stage_tiktoken": round(totals["audit_full"] / totals["stage_batch_tiktoken"], 4),
        "roundtrip": flags.roundtrip if flags else {},
    }
    out["goals"] = {"audit_share_of_stage": {"target": "<= 0.05", "hf": out["audit_share_of_stage_hf"],
                                             "tiktoken": out["audit_share_of_stage_tiktoken"]}}
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=1))
    sys.exit(0)
