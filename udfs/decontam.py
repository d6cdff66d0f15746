"""Evaluation-overlap (decontamination) kernels: normalised words, 64-bit word n-gram hashes, cut spans.

Pure functions over strings and Arrow arrays, no Spark. Both sides of the join, evaluation items and
training documents, go through :func:`word_hashes`, so a document and an item share an n-gram hash
exactly when they share the n consecutive normalised words (up to 64-bit hash collisions).

**Normalisation** (version :data:`NORMALIZATION_VERSION`): Unicode NFKC, lowercase, every character
that is not a letter, mark or number (Unicode categories L*, M*, N*) becomes a word break, and words
are the maximal runs between breaks. So punctuation, symbols and the underscore act as spaces and
numbers are kept (``"x_1 = 2.5"`` -> ``x 1 2 5``). Words are found on the *input* text, then NFKC'd
and lowercased one by one (NFKC may split a word again, e.g. ``½`` -> ``1 2``); every word keeps the
character offsets of its run in the input text, which is what :func:`cut_spans` maps matches back to.
Lowercase is the first code point of :meth:`str.lower` per code point (so ``İ`` -> ``i``).

**Hash** (64 bit, wrapping uint64 arithmetic; ``fmix`` = MurmurHash3's 64-bit finaliser, Appleby 2011):

* word: ``fmix(sum_i c_i * P**i  XOR  len * K)`` over its normalised code points ``c_0..c_{len-1}``;
* n-gram of words ``w_j..w_{j+n-1}``: ``fmix(sum_k word(w_{j+k}) * Q**(n-1-k)  +  n * K)``.

Each word is hashed once; the n-gram hashes are then ``n`` vectorised multiply-adds over every window
of the batch at once (no Python loop per n-gram). The expected number of false matches is about
``doc n-grams * eval n-grams / 2**64``: 5e-6 for 1e9 document n-grams against 1e5 evaluation n-grams.

Source of the method: Brown et al. 2020 (GPT-3), appendix C: lowercased, punctuation-free word 13-grams,
and on a match the 13-gram plus 200 characters either side removed; datatrove's
``NGramsDecontIndexer`` for indexing an item's fields together.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import pyarrow as pa

NORMALIZATION_VERSION = 1
"""Bumped whenever normalisation or hashing changes: it is part of the ``eval_ngrams`` fingerprint."""

_P = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplication by it is invertible mod 2**64
_Q = np.uint64(0xC2B2AE3D27D4EB4F)
_K = np.uint64(0x165667B19E3779F9)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_ASCII_MAX = 0x7F
_TOP = np.uint64(64 - 22)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (Appleby 2011), element-wise over a uint64 array."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


_ASSIGNED_WORD_RANGES = ((0, 0x32400), (0xE0100, 0xE01F0))
"""Code points that can be letters, marks or numbers (Unicode 15/16): planes 0-3 up to CJK extension H
and the variation selectors supplement (Mn); the rest of plane 3 and planes 4-16 hold no L/M/N
character (private use is Co). Scanning only these keeps the table build ~0.3 s per process."""


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """(is word character: bool[0x110000], lowercase code point: uint32[0x110000]), once per process."""
    is_word = np.zeros(sys.maxunicode + 1, dtype=bool)
    lower = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    category, lo_ = unicodedata.category, str.lower
    for a, b in _ASSIGNED_WORD_RANGES:
        for cp in range(a, b):
            ch = chr(cp)
            if category(ch)[0] in "LMN":
                is_word[cp] = True
                lo = lo_(ch)
                if lo != ch:
                    lower[cp] = ord(lo[0])
    return is_word, lower


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (exclusive) of the runs of True in a bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return edges[0::2], edges[1::2]


def _batch_words(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Normalised words of a batch of texts, found in one pass over the texts joined by newlines.

    Returns:
        (code points uint32 [sum of word lengths], word lengths int64 [W], start int64 [W], end int64
        [W], words per text int64 [D]); start/end are code-point offsets of the word's run in its own
        input text (end exclusive). Words never span two texts: the newline between them is a break.
    """
    is_word, lower = _tables()
    n_docs = len(texts)
    cps = _code_points("\n".join(texts))
    doc_start = np.zeros(n_docs, np.int64)
    if n_docs > 1:
        doc_start[1:] = np.cumsum(np.fromiter((len(t) + 1 for t in texts[:-1]), np.int64, n_docs - 1))
    mask = is_word[cps]
    starts, ends = _runs(mask)
    word_doc = np.searchsorted(doc_start, starts, side="right") - 1
    # str.isascii is O(1) in CPython; ASCII text is NFKC already.
    slow = [d for d, t in enumerate(texts) if not t.isascii() and not unicodedata.is_normalized("NFKC", t)]
    if slow and starts.size:
        needs = np.isin(word_doc, slow) & (np.maximum.reduceat(cps, starts) > _ASCII_MAX)
    else:
        needs = np.zeros(starts.size, dtype=bool)
    if not needs.any():
        counts = np.bincount(word_doc, minlength=n_docs).astype(np.int64)
        return (
            lower[cps[mask]],
            (ends - starts).astype(np.int64),
            starts - doc_start[word_doc],
            ends - doc_start[word_doc],
            counts,
        )
    # Not NFKC: only the non-ASCII words of those texts are normalised, one by one.
    parts, lens, s_out, e_out, d_out = [], [], [], [], []
    prev = 0
    for i in [*np.flatnonzero(needs).tolist(), starts.size]:
        if i > prev:  # words prev..i-1 need nothing: one slice
            parts.append(lower[cps[starts[prev] : ends[i - 1]][mask[starts[prev] : ends[i - 1]]]])
            lens.append(ends[prev:i] - starts[prev:i])
            s_out.append(starts[prev:i])
            e_out.append(ends[prev:i])
            d_out.append(word_doc[prev:i])
        if i == starts.size:
            break
        s, e = int(starts[i]), int(ends[i])
        sub = _code_points(unicodedata.normalize("NFKC", _decode(cps[s:e])))
        sub_starts, sub_ends = _runs(is_word[sub])
        for a, b in zip(sub_starts.tolist(), sub_ends.tolist(), strict=True):
            parts.append(lower[sub[a:b]])
            lens.append(np.array([b - a]))
            s_out.append(np.array([s]))
            e_out.append(np.array([e]))
            d_out.append(word_doc[i : i + 1])
        prev = i + 1
    word_doc = np.concatenate(d_out).astype(np.int64)
    counts = np.bincount(word_doc, minlength=n_docs).astype(np.int64)
    return (
        np.concatenate(parts),
        np.concatenate(lens).astype(np.int64),
        np.concatenate(s_out) - doc_start[word_doc],
        np.concatenate(e_out) - doc_start[word_doc],
        counts,
    )


