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
def _doc_words(data, offs, d, table, terms, word_seed, pm0, words):  # pragma: no cover
    # Document d's words' pre-mix sums into words[:m]; returns m. Branch-free over the bytes (a word
    # boundary is a coin flip to the branch predictor): every byte stores the running sum at slot m, a
    # word's end moves m on, a separator zeroes the sum. Unsigned indices: numba adds a negative-index
    # wraparound to every signed one (1.25x here).
    known = np.uint64(terms.shape[0])
    p = np.uint64(offs[d])
    end = np.uint64(offs[d + 1])
    m = np.uint64(0)
    acc = np.uint64(0)
    i = np.uint64(0)
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
    return m


@numba.njit(cache=True, nogil=True)
def _doc_shingles(words, m, pos_mult, n, out, base):  # pragma: no cover
    # words[:m] pre-mix sums -> the document's m - k + 1 n-gram hashes at out[base:]; returns their count.
    # Position-outer loops over the shingles: each is a plain vector loop (LLVM's AVX-512 64-bit products).
    j = np.uint64(0)
    while j < m:
        words[j] = _fmix64(words[j])
        j += np.uint64(1)
    k = min(m, np.uint64(n))
    ns = m - k + np.uint64(1)
    p0 = pos_mult[0]
    j = np.uint64(0)
    while j < ns:
        out[base + j] = words[j] * p0
        j += np.uint64(1)
    t = np.uint64(1)
    while t < k:
        pt = pos_mult[t]
        j = np.uint64(0)
        while j < ns:
            out[base + j] += words[j + t] * pt
            j += np.uint64(1)
        t += np.uint64(1)
    j = np.uint64(0)
    while j < ns:
        out[base + j] = _fmix64(out[base + j])
        j += np.uint64(1)
    return ns


@numba.njit(cache=True, nogil=True)
def _longest(offs):  # pragma: no cover
    most = 0
    for d in range(len(offs) - 1):
        most = max(most, offs[d + 1] - offs[d])
    return most


@numba.njit(cache=True, nogil=True)
def _ascii_documents(data, offs):  # pragma: no cover
    n_docs = len(offs) - 1
    out = np.empty(n_docs, dtype=np.bool_)
    for d in range(n_docs):
        high = np.uint8(0)
        p = np.uint64(offs[d])
        end = np.uint64(offs[d + 1])
        while p < end:  # an OR-reduction LLVM vectorises: ~30x cheaper than Arrow's string_is_ascii here
            high |= data[p]
            p += np.uint64(1)
        out[d] = high < 128
    return out


