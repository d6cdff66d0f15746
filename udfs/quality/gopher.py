"""Gopher quality and repetition signals (Rae et al. 2021, appendix A.1.1 and table A1; datatrove
0.10.1 ``gopher_quality_filter.py`` and ``gopher_repetition_filter.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.quality.parse import (
    Parsed,
    _byte_rows,
    _duplicates,
    _edge_in,
    _np,
    _per_doc,
    _ratio,
    _struct,
    _utf8,
)

STOP_WORDS: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")
"""Gopher's English stop words (Rae et al. 2021, A.1.1); a document needs at least 2 of them."""
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)
"""Set bits of each byte (distinct stop words of a document from its byte of stop-word bits)."""
if len(STOP_WORDS) > 8:
    raise ImportError("gopher_quality keeps the stop words of a document as one byte of bits: at most 8")

BULLETS = "•‣◦⁃∙▪●-*"
"""Characters that start a bullet line. datatrove uses ``•`` and ``-``; the paper says "bullet point"."""

GOPHER_REPETITION_TOP_N = (2, 3, 4)
GOPHER_REPETITION_DUP_N = (5, 6, 7, 8, 9, 10)


# ------------------------------------------------------------------------------------ Gopher quality
GOPHER_QUALITY_TYPE = pa.struct([
    ("word_count", pa.int64()),
    ("mean_word_length", pa.float64()),
    ("hash_word_ratio", pa.float64()),
    ("ellipsis_word_ratio", pa.float64()),
    ("bullet_lines_ratio", pa.float64()),
    ("ellipsis_lines_ratio", pa.float64()),
    ("alpha_words_ratio", pa.float64()),
    ("stop_words", pa.int64()),
])


def whitespace_alpha_ratio(texts: pa.Array) -> np.ndarray:
    """Fraction of whitespace-separated words holding a letter (``\\pL``), per text; 0.0 without words.

    The paper's reading of Gopher's alphabetic-word rule (Rae et al. 2021, A.1.1: "80% of words in a
    document contain at least one alphabetic character"): a word is what a reader calls one, so
    ``(1)``, ``x=2,`` or ``2.5`` are one word each and trailing punctuation does not count apart.

    >>> whitespace_alpha_ratio(pa.array(["Energy E = mc^2 (1).", ""])).tolist()
    [0.6, 0.0]
    """
    lists = pc.utf8_split_whitespace(texts)
    words = pc.list_flatten(lists)
    doc = _np(pc.list_parent_indices(lists), np.int64)
    nonempty = _np(pc.utf8_length(words), np.int64) > 0
    alpha = _np(pc.match_substring_regex(words, r"\pL"), bool) & nonempty
    return _ratio(_per_doc(doc[alpha], len(texts)), _per_doc(doc[nonempty], len(texts)))


def _ellipses(texts: pa.Array) -> np.ndarray:
    """int64 per text: ``...`` (counted without overlap, as ``str.count``: a run of r dots holds r // 3)
    plus ``…``, found on the UTF-8 bytes."""
    off, data = _utf8(texts)
    n = len(texts)
    dot = np.flatnonzero(data == ord("."))
    row = np.searchsorted(off, dot, side="right") - 1
    start = np.flatnonzero(np.r_[True, (dot[1:] != dot[:-1] + 1) | (row[1:] != row[:-1])]) if len(dot) else dot
    runs = np.diff(start, append=len(dot)) // 3
    lead = np.flatnonzero(data[:-2] == 0xE2) if len(data) > 2 else np.zeros(0, np.int64)
    lead = lead[(data[lead + 1] == 0x80) & (data[lead + 2] == 0xA6)]
    return (_per_doc(row[start], n, runs) + _per_doc(np.searchsorted(off, lead, side="right") - 1, n)).astype(np.int64)