def _decode(cps: np.ndarray) -> str:
    return cps.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


def normalized_words(text: str) -> list[str]:
    """The normalised words of ``text`` as strings (for tests, docs and inspection; see the module doc).

    >>> normalized_words("The Ｑuick_brown fox: x[1] = 2.5!")
    ['the', 'quick', 'brown', 'fox', 'x', '1', '2', '5']
    """
    cps, lens, _, _, _ = _batch_words([text])
    flat = _decode(cps)
    offsets = np.concatenate(([0], np.cumsum(lens))).tolist()
    return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


class _Powers:
    """P**k mod 2**64 for k < len, grown on demand (one per process)."""

    table = np.ones(1, dtype=np.uint64)

    @classmethod
    def upto(cls, n: int) -> np.ndarray:
        if n > cls.table.size:
            size = max(n, 2 * cls.table.size)
            with np.errstate(over="ignore"):
                cls.table = np.concatenate(
                    ([np.uint64(1)], np.cumprod(np.full(size - 1, _P, dtype=np.uint64)))
                )
        return cls.table[:n]


def _hash_words(cps: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Word hashes (uint64 [W]) of words given as concatenated code points and lengths (all > 0)."""
    if not lens.size:
        return np.zeros(0, np.uint64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    # position of each code point inside its word: a running count reset at every word start
    step = np.ones(cps.size, dtype=np.int64)
    step[starts[1:]] = 1 - lens[:-1]
    step[0] = 0
    pos_in_word = np.cumsum(step)
    with np.errstate(over="ignore"):
        terms = cps.astype(np.uint64) * _Powers.upto(int(lens.max()))[pos_in_word]
        sums = np.add.reduceat(terms, starts)
        return fmix64(sums ^ (lens.astype(np.uint64) * _K))


def word_hashes(texts: Iterable[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hash every normalised word of a batch of texts once.

    Args:
        texts: strings (None counts as empty).

    Returns:
        (hashes uint64 [W], doc offsets int64 [D+1] (words of text d are ``offsets[d]:offsets[d+1]``),
        start int64 [W], end int64 [W]): code-point offsets of each word in its input text.
    """
    cps, lens, starts, ends, counts = _batch_words([t or "" for t in texts])
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    return _hash_words(cps, lens), offsets, starts, ends


def ngram_windows(hashes: np.ndarray, offsets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every window of ``n`` consecutive words that lies inside one text.

    Args:
        hashes: word hashes uint64 [W] from :func:`word_hashes`.
        offsets: doc offsets int64 [D+1].
        n: words per n-gram (>= 1).

    Returns:
        (n-gram hashes uint64 [G], index of the window's first word int64 [G]), in word order.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    total = hashes.size - n + 1
    if total <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    acc = np.zeros(total, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):  # n vectorised multiply-adds over all windows of the batch
            acc = acc * _Q + hashes[k : k + total]
        acc = fmix64(acc + np.uint64(n) * _K)
    first = np.arange(total, dtype=np.int64)
    word_doc = word_docs(offsets)
    inside = word_doc[:total] == word_doc[n - 1 :]
    return acc[inside], first[inside]


def whole_hashes(hashes: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The hash of all the words of each text of ``rows`` as one n-gram: what :func:`ngram_windows`
    gives the one window of ``n`` = the text's word count, for every row at once.

    Horner's multiply-adds over a window equal ``sum_k word_k * Q**(n-1-k)`` in wrapping uint64
    arithmetic, so each word's term is its hash times the power of ``Q`` of its distance from its text's
    last word, and the terms of a text are summed at once (``np.add.reduceat``), without a loop per text.

    Args:
        hashes: word hashes uint64 [W] from :func:`word_hashes`.
        offsets: doc offsets int64 [D+1].
        rows: int64 [R] text indexes, each text holding at least one word.

    Returns:
        uint64 [R].
    """
    if not rows.size:
        return np.zeros(0, np.uint64)
    a, b = offsets[rows], offsets[rows + 1]
    n = b - a
    starts = np.concatenate(([0], np.cumsum(n)[:-1]))
    # every word of the rows, in order: its index in ``hashes`` and its distance from its text's end
    word = np.arange(int(n.sum()), dtype=np.int64) + np.repeat(a - starts, n)
    to_end = np.repeat(b, n) - 1 - word
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.r_[np.uint64(1), np.full(int(n.max()) - 1, _Q, np.uint64)], dtype=np.uint64)
        acc = np.add.reduceat(hashes[word] * powers[to_end], starts)
        return fmix64(acc + n.astype(np.uint64) * _K)


def word_docs(offsets: np.ndarray) -> np.ndarray:
    """Text index (int64 [W]) of every word, from the doc offsets of :func:`word_hashes`."""
    return np.repeat(np.arange(offsets.size - 1, dtype=np.int64), np.diff(offsets))


def text_hash(text: str) -> tuple[int, int]:
    """(hash of all the normalised words of ``text`` as one n-gram, number of words); (0, 0) when none.

    This is the key of an evaluation item shorter than the n-gram size: a document matches it when it
    holds the item's words consecutively.
    """
    h, off, _, _ = word_hashes([text])
    if not h.size:
        return 0, 0
    g, _ = ngram_windows(h, off, h.size)
    return int(g[0]), int(h.size)


def item_hashes(texts: Sequence[str], n: int) -> list[tuple[np.ndarray, int]]:
    """Keys of evaluation items: distinct n-gram hashes, or the whole-text hash of a short item.

    Args:
        texts: the text of each item (its fields joined by newlines).
        n: the n-gram size.

    Returns:
        Per item ``(hashes uint64 [k], words)``: an item of ``words >= n`` has its distinct n-gram
        hashes (sorted); a shorter one the single hash of its ``words``-gram; an empty one none.
    """
    hashes, offsets, _, _ = word_hashes(texts)
    out = []
    grams, first = ngram_windows(hashes, offsets, n)
    doc_of = word_docs(offsets)[first]
    for d in range(len(texts)):
        words = int(offsets[d + 1] - offsets[d])
        if words >= n:
            out.append((np.unique(grams[doc_of == d]), words))
        elif words:
            g, _ = ngram_windows(hashes[offsets[d] : offsets[d + 1]], np.array([0, words]), words)
            out.append((g, words))
        else:
            out.append((np.zeros(0, np.uint64), 0))
    return out


def _member(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Element-wise ``values in sorted_keys`` (both uint64) by binary search."""
    if not sorted_keys.size or not values.size:
        return np.zeros(values.size, dtype=bool)
    # A 2**22-bit table over the top hash bits first: with 1e5 keys ~2% of the values go on to the
    # binary search, which would otherwise dominate the batch.
    bits = np.zeros(1 << 22, dtype=bool)
    bits[sorted_keys >> _TOP] = True
    out = bits[values >> _TOP]
    cand = np.flatnonzero(out)
    idx = np.searchsorted(sorted_keys, values[cand])
    idx[idx == sorted_keys.size] = 0
    out[cand] = sorted_keys[idx] == values[cand]
    return out


def doc_hashes(
    texts: pa.Array | Sequence[str | None],
    n: int,
    ngram_keys: np.ndarray | None,
    short_lengths: Sequence[int] = (),
    short_keys: np.ndarray | None = None,
) -> pa.Array:
    """The n-gram hashes of each document that can match an evaluation item.

    Args:
        texts: documents (string array; null = empty).
        n: the n-gram size.
        ngram_keys: sorted uint64 evaluation n-gram hashes to keep (the broadcast path: only matches
            leave the batch), or None to keep every distinct n-gram hash (the shuffle-join path).
        short_lengths: word counts of the evaluation items shorter than ``n``; the document's k-grams
            for each such k are hashed too.
        short_keys: sorted uint64 whole-text hashes of those short items; only k-grams among them are
            kept (always filtered here: there is one per short item, so they are few).

    Returns:
        list<int64> per document (hashes reinterpreted as signed, Spark's bigint), distinct and sorted.
    """
    values = texts.to_pylist() if isinstance(texts, pa.Array | pa.ChunkedArray) else list(texts)
    hashes, offsets, _, _ = word_hashes(values)
    grams, first = ngram_windows(hashes, offsets, n)
    if ngram_keys is not None:
        keep = _member(grams, ngram_keys)
        grams, first = grams[keep], first[keep]
    all_grams, all_first = [grams], [first]
    if short_keys is not None and short_keys.size:
        for k in sorted(set(short_lengths)):
            g, f = ngram_windows(hashes, offsets, k)
            keep = _member(g, short_keys)
            all_grams.append(g[keep])
            all_first.append(f[keep])
    grams = np.concatenate(all_grams)
    return distinct_lists(grams, word_docs(offsets)[np.concatenate(all_first)], len(values))


def pair_order(major: np.ndarray, minor: np.ndarray, major_bits: int = 64,
               minor_bits: int = 64) -> np.ndarray:
    """Indices that sort pairs by ``major``, then ``minor`` (both compared as unsigned 64-bit).

    The same order as ``np.lexsort((minor, major))`` except among pairs equal in both (their order is
    arbitrary; every caller drops or merges them). One ``argsort`` of a packed uint64 key, ``major`` in
    the high bits: numpy's vectorised quicksort of one key is ~5x faster than ``lexsort``'s two stable
    passes on the millions of n-grams of a batch. When the two need more than 64 bits, the low bits of
    the wider one are left out of the key and the sorted pairs are checked; a tie of the key that hides
    a different order (two distinct values of one major sharing their top ``64 - major_bits`` bits:
    about ``m**2 / 2**(65 - major_bits)`` for ``m`` values of a major) falls back to ``lexsort``.

    Args:
        major, minor: uint64 [N] (an int64 array's ``view(np.uint64)``: negatives then sort last).
        major_bits, minor_bits: every value of ``major`` (``minor``) is below ``2**major_bits``
            (``2**minor_bits``); 64 when nothing is known.

    Returns:
        int64 [N] indices.
    """
    major = np.asarray(major, np.uint64)
    minor = np.asarray(minor, np.uint64)
    major_bits, minor_bits = min(max(major_bits, 1), 64), min(max(minor_bits, 1), 64)
    drop = major_bits + minor_bits - 64
    if drop <= 0:
        return np.argsort((major << np.uint64(minor_bits)) | minor)
    if major_bits >= minor_bits:  # the low bits of the major go
        key = ((major >> np.uint64(drop)) << np.uint64(minor_bits)) | minor
    else:  # the low bits of the minor go
        key = (major << np.uint64(64 - major_bits)) | (minor >> np.uint64(drop))
    order = np.argsort(key)
    a, b = major[order], minor[order]
    if ((a[1:] < a[:-1]) | ((a[1:] == a[:-1]) & (b[1:] < b[:-1]))).any():
        return np.lexsort((minor, major))
    return order


def distinct_lists(values: np.ndarray, rows: np.ndarray, n_rows: int) -> pa.ListArray:
    """Group uint64 ``values`` by ``rows`` into one sorted list of distinct values per row.

    Args:
        values: uint64 (or int64) hashes [N].
        rows: int64 row index of each value [N], each in ``[0, n_rows)``.
        n_rows: number of lists to return.

    Returns:
        list<int64> [n_rows] (values reinterpreted as signed, Spark's bigint), sorted as unsigned;
        a row without values gets an empty list.
    """
    values = np.asarray(values).view(np.uint64)
    rows = np.asarray(rows, np.int64)
    order = pair_order(rows.view(np.uint64), values, major_bits=max(n_rows - 1, 1).bit_length())
    values, rows = values[order], rows[order]
    if values.size:
        keep = np.ones(values.size, dtype=bool)
        keep[1:] = (values[1:] != values[:-1]) | (rows[1:] != rows[:-1])
        values, rows = values[keep], rows[keep]
    list_offsets = np.searchsorted(rows, np.arange(n_rows + 1), side="left").astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(list_offsets), pa.array(values.view(np.int64)))


def cut_spans(
    text: str,
    matched: np.ndarray,
    n: int,
    short_lengths: Sequence[int] = (),
    margin_chars: int = 200,
) -> list[tuple[int, int]]:
    """Character spans of ``text`` to remove: every matched n-gram (or short-item k-gram) ± a margin.

    Args:
        text: the input document text.
        matched: uint64 (or int64 view) hashes of the matched items' keys found in this document.
        n: the n-gram size.
        short_lengths: word counts of the short items (k-grams for each are looked up too).
        margin_chars: characters added on each side of a match (GPT-3: 200).

    Returns:
        Sorted, merged ``(start, end)`` code-point offsets into ``text`` (end exclusive), clipped to
        ``[0, len(text)]``; empty when nothing matches.
    """
    keys = np.unique(np.asarray(matched).view(np.uint64))
    hashes, offsets, starts, ends = word_hashes([text])
    spans: list[tuple[int, int]] = []
    for k in sorted({n, *short_lengths}):
        g, first = ngram_windows(hashes, offsets, k)
        for j in first[_member(g, keys)].tolist():
            spans.append(
                (max(0, int(starts[j]) - margin_chars), min(len(text), int(ends[j + k - 1]) + margin_chars))
            )
    return merge_spans(spans)


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort and merge overlapping or touching ``(start, end)`` spans.

    >>> merge_spans([(5, 9), (0, 2), (2, 4), (8, 12)])
    [(0, 4), (5, 12)]
    """
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def apply_cuts(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` without the (sorted, disjoint) spans; the pieces left are joined by a newline.

    The newline keeps a word before a cut from fusing with a word after it.

    >>> apply_cuts("keep this. SECRET TEXT. and this", [(11, 24)])
    'keep this.\\nand this'
    """
    pieces, pos = [], 0
    for s, e in spans:
        pieces.append(text[pos:s])
        pos = e
    pieces.append(text[pos:])
    return "\n".join(p.strip() for p in pieces if p.strip())
