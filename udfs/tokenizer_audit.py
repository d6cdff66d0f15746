"""Tokenizer audit counters: per-batch signals and mergeable aggregates of how a tokenizer fits the data.

Pure functions over one Arrow batch of documents and their content ids (no BOS/EOS). A batch gives
per-document columns (:func:`audit_batch` ``docs``) and a :class:`Partial`: numpy arrays and small
dicts with fixed keys that merge by element-wise sum (:func:`merge`), so partials from any number of
tasks, in any order, merge to the same totals. No Spark, no config: the thresholds that turn these
counts into findings live with the audit job.

What is counted:

* cost per group (``source`` and, when known, ``lang``): documents, words, UTF-8 bytes, tokens, unknown
  and byte-fallback tokens, and histograms of tokens per word and bytes per token per document;
* the id histogram over the vocabulary (int64, ``np.bincount``): ids never or rarely seen are the
  candidates for under-trained ("glitch") tokens (Land & Bartolo 2024, "Fishing for Magikarp");
* what follows each id: how often the next token starts a word with no leading space (``LETTER``) or
  with one leading space (``SPACE_LETTER``), for the prompt-boundary check of :mod:`udfs.tokenizer_prompts`;
  counted for the ids that check reads (the prompts' last ids, ``watch``), so the per-token work is one
  gather and one ``bincount`` over the vocabulary;
* round trip: ``decode(ids) == text`` on the caller's sample, mismatches classified by kind
  (:mod:`udfs.tokenizer_roundtrip`);
* literal special-token strings in the text (``<|endoftext|>``);
* on the caller's text sample, words, whitespace runs (spaces, tabs, newlines) and digit runs in the text
  (:mod:`udfs.tokenizer_text`) and digits per all-digit token, by length bucket (:data:`RUN_BUCKETS`),
  per group.

Per-id facts come from :mod:`udfs.tokenizer_vocab`; the names other modules use from there and from the
round-trip and text modules are re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs import tokenize as tok_udfs
from udfs.tokenizer_roundtrip import RT_KINDS as RT_KINDS
from udfs.tokenizer_roundtrip import check_roundtrip
from udfs.tokenizer_roundtrip import decode_bytes as decode_bytes
from udfs.tokenizer_roundtrip import roundtrip_kind as roundtrip_kind
from udfs.tokenizer_text import RUN_BUCKETS as RUN_BUCKETS
from udfs.tokenizer_text import WS_KINDS as WS_KINDS
from udfs.tokenizer_text import text_buffer, text_counts
from udfs.tokenizer_vocab import LETTER as LETTER
from udfs.tokenizer_vocab import OTHER as OTHER
from udfs.tokenizer_vocab import SPACE_LETTER as SPACE_LETTER
from udfs.tokenizer_vocab import VocabTables as VocabTables
from udfs.tokenizer_vocab import ids_of_docs
from udfs.tokenizer_vocab import token_texts as token_texts
from udfs.tokenizer_vocab import vocab_tables as vocab_tables

TOTALS: tuple[str, ...] = (
    "docs",
    "bytes",
    "tokens",
    "unknown",
    "byte_fallback",
    "text_docs",
    "text_tokens",
    "words",
)
"""The fixed counters of a group, in :attr:`GroupAgg.totals` order: documents, UTF-8 bytes, content tokens,
unknown-token ids, byte-fallback ids over every document; then the documents of the text sample, their
tokens and their words (words and runs are counted on the text sample only: tokens per word is
``text_tokens / words``)."""

DIGIT_TOKEN_BUCKETS: tuple[str, ...] = ("1", "2", "3", "4+")
"""Digits per all-digit token (a leading space allowed): how the tokenizer groups numbers."""

FERTILITY_EDGES = 2.0 ** np.arange(-2.0, 6.0001, 0.125)
"""Bin edges of the per-document tokens-per-word and bytes-per-token histograms (0.25 .. 64, 1/8 octave);
the first and last bins also hold the values below and above."""


# ------------------------------------------------------------------------------------------ aggregates
def _zeros(*shape: int) -> np.ndarray:
    return np.zeros(shape, dtype=np.int64)


@dataclass
class GroupAgg:
    """Counters of one group (one source, or one language).

    Attributes:
        totals: int64 [len(:data:`TOTALS`)].
        tokens_per_word: int64 [bins]: documents per tokens-per-word bin (:data:`FERTILITY_EDGES`).
        bytes_per_token: int64 [bins]: documents per bytes-per-token bin.
        ws_runs: int64 [len(:data:`WS_KINDS`), len(:data:`RUN_BUCKETS`)]: whitespace runs by kind and length.
        digit_runs: int64 [len(:data:`RUN_BUCKETS`)]: runs of ASCII digits in the text by length.
        digit_tokens: int64 [len(:data:`DIGIT_TOKEN_BUCKETS`)]: all-digit tokens by digits.
    """

    totals: np.ndarray = field(default_factory=lambda: _zeros(len(TOTALS)))
    tokens_per_word: np.ndarray = field(default_factory=lambda: _zeros(len(FERTILITY_EDGES) + 1))
    bytes_per_token: np.ndarray = field(default_factory=lambda: _zeros(len(FERTILITY_EDGES) + 1))
    ws_runs: np.ndarray = field(default_factory=lambda: _zeros(len(WS_KINDS), len(RUN_BUCKETS)))
    digit_runs: np.ndarray = field(default_factory=lambda: _zeros(len(RUN_BUCKETS)))
    digit_tokens: np.ndarray = field(default_factory=lambda: _zeros(len(DIGIT_TOKEN_BUCKETS)))

    def add(self, other: GroupAgg) -> None:
        """Add ``other``'s counters into this one."""
        for name in self.__dataclass_fields__:
            getattr(self, name).__iadd__(getattr(other, name))

    def total(self, name: str) -> int:
        """One counter of :data:`TOTALS` by name."""
        return int(self.totals[TOTALS.index(name)])