def gopher_quality(p: Parsed, alpha_words_reading: str = "whitespace") -> pa.StructArray:
    """Gopher quality-filter signals (Rae et al. 2021, A.1.1; datatrove ``GopherQualityFilter``).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.
        alpha_words_reading: ``whitespace`` or ``datatrove`` (see ``alpha_words_ratio``).

    Returns:
        StructArray[n] of :data:`GOPHER_QUALITY_TYPE`:
        ``word_count`` int64, non-symbol words (paper range 50..100,000);
        ``mean_word_length`` float64, characters per non-symbol word, 0.0 without words (paper 3..10);
        ``hash_word_ratio`` / ``ellipsis_word_ratio`` float64, ``#`` resp. ``...``/``…`` occurrences per
        word, all words counted as datatrove does (paper <= 0.1);
        ``bullet_lines_ratio`` / ``ellipsis_lines_ratio`` float64, fraction of non-blank lines starting
        with a bullet (:data:`BULLETS`) resp. ending with ``...``/``…`` (paper <= 0.9 / <= 0.3);
        ``alpha_words_ratio`` float64, words holding an alphabetic character / words (paper >= 0.8):
        whitespace-separated words with ``alpha_words_reading="whitespace"`` (the paper,
        :func:`whitespace_alpha_ratio`), spaCy-like tokens with ``"datatrove"`` (datatrove's reading,
        where every punctuation mark and number is a word);
        ``stop_words`` int64, distinct :data:`STOP_WORDS` present, case-insensitive (paper >= 2).
        Ratios are 0.0 when their denominator is 0.
    """
    n = p.n
    n_words = p.n_tokens
    word_count = p.words - p.symbol_words
    word_len = p.word_char_sum - p.symbol_chars
    hashes = _per_doc(_byte_rows(p.texts, ord("#")), n).astype(np.int64)
    ellipses = _ellipses(p.texts)

    n_lines = _per_doc(p.line_doc, n)
    bullet = _edge_in(p.lines_stripped, list(BULLETS), end=False)
    ell_end = _edge_in(p.lines_stripped, ["...", "…"], end=True)

    # Stop words as bits of each distinct word (8 stop words: one byte), OR-ed per document.
    stop_of_dict = _np(pc.fill_null(pc.index_in(pc.utf8_lower(p.word_dict), value_set=pa.array(STOP_WORDS)), -1), np.int64)
    bits = np.where(stop_of_dict >= 0, np.left_shift(1, np.maximum(stop_of_dict, 0)), 0).astype(np.uint8)
    stop_words = _POPCOUNT[p.words_any(bits)].astype(np.int64)
    return _struct(
        {
            "word_count": word_count,
            "mean_word_length": _ratio(word_len, word_count),
            "hash_word_ratio": _ratio(hashes, n_words),
            "ellipsis_word_ratio": _ratio(ellipses, n_words),
            "bullet_lines_ratio": _ratio(_per_doc(p.line_doc[bullet], n), n_lines),
            "ellipsis_lines_ratio": _ratio(_per_doc(p.line_doc[ell_end], n), n_lines),
            "alpha_words_ratio": (_ratio(p.alpha_words, n_words) if alpha_words_reading == "datatrove"
                                  else _ratio(p.ws_alpha_words, p.ws_words)),
            "stop_words": stop_words,
        },
        {f.name: f.type for f in GOPHER_QUALITY_TYPE},
    )


# --------------------------------------------------------------------------------- Gopher repetition
GOPHER_REPETITION_TYPE = pa.struct(
    [
        ("dup_line_frac", pa.float64()),
        ("dup_line_char_frac", pa.float64()),
        ("dup_para_frac", pa.float64()),
        ("dup_para_char_frac", pa.float64()),
    ]
    + [(f"top_{k}gram_char_frac", pa.float64()) for k in GOPHER_REPETITION_TOP_N]
    + [(f"dup_{k}gram_char_frac", pa.float64()) for k in GOPHER_REPETITION_DUP_N]
)




CHUNK_WORDS = 1 << 20
"""Words per chunk of whole documents in which :func:`gopher_repetition` groups n-grams: n-gram ids and
positions then pack into one int64 sort key (a larger document is a chunk of its own)."""


