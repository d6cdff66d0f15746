"""Compiled loops of :mod:`udfs.minhash`: ASCII shingle hashes, the ``fast`` and ``oph`` sketches.

The same values as the numpy forms in :mod:`udfs.minhash` (which stay the reference, the path for
non-ASCII text and the fallback where numba is missing), bit for bit: ``tests/test_minhash_jit.py``
compares the two. numpy's forms make one pass over the whole batch per step (normalise, split, dictionary
encode, hash, n-gram sums, ``num_perm`` permutations held as a block), each pass writing an array as
large as its input; here each document is read once, its bytes folded, its words hashed and its shingles
sketched while they are in the core's cache.

Compiled by numba (LLVM) on first use and cached beside this module (``cache=True``; numba falls back
to a per-user cache folder where the package folder is read-only), so a Python worker pays the compile
once per machine, a cache load (~0.1 s) per process after that.
"""

from __future__ import annotations

import numba
import numpy as np

from udfs.jit_mix import fmix64 as _fmix64

_U32 = np.uint64(0xFFFFFFFF)
_M32A, _M32B = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_EMPTY = np.uint64(1 << 32)


@numba.njit(cache=True, inline="always")
def _fmix32(h):
    # numba widens uint32 arithmetic to 64 bits: each product is cut back to 32 (LLVM then multiplies in 32)
    h ^= h >> np.uint32(16)
    h = np.uint32(h * _M32A)
    h ^= h >> np.uint32(13)
    h = np.uint32(h * _M32B)
    return np.uint32(h ^ (h >> np.uint32(16)))


@numba.njit(cache=True, nogil=True)
def _ascii_shingle_hashes(data, offs, eligible, table, terms, word_seed, pos_mult, n):  # pragma: no cover
    n_docs = len(offs) - 1
    counts = np.zeros(n_docs, dtype=np.int64)
    cap = len(data) // 2 + n_docs + 1  # a word is >= 1 byte and a separator
    words = np.empty(cap, dtype=np.uint64)
    out = np.empty(cap, dtype=np.uint64)
    n_out = 0
    known = np.uint64(terms.shape[0])
    pm0 = pos_mult[0]
    for d in range(n_docs):
        if not eligible[d]:
            continue
        # Branch-free over the bytes (a word boundary is a coin flip to the branch predictor): every
        # byte stores the running sum at slot m, a word's end moves m on, a separator zeroes the sum.
        # Unsigned indices: numba adds a negative-index wraparound to every signed one (1.25x here).
        m = np.uint64(0)
        acc = np.uint64(0)
        i = np.uint64(0)
        p = np.uint64(offs[d])
        end = np.uint64(offs[d + 1])
        while p < end:
            c = table[data[p]]
            inside = c > 32  # after the fold: [a-z0-9] (>= 48) or RE2's \s [\t\n\f\r ] (<= 32)
            mask = np.uint64(0) - np.uint64(inside)
            words[m] = acc
            m += np.uint64((not inside) & (i > np.uint64(0)))
            if i < known:
                acc = (acc + terms[i, c]) & mask
            else:
                acc = (acc + _fmix64(((i << np.uint64(8)) | np.uint64(c)) ^ word_seed) + pm0) & mask
            i = (i + np.uint64(1)) & mask
            p += np.uint64(1)
        if i:
            words[m] = acc
            m += np.uint64(1)
        if m == 0:  # an empty normalised view: the numpy path takes the raw text
            continue
        n_words = np.int64(m)
        for j in range(n_words):
            words[j] = _fmix64(words[j])
        k = min(n_words, n)
        for j in range(n_words - k + 1):
            g = np.uint64(0)
            for t in range(k):
                g += words[j + t] * pos_mult[t]
            out[n_out] = _fmix64(g)
            n_out += 1
        counts[d] = n_words - k + 1
    return out[:n_out], counts


@numba.njit(cache=True, nogil=True)
def _affine_min(h64, offsets, a, b):  # pragma: no cover
    n_docs = len(offsets) - 1
    k = len(a)
    out = np.empty((n_docs, k), dtype=np.uint32)
    most = 0
    for d in range(n_docs):
        most = max(most, offsets[d + 1] - offsets[d])
    xs = np.empty(most, dtype=np.uint32)
    n_perm = np.uint64(k)
    for d in range(n_docs):
        s0 = np.uint64(offsets[d])
        n = np.uint64(offsets[d + 1]) - s0
        t = np.uint64(0)
        while t < n:  # unsigned indices: no negative-index wraparound (see _ascii_shingle_hashes)
            h = h64[s0 + t]
            xs[t] = _fmix32(np.uint32((h >> np.uint64(32)) ^ (h & _U32)))
            t += np.uint64(1)
        # permutations outside, shingles inside: a min-reduction over a short array that LLVM keeps
        # in vector registers (1.8x faster than updating a row of num_perm minima per shingle)
        p = np.uint64(0)
        while p < n_perm:
            ap = a[p]
            bp = b[p]
            low = np.uint32(0xFFFFFFFF)
            t = np.uint64(0)
            while t < n:
                v = np.uint32(ap * xs[t] + bp)
                low = v if v < low else low
                t += np.uint64(1)
            out[d, p] = low
            p += np.uint64(1)
    return out