@dataclass
class Partial:
    """The mergeable audit of some batches.

    Attributes:
        id_counts: int64 [vocab]: occurrences of each id in the content.
        follow: int64 [vocab, 3]: times each id is followed, in the same document, by a token of kind
            :data:`OTHER` / :data:`LETTER` / :data:`SPACE_LETTER`; filled for the watched ids only (the
            last ids of the prompts the audit checks, ``audit_batch``'s ``watch``), zero elsewhere.
        groups: ``{(dimension, value): GroupAgg}``, dimension ``source`` or ``lang``.
        roundtrip: documents ``checked``, then per kind of :data:`RT_KINDS`, and ``invalid_utf8``.
        rt_examples: ``(doc_id, source, kind)`` of mismatches, the ``keep`` smallest doc_ids.
        specials: literal special-token string -> ``[documents, occurrences]``.
        engines: ``checked`` and ``differ`` (documents whose ids differ between engines).
        engine_examples: doc_ids that differ, the ``keep`` smallest.
        keep: how many examples are kept.
        seconds: wall seconds the workers spent auditing (summed over batches; the tokenize stage's
            inline audit fills it, to report the audit's share of the stage).
    """

    id_counts: np.ndarray
    follow: np.ndarray
    groups: dict[tuple[str, str], GroupAgg] = field(default_factory=dict)
    roundtrip: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("checked", *RT_KINDS, "invalid_utf8"), 0)
    )
    rt_examples: list[tuple[str, str, str]] = field(default_factory=list)
    specials: dict[str, list[int]] = field(default_factory=dict)
    engines: dict[str, int] = field(default_factory=lambda: {"checked": 0, "differ": 0})
    engine_examples: list[str] = field(default_factory=list)
    keep: int = 5
    seconds: float = 0.0

    @classmethod
    def empty(cls, vocab_size: int, keep: int = 5) -> Partial:
        """All counters zero for a vocabulary of ``vocab_size`` ids."""
        return cls(_zeros(vocab_size), _zeros(vocab_size, 3), keep=keep)