def _word_chunks(words_in_doc: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` word ranges of whole consecutive documents, each at most ``limit`` words or one document."""
    ends = np.cumsum(words_in_doc)
    out, lo = [], 0
    total = int(ends[-1]) if len(ends) else 0
    while lo < total:
        # the last document that ends within the limit, or the next one alone
        i = int(np.searchsorted(ends, lo + limit, side="right")) - 1
        hi = int(ends[i]) if i >= 0 and ends[i] > lo else int(ends[np.searchsorted(ends, lo, side="right")])
        out.append((lo, hi))
        lo = hi
    return out


def _sorted_pairs(gram: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(gram, pos)`` pairs (non-negative int64) sorted by gram, then position: one sort of packed keys
    when both fit in 63 bits, else a lexicographic sort."""
    pbits = int(pos.max()).bit_length() if len(pos) else 0
    if not len(gram) or int(gram.max()).bit_length() + pbits <= 63:
        packed = np.sort((gram << pbits) | pos)
        return packed >> pbits, packed & ((1 << pbits) - 1)
    order = np.lexsort((pos, gram))
    return gram[order], pos[order]


def _ngram_repeats(word_ids: np.ndarray, doc: np.ndarray, cum: np.ndarray, top: dict[int, np.ndarray],
                   covered: dict[int, np.ndarray]) -> None:
    """Add the repeated word n-grams of whole documents to ``top`` and ``covered`` (per document, by k).

    Level k groups the k-grams that occur more than once in their document. An n-gram occurs twice
    only if both its (k-1)-gram prefix and suffix do, so only starts i where both the (k-1)-grams at i
    and i + 1 repeat are candidates (exact pruning: most starts drop out), and the pair of their group
    ids is the k-gram's exact id (words themselves at k = 2). Sorting (id, position) gives each group's
    occurrences in text order: the first, its count and the later ones.

    Args:
        word_ids / doc: int64 per word of the chunk, in text order; ``doc`` ascending.
        cum: int64[len + 1], cumulative characters of the chunk's words from 0.
        top: k -> float64[n]: characters of the most frequent repeated k-gram (joined by spaces) times its
            count (ties: the earliest) where the document has one, for k in :data:`GOPHER_REPETITION_TOP_N`.
        covered: k -> float64[n]: characters of the words covered by occurrences of a k-gram after its
            first (each word once), for k in :data:`GOPHER_REPETITION_DUP_N`.
    """
    n_words = len(word_ids)
    if n_words < 2:
        return
    n_ids = int(word_ids.max()) + 1
    cand = np.flatnonzero(doc[:-1] == doc[1:])
    gram = word_ids[cand] * n_ids + word_ids[cand + 1]
    for k in range(2, max(GOPHER_REPETITION_DUP_N) + 1):
        g, pos = _sorted_pairs(gram, cand)
        new = np.empty(len(g), dtype=bool)
        new[:1] = True
        np.not_equal(g[1:], g[:-1], out=new[1:])
        if k == 2:  # word ids hold no document; longer n-grams' group ids do
            d = doc[pos]
            new[1:] |= d[1:] != d[:-1]
        starts = np.flatnonzero(new)
        size = np.diff(starts, append=len(g))
        multi = size > 1
        if k in top and multi.any():
            first, count = pos[starts[multi]], size[multi]
            fdoc = doc[first]
            best = np.zeros(len(top[k]), np.int64)
            np.maximum.at(best, fdoc, count)
            win = count == best[fdoc]
            earliest = np.full(len(top[k]), n_words, np.int64)
            np.minimum.at(earliest, fdoc[win], first[win])
            docs = np.flatnonzero(best)
            e = earliest[docs]
            top[k][docs] = (cum[e + k] - cum[e] + (k - 1)) * best[docs]
        if k in covered:
            # the duplicates are the occurrences after the first (as datatrove counts them); the words
            # they cover are the union of the ascending spans [s, s + k)
            later = np.sort(pos[~new])
            if len(later):
                from_ = np.maximum(later, np.r_[0, later[:-1] + k])
                covered[k] += _per_doc(doc[later], len(covered[k]), cum[later + k] - cum[from_])
        if not multi.any():
            return
        # next level: starts whose k-gram and following k-gram both repeat (consecutive positions among
        # the repeated starts, sorted with their groups' ranks); ids = the pair of ranks
        rep = np.repeat(multi, size)
        n_groups = int(multi.sum())
        ranked, rank = _sorted_pairs(pos[rep], np.repeat(np.arange(n_groups, dtype=np.int64), size[multi]))
        follows = ranked[1:] == ranked[:-1] + 1
        cand = ranked[:-1][follows]
        gram = rank[:-1][follows] * n_groups + rank[1:][follows]


def gopher_repetition(p: Parsed) -> pa.StructArray:
    """Gopher repetition signals (Rae et al. 2021, A.1.1 and table A1; datatrove ``GopherRepetitionFilter``).

    Character fractions are over all characters of the text (``len(text)``, as datatrove). Word n-grams
    are compared exactly (by the ids of their words, :func:`_ngram_repeats`).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.

    Returns:
        StructArray[n] of :data:`GOPHER_REPETITION_TYPE`, all float64 in [0, 1] except
        ``top_{2,3,4}gram_char_frac``, which can pass 1 (overlapping occurrences all count, "x x x" holds
        "x x" twice, and the n-gram is measured joined by spaces where words may touch, as in Japanese;
        both as datatrove), 0.0 for empty text:
        ``dup_line_frac`` / ``dup_para_frac``: non-blank lines (paragraphs) equal to an earlier one, over
        all lines (paragraphs) (paper <= 0.30 / 0.30); ``dup_line_char_frac`` / ``dup_para_char_frac``:
        their characters (paper <= 0.20 / 0.20); ``top_{2,3,4}gram_char_frac``: characters of the most
        frequent word n-gram (joined by one space) times its count (ties: the earliest), as in the paper
        and datatrove (paper <= 0.20 / 0.18 / 0.16); ``dup_{5..10}gram_char_frac``: characters (spaces
        excluded) of the words covered by occurrences of a word n-gram after its first, each word
        counted once (paper: "taking care not to count characters that occur in overlapping n-grams more
        than once"; datatrove's greedy scan instead jumps n words after each duplicate, which can miss
        overlapping ones) (paper <= 0.15 .. 0.10).
    """
    n = p.n
    out: dict[str, np.ndarray] = {}
    n_lines = _per_doc(p.line_doc, n)
    line_dups, line_dup_chars = p.line_duplicates
    para_dups, para_dup_chars = _duplicates(p.para_doc, p.paras, p.para_chars, n)
    out["dup_line_frac"] = _ratio(line_dups, n_lines)
    out["dup_line_char_frac"] = _ratio(line_dup_chars, p.n_chars)
    out["dup_para_frac"] = _ratio(para_dups, _per_doc(p.para_doc, n))
    out["dup_para_char_frac"] = _ratio(para_dup_chars, p.n_chars)

    top = {k: np.zeros(n) for k in GOPHER_REPETITION_TOP_N}
    covered = {k: np.zeros(n) for k in GOPHER_REPETITION_DUP_N}
    words_in_doc = p.words
    cum = np.concatenate([[0], np.cumsum(p.word_chars)])
    for lo, hi in _word_chunks(words_in_doc, CHUNK_WORDS):
        _ngram_repeats(p.word_ids[lo:hi], p.word_doc[lo:hi], cum[lo : hi + 1] - cum[lo], top, covered)
    for k in GOPHER_REPETITION_TOP_N:
        # a document without a repeated k-gram: its most frequent k-gram is its first, once
        has = np.flatnonzero((top[k] == 0) & (words_in_doc >= k))
        first = (np.cumsum(words_in_doc) - words_in_doc)[has]
        top[k][has] = cum[first + k] - cum[first] + (k - 1)
        out[f"top_{k}gram_char_frac"] = _ratio(top[k], p.n_chars)
    for k in GOPHER_REPETITION_DUP_N:
        out[f"dup_{k}gram_char_frac"] = _ratio(covered[k], p.n_chars)
    return _struct(out, {f.name: f.type for f in GOPHER_REPETITION_TYPE})
