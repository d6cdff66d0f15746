"""The audit's work on a Python worker: ``tokenized`` rows joined with their text in, one merged partial out.

What the audit job's ``mapInArrow`` function runs, kept in ``udfs`` so a worker imports no pipeline module
(as :mod:`udfs.tokenize_batch`). Per batch: strip the ``[BOS] ... EOS`` framing from the stored ids,
:func:`udfs.tokenizer_audit.audit_batch` the content against the text, and on the seeded engine sample
encode with both engines; the partials of a task's batches are merged and yielded once, pickled, as one
row, so the driver merges one partial per task.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from udfs import tokenize as tok_udfs
from udfs import tokenizer_audit as ta

ROUNDTRIP_SAMPLE = "_audit_rt_sample"
"""The audit's round-trip sample flag column (apart from the tokenize stage's own ``_rt_sample``: both
samples are drawn in the same pass, from different fractions and salts)."""

PARTIAL_SCHEMA = pa.schema([pa.field("partial", pa.binary(), False)])
"""The one column of the audit function's output: a pickled :class:`udfs.tokenizer_audit.Partial`."""


@dataclass(frozen=True)
class AuditSpec:
    """What a worker needs to audit batches (pickled into the ``mapInArrow`` function).

    Attributes:
        tokenizer: the spec the ids were written with (``tokenized``'s ``tokenizer`` property).
        allow_download: ``tokenize.allow_download``.
        bos: the ids start with one BOS per document.
        specials: literal special-token strings to count in the text.
        keep: examples kept.
        engines: compare the Hugging Face tokenizer with tiktoken on the ``_engine_sample`` rows.
    """

    tokenizer: str
    allow_download: bool
    bos: bool
    specials: tuple[str, ...]
    keep: int
    engines: bool


def content_ids(tokens: pa.Array, bos: bool) -> tuple[np.ndarray, np.ndarray]:
    """Content lengths and ids of a ``tokens`` column written as ``[BOS] content EOS``.

    Returns:
        ``(lengths, flat)``: int64 [documents] content tokens, and the content ids in order (int64).
    """
    lengths, flat = tok_udfs.token_ids(tokens)
    frame = 1 + int(bos)
    keep = np.ones(len(flat), dtype=bool)
    ends = np.cumsum(lengths)
    has = lengths > 0
    keep[ends[has] - 1] = False
    if bos:
        keep[(ends - lengths)[has]] = False
    return np.maximum(lengths - frame, 0), flat[keep].astype(np.int64)


def audit_record_batch(
    batch: pa.RecordBatch,
    spec: AuditSpec,
    tok: tok_udfs.LoadedTokenizer,
    tables: ta.VocabTables,
    fast: object | None,
    tokens: pa.Array | None = None,
) -> ta.Partial:
    """The partial of one batch.

    Args:
        batch: ``doc_id``, ``source``, ``text``, the sample flags ``_audit_rt_sample``, ``_text_sample`` and
            ``_engine_sample`` (bool), optionally ``lang``, and ``tokens`` unless given apart.
        spec: the audit settings.
        tok: the tokenizer that wrote the ids; ``tables`` its :func:`cached_vocab_tables`.
        fast: the tiktoken encoding when ``spec.engines``, else None.
        tokens: the batch's framed ids (``[BOS] content EOS``, :func:`udfs.tokenize.frame_ids`) when the
            caller holds them (the tokenize stage, right after encoding), else read from ``batch``.

    Returns:
        The batch's :class:`udfs.tokenizer_audit.Partial`.
    """
    lengths, flat = content_ids(batch.column("tokens") if tokens is None else tokens, spec.bos)
    names = batch.schema.names
    part, _ = ta.audit_batch(
        tok,
        tables,
        batch.column("text"),
        lengths,
        flat,
        doc_ids=batch.column("doc_id"),
        sources=batch.column("source"),
        langs=batch.column("lang") if "lang" in names else None,
        roundtrip_sample=batch.column(ROUNDTRIP_SAMPLE).to_numpy(zero_copy_only=False),
        text_sample=batch.column("_text_sample").to_numpy(zero_copy_only=False),
        specials=spec.specials,
        keep=spec.keep,
    )
    if fast is not None:
        picked = np.flatnonzero(batch.column("_engine_sample").to_numpy(zero_copy_only=False))
        if len(picked):
            texts = tok_udfs.batch_texts(batch.column("text").take(pa.array(picked)))
            differ = ta.engines_differ(tok, fast, texts)
            part.engines["checked"] += len(picked)
            part.engines["differ"] += int(differ.sum())
            ids = batch.column("doc_id")
            part.engine_examples = sorted(ids[int(i)].as_py() for i in picked[differ])[: spec.keep]
    return part