def merge(a: Partial, b: Partial) -> Partial:
    """``a`` + ``b`` (``a`` is updated and returned): sums, and the smallest examples of both.

    Raises:
        ValueError: the two were built for different vocabularies.
    """
    if a.id_counts.shape != b.id_counts.shape:
        raise ValueError(
            f"audit partials of different vocabularies: {a.id_counts.shape[0]} vs {b.id_counts.shape[0]} ids"
        )
    a.id_counts += b.id_counts
    a.follow += b.follow
    for key, g in b.groups.items():
        a.groups.setdefault(key, GroupAgg()).add(g)
    for k, v in b.roundtrip.items():
        a.roundtrip[k] = a.roundtrip.get(k, 0) + v
    a.rt_examples = sorted({*a.rt_examples, *b.rt_examples})[: a.keep]
    for s, (docs, occ) in b.specials.items():
        cur = a.specials.setdefault(s, [0, 0])
        cur[0] += docs
        cur[1] += occ
    for k, v in b.engines.items():
        a.engines[k] = a.engines.get(k, 0) + v
    a.engine_examples = sorted({*a.engine_examples, *b.engine_examples})[: a.keep]
    a.seconds += b.seconds
    return a


# ------------------------------------------------------------------------------------------ text side
def watch_table(vocab_size: int, ids: tuple[int, ...] | None) -> np.ndarray | None:
    """bool [vocab_size]: True at ``ids`` (those outside the vocabulary are ignored); None for None
    (every id watched).

    >>> watch_table(4, (1, 3, 9)).tolist(), watch_table(4, None)
    ([False, True, False, True], None)
    """
    if ids is None:
        return None
    table = np.zeros(vocab_size, dtype=bool)
    picked = np.array([i for i in ids if 0 <= i < vocab_size], dtype=np.int64)
    table[picked] = True
    return table