@numba.njit(cache=True, nogil=True)
def _oph(h64, offsets, k, mult, shift, pow2, rightward):  # pragma: no cover
    n_docs = len(offsets) - 1
    out = np.empty((n_docs, k), dtype=np.uint32)
    row = np.empty(k, dtype=np.uint64)
    nxt = np.empty(k, dtype=np.int64)
    kk = np.uint64(k)
    for d in range(n_docs):
        row[:] = _EMPTY
        s = np.uint64(offsets[d])
        end = np.uint64(offsets[d + 1])
        while s < end:
            x = h64[s] * mult
            slot = x >> shift if pow2 else ((x >> np.uint64(32)) * kk) >> np.uint64(32)
            v = x & _U32
            cur = row[slot]
            row[slot] = v if v < cur else cur  # a select, not a branch the predictor misses half the time
            s += np.uint64(1)
        first = -1
        last = -1
        for p in range(k):
            if row[p] != _EMPTY:
                if first < 0:
                    first = p
                last = p
        nearest = -1
        for p in range(k - 1, -1, -1):  # the nearest filled bin to the right, circularly
            if row[p] != _EMPTY:
                nearest = p
            nxt[p] = nearest if nearest >= 0 else first
        prev = last
        for p in range(k):
            if row[p] != _EMPTY:
                prev = p
                out[d, p] = np.uint32(row[p])
            else:
                src = (nxt[p] if nxt[p] > p else first) if rightward[p] else prev
                out[d, p] = np.uint32(row[src])
    return out


def ascii_shingle_hashes(data: np.ndarray, offs: np.ndarray, eligible: np.ndarray, table: np.ndarray,
                         terms: np.ndarray, word_seed: np.uint64, pos_mult: np.ndarray,
                         n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``fast`` shingle hashes of the ASCII documents of a batch, from their raw bytes.

    Per document: each byte through ``table`` (lowercase, punctuation and other ASCII to a space, digits
    folded where asked), words = runs of bytes outside RE2's ``\\s`` (``[\\t\\n\\f\\r ]``), word hash as
    :func:`udfs.minhash.hash_strings`, n-gram hashes as ``udfs.minhash._ngram_hashes`` (a document of
    m < n words: one shingle of its m words).

    Args:
        data: uint8, the value bytes of a string array (ASCII where ``eligible``).
        offs: int64 (n_docs + 1,), byte offsets of each document into ``data``.
        eligible: bool (n_docs,): documents to hash; the others get no shingles.
        table: uint8 (256,), the byte fold (``udfs.minhash._ASCII_LUTS``).
        terms: uint64 (L, 128), ``fmix64(((i << 8) | c) ^ word_seed) + pos_mult[0]`` for byte c at
            position i < L of a word (longer words compute theirs): a word's sum of terms is its
            pre-mix hash, length term included.
        word_seed, pos_mult: :mod:`udfs.minhash`'s ``_WORD_SEED`` and ``_POS_MULT`` (>= n entries).
        n: words per shingle (>= 1).

    Returns:
        ``(hashes, counts)``: uint64 shingle hashes of the hashed documents in order, and int64 shingles
        per document (0 for a document not eligible or whose folded text holds no word: the caller
        hashes those the numpy way, from their raw text).
    """
    return _ascii_shingle_hashes(data, offs, eligible, table, terms, word_seed, pos_mult, n)


def affine_min(h64: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The ``fast`` sketch: ``min over shingles of a[p] * fmix32(hi ^ lo) + b[p] mod 2^32`` per document.

    Args:
        h64: uint64 shingle hashes; offsets: int64 (n_docs + 1,); a, b: uint32 (num_perm,)
            (:func:`udfs.minhash.permutations`, datasketch's ``affine32`` draw).

    Returns:
        uint32 (n_docs, num_perm), equal to ``udfs.minhash._min_per_doc`` of the folded hashes.
    """
    return _affine_min(h64, offsets, a, b)


def one_permutation(h64: np.ndarray, offsets: np.ndarray, k: int, mult: np.uint64,
                    rightward: np.ndarray) -> np.ndarray:
    """:func:`udfs.minhash.one_permutation`'s bins and densification, one document at a time.

    Args:
        h64: uint64 shingle hashes; offsets: int64 (n_docs + 1,), every document >= 1 shingle.
        k: bins (num_perm); mult: the seed's odd multiplier; rightward: bool (k,), the densification
            direction of each bin position.

    Returns:
        uint32 (n_docs, k).
    """
    pow2 = k > 1 and k & (k - 1) == 0
    shift = np.uint64(64 - k.bit_length() + 1) if pow2 else np.uint64(0)
    return _oph(h64, offsets, k, np.uint64(mult), shift, pow2, rightward)


def warm() -> None:
    """Compile (or load from the cache) every loop here on a one-document input, so that a failure to
    compile or to cache (numba missing LLVM, no writable cache folder) shows at load time, where
    :func:`udfs.minhash.load_compiled` falls back to the numpy forms, not in the middle of a batch.

    Raises:
        Exception: whatever numba raises.
    """
    data = np.frombuffer(b"a b", dtype=np.uint8)
    offs = np.array([0, 3], dtype=np.int64)
    table = np.arange(256, dtype=np.uint8)
    terms = np.zeros((2, 128), dtype=np.uint64)
    h, counts = ascii_shingle_hashes(data, offs, np.ones(1, dtype=bool), table, terms, np.uint64(1),
                                     np.ones(2, dtype=np.uint64), 2)
    offsets = np.array([0, len(h)], dtype=np.int64)
    affine_min(h, offsets, np.ones(2, dtype=np.uint32), np.zeros(2, dtype=np.uint32))
    one_permutation(h, offsets, 2, np.uint64(1), np.zeros(2, dtype=bool))
