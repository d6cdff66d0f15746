"""The paragraph kernel of :func:`udfs.paragraphs.paragraph_batch` compiled with numba: the same rows.

One pass per batch over the code points of its texts finds the units (:func:`udfs.paragraphs.split`'s
separators and trimming), their normalised words and word hashes (:func:`udfs.decontam.word_hashes`),
their exact keys (XXH64 twice, :func:`udfs.paragraphs.exact_key`) and, for the units kept, their distinct
n-gram hashes, sorted (:func:`udfs.decontam.ngram_windows`, :func:`~udfs.decontam.whole_hashes`,
:func:`~udfs.decontam.distinct_lists`). Texts come as Arrow string arrays (UTF-8 decoded here, no Python
``str`` per document) or as Python strings (UTF-32, lone surrogates kept as the reference keeps them).

What stays in Python, per unit or document that needs it and only those: NFKC (a unit holding a
non-ASCII letter, mark or number whose text is not NFKC gets the reference's words,
:func:`udfs.decontam.word_hashes` on its text) and display math (:func:`udfs.paragraphs.math_units` on
the documents holding ``\\`` or ``$``). Character classes are the reference's: ``str.isspace`` (which
``re``'s ``\\s``, ``str.strip`` and ``str.split`` use) and :func:`udfs.decontam._tables`.

The near rule's map and reduce steps (:func:`udfs.paragraphs.gram_blocks`,
:func:`udfs.paragraphs.first_holders`) are here too: their (n-gram, unit) pairs are ordered by a
counting pass over the hashes' bits (bucket, then top bits) and an insertion sort of the few values that
share a bin, instead of a comparison sort of the whole batch; n-gram hashes are spread evenly, so a bin
holds about one value.

Compiled once per checkout (``cache=True``: numba's cache files beside this module, ~11 CPU-s the
first time, more with each new argument type; ``make`` does it when it installs the virtualenv, see
:mod:`udfs.compiled`); a Python worker then imports numba and loads them in ~0.5 CPU-s, once it has
been handed :data:`udfs.compiled.AFTER_BYTES` of input.

Source of XXH64: the xxHash specification (``doc/xxhash_spec.md`` in Cyan4973/xxHash), checked against
the ``xxhash`` package's C implementation in the tests.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa

from udfs import decontam, jit_mix
from udfs.jit_mix import fmix64 as _fmix
from udfs.paragraphs import IDX_BITS, KEY_SEEDS

_LINE, _BLANK_LINE, _SENTENCE = 0, 1, 2
MODES = {"line": _LINE, "blank_line": _BLANK_LINE, "sentence": _SENTENCE}
"""``passages.unit`` -> the kernel's mode number."""

_P = np.uint64(0x9E3779B97F4A7C15)
_Q = np.uint64(0xC2B2AE3D27D4EB4F)
_K = np.uint64(0x165667B19E3779F9)
assert (_P, _Q, _K) == (decontam._P, decontam._Q, decontam._K)
assert (jit_mix._M1, jit_mix._M2) == (decontam._M1, decontam._M2)


@lru_cache(maxsize=1)
def space_table() -> np.ndarray:
    """bool [0x110000]: ``chr(cp).isspace()``. Every such character lies in the BMP (Unicode's
    White_Space property and the C0 separators ``\\x1c``-``\\x1f``), so only the BMP is scanned."""
    out = np.zeros(0x110000, bool)
    out[[cp for cp in range(0x10000) if chr(cp).isspace()]] = True
    return out


# ------------------------------------------------------------------------------------------- decoding
@nb.njit(cache=True)
def _utf8_decode(data, offsets, valid, out, out_off):  # pragma: no cover - compiled
    """UTF-8 of each text -> code points; False on an invalid sequence (the caller falls back)."""
    n = offsets.size - 1
    k = 0
    for d in range(n):
        out_off[d] = k
        if not valid[d]:
            continue
        i, end = offsets[d], offsets[d + 1]
        while i < end:
            b0 = np.uint32(data[i])
            if b0 < 0x80:
                out[k] = b0
                i += 1
            elif 0xC2 <= b0 < 0xE0:
                if i + 1 >= end or (data[i + 1] & 0xC0) != 0x80:
                    return False
                out[k] = ((b0 & 0x1F) << 6) | (data[i + 1] & 0x3F)
                i += 2
            elif 0xE0 <= b0 < 0xF0:
                if i + 2 >= end or (data[i + 1] & 0xC0) != 0x80 or (data[i + 2] & 0xC0) != 0x80:
                    return False
                cp = ((b0 & 0x0F) << 12) | ((np.uint32(data[i + 1]) & 0x3F) << 6) | (data[i + 2] & 0x3F)
                if cp < 0x800 or 0xD800 <= cp < 0xE000:
                    return False
                out[k] = cp
                i += 3
            elif 0xF0 <= b0 < 0xF5:
                if (i + 3 >= end or (data[i + 1] & 0xC0) != 0x80 or (data[i + 2] & 0xC0) != 0x80
                        or (data[i + 3] & 0xC0) != 0x80):
                    return False
                cp = (((b0 & 0x07) << 18) | ((np.uint32(data[i + 1]) & 0x3F) << 12)
                      | ((np.uint32(data[i + 2]) & 0x3F) << 6) | (data[i + 3] & 0x3F))
                if cp < 0x10000 or cp > 0x10FFFF:
                    return False
                out[k] = cp
                i += 4
            else:
                return False
            k += 1
    out_off[n] = k
    return True