def _per_doc(marks: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per document, how many ``True`` of ``marks`` (over the flat token ids) fall inside it (int64)."""
    doc = np.searchsorted(offsets, np.flatnonzero(marks), side="right") - 1
    return np.bincount(doc, minlength=len(offsets) - 1).astype(np.int64)


def _fert_bin(values: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(FERTILITY_EDGES, values, side="right"), 0, len(FERTILITY_EDGES))


@dataclass(frozen=True)
class DocSignals:
    """Per-document audit columns of one batch (all length ``n``).

    Attributes:
        n_words: int64 words (see the module docstring); -1 outside the text sample.
        n_bytes: int64 UTF-8 bytes of the text.
        n_tokens: int64 content tokens.
        n_unknown: int64 unknown plus byte-fallback ids.
        roundtrip_kind: str per document (:data:`RT_KINDS`), None where not checked.
    """

    n_words: np.ndarray
    n_bytes: np.ndarray
    n_tokens: np.ndarray
    n_unknown: np.ndarray
    roundtrip_kind: list[str | None]


# ------------------------------------------------------------------------------------------ the batch
def _codes(values: pa.Array | None, n: int) -> tuple[np.ndarray, list[str]]:
    if values is None:
        return np.zeros(n, dtype=np.int64), []
    enc = pc.fill_null(pc.cast(values, pa.string()), "").dictionary_encode()
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def audit_batch(
    tok: tok_udfs.LoadedTokenizer,
    tables: VocabTables,
    texts: pa.Array,
    lengths: np.ndarray,
    flat: np.ndarray,
    *,
    doc_ids: pa.Array,
    sources: pa.Array,
    langs: pa.Array | None = None,
    roundtrip_sample: np.ndarray | None = None,
    text_sample: np.ndarray | None = None,
    specials: tuple[str, ...] = (),
    keep: int = 5,
    watch: np.ndarray | None = None,
) -> tuple[Partial, DocSignals]:
    """Audit one batch of documents and their content ids.

    Args:
        tok: the tokenizer that produced the ids.
        tables: its :func:`vocab_tables`.
        texts: ``string`` [n] the documents as tokenized (null = "").
        lengths: int64 [n] content tokens per document (no BOS/EOS).
        flat: the content ids of the batch in order (any integer dtype), ``lengths.sum()`` of them.
        doc_ids: ``string`` [n], for examples.
        sources: ``string`` [n], the ``source`` group of each document.
        langs: ``string`` [n] language codes, or None when the run has none.
        roundtrip_sample: bool [n]: documents whose round trip is checked; None = every document.
        text_sample: bool [n]: documents whose words, whitespace runs, digit runs and digit tokens are
            counted (a scan of their bytes); None = every document.
        specials: literal special-token strings to count in the text (``<|endoftext|>``).
        keep: round-trip examples kept (smallest doc_ids).
        watch: bool [vocab]: the ids whose next token's kind is counted (:attr:`Partial.follow`): the last
            ids of the evaluation prompts the audit checks (:func:`watch_table`); None = every id.

    Returns:
        ``(partial, docs)``: the batch's :class:`Partial` and :class:`DocSignals`.

    Raises:
        ValueError: ``lengths`` does not add up to ``len(flat)``, or an id is outside the vocabulary.
    """
    n = len(lengths)
    lengths = np.asarray(lengths, dtype=np.int64)
    if int(lengths.sum()) != len(flat):
        raise ValueError(f"audit_batch: lengths sum to {int(lengths.sum())} but {len(flat)} ids were given")
    ids = np.asarray(flat)
    if not (ids.dtype == np.int64 or ids.dtype.kind == "u" and ids.dtype.itemsize <= 4):
        ids = ids.astype(np.int64)  # uint32 (as stored) is read as is: half the bytes per pass
    part = Partial.empty(tables.vocab_size, keep)
    _id_and_follow_counts(part, ids, lengths, tables, watch)  # checks the id range on the way

    n_bytes = pc.binary_length(pc.fill_null(texts, "")).to_numpy(zero_copy_only=False).astype(np.int64)
    sampled = np.ones(n, dtype=bool) if text_sample is None else np.asarray(text_sample, dtype=bool)
    picked = np.flatnonzero(sampled)
    sub = texts if len(picked) == n else pc.take(texts, pa.array(picked))
    tc = text_counts(*text_buffer(sub))
    words = np.full(n, -1, dtype=np.int64)
    words[picked] = tc["words"]
    run_doc, run_kind, run_bucket = tc["runs"]
    runs = (picked[run_doc], run_kind, run_bucket)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    unknown = _per_doc(tables.unknown[ids], bounds) if tables.unknown.any() else np.zeros(n, np.int64)
    fallback = (
        _per_doc(tables.byte_fallback[ids], bounds) if tables.byte_fallback.any() else np.zeros(n, np.int64)
    )
    check = np.ones(n, dtype=bool) if roundtrip_sample is None else np.asarray(roundtrip_sample, dtype=bool)
    kinds, invalid = check_roundtrip(tok, tables, texts, lengths, ids, check)

    src_codes, src_names = _codes(sources, n)
    dims = [("source", src_codes, src_names)]
    if langs is not None:
        lang_codes, lang_names = _codes(langs, n)
        dims.append(("lang", lang_codes, lang_names))
    digit_doc, digit_bucket = _digit_tokens(ids, lengths, picked, tables)
    on = sampled.astype(np.int64)
    cols = np.stack(
        [np.ones(n, np.int64), n_bytes, lengths, unknown, fallback, on, lengths * on, np.maximum(words, 0)],
        axis=1,
    )
    tpw_bin = _fert_bin(np.divide(lengths, words, out=np.zeros(n), where=words > 0))  # type: ignore[call-overload]
    bpt_bin = _fert_bin(np.divide(n_bytes, lengths, out=np.zeros(n), where=lengths > 0))  # type: ignore[call-overload]
    for dim, codes, names in dims:
        _add_groups(
            part,
            dim,
            codes,
            names,
            cols,
            tpw_bin,
            bpt_bin,
            words > 0,
            lengths > 0,
            runs,
            digit_doc,
            digit_bucket,
        )

    part.roundtrip["checked"] += int(check.sum())
    for k in kinds:
        if k is not None:
            part.roundtrip[k] += 1
    part.roundtrip["invalid_utf8"] += invalid
    bad = [
        (doc_ids[i].as_py(), str(sources[i].as_py()), k) for i, k in enumerate(kinds) if k not in (None, "ok")
    ]
    part.rt_examples = sorted(bad)[:keep]
    _count_specials(part, texts, specials)
    return part, DocSignals(words, n_bytes, lengths, unknown + fallback, kinds)


def _digit_tokens(
    ids: np.ndarray, lengths: np.ndarray, picked: np.ndarray, tables: VocabTables
) -> tuple[np.ndarray, np.ndarray]:
    """Document (int64, a position in the batch) and digits bucket (int64, :data:`DIGIT_TOKEN_BUCKETS`) of
    every all-digit token of the documents ``picked`` (the text sample): their ids are gathered first
    (:func:`udfs.tokenizer_vocab.ids_of_docs`), so the per-token table lookup touches the sample only."""
    dl = tables.digit_len.take(ids_of_docs(ids, lengths, picked))
    pos = np.flatnonzero(dl)
    doc = picked[np.searchsorted(np.cumsum(lengths[picked]), pos, side="right")]
    return doc, np.minimum(dl[pos], 4).astype(np.int64) - 1


def _count_specials(part: Partial, texts: pa.Array, specials: tuple[str, ...]) -> None:
    """Documents and occurrences of each literal special-token string; one literal search over the
    batch's buffer first (no copy of it), the per-document count only when the string occurs."""
    if not specials:
        return
    data, _ = text_buffer(texts)
    raw = memoryview(data)
    for s in specials:
        if re.search(re.escape(s.encode("utf-8")), raw):
            occ = pc.count_substring(pc.fill_null(texts, ""), s).to_numpy(zero_copy_only=False)
            if occ.any():
                part.specials[s] = [int((occ > 0).sum()), int(occ.sum())]


def _id_and_follow_counts(
    part: Partial, ids: np.ndarray, lengths: np.ndarray, tables: VocabTables, watch: np.ndarray | None
) -> None:
    """Add each id's occurrences (one ``bincount`` over the vocabulary) and, for the occurrences of the
    watched ids (every id when ``watch`` is None), the kind of the token after it in the same document:
    a document's last token counts under a fourth kind, "end", dropped after counting.

    Raises:
        ValueError: an id is outside ``[0, vocab)``.
    """
    if not len(ids):
        return
    n = tables.vocab_size
    try:
        counts = np.bincount(ids, minlength=n)
    except ValueError:  # a negative id
        counts = part.id_counts[:0]
    if len(counts) != n:
        raise ValueError(f"audit_batch: ids outside [0, {n})")
    part.id_counts += counts
    if watch is None:
        pos = np.arange(len(ids))
    else:
        watched = np.flatnonzero(watch)
        if len(watched) <= 2:  # the usual prompt set ends on one or two ids: compare, no gather
            hit = ids == watched[0] if len(watched) else np.zeros(len(ids), dtype=bool)
            if len(watched) == 2:
                hit |= ids == watched[1]
        else:
            hit = watch.take(ids)
        pos = np.flatnonzero(hit)
    if not len(pos):
        return
    last = np.cumsum(lengths)[lengths > 0] - 1  # each document's last position, ascending
    at = np.minimum(np.searchsorted(last, pos), len(last) - 1)
    kind = tables.next_kind.take(ids.take(np.minimum(pos + 1, len(ids) - 1))).astype(np.int64)
    kind[last.take(at) == pos] = 3
    both = np.bincount(ids.take(pos).astype(np.int64) * 4 + kind, minlength=4 * n).reshape(-1, 4)
    part.follow += both[:, :3]


def _add_groups(
    part: Partial,
    dim: str,
    codes: np.ndarray,
    names: list[str],
    cols: np.ndarray,
    tpw_bin: np.ndarray,
    bpt_bin: np.ndarray,
    has_words: np.ndarray,
    has_tokens: np.ndarray,
    runs: tuple[np.ndarray, np.ndarray, np.ndarray],
    digit_doc: np.ndarray,
    digit_bucket: np.ndarray,
) -> None:
    """Add one batch's counters into the groups of one dimension (``source`` or ``lang``)."""
    k = max(len(names), 1)
    nb = len(FERTILITY_EDGES) + 1
    totals = np.stack(
        [np.bincount(codes, weights=cols[:, j], minlength=k) for j in range(cols.shape[1])], axis=1
    ).astype(np.int64)
    tpw = np.bincount(codes[has_words] * nb + tpw_bin[has_words], minlength=k * nb).reshape(k, nb)
    bpt = np.bincount(codes[has_tokens] * nb + bpt_bin[has_tokens], minlength=k * nb).reshape(k, nb)
    nr = len(RUN_BUCKETS)
    doc, kind, bucket = runs
    nk = len(WS_KINDS) + 1
    counted = np.bincount((codes[doc] * nk + kind) * nr + bucket, minlength=k * nk * nr).reshape(k, nk, nr)
    ws, digits = counted[:, :-1, :], counted[:, -1, :]
    nd = len(DIGIT_TOKEN_BUCKETS)
    dtok = np.bincount(codes[digit_doc] * nd + digit_bucket, minlength=k * nd).reshape(k, nd)
    for c, name in enumerate(names):
        part.groups.setdefault((dim, name), GroupAgg()).add(
            GroupAgg(totals[c], tpw[c], bpt[c], ws[c], digits[c], dtok[c])
        )


def engines_differ(tok: tok_udfs.LoadedTokenizer, fast: object, texts: list[str]) -> np.ndarray:
    """bool [n]: documents whose ids differ between the Hugging Face tokenizer and tiktoken ``fast``.

    Args:
        tok: the tokenizer (its ``tokenizers`` instance is the reference).
        fast: a ``tiktoken.Encoding`` built from it (:func:`udfs.tokenize_tiktoken.encoding_for`).
        texts: the documents to compare (a seeded sample).
    """
    ref = tok_udfs.encode_ids(tok, texts)
    got = tok_udfs.encode_ids(tok, texts, fast)
    return np.array([list(a) != np.asarray(b).tolist() for a, b in zip(ref, got, strict=True)], dtype=bool)


def fertility_quantiles(hist: np.ndarray, qs: tuple[float, ...] = (0.1, 0.5, 0.9)) -> list[float | None]:
    """Quantiles of a per-document :data:`FERTILITY_EDGES` histogram (geometric bin centres; None if empty).

    >>> h = np.zeros(len(FERTILITY_EDGES) + 1, np.int64); h[17] = 3
    >>> [round(q, 3) for q in fertility_quantiles(h)]
    [1.044, 1.044, 1.044]
    """
    total = int(hist.sum())
    if not total:
        return [None] * len(qs)
    lo = np.concatenate([[FERTILITY_EDGES[0] / 2**0.125], FERTILITY_EDGES])
    hi = np.concatenate([FERTILITY_EDGES, [FERTILITY_EDGES[-1] * 2**0.125]])
    centres = np.sqrt(lo * hi)
    cum = np.cumsum(hist)
    return [float(centres[int(np.searchsorted(cum, q * total, side="left"))]) for q in qs]


def audit_texts(
    tok: tok_udfs.LoadedTokenizer,
    tables: VocabTables,
    texts: list[str],
    sources: list[str],
    *,
    langs: list[str] | None = None,
    doc_ids: list[str] | None = None,
    specials: tuple[str, ...] = (),
    keep: int = 5,
    engine: object | None = None,
) -> tuple[Partial, DocSignals]:
    """Encode ``texts`` (:func:`udfs.tokenize.encode_ids`) and :func:`audit_batch` them: one call for
    benchmarks, tests and callers that hold Python strings rather than a ``tokenized`` batch.

    Args:
        texts: the documents.
        sources: the source of each document.
        langs: the language of each document, or None.
        doc_ids: ids for examples (default: the position as a zero-padded string).
        engine: the encoder (see :func:`udfs.tokenize.encode_ids`).

    Returns:
        As :func:`audit_batch`.
    """
    ids = tok_udfs.encode_ids(tok, texts, engine)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids]) if ids else np.zeros(0, np.int64)
    return audit_batch(
        tok,
        tables,
        pa.array(texts, pa.string()),
        lengths,
        flat,
        doc_ids=pa.array(doc_ids or [f"{i:09d}" for i in range(len(texts))], pa.string()),
        sources=pa.array(sources, pa.string()),
        langs=None if langs is None else pa.array(langs, pa.string()),
        specials=specials,
        keep=keep,
    )