def documents(part: ta.Partial) -> int:
    """Documents a partial audited (summed over its sources)."""
    return sum(g.total("docs") for (dim, _), g in part.groups.items() if dim == "source")


def audit_encoded(
    batch: pa.RecordBatch,
    encoded: pa.RecordBatch,
    spec: AuditSpec,
    tok: tok_udfs.LoadedTokenizer,
    fast: object | None,
) -> ta.Partial | None:
    """The partial of a batch the tokenize stage just encoded (its inline audit, no second read).

    Documents without content tokens are left out, as the ``tokenized`` table leaves them out, so the
    inline audit counts what :func:`make_auditor` counts on the written table.

    Args:
        batch: the encoder's input: ``doc_id``, ``text``, ``source``, the audit's sample flags
            (:data:`ROUNDTRIP_SAMPLE`, ``_text_sample``, ``_engine_sample``), optionally ``lang``.
        encoded: the encoder's output for ``batch`` (``tokens``, ``n_content_tokens``, row for row).
        spec: the audit settings.
        tok: the tokenizer that encoded the batch.
        fast: the tiktoken encoding the stage encoded with, or None; with ``spec.engines`` and None, the
            worker's cached :func:`udfs.tokenize_tiktoken.encoding_for` is used for the engine sample.

    Returns:
        The batch's partial with ``seconds`` set, or None when no document of the batch has content.
    """
    start = time.perf_counter()
    tokens = encoded.column("tokens")
    content = encoded.column("n_content_tokens").to_numpy(zero_copy_only=False) > 0
    if not content.all():
        keep = pa.array(content)
        batch, tokens = batch.filter(keep), tokens.filter(keep)
    if not batch.num_rows:
        return None
    if spec.engines and fast is None:
        from udfs.tokenize_tiktoken import encoding_for

        fast = encoding_for(tok)
    part = audit_record_batch(batch, spec, tok, cached_vocab_tables(tok), fast if spec.engines else None,
                              tokens=tokens)
    part.seconds = time.perf_counter() - start
    return part


class PartialParam:
    """Accumulator param (pyspark's ``AccumulatorParam`` protocol) of :class:`udfs.tokenizer_audit.Partial`.

    For filling the audit inside the tokenize stage's own pass: the encoder adds each batch's partial, and
    Spark applies a task's update once (retries excluded). Duck-typed, not a pyspark subclass, so a worker
    unpickling it imports only this module.
    """

    def zero(self, value: ta.Partial) -> ta.Partial:
        """An empty partial of ``value``'s vocabulary."""
        return ta.Partial.empty(len(value.id_counts), value.keep)

    def addInPlace(self, a: ta.Partial, b: ta.Partial) -> ta.Partial:  # noqa: N802 - pyspark's name
        """``b`` merged into ``a``."""
        return ta.merge(a, b)


_TABLES: dict[tuple[str, int], ta.VocabTables] = {}


def cached_vocab_tables(tok: tok_udfs.LoadedTokenizer) -> ta.VocabTables:
    """:func:`udfs.tokenizer_audit.vocab_tables` once per loaded tokenizer of this process (Spark reuses
    a worker across tasks; GPT-2's tables take ~0.3 CPU s)."""
    key = (tok.spec, id(tok.tokenizer))
    if key not in _TABLES:
        _TABLES[key] = ta.vocab_tables(tok)
    return _TABLES[key]


def make_auditor(spec: AuditSpec) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of the audit: one merged, pickled partial per task."""

    def audit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tok = tok_udfs.load_tokenizer(spec.tokenizer, allow_download=spec.allow_download)
        tables = cached_vocab_tables(tok)
        fast = None
        if spec.engines:
            from udfs.tokenize_tiktoken import encoding_for

            fast = encoding_for(tok)
        total = ta.Partial.empty(tables.vocab_size, spec.keep)
        for batch in batches:
            if batch.num_rows:
                ta.merge(total, audit_record_batch(batch, spec, tok, tables, fast))
        yield pa.RecordBatch.from_arrays(
            [pa.array([pickle.dumps(total)], pa.binary())], schema=PARTIAL_SCHEMA
        )

    return audit