def code_points(texts) -> tuple[np.ndarray, np.ndarray] | None:
    """Code points (uint32 [C]) and per-text offsets (int64 [D+1]) of ``texts``: a ``pa.StringArray``
    or ``pa.LargeStringArray`` (null = empty) or a sequence of ``str | None``. None when an Arrow text
    is not valid UTF-8."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if isinstance(texts, pa.Array):
        if texts.type not in (pa.string(), pa.large_string()):
            raise TypeError(f"texts must be a string array; got {texts.type}")
        n = len(texts)
        bufs = texts.buffers()
        wide = np.int64 if texts.type == pa.large_string() else np.int32
        at = texts.offset * np.dtype(wide).itemsize
        offsets = np.frombuffer(bufs[1], wide, n + 1, at).astype(np.int64) if n else np.zeros(1, np.int64)
        has_data = bufs[2] is not None and bufs[2].size
        data = np.frombuffer(bufs[2], np.uint8) if has_data else np.zeros(0, np.uint8)
        valid = (np.ones(n, bool) if texts.null_count == 0
                 else texts.is_valid().to_numpy(zero_copy_only=False).astype(bool))
        out = np.empty(int(offsets[-1] - offsets[0]), np.uint32)
        out_off = np.zeros(n + 1, np.int64)
        if not _utf8_decode(data, offsets, valid, out, out_off):
            return None
        return out[:out_off[-1]], out_off
    texts = [t or "" for t in texts]
    lens = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    off = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), np.uint32)
    return cps, off


# ------------------------------------------------------------------------------------------- splitting
@nb.njit(cache=True)
def _raw_pieces(cps, base, n, mode, space, pa_, pb_):  # pragma: no cover - compiled
    """The text ``cps[base:base+n]`` cut at its separators (``\\n``, or a blank-line run for
    ``_BLANK_LINE``, as :data:`udfs.paragraphs._SEPARATORS`' regexes match them): untrimmed pieces
    written to ``pa_``/``pb_`` (offsets in the text); returns how many, and whether the text holds
    ``\\`` or ``$`` (the one pass over it finds both)."""
    k = 0
    pos = 0
    i = 0
    mathy = False
    while i < n:
        c = cps[base + i]
        if c != 10:
            mathy |= c == 92 or c == 36
            i += 1
            continue
        if mode != _BLANK_LINE:
            pa_[k] = pos
            pb_[k] = i
            k += 1
            pos = i + 1
            i += 1
            continue
        # \n, then whitespace-only lines, the last one ended by a \n: ``\n[^\S\n]*\n(?:[^\S\n]*\n)*``
        j = i + 1
        while j < n and cps[base + j] != 10 and space[cps[base + j]]:
            j += 1
        if j >= n or cps[base + j] != 10:
            i += 1
            continue
        stop = j + 1
        while True:
            m = stop
            while m < n and cps[base + m] != 10 and space[cps[base + m]]:
                m += 1
            if m < n and cps[base + m] == 10:
                stop = m + 1
            else:
                break
        pa_[k] = pos
        pb_[k] = i
        k += 1
        pos = stop
        i = stop
    pa_[k] = pos
    pb_[k] = n
    return k + 1, mathy


@nb.njit(cache=True, inline="always")
def _trim(cps, base, a, b, space):  # pragma: no cover - compiled
    while a < b and space[cps[base + a]]:
        a += 1
    while b > a and space[cps[base + b - 1]]:
        b -= 1
    return a, b


@nb.njit(cache=True)
def _sentences(cps, base, a, b, space, d, doc, start, end, u):  # pragma: no cover - compiled
    """The sentences of the trimmed line ``[a, b)`` written from unit ``u`` on; returns the next unit.

    ``(?<=[.!?\\u2026])\\s+`` cuts: a match never starts at ``a`` (not whitespace) and takes the whole
    whitespace run after the sentence end."""
    s0 = a
    i = a + 1
    while i < b:
        prev = cps[base + i - 1]
        if space[cps[base + i]] and (prev == 46 or prev == 33 or prev == 63 or prev == 0x2026):
            j = i
            while j < b and space[cps[base + j]]:
                j += 1
            x, y = _trim(cps, base, s0, i, space)
            if x < y:
                doc[u], start[u], end[u] = d, x, y
                u += 1
            s0 = j
            i = j + 1
            continue
        i += 1
    x, y = _trim(cps, base, s0, b, space)
    if x < y:
        doc[u], start[u], end[u] = d, x, y
        u += 1
    return u


@nb.njit(cache=True)
def _split(cps, doc_off, mode, space, max_units):  # pragma: no cover - compiled
    """Units of every text: (doc int64, idx int64, start, end, cut_end int64 code points in the text),
    at most ``max_units`` per text, and per text whether it holds ``\\`` or ``$``."""
    n_docs = doc_off.size - 1
    mathy = np.zeros(n_docs, np.bool_)
    # A unit holds at least one character and units do not overlap: a bound with no counting pass
    # (numpy's empty arrays take memory only where written).
    cap = cps.size + 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, doc_off[d + 1] - doc_off[d])
    doc = np.empty(cap, np.int64)
    start = np.empty(cap, np.int64)
    end = np.empty(cap, np.int64)
    cut = np.empty(cap, np.int64)
    pa_ = np.empty(longest + 1, np.int64)
    pb_ = np.empty(longest + 1, np.int64)
    u = 0
    for d in range(n_docs):
        base = doc_off[d]
        size = doc_off[d + 1] - base
        first = u
        n_pieces, mathy[d] = _raw_pieces(cps, base, size, mode, space, pa_, pb_)
        for p in range(n_pieces):
            a, b = _trim(cps, base, pa_[p], pb_[p], space)
            if a == b:
                continue
            if mode == _SENTENCE:
                u = _sentences(cps, base, a, b, space, d, doc, start, end, u)
            else:
                doc[u], start[u], end[u] = d, a, b
                u += 1
        # cut_end: the next unit's start, or the text's length; then only the first max_units stay
        for v in range(first, u):
            cut[v] = start[v + 1] if v + 1 < u else size
        if u - first > max_units:
            u = first + max_units
    idx = np.empty(u, np.int64)
    k = 0
    for v in range(u):
        k = k + 1 if v > 0 and doc[v] == doc[v - 1] else 0
        idx[v] = k
    return doc[:u].copy(), idx, start[:u].copy(), end[:u].copy(), cut[:u].copy(), mathy


# ------------------------------------------------------------------------------------ words and hashes
@nb.njit(cache=True)
def _words(cps, doc_off, doc, start, end, is_word, lower):  # pragma: no cover - compiled
    """Word hashes of every unit (uint64 [W]), its words' offsets (int64 [U+1]) and whether it holds a
    non-ASCII letter, mark or number (bool [U]). One loop per unit, its word's hash state carried from
    character to character (15 % less time than a loop per word, whose two exits it avoids)."""
    n_units = doc.size
    bound = 0
    for u in range(n_units):
        bound += (end[u] - start[u] + 1) // 2
    hashes = np.empty(bound, np.uint64)
    w_off = np.empty(n_units + 1, np.int64)
    wide = np.zeros(n_units, np.bool_)
    w = 0
    for u in range(n_units):
        w_off[u] = w
        base = doc_off[doc[u]]
        i = base + start[u]
        e = base + end[u]
        seen = np.uint32(0)  # every word character's bits: above 127 where one is not ASCII
        h = np.uint64(0)
        pw = np.uint64(1)
        n = 0
        while i < e:
            c = cps[i]
            i += 1
            if is_word[c]:
                seen |= c
                h += np.uint64(lower[c]) * pw
                pw *= _P
                n += 1
            elif n:
                hashes[w] = _fmix(h ^ (np.uint64(n) * _K))
                w += 1
                h = np.uint64(0)
                pw = np.uint64(1)
                n = 0
        if n:
            hashes[w] = _fmix(h ^ (np.uint64(n) * _K))
            w += 1
        wide[u] = seen > 127
    w_off[n_units] = w
    return w_off, hashes[:w].copy(), wide


_SIGN = np.uint64(1 << 63)
_DIRECT_SORT_MAX = 1 << 20
"""Longest array :func:`_sort_pairs` orders by a counting pass over top bits (its table: 16 MiB at most);
a longer one (a handful of buckets over millions of n-grams) goes to an argsort."""


@nb.njit(cache=True, inline="always")
def _top_bit_bins(keys, counts):  # pragma: no cover - compiled
    """The counting pass of :func:`_sort_pairs` and :func:`_sort_keys`: ``counts`` filled with the start
    of each bin of the top ``k`` bits (2**k >= keys.size); returns the shift to a key's bin."""
    c = keys.size
    k = 1
    while (1 << k) < c:
        k += 1
    shift = np.uint64(64 - k)
    counts[:(1 << k) + 1] = 0
    for j in range(c):
        counts[(keys[j] >> shift) + np.uint64(1)] += 1
    for b in range(1 << k):
        counts[b + 1] += counts[b]
    return shift


@nb.njit(cache=True)
def _sort_pairs(keys, rows, scratch_k, scratch_r, counts):  # pragma: no cover - compiled
    """Sort ``keys`` (uint64, evenly spread hashes) in place, carrying ``rows`` along: a counting pass
    over the top bits, then an insertion sort of the values that share a top-bit bucket (equal keys
    stay where they are, so a repeated n-gram costs no more than a distinct one)."""
    c = keys.size
    if c < 2:
        return
    if c > _DIRECT_SORT_MAX:
        order = np.argsort(keys, kind="mergesort")  # stable, as the insertion sort below
        keys[:] = keys[order]
        rows[:] = rows[order]
        return
    shift = _top_bit_bins(keys, counts)
    for j in range(c):
        b = keys[j] >> shift
        scratch_k[counts[b]] = keys[j]
        scratch_r[counts[b]] = rows[j]
        counts[b] += 1
    for j in range(1, c):
        v = scratch_k[j]
        r = scratch_r[j]
        q = j - 1
        while q >= 0 and scratch_k[q] > v:
            scratch_k[q + 1] = scratch_k[q]
            scratch_r[q + 1] = scratch_r[q]
            q -= 1
        scratch_k[q + 1] = v
        scratch_r[q + 1] = r
    keys[:] = scratch_k[:c]
    rows[:] = scratch_r[:c]


@nb.njit(cache=True)
def _sort_keys(keys, scratch, counts):  # pragma: no cover - compiled
    """:func:`_sort_pairs` with nothing carried along: ``keys`` (uint64, evenly spread) sorted in place."""
    c = keys.size
    if c < 2:
        return
    if c > _DIRECT_SORT_MAX:
        keys[:] = np.sort(keys)
        return
    shift = _top_bit_bins(keys, counts)
    for j in range(c):
        b = keys[j] >> shift
        scratch[counts[b]] = keys[j]
        counts[b] += 1
    for j in range(1, c):
        v = scratch[j]
        q = j - 1
        while q >= 0 and scratch[q] > v:
            scratch[q + 1] = scratch[q]
            q -= 1
        scratch[q + 1] = v
    keys[:] = scratch[:c]


@nb.njit(cache=True)
def _sort_by_key(keys, rows, packed, scratch_k, scratch_r, counts):  # pragma: no cover - compiled
    """:func:`_sort_pairs`' result (``keys`` ascending, ``rows`` carried, equal keys in their first order)
    sorting one array: where the keys share their low ``f`` bits (a bucket's masked n-grams share 24:
    their bucket's and the bits :func:`udfs.paragraphs.gram_mask` clears) and ``2**f`` covers their
    count, each key's position replaces those bits, so the sort moves 8 bytes per pair, not 16. On the
    reduce step's buckets (~80,000 n-grams at scale) it took 15 % less time than :func:`_sort_pairs`; on
    the map step's (~13,000) the extra passes cost more than they saved.
    ``packed`` and the scratch arrays hold at least ``keys.size`` values where it is at most
    :data:`_DIRECT_SORT_MAX`."""
    c = keys.size
    if c < 2:
        return
    diff = np.uint64(0)
    for j in range(1, c):
        diff |= keys[j] ^ keys[0]
    free = 0
    while free < 40 and (diff >> np.uint64(free)) & np.uint64(1) == 0:
        free += 1
    if c > _DIRECT_SORT_MAX or (1 << free) < c:
        _sort_pairs(keys, rows, scratch_k, scratch_r, counts)
        return
    low = (np.uint64(1) << np.uint64(free)) - np.uint64(1)
    same = keys[0] & low
    for j in range(c):
        packed[j] = (keys[j] & ~low) | np.uint64(j)
    _sort_keys(packed[:c], scratch_k, counts)
    for j in range(c):
        scratch_r[j] = rows[np.int64(packed[j] & low)]
    for j in range(c):
        keys[j] = (packed[j] & ~low) | same
        rows[j] = scratch_r[j]


@nb.njit(cache=True)
def _grams(hashes, w_off, rows, n, distinct):  # pragma: no cover - compiled
    """Per row of ``rows``: the distinct hashes of its ``n``-word windows (or of all its words when
    fewer), sorted as unsigned: (list offsets int32 [R+1], values uint64). Without ``distinct``, every
    window's hash in text order, repeats kept: the per-row sort is two thirds of the step's time, and
    the near rule's map step drops a unit's repeats in its own sort (:func:`gram_blocks_arrays`)."""
    total = 0
    longest = 1
    for t in range(rows.size):
        m = w_off[rows[t] + 1] - w_off[rows[t]]
        total += m - n + 1 if m >= n else 1
        longest = max(longest, m - n + 1)
    out = np.empty(total, np.uint64)
    lo = np.empty(rows.size + 1, np.int32)
    top = np.uint64(1)  # Q**(n-1): the leaving word's weight in the rolling window
    for _ in range(n - 1):
        top *= _Q
    nk = np.uint64(n) * _K
    longest = min(longest, _DIRECT_SORT_MAX)
    scratch_k = np.empty(longest, np.uint64)
    counts = np.empty(2 * longest + 2, np.int64)
    k = 0
    for t in range(rows.size):
        lo[t] = k
        a = w_off[rows[t]]
        m = w_off[rows[t] + 1] - a
        acc = np.uint64(0)
        if m >= n:
            for j in range(n):
                acc = acc * _Q + hashes[a + j]
            out[k] = _fmix(acc + nk)
            c = 1
            for j in range(m - n):
                acc = (acc - hashes[a + j] * top) * _Q + hashes[a + j + n]
                out[k + c] = _fmix(acc + nk)
                c += 1
        else:
            for j in range(m):
                acc = acc * _Q + hashes[a + j]
            out[k] = _fmix(acc + np.uint64(m) * _K)
            c = 1
        if distinct and c > 1:
            _sort_keys(out[k:k + c], scratch_k, counts)
            d = 1
            for j in range(k + 1, k + c):
                if out[j] != out[k + d - 1]:
                    out[k + d] = out[j]
                    d += 1
            c = d
        k += c
    lo[rows.size] = k
    return lo, out[:k].copy()


# ---------------------------------------------------------------------------------------------- XXH64
# Yann Collet's XXH64 (the xxHash specification, doc/xxhash_spec.md; the ``xxhash`` package's C code
# gives the same values): four 64-bit lanes over 32-byte stripes, then the tail and the avalanche.
_X1 = np.uint64(0x9E3779B185EBCA87)
_X2 = np.uint64(0xC2B2AE3D27D4EB4F)
_X3 = np.uint64(0x165667B19E3779F9)
_X4 = np.uint64(0x85EBCA77C2B2AE63)
_X5 = np.uint64(0x27D4EB2F165667C5)
_KEY_SEEDS = np.array(KEY_SEEDS, np.uint64)


@nb.njit(cache=True, inline="always")
def _rotl(x, r):  # pragma: no cover - compiled
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@nb.njit(cache=True, inline="always")
def _round(acc, w):  # pragma: no cover - compiled
    return _rotl(acc + w * _X2, 31) * _X1


@nb.njit(cache=True, inline="always")
def _merge(h, v):  # pragma: no cover - compiled
    return (h ^ _round(np.uint64(0), v)) * _X1 + _X4


@nb.njit(cache=True, inline="always")
def _le(data, q, k):  # pragma: no cover - compiled
    """The little-endian ``k``-byte word at ``data[q:q+k]`` (uint64)."""
    w = np.uint64(0)
    for j in range(k):
        w |= np.uint64(data[q + j]) << np.uint64(8 * j)
    return w


@nb.njit(cache=True)
def xxh64(data, n, seed):  # pragma: no cover - compiled
    """XXH64 of ``data[:n]`` (uint8) with ``seed`` (uint64), as ``xxhash.xxh64_intdigest``."""
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = seed + _X1 + _X2, seed + _X2, seed, seed - _X1
        while i + 32 <= n:
            v1 = _round(v1, _le(data, i, 8))
            v2 = _round(v2, _le(data, i + 8, 8))
            v3 = _round(v3, _le(data, i + 16, 8))
            v4 = _round(v4, _le(data, i + 24, 8))
            i += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(_merge(_merge(_merge(h, v1), v2), v3), v4)
    else:
        h = seed + _X5
    h += np.uint64(n)
    while i + 8 <= n:
        h = _rotl(h ^ _round(np.uint64(0), _le(data, i, 8)), 27) * _X1 + _X4
        i += 8
    if i + 4 <= n:
        h = _rotl(h ^ (_le(data, i, 4) * _X1), 23) * _X2 + _X3
        i += 4
    while i < n:
        h = _rotl(h ^ (np.uint64(data[i]) * _X5), 11) * _X1
        i += 1
    h ^= h >> np.uint64(33)
    h *= _X2
    h ^= h >> np.uint64(29)
    h *= _X3
    return h ^ (h >> np.uint64(32))


@nb.njit(cache=True)
def _keys(cps, doc_off, doc, start, end, rows, space, collapse):  # pragma: no cover - compiled
    """The exact key (uint8 [R, 16], :func:`udfs.paragraphs.exact_key`: XXH64 with each of
    :data:`udfs.paragraphs.KEY_SEEDS`, big-endian) of the UTF-8 of each unit of ``rows`` (lone
    surrogates as three bytes, as ``surrogatepass``), whitespace runs as one space when ``collapse``."""
    out = np.empty((rows.size, 16), np.uint8)
    longest = 0
    for t in range(rows.size):
        longest = max(longest, end[rows[t]] - start[rows[t]])
    data = np.empty(4 * longest, np.uint8)  # a unit's UTF-8
    for t in range(rows.size):
        u = rows[t]
        n = 0
        base = doc_off[doc[u]]
        prev = False  # the last character was whitespace (collapsed: one space written for the run)
        for i in range(base + start[u], base + end[u]):
            c = cps[i]
            if c < 0x80:  # ASCII without branching on whitespace, which is as common as it is irregular
                sp = space[c] and collapse  # this order compiles to a select, the other to a branch
                data[n] = np.uint8(32) if sp else np.uint8(c)
                n += 0 if sp and prev else 1
                prev = sp
                continue
            if collapse and space[c]:
                if not prev:
                    data[n] = 32
                    n += 1
                prev = True
                continue
            prev = False
            if c < 0x800:
                data[n] = 0xC0 | (c >> 6)
                data[n + 1] = 0x80 | (c & 0x3F)
                n += 2
            elif c < 0x10000:
                data[n] = 0xE0 | (c >> 12)
                data[n + 1] = 0x80 | ((c >> 6) & 0x3F)
                data[n + 2] = 0x80 | (c & 0x3F)
                n += 3
            else:
                data[n] = 0xF0 | (c >> 18)
                data[n + 1] = 0x80 | ((c >> 12) & 0x3F)
                data[n + 2] = 0x80 | ((c >> 6) & 0x3F)
                data[n + 3] = 0x80 | (c & 0x3F)
                n += 4
        for j in range(2):  # each digest big-endian, as xxhash's ``xxh64_digest``
            h = xxh64(data, n, _KEY_SEEDS[j])
            for q in range(8):
                out[t, 8 * j + q] = (h >> np.uint64(56 - 8 * q)) & np.uint64(0xFF)
    return out


# ---------------------------------------------------------------------------------------------- batch
def _text_of(texts, d: int) -> str:
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        return texts[d].as_py() or ""
    return texts[d] or ""


def _kept_ids(doc_ids, kept_doc: np.ndarray, n_docs: int) -> pa.Array:
    """The ``doc_id`` of each kept unit (``kept_doc``: its text's index); all null where ``doc_ids`` is
    None."""
    if doc_ids is None:
        return pa.nulls(kept_doc.size, pa.string())
    ids = doc_ids if isinstance(doc_ids, pa.Array | pa.ChunkedArray) else pa.array(list(doc_ids), pa.string())
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if len(ids) != n_docs:
        raise ValueError(f"doc_ids has {len(ids)} values for {n_docs} texts")
    return ids.take(pa.array(kept_doc)).cast(pa.string())


def paragraph_batch(doc_ids, texts, unit: str, min_words: int, ngram_size: int, key: str, grams: bool,
                    ranks, exempt_math: bool, distinct: bool = True) -> pa.RecordBatch | None:
    """:func:`udfs.paragraphs.paragraph_batch`'s rows (its arguments; ``doc_ids`` and ``texts`` may be
    Arrow string arrays), or None when an Arrow text is not valid UTF-8 (the caller falls back).
    Without ``distinct``, each unit's ``grams`` hold every window's hash in text order, repeats kept
    (:func:`_grams`)."""
    from udfs import paragraphs as P

    decoded = code_points(texts)
    if decoded is None:
        return None
    cps, off = decoded
    n_docs = off.size - 1
    is_word, lower = decontam._tables()
    space = space_table()
    doc, idx, start, end, cut, mathy = _split(cps, off, MODES[unit], space, 1 << P.IDX_BITS)
    w_off, hashes, wide = _words(cps, off, doc, start, end, is_word, lower)
    fixed = {}
    for u in np.flatnonzero(wide).tolist():  # NFKC: the reference's words for a unit whose text changes
        piece = _text_of(texts, int(doc[u]))[start[u]:end[u]]
        if not unicodedata.is_normalized("NFKC", piece):
            fixed[u] = decontam.word_hashes([piece])[0]
    if fixed:
        parts, counts = [], np.diff(w_off)
        prev = 0
        for u in sorted(fixed):
            parts += [hashes[w_off[prev]:w_off[u]], fixed[u]]
            counts[u] = fixed[u].size
            prev = u + 1
        parts.append(hashes[w_off[prev]:])
        hashes = np.concatenate(parts).astype(np.uint64)
        w_off = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    n_words = np.diff(w_off)
    exempt = np.zeros(doc.size, bool)
    if exempt_math:
        for d in np.flatnonzero(mathy).tolist():
            a, b = np.searchsorted(doc, [d, d + 1])
            if b > a:
                spans = list(zip(start[a:b].tolist(), end[a:b].tolist(), strict=True))
                exempt[a:b] = P.math_units(_text_of(texts, d), spans)
    keep = np.flatnonzero((n_words >= max(min_words, 1)) & ~exempt)
    if grams:
        lo, values = _grams(hashes, w_off, keep, ngram_size, distinct)
        lists = pa.ListArray.from_arrays(pa.array(lo), pa.array(values.view(np.int64)))
    else:
        lists = pa.ListArray.from_arrays(pa.array(np.zeros(keep.size + 1, np.int32)),
                                         pa.array([], pa.int64()))
    digests = _keys(cps, off, doc, start, end, keep, space, key == "collapsed_whitespace")
    key_col = pa.Array.from_buffers(pa.binary(), keep.size, [
        None, pa.py_buffer(np.arange(0, 16 * (keep.size + 1), 16, dtype=np.int32)), pa.py_buffer(digests)])
    ranks = np.arange(n_docs, dtype=np.int64) if ranks is None else np.asarray(ranks, np.int64)
    if ranks.size != n_docs:
        raise ValueError(f"ranks has {ranks.size} values for {n_docs} texts")
    kept_doc = doc[keep]
    return pa.record_batch([
        _kept_ids(doc_ids, kept_doc, n_docs), pa.array(P.unit_ids(ranks[kept_doc], idx[keep])),
        pa.array(idx[keep].astype(np.int32)), pa.array(start[keep].astype(np.int32)),
        pa.array(end[keep].astype(np.int32)), pa.array(cut[keep].astype(np.int32)),
        pa.array(n_words[keep].astype(np.int32)), key_col, lists,
    ], schema=P.PARAGRAPH_SCHEMA)


# ------------------------------------------------------------------------------- the near rule's map side
@nb.njit(cache=True, inline="always")
def _bucket_of(h, n_buckets, mask):  # pragma: no cover - compiled
    # A power-of-two count takes the low bits: the same value as the modulo without a 64-bit division
    # per n-gram (two per n-gram were most of the map step's time).
    return h & mask if mask else h % n_buckets


@nb.njit(cache=True)
def _by_bucket(g, lengths, n_buckets, low):  # pragma: no cover - compiled
    """Every (n-gram, unit) pair put in its bucket (a counting sort): (keys uint64 [N], the n-gram in
    signed order as unsigned; rows int64 [N], the unit's index; bucket starts int64 [n_buckets+1]).
    With ``low`` > 0 bits (the n-grams' low bits hold their bucket or zeros), a key's low bits hold its
    unit's index instead and ``rows`` is left for the caller to fill."""
    n = g.size
    nb_ = np.uint64(n_buckets)
    mask = np.uint64(n_buckets - 1) if n_buckets & (n_buckets - 1) == 0 else np.uint64(0)
    start = np.zeros(n_buckets + 1, np.int64)
    for i in range(n):
        start[_bucket_of(np.uint64(g[i]), nb_, mask) + np.uint64(1)] += 1
    for b in range(n_buckets):
        start[b + 1] += start[b]
    keys = np.empty(n, np.uint64)
    rows = np.empty(n, np.int64)
    fill = start[:n_buckets].copy()
    i = 0
    if low:
        high = ~((np.uint64(1) << np.uint64(low)) - np.uint64(1))
        for r in range(lengths.size):
            for _ in range(lengths[r]):
                b = _bucket_of(np.uint64(g[i]), nb_, mask)
                keys[fill[b]] = ((np.uint64(g[i]) ^ _SIGN) & high) | np.uint64(r)
                fill[b] += 1
                i += 1
        return keys, rows, start
    for r in range(lengths.size):
        for _ in range(lengths[r]):
            b = _bucket_of(np.uint64(g[i]), nb_, mask)
            keys[fill[b]] = np.uint64(g[i]) ^ _SIGN
            rows[fill[b]] = r
            fill[b] += 1
            i += 1
    return keys, rows, start


@nb.njit(cache=True)
def _first_holders_of_bucket(keys, rows, a, e, uids, seen, repeats, out_g, out_u, out_c, m
                             ):  # pragma: no cover - compiled
    """The map step on one sorted bucket ``keys[a:e]`` (its units' indices in ``rows``): each n-gram's
    smallest uid and holders written at ``out_*[m:]``, the other holders counted in ``seen``, a unit's
    repeats of an n-gram in ``repeats``; returns the next free position. Both sorts keep an n-gram's
    holders in unit order, so a unit's repeats are adjacent."""
    i = a
    while i < e:
        j = i + 1
        first = rows[i]
        holders = 1
        while j < e and keys[j] == keys[i]:
            if rows[j] == rows[j - 1]:
                repeats[rows[j]] += 1
            else:
                holders += 1
                if uids[rows[j]] < uids[first]:
                    first = rows[j]
            j += 1
        for q in range(i, j):
            if rows[q] != first and (q == i or rows[q] != rows[q - 1]):
                seen[rows[q]] += 1
        out_g[m] = np.int64(keys[i] ^ _SIGN)
        out_u[m] = uids[first]
        out_c[m] = holders
        m += 1
        i = j
    return m


@nb.njit(cache=True)
def gram_blocks_arrays(g, lengths, uids, n_buckets, low=0):  # pragma: no cover - compiled
    """:func:`udfs.paragraphs.gram_blocks`' arrays. The n-grams are put in their hash bucket first
    (a counting sort), then each bucket is ordered by n-gram: the output's order, with no sort of the
    whole batch.

    Args:
        g: int64 [N], every unit's n-grams, unit after unit (a unit may hold one several times).
        lengths: int64 [units], n-grams per unit.
        uids: int64 [units], unit ids.
        n_buckets: buckets (by the hash as unsigned, modulo).
        low: 0, or the low bits of every n-gram that hold only its bucket's number (power-of-two
            buckets) or zeros, as :func:`udfs.paragraphs.gram_mask` leaves them, with
            ``2**low`` > units: each pair then travels as one word, its unit's index in those bits (a
            bucket's pairs sort as one array, in the same order: by n-gram, then by unit index).

    Returns:
        (bucket int32 [B] of each non-empty bucket, ascending; block offsets int64 [B+1]; per distinct
        n-gram of the batch, block after block: its hash int64, ascending as signed; its smallest uid;
        its holders int64), and per unit the n-grams it holds after a smaller uid and its repeats of an
        n-gram it already holds (int64 [units] each; a unit counts once among an n-gram's holders).
    """
    n = g.size
    if low and (lengths.size > (1 << low) or n_buckets & (n_buckets - 1)):
        low = 0
    keys, rows, start = _by_bucket(g, lengths, n_buckets, low)
    low_mask = (np.uint64(1) << np.uint64(low)) - np.uint64(1)
    widest = 0
    for b in range(n_buckets):
        widest = max(widest, start[b + 1] - start[b])
    widest = min(widest, _DIRECT_SORT_MAX)
    scratch_k = np.empty(widest, np.uint64)
    scratch_r = np.empty(widest, np.int64)
    counts = np.empty(2 * widest + 2, np.int64)  # c values go in 2**ceil(log2(c)) bins
    seen = np.zeros(lengths.size, np.int64)
    repeats = np.zeros(lengths.size, np.int64)
    out_g = np.empty(n, np.int64)
    out_u = np.empty(n, np.int64)
    out_c = np.empty(n, np.int64)
    bucket = np.empty(n_buckets, np.int32)
    offsets = np.zeros(n_buckets + 1, np.int64)
    m = 0
    blocks = 0
    for b in range(n_buckets):
        a, e = start[b], start[b + 1]
        if a == e:
            continue
        if low:
            _sort_keys(keys[a:e], scratch_k, counts)
            for q in range(a, e):  # the unit index out of the low bits, the bucket's number back in
                rows[q] = np.int64(keys[q] & low_mask)
                keys[q] = (keys[q] & ~low_mask) | np.uint64(b)
        else:
            _sort_pairs(keys[a:e], rows[a:e], scratch_k, scratch_r, counts)
        m = _first_holders_of_bucket(keys, rows, a, e, uids, seen, repeats, out_g, out_u, out_c, m)
        bucket[blocks] = b
        blocks += 1
        offsets[blocks] = m
    return bucket[:blocks].copy(), offsets[:blocks + 1].copy(), out_g[:m].copy(), out_u[:m].copy(), \
        out_c[:m].copy(), seen, repeats


@nb.njit(cache=True)
def low_bytes(values, width):  # pragma: no cover - compiled
    """The low ``width`` bytes (1 to 8) of each value of ``values`` (uint64 [N]), little-endian, one value
    after another (uint8 [N * width]): :func:`udfs.paragraphs._low_bytes` in one pass, where numpy copies a
    strided [N, width] view byte by byte. The n-gram keys' width (5 bytes) is spelled out: 40 % less
    time than the loop over bytes."""
    out = np.empty(values.size * width, np.uint8)
    at = 0
    if width == 5:
        for i in range(values.size):
            v = values[i]
            out[at] = v & np.uint64(0xFF)
            out[at + 1] = (v >> np.uint64(8)) & np.uint64(0xFF)
            out[at + 2] = (v >> np.uint64(16)) & np.uint64(0xFF)
            out[at + 3] = (v >> np.uint64(24)) & np.uint64(0xFF)
            out[at + 4] = (v >> np.uint64(32)) & np.uint64(0xFF)
            at += 5
        return out
    for i in range(values.size):
        v = values[i]
        for q in range(width):
            out[at + q] = (v >> np.uint64(8 * q)) & np.uint64(0xFF)
        at += width
    return out


@nb.njit(cache=True, inline="always")
def _bit_length(x):  # pragma: no cover - compiled
    b = 0
    while x:
        x >>= np.uint64(1)
        b += 1
    return b


@nb.njit(cache=True)
def pack_arrays(hg, hu, width):  # pragma: no cover - compiled
    """:func:`udfs.paragraphs._block_batch`'s packing of a batch's first holders in three passes, where
    numpy made a dozen: (the n-gram keys' bytes uint8 [N * width]; the uids' bytes uint8
    [N * uid_width]; uid_width; uid_bits; uid_base), the bytes and values of its numpy form.

    Args:
        hg: int64 [N], the n-grams (masked), block after block.
        hu: int64 [N], their first holders' unit ids (>= 0).
        width: bytes of an n-gram key (:func:`udfs.paragraphs._gram_width`).
    """
    n = hg.size
    top = np.uint64(64 - 8 * width)
    keys = np.empty(n, np.uint64)
    for i in range(n):
        keys[i] = (np.uint64(hg[i]) ^ _SIGN) >> top
    gram = low_bytes(keys, width)
    if n == 0:
        return gram, np.zeros(0, np.uint8), np.int64(1), np.int64(0), np.int64(0)
    idx_mask = np.uint64((1 << IDX_BITS) - 1)
    base = hu.min() & ~np.int64((1 << IDX_BITS) - 1)
    packed = np.empty(n, np.uint64)
    lo_max = np.uint64(0)
    for i in range(n):
        v = np.uint64(hu[i]) - np.uint64(base)
        packed[i] = v
        lo_max = max(lo_max, v & idx_mask)
    bits = _bit_length(lo_max)
    p_max = np.uint64(0)
    for i in range(n):
        v = packed[i]
        packed[i] = ((v >> np.uint64(IDX_BITS)) << np.uint64(bits)) | (v & idx_mask)
        p_max = max(p_max, packed[i])
    uid_width = max((_bit_length(p_max) + 7) // 8, 1)
    if uid_width <= 4:
        return gram, low_bytes(packed, uid_width), np.int64(uid_width), np.int64(bits), base
    # A batch's documents too far apart in rank: the uids as they are.
    return gram, low_bytes(hu.view(np.uint64), 8), np.int64(8), np.int64(-1), base


@nb.njit(cache=True, inline="always")
def _read_le(data, p, w):  # pragma: no cover - compiled
    # The widths the blocks hold most (5-byte n-gram keys, 2- to 4-byte uids) spelled out, so each is a
    # few fixed loads rather than a loop of w steps.
    if w == 5:
        return (np.uint64(data[p]) | (np.uint64(data[p + 1]) << np.uint64(8))
                | (np.uint64(data[p + 2]) << np.uint64(16)) | (np.uint64(data[p + 3]) << np.uint64(24))
                | (np.uint64(data[p + 4]) << np.uint64(32)))
    if w == 3:
        return (np.uint64(data[p]) | (np.uint64(data[p + 1]) << np.uint64(8))
                | (np.uint64(data[p + 2]) << np.uint64(16)))
    if w == 2:
        return np.uint64(data[p]) | (np.uint64(data[p + 1]) << np.uint64(8))
    if w == 4:
        return (np.uint64(data[p]) | (np.uint64(data[p + 1]) << np.uint64(8))
                | (np.uint64(data[p + 2]) << np.uint64(16)) | (np.uint64(data[p + 3]) << np.uint64(24)))
    v = np.uint64(0)
    for q in range(w):
        v |= np.uint64(data[p + q]) << np.uint64(8 * q)
    return v


@nb.njit(cache=True)
def unpack_arrays(g_data, g_off, g_width, shift, bucket, u_data, u_off, u_width, bits, base, c_data, c_off,
                  first, idx_bits):  # pragma: no cover - compiled
    """:func:`udfs.paragraphs.unpack_blocks`' arrays in one pass over the blocks' bytes (validated by the
    caller): per block r, ``first[r]`` its first n-gram's position in the output (int64 [rows + 1]), its
    keys of ``g_width[r]`` bytes at ``g_off[r]``, its uids of ``u_width[r]`` bytes at ``u_off[r]``
    (``bits[r]`` < 0: as they are), its 12-byte holder-count exceptions from ``c_off[r]`` to
    ``c_off[r + 1]``. Returns (n-grams, first holders, holder counts), int64 [first[-1]] each."""
    total = first[first.size - 1]
    g = np.empty(total, np.int64)
    u = np.empty(total, np.int64)
    c = np.ones(total, np.int64)
    for r in range(first.size - 1):
        at, n = first[r], first[r + 1] - first[r]
        w = g_width[r]
        up = np.uint64(64 - 8 * w)
        low = np.uint64(bucket[r]) & ((np.uint64(1) << np.uint64(shift[r])) - np.uint64(1))
        p = g_off[r]
        for i in range(n):
            k = _read_le(g_data, p, w)
            p += w
            g[at + i] = np.int64(((k << up) | low) ^ _SIGN)
        w = u_width[r]
        p = u_off[r]
        kb = bits[r]
        if kb >= 0:
            lo_mask = (np.uint64(1) << np.uint64(kb)) - np.uint64(1)
        b = np.uint64(base[r])
        for i in range(n):
            v = _read_le(u_data, p, w)
            p += w
            if kb < 0:
                u[at + i] = np.int64(v)
            else:
                u[at + i] = np.int64((((v >> np.uint64(kb)) << np.uint64(idx_bits)) | (v & lo_mask)) + b)
        for e in range(c_off[r], c_off[r + 1], 12):
            pos = np.int64(0)
            for q in range(4):
                pos |= np.int64(c_data[e + q]) << (8 * q)
            cnt = np.uint64(0)
            for q in range(8):
                cnt |= np.uint64(c_data[e + 4 + q]) << np.uint64(8 * q)
            c[at + pos] = np.int64(cnt)
    return g, u, c


@nb.njit(cache=True)
def first_holders_arrays(g, u, c):  # pragma: no cover - compiled
    """:func:`udfs.paragraphs.first_holders`' arrays over one bucket's blocks (int64 [N] each: n-gram,
    its first holder in a batch, that batch's holders): (every holder but the smallest uid of each
    n-gram, for the seen counts; the n-grams held twice or more over all batches, ascending as signed;
    their smallest uid)."""
    n = g.size
    keys = np.empty(n, np.uint64)
    idx = np.arange(n)
    for i in range(n):
        keys[i] = np.uint64(g[i]) ^ _SIGN
    width = min(n, _DIRECT_SORT_MAX)
    _sort_by_key(keys, idx, np.empty(width, np.uint64), np.empty(width, np.uint64), np.empty(width, np.int64),
                 np.empty(2 * width + 2, np.int64))
    later = np.empty(n, np.int64)
    shared_g = np.empty(n, np.int64)
    shared_first = np.empty(n, np.int64)
    n_later = 0
    n_shared = 0
    i = 0
    while i < n:
        first = idx[i]
        total = c[first]
        j = i + 1
        while j < n and keys[j] == keys[i]:
            total += c[idx[j]]
            if u[idx[j]] < u[first]:
                first = idx[j]
            j += 1
        for q in range(i, j):
            if idx[q] != first:
                later[n_later] = u[idx[q]]
                n_later += 1
        if total > 1:
            shared_g[n_shared] = np.int64(keys[i] ^ _SIGN)
            shared_first[n_shared] = u[first]
            n_shared += 1
        i = j
    return later[:n_later].copy(), shared_g[:n_shared].copy(), shared_first[:n_shared].copy()


def warm() -> None:
    """Compile (or load from numba's cache) the kernels the passages stage runs, on a tiny input: Arrow
    text in each unit mode, the near rule's map and reduce steps (:mod:`udfs.compiled` calls it).

    Raises:
        Exception: whatever numba raises.
    """
    texts = pa.array(["A b c.\n\nD e f! G h"])
    ids = pa.array(["d"])
    for unit in MODES:
        paragraph_batch(ids, texts, unit, 1, 2, "collapsed_whitespace", True, None, True)
    g = np.array([1, 2, 2], np.int64)
    gram_blocks_arrays(g, np.array([2, 1], np.int64), np.array([0, 1], np.int64), 2, 0)  # low given
    first_holders_arrays(g, np.array([0, 0, 1], np.int64), np.array([1, 1, 1], np.int64))
    low_bytes(np.zeros(1, np.uint64), 5)
    pack_arrays(g, np.array([0, 1, 2], np.int64), 5)
    none, one, two = np.zeros(0, np.uint8), np.ones(1, np.int64), np.zeros(2, np.int64)
    unpack_arrays(none, two, 5 * one, 10 * one, one, none, two, one, one, one, none, two, two, 23)
