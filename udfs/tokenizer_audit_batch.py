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
        watch: the ids whose next token's kind is counted: the last ids of the prompts the audit checks
            (:func:`pipelines.audit.prompts.boundary_ids`); None = every id.
    """

    tokenizer: str
    allow_download: bool
    bos: bool
    specials: tuple[str, ...]
    keep: int
    engines: bool
    watch: tuple[int, ...] | None = None


def content_ids(tokens: pa.Array, bos: bool) -> tuple[np.ndarray, np.ndarray]:
    """Content lengths and ids of a ``tokens`` column written as ``[BOS] content EOS``.

    Returns:
        ``(lengths, flat)``: int64 [documents] content tokens, and the content ids in order (the stored
        integer type: uint32 for the binary layout).

    One slice per document, concatenated in one copy (no mask over the batch).
    """
    lengths, flat = tok_udfs.token_ids(tokens)
    frame = 1 + int(bos)
    ends = np.cumsum(lengths)
    has = lengths > 0
    spans = zip((ends - lengths + int(bos))[has].tolist(), (ends - 1)[has].tolist(), strict=True)
    content = [flat[a:b] for a, b in spans]
    out = np.concatenate(content) if content else flat[:0]
    return np.maximum(lengths - frame, 0), out


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
    part = _audit_content(batch, spec, tok, tables, lengths, flat)
    if fast is not None:
        picked = np.flatnonzero(batch.column("_engine_sample").to_numpy(zero_copy_only=False))
        if len(picked):
            texts = tok_udfs.batch_texts(batch.column("text").take(pa.array(picked)))
            _add_engines(part, spec, batch.column("doc_id"), picked, ta.engines_differ(tok, fast, texts))
    return part


def _add_engines(part: ta.Partial, spec: AuditSpec, doc_ids: pa.Array, picked: np.ndarray,
                 differ: np.ndarray) -> None:
    """Count the documents ``picked`` as compared across engines, those where ``differ`` as differing."""
    part.engines["checked"] += len(picked)
    part.engines["differ"] += int(differ.sum())
    part.engine_examples = sorted(doc_ids[int(i)].as_py() for i in picked[differ])[: spec.keep]


def _audit_content(batch: pa.RecordBatch, spec: AuditSpec, tok: tok_udfs.LoadedTokenizer,
                   tables: ta.VocabTables, lengths: np.ndarray, flat: np.ndarray) -> ta.Partial:
    """:func:`udfs.tokenizer_audit.audit_batch` of a batch's content ids, its sample flags read from it."""
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
        watch=_watch(spec, tables.vocab_size),
    )
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

    Engines (with ``spec.engines``): the engine sample's ids as written are compared with the other
    engine's (tiktoken's when the stage encoded with the Hugging Face tokenizer, and the other way
    round). The documents of the stage's own round-trip sample (``_rt_sample``) are not encoded again
    when the stage encoded with tiktoken: the stage compared them with the Hugging Face tokenizer itself
    and fails on any difference (:func:`udfs.tokenize_batch.encode_batch`); the two samples are drawn
    from one hash, so with the default fractions the engine sample is the round-trip sample and the
    comparison costs nothing more.

    Args:
        batch: the encoder's input: ``doc_id``, ``text``, ``source``, ``_rt_sample``, the audit's sample
            flags (:data:`ROUNDTRIP_SAMPLE`, ``_text_sample``, ``_engine_sample``), optionally ``lang``.
        encoded: the encoder's output for ``batch`` (``tokens``, ``n_content_tokens``, row for row).
        spec: the audit settings.
        tok: the tokenizer that encoded the batch.
        fast: the tiktoken encoding the stage encoded with, or None (the Hugging Face tokenizer).

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
    lengths, flat = content_ids(tokens, spec.bos)
    part = _audit_content(batch, spec, tok, cached_vocab_tables(tok), lengths, flat)
    if spec.engines:
        _engines_inline(part, batch, spec, tok, fast, lengths, flat)
    part.seconds = time.perf_counter() - start
    return part


def _engines_inline(part: ta.Partial, batch: pa.RecordBatch, spec: AuditSpec, tok: tok_udfs.LoadedTokenizer,
                    fast: object | None, lengths: np.ndarray, flat: np.ndarray) -> None:
    """The engine comparison of :func:`audit_encoded`: the written ids against the other engine's."""
    sample = batch.column("_engine_sample").to_numpy(zero_copy_only=False)
    picked = np.flatnonzero(sample)
    if not len(picked):
        return
    todo = sample.copy()
    if fast is not None:  # the stage compared its round-trip sample with the Hugging Face tokenizer
        todo &= ~batch.column("_rt_sample").to_numpy(zero_copy_only=False)
    differ = np.zeros(len(sample), dtype=bool)
    redo = np.flatnonzero(todo)
    if len(redo):
        if fast is None:
            from udfs.tokenize_tiktoken import encoding_for

            other = tok_udfs.encode_ids(tok, tok_udfs.batch_texts(batch.column("text").take(pa.array(redo))),
                                        encoding_for(tok))
        else:
            other = tok_udfs.encode_ids(tok, tok_udfs.batch_texts(batch.column("text").take(pa.array(redo))))
        ends = np.cumsum(lengths)
        for i, ids in zip(redo.tolist(), other, strict=True):
            differ[i] = not np.array_equal(np.asarray(ids), flat[ends[i] - lengths[i] : ends[i]])
    _add_engines(part, spec, batch.column("doc_id"), picked, differ[picked])


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
_WATCH: dict[tuple[tuple[int, ...] | None, int], object] = {}


def _watch(spec: AuditSpec, vocab_size: int) -> object:
    """:func:`udfs.tokenizer_audit.watch_table` of ``spec.watch``, built once per process."""
    key = (spec.watch, vocab_size)
    if key not in _WATCH:
        _WATCH.clear()
        _WATCH[key] = ta.watch_table(vocab_size, spec.watch)
    return _WATCH[key]


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
