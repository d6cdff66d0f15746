"""The tokenize stage's work on a Python worker: documents in, framed ids and audit signals out (Arrow).

Everything the stage's ``mapInArrow`` function runs lives here, so that a Python worker imports
``udfs`` (plus numpy, pyarrow, tokenizers, tiktoken) and not the pipeline modules: importing
``pipelines.tokenize.stage`` pulls in the config models and table helpers, ~0.25 CPU s per worker start
(bench/notes.md), for nothing a worker uses. No Spark here: :func:`make_encoder` returns a plain
function of an iterator of batches, and the counters it fills are duck-typed accumulators.

Per batch (:func:`encode_batch`): encode (:func:`udfs.tokenize.encode_ids`), frame ``[BOS] content EOS``
into one flat uint32 buffer, check every id against the vocabulary (one pass), and audit the seeded
sample the JVM marked in ``_rt_sample``: decode and compare with the text, and with tiktoken also
re-encode with the Hugging Face tokenizer and require the same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs import tokenize as tok_udfs
from udfs.tokenizer_audit_batch import AuditSpec, audit_encoded

COUNTS: tuple[str, ...] = ("docs", "zero", "rt_checked", "rt_bad")
"""What the stage counts while encoding (documents, zero-token documents, audited, round-trip mismatches)."""

FAIL_MARK = "WINNOW_TOKENIZE_FAILURE: "
"""Starts the message of an executor-side :class:`TokenizeFailure` (the driver finds it in Spark's error)."""


class TokenizeFailure(ValueError):
    """An executor found wrong ids (outside the vocabulary, or tiktoken != HF): nothing is written."""


class CountsParam:
    """Accumulator param (pyspark's ``AccumulatorParam`` protocol): element-wise sum of :data:`COUNTS` lists.

    The ``tokenized`` write is the action that runs the encoder, and Spark applies an action's
    accumulator updates once per task (retries excluded). Duck-typed, not a pyspark subclass, so a worker
    unpickling it imports only this module.
    """

    def zero(self, value: list[int]) -> list[int]:
        """All zeros, as long as ``value``."""
        return [0] * len(value)

    def addInPlace(self, a: list[int], b: list[int]) -> list[int]:  # noqa: N802 - pyspark's name
        """``a + b`` element-wise."""
        return [x + y for x, y in zip(a, b, strict=True)]


class SumBySourceParam:
    """Accumulator param: key-wise sum of ``{source: tokens}`` dicts (tokens written per source)."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        """An empty dict."""
        return {}

    def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:  # noqa: N802 - pyspark's name
        """``b``'s sums added into ``a``."""
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


@dataclass(frozen=True)
class EncoderSpec:
    """What a worker needs to encode batches (pickled into the ``mapInArrow`` function).

    Attributes:
        tokenizer: ``tokenize.tokenizer`` spec, loaded once per worker (:func:`udfs.tokenize.load_tokenizer`).
        allow_download: ``tokenize.allow_download``.
        threads: Rust threads per task (``tokenize.threads_per_task``).
        vocab_size: ids must be < this.
        eos_id: appended after every document.
        bos_id: prepended before every document, or None.
        engine: ``hf`` or ``tiktoken``.
        keep_examples: round-trip mismatch descriptions kept per batch (the smallest doc_ids).
        audit: the tokenizer audit's settings when the stage fills the audit as it encodes
            (:func:`udfs.tokenizer_audit_batch.audit_encoded`), else None.
    """

    tokenizer: str
    allow_download: bool
    threads: int
    vocab_size: int
    eos_id: int
    bos_id: int | None
    engine: str
    keep_examples: int
    audit: AuditSpec | None = None


@dataclass(frozen=True)
class BatchResult:
    """One encoded batch.

    Attributes:
        batch: ``doc_id``, ``source``, ``tokens``, ``n_tokens``, ``n_content_tokens``, ``roundtrip_checked``,
            ``roundtrip_mismatch``, ``roundtrip_error`` (see ``pipelines.tokenize.stage.tokenize``).
        counts: the :data:`COUNTS` of the batch.
        tokens_by_source: tokens (incl. EOS/BOS) of the documents with content, per ``source``.
    """

    batch: pa.RecordBatch
    counts: list[int]
    tokens_by_source: dict[str, int]


def encode_batch(batch: pa.RecordBatch, spec: EncoderSpec, loaded: tok_udfs.LoadedTokenizer,
                 fast: object | None, schema: pa.Schema) -> BatchResult:
    """Encode, frame, check and audit one batch.

    Args:
        batch: ``doc_id`` (string), ``text`` (string), ``source`` (string), ``_rt_sample`` (bool: in the
            seeded audit sample).
        spec: the stage settings.
        loaded: the Hugging Face tokenizer (the reference, and the round-trip decoder).
        fast: the ``tiktoken.Encoding`` when ``spec.engine == "tiktoken"``, else None.
        schema: the Arrow schema of the result (the stage's output schema).

    Returns:
        A :class:`BatchResult`.

    Raises:
        TokenizeFailure: an id outside ``[0, vocab_size)``, or with tiktoken a sampled document whose ids
            differ from the Hugging Face tokenizer's; the message starts with :data:`FAIL_MARK`.
    """
    texts = tok_udfs.batch_texts(batch.column("text"))
    ids = tok_udfs.encode_ids(loaded, texts, fast)
    tokens, n_content = tok_udfs.frame_ids(ids, eos_id=spec.eos_id, bos_id=spec.bos_id)
    doc_ids = batch.column("doc_id")
    if not tok_udfs.ids_in_range(tokens, spec.vocab_size):
        bad = tok_udfs.ids_out_of_range(tokens, spec.vocab_size)
        i = int(bad.nonzero()[0][0])
        raise TokenizeFailure(f"{FAIL_MARK}tokenizer {spec.tokenizer!r} produced {int(bad.sum())} ids "
                              f"outside [0, {spec.vocab_size}) (first in doc_id {doc_ids[i].as_py()!r}); "
                              "nothing written")
    sampled = batch.column("_rt_sample").to_numpy(zero_copy_only=False)
    mismatch, errors = _audit(loaded, fast, spec, texts, ids, tokens, doc_ids, sampled.nonzero()[0])
    extra = 1 + (spec.bos_id is not None)
    counts = [batch.num_rows, int((n_content == 0).sum()), int(sampled.sum()), int(mismatch.sum())]
    by_source = _tokens_by_source(batch.column("source"), np.where(n_content > 0, n_content + extra, 0))
    out = pa.RecordBatch.from_arrays(
        [
            doc_ids,
            batch.column("source"),
            tokens,
            pa.array(n_content + extra, pa.int32()),
            pa.array(n_content, pa.int32()),
            pa.array(sampled, pa.bool_()),
            pa.array(mismatch, pa.bool_()),
            pa.array(errors, pa.string()),
        ],
        schema=schema,
    )
    return BatchResult(out, counts, by_source)


def make_encoder(spec: EncoderSpec, schema: pa.Schema, *,
                 encoding_factory: Callable[[tok_udfs.LoadedTokenizer], object] | None = None,
                 counts: object | None = None, by_source: object | None = None,
                 audit: object | None = None
                 ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of the stage: :func:`encode_batch` over a task's batches.

    The tokenizer and the tiktoken encoding are built once per worker process (module caches of
    :func:`udfs.tokenize.load_tokenizer` and :func:`udfs.tokenize_tiktoken.encoding_for`); Spark reuses a
    worker across tasks (``spark.python.worker.reuse``, on by default), so a worker builds them once.

    Args:
        spec: the stage settings.
        schema: the Arrow schema of the output batches.
        encoding_factory: builds the tiktoken encoding (default :func:`udfs.tokenize_tiktoken.encoding_for`);
            tests pass a deliberately wrong one.
        counts: an accumulator of :class:`CountsParam`, or None.
        by_source: an accumulator of :class:`SumBySourceParam`, or None.
        audit: an accumulator of :class:`udfs.tokenizer_audit_batch.PartialParam` that receives the
            audit partial of every batch (with ``spec.audit``), or None.
    """

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from udfs.worker_memory import keep_freed_memory

        keep_freed_memory()  # each batch's id arrays reuse freed memory (no page faults per batch)
        tok_udfs.set_thread_budget(spec.threads)
        loaded = tok_udfs.load_tokenizer(spec.tokenizer, allow_download=spec.allow_download)
        fast = None
        if spec.engine == "tiktoken":
            from udfs.tokenize_tiktoken import encoding_for

            fast = (encoding_factory or encoding_for)(loaded)
        for batch in batches:
            res = encode_batch(batch, spec, loaded, fast, schema)
            if counts is not None:
                counts.add(res.counts)  # type: ignore[attr-defined]
            if by_source is not None:
                by_source.add(res.tokens_by_source)  # type: ignore[attr-defined]
            if audit is not None and spec.audit is not None:
                part = audit_encoded(batch, res.batch, spec.audit, loaded, fast)
                if part is not None:
                    audit.add(part)  # type: ignore[attr-defined]
            yield res.batch

    return encode


def _audit(loaded: tok_udfs.LoadedTokenizer, fast: object | None, spec: EncoderSpec, texts: list[str],
           ids: list, tokens: pa.BinaryArray, doc_ids: pa.Array,
           picked: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
    """Round-trip (and, with tiktoken, HF-equality) check of the sampled rows ``picked``.

    Returns:
        ``(mismatch, errors)``: bool per row, and the difference for the ``keep_examples`` smallest
        mismatching doc_ids of the batch (a superset of the global smallest), else None.
    """
    n = len(texts)
    mismatch = np.zeros(n, dtype=bool)
    errors: list[str | None] = [None] * n
    if not len(picked):
        return mismatch, errors
    sub = [texts[i] for i in picked]
    if fast is not None:  # the audit of the fast path: tiktoken's ids must be HF's
        _audit_engine(loaded, sub, [ids[i] for i in picked], [doc_ids[i].as_py() for i in picked])
    first = 1 if spec.bos_id is not None else 0
    lengths, flat = tok_udfs.token_ids(tokens)
    ends = np.cumsum(lengths)
    found: list[tuple[str, int, str]] = []
    for i, text in zip(picked.tolist(), sub, strict=True):
        content = flat[ends[i] - lengths[i] + first: ends[i] - 1].tolist()
        err = tok_udfs.roundtrip_mismatch(loaded, text, content)
        if err is not None:
            mismatch[i] = True
            found.append((doc_ids[i].as_py(), i, err))
    for _, i, err in sorted(found)[:spec.keep_examples]:
        errors[i] = err
    return mismatch, errors


def _audit_engine(loaded: tok_udfs.LoadedTokenizer, texts: list[str], got: list, doc_ids: list[str]) -> None:
    ref = tok_udfs.encode_ids(loaded, texts)
    for doc_id, want, have in zip(doc_ids, ref, got, strict=True):
        have = have.tolist() if isinstance(have, np.ndarray) else list(have)
        if have != want:
            k = next((j for j, (a, b) in enumerate(zip(want, have, strict=False)) if a != b),
                     min(len(want), len(have)))
            raise TokenizeFailure(
                f"{FAIL_MARK}tokenize.engine=tiktoken gave ids different from the Hugging Face tokenizer "
                f"{loaded.spec!r} on doc_id {doc_id!r} (first difference at token {k}: "
                f"tiktoken {have[k:k + 5]} vs hf {want[k:k + 5]}); nothing written. "
                "Set tokenize.engine=hf for this tokenizer."
            )


def _tokens_by_source(sources: pa.Array, n_tokens: np.ndarray) -> dict[str, int]:
    keep = n_tokens > 0  # documents that are written (zero-token ones are removed)
    t = pa.table({"s": pc.cast(sources, pa.string()).filter(pa.array(keep)),
                  "n": pa.array(n_tokens[keep].astype(np.int64))})
    agg = t.group_by("s").aggregate([("n", "sum")])
    keys, sums = agg.column("s").to_pylist(), agg.column("n_sum").to_pylist()
    return {str(k): int(v) for k, v in zip(keys, sums, strict=True)}