@numba.njit(cache=True, nogil=True)
def _ascii_shingle_hashes(data, offs, eligible, table, terms, word_seed, pos_mult, n):  # pragma: no cover
    n_docs = len(offs) - 1
    counts = np.zeros(n_docs, dtype=np.int64)
    out = np.empty(len(data) // 2 + n_docs + 1, dtype=np.uint64)  # a word is >= 1 byte and a separator
    words = np.empty(_longest(offs) // 2 + 2, dtype=np.uint64)
    n_out = np.uint64(0)
    for d in range(n_docs):
        if not eligible[d]:
            continue
        m = _doc_words(data, offs, d, table, terms, word_seed, pos_mult[0], words)
        if m == 0:  # an empty normalised view: the numpy path takes the raw text
            continue
        ns = _doc_shingles(words, m, pos_mult, n, out, n_out)
        n_out += ns
        counts[d] = np.int64(ns)
    return out[:n_out], counts


@numba.njit(cache=True, nogil=True)
def _affine_row(h64, s0, n, a, b, xs, out_row):  # pragma: no cover
    t = np.uint64(0)
    while t < n:  # unsigned indices: no negative-index wraparound (see _doc_words)
        h = h64[s0 + t]
        xs[t] = _fmix32(np.uint32((h >> np.uint64(32)) ^ (h & _U32)))
        t += np.uint64(1)
    # permutations outside, shingles inside: a min-reduction over a short array that LLVM keeps
    # in vector registers (1.8x faster than updating a row of num_perm minima per shingle)
    n_perm = np.uint64(len(a))
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
        out_row[p] = low
        p += np.uint64(1)


@numba.njit(cache=True, nogil=True)
def _affine_min(h64, offsets, a, b):  # pragma: no cover
    n_docs = len(offsets) - 1
    out = np.empty((n_docs, len(a)), dtype=np.uint32)
    xs = np.empty(_longest(offsets), dtype=np.uint32)
    for d in range(n_docs):
        s0 = np.uint64(offsets[d])
        _affine_row(h64, s0, np.uint64(offsets[d + 1]) - s0, a, b, xs, out[d])
    return out


@numba.njit(cache=True, nogil=True)
def _oph_row(h64, s, end, mult, shift, pow2, rightward, row, nxt, out_row):  # pragma: no cover
    k = len(row)
    kk = np.uint64(k)
    row[:] = _EMPTY
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
            out_row[p] = np.uint32(row[p])
        else:
            src = (nxt[p] if nxt[p] > p else first) if rightward[p] else prev
            out_row[p] = np.uint32(row[src])


@numba.njit(cache=True, nogil=True)
def _oph(h64, offsets, k, mult, shift, pow2, rightward):  # pragma: no cover
    n_docs = len(offsets) - 1
    out = np.empty((n_docs, k), dtype=np.uint32)
    row = np.empty(k, dtype=np.uint64)
    nxt = np.empty(k, dtype=np.int64)
    for d in range(n_docs):
        s0, s1 = np.uint64(offsets[d]), np.uint64(offsets[d + 1])
        _oph_row(h64, s0, s1, mult, shift, pow2, rightward, row, nxt, out[d])
    return out


@numba.njit(cache=True, nogil=True)
def _ascii_sketches(data, offs, eligible, table, terms, word_seed, pos_mult, n,
                    oph, k, a, b, mult, shift, pow2, rightward):  # pragma: no cover
    # Bytes -> words -> shingles -> sketch row, one document at a time in scratch arrays the size of the
    # longest document: no batch-sized array of shingle hashes, whose fresh pages (~1 page fault a 4 KiB)
    # cost as much as hashing them.
    n_docs = len(offs) - 1
    out = np.empty((n_docs, k), dtype=np.uint32)
    done = np.zeros(n_docs, dtype=np.bool_)
    longest = _longest(offs) // 2 + 2
    words = np.empty(longest, dtype=np.uint64)
    shingles = np.empty(longest, dtype=np.uint64)
    xs = np.empty(longest, dtype=np.uint32)
    row = np.empty(k, dtype=np.uint64)
    nxt = np.empty(k, dtype=np.int64)
    for d in range(n_docs):
        if not eligible[d]:
            continue
        m = _doc_words(data, offs, d, table, terms, word_seed, pos_mult[0], words)
        if m == 0:
            continue
        ns = _doc_shingles(words, m, pos_mult, n, shingles, np.uint64(0))
        if oph:
            _oph_row(shingles, np.uint64(0), ns, mult, shift, pow2, rightward, row, nxt, out[d])
        else:
            _affine_row(shingles, np.uint64(0), ns, a, b, xs, out[d])
        done[d] = True
    return out, done


def ascii_documents(data: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Which documents are ASCII: bool (n_docs,), True where every byte of ``data[offs[d]:offs[d+1]]`` is
    < 0x80 (an empty document is ASCII, as in Arrow's ``string_is_ascii``). ``offs``: int64 (n_docs + 1,)."""
    return _ascii_documents(data, offs)


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


def _bins(k: int) -> tuple[np.uint64, bool]:
    # a power of two takes the bin from the top bits in one shift: the same bins as the general formula
    pow2 = k > 1 and k & (k - 1) == 0
    return (np.uint64(64 - k.bit_length() + 1) if pow2 else np.uint64(0)), pow2


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
    shift, pow2 = _bins(k)
    return _oph(h64, offsets, k, np.uint64(mult), shift, pow2, rightward)


_NO_PERMS = np.zeros(1, dtype=np.uint32)
_NO_DIRECTIONS = np.zeros(1, dtype=np.bool_)


def ascii_affine_sketches(data: np.ndarray, offs: np.ndarray, eligible: np.ndarray, table: np.ndarray,
                          terms: np.ndarray, word_seed: np.uint64, pos_mult: np.ndarray, n: int,
                          a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`affine_min` of :func:`ascii_shingle_hashes`, fused: each document's bytes hashed and sketched
    while in the core's cache, without the batch's array of shingle hashes (whose fresh memory pages cost
    ~1.7 ms a 1,024-document batch, as much as the n-gram hashing they hold).

    Args:
        data, offs, eligible, table, terms, word_seed, pos_mult, n: as :func:`ascii_shingle_hashes`.
        a, b: uint32 (num_perm,), the ``fast`` permutations.

    Returns:
        ``(signatures, done)``: uint32 (n_docs, num_perm), and bool (n_docs,) True where the row holds the
        document's sketch; the other rows (not eligible, or no word once folded) are undefined and the
        caller sketches those documents the numpy way.
    """
    return _ascii_sketches(data, offs, eligible, table, terms, word_seed, pos_mult, n, False, len(a), a, b,
                           np.uint64(1), np.uint64(0), False, _NO_DIRECTIONS)


def ascii_oph_sketches(data: np.ndarray, offs: np.ndarray, eligible: np.ndarray, table: np.ndarray,
                       terms: np.ndarray, word_seed: np.uint64, pos_mult: np.ndarray, n: int, k: int,
                       mult: np.uint64, rightward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`one_permutation` of :func:`ascii_shingle_hashes`, fused as :func:`ascii_affine_sketches`.

    Args:
        data, offs, eligible, table, terms, word_seed, pos_mult, n: as :func:`ascii_shingle_hashes`.
        k, mult, rightward: as :func:`one_permutation`.

    Returns:
        ``(signatures, done)``: uint32 (n_docs, k) and bool (n_docs,), as :func:`ascii_affine_sketches`.
    """
    shift, pow2 = _bins(k)
    return _ascii_sketches(data, offs, eligible, table, terms, word_seed, pos_mult, n, True, k, _NO_PERMS,
                           _NO_PERMS, np.uint64(mult), shift, pow2, rightward)


def warm() -> None:
    """Compile (or load from the cache) every loop here on a one-document input, so that a failure to
    compile or to cache (numba missing LLVM, no writable cache folder) shows at load time, where
    :func:`udfs.minhash.load_compiled` falls back to the numpy forms, not in the middle of a batch.

    Raises:
        Exception: whatever numba raises.
    """
    data = np.frombuffer(b"a b", dtype=np.uint8)
    offs = np.array([0, 3], dtype=np.int64)
    ascii_documents(data, offs)
    table = np.arange(256, dtype=np.uint8)
    terms = np.zeros((2, 128), dtype=np.uint64)
    h, counts = ascii_shingle_hashes(data, offs, np.ones(1, dtype=bool), table, terms, np.uint64(1),
                                     np.ones(2, dtype=np.uint64), 2)
    offsets = np.array([0, len(h)], dtype=np.int64)
    affine_min(h, offsets, np.ones(2, dtype=np.uint32), np.zeros(2, dtype=np.uint32))
    one_permutation(h, offsets, 2, np.uint64(1), np.zeros(2, dtype=bool))
    args = (data, offs, np.ones(1, dtype=bool), table, terms, np.uint64(1), np.ones(2, dtype=np.uint64), 2)
    ascii_affine_sketches(*args, np.ones(2, dtype=np.uint32), np.zeros(2, dtype=np.uint32))
    ascii_oph_sketches(*args, 2, np.uint64(1), np.zeros(2, dtype=bool))
