"""Shingling and MinHash signatures over whole Arrow batches.

Shingles are word n-grams (default n = 5, as in Lee et al. 2022 "Deduplicating Training Data Makes
Language Models Better" and RefinedWeb, Penedo et al. 2023, §G.2) over a normalised view of the text:
lowercase, punctuation stripped, whitespace collapsed, optionally digits folded to ``0`` and diacritics
removed. The stored text is never changed. Scripts written without spaces (Han, Hiragana, Katakana,
Hangul is spaced so it is left alone, Thai, Lao, Khmer, Myanmar) are split into one "word" per
character, so their n-grams are character n-grams. A document with fewer than n words yields one
shingle of all its words; one whose normalised view is empty yields one shingle of its
whitespace-collapsed raw text; so a signature is never empty.

Four signature schemes. ``oph`` hashes each shingle once; the other three use ``num_perm`` seeded
permutations drawn exactly as datasketch 2.0.0 draws them (``numpy.random.RandomState(seed)``, see
``datasketch/minhash.py``):

* ``oph``: one-permutation hashing of the ``fast`` shingle hashes (:func:`one_permutation`): one seeded
  re-mix per shingle places it in one of ``num_perm`` bins and gives its value, bins keep their
  minimum, empty bins are densified. Its cost does not grow with ``num_perm``; its Jaccard estimates
  are unbiased like the others' (Li, Owen and Zhang 2012; Shrivastava and Li 2014).

* ``fast`` (default): shingle hash = 64-bit word hashes (each distinct word of the batch hashed once,
  bytes mixed with the MurmurHash3 ``fmix64`` finalizer and summed per word, all in numpy) combined
  into n-gram hashes with per-position odd multipliers, folded to 32 bits; then datasketch's
  ``affine32`` permutation (``fmix32`` pre-mix, ``a*h + b mod 2^32``). No Python loop per word or
  shingle. Its Jaccard estimates match datasketch's within sampling error (different shingle hash).
* ``datasketch_affine32``: bit-exact with ``datasketch.MinHash(num_perm, seed)`` (2.0.0 default
  scheme ``affine32``, ``sha1_hash32``) fed ``update_batch`` with each shingle's UTF-8 bytes, the
  n-gram's words joined by one space. SHA-1 runs per shingle in Python (hashlib), as in datasketch.
* ``datasketch_legacy``: the same for ``scheme="legacy"`` (``(a*h + b) mod (2^61 - 1)`` in wrapping
  uint64 arithmetic, masked to 32 bits; the only scheme before datasketch 2.0.0).

Signatures are ``uint32`` arrays of shape ``(n_docs, num_perm)`` for every scheme (legacy values are
masked to 32 bits by datasketch itself, so the narrowing is lossless).

The ``fast`` and ``oph`` shingle hashes of ASCII documents and both schemes' sketches run as compiled
loops (:mod:`udfs.minhash_jit`, numba) once a process has hashed :data:`udfs.compiled.AFTER_BYTES` of text
(or called :func:`load_compiled`); :func:`signatures` then hashes and sketches each ASCII document in one
pass, without a batch-sized array of shingle hashes. The numpy forms here give the same values bit for bit
(``tests/test_minhash_jit.py``), hash the other documents, and are the fallback without numba.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.compiled import Kernels
from udfs.decontam import fmix64, pair_order

KERNELS = Kernels("udfs.minhash_jit")
"""The compiled loops (:mod:`udfs.minhash_jit`), loaded once a process has hashed
:data:`udfs.compiled.AFTER_BYTES` of text: loading numba and the cached machine code costs ~0.35 CPU-s,
what the loops save on ~40 MB of text (~8.5 ms a MB on the generated bench corpus)."""

SCHEMES = ("fast", "oph", "datasketch_affine32", "datasketch_legacy")

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
"""Modulus of datasketch's ``legacy`` permutations."""
MAX_HASH32 = np.uint64((1 << 32) - 1)

# Scripts written without spaces between words: one character = one word.
_UNSPACED = r"([\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}])"
_PUNCT = r"[^\p{L}\p{N}\p{M}\s]+"

# MurmurHash3 finalizer constants (Appleby, smhasher; also datasketch._FMIX_CONSTANTS).
_M64A, _M64B = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_M32A, _M32B = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_WORD_SEED = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio constant: any fixed odd value works
# Odd multipliers, one per n-gram position, so "a b" and "b a" hash differently (order matters).
_POS_MULT = (np.arange(1, 65, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)

FAST_HASH_NAME = "winnow-fmix64-wordsum-v1"
"""Recorded in table metadata: the ``fast`` shingle hash (change the name if the function changes)."""


@dataclass(frozen=True)
class ShingleSpec:
    """How text becomes shingles. Part of the signature settings recorded in table metadata.

    Attributes:
        ngram_size: words per shingle (n >= 1).
        fold_digits: every decimal digit becomes ``0`` (so "page 12" ~ "page 37").
        fold_diacritics: NFKD then drop combining marks ("café" -> "cafe").
        split_unspaced: one word per character for scripts written without spaces (CJK, Thai, ...).
    """

    ngram_size: int = 5
    fold_digits: bool = False
    fold_diacritics: bool = False
    split_unspaced: bool = True

    def to_dict(self) -> dict:
        """The settings as a plain dict (part of the recorded signature settings)."""
        return asdict(self)


# ------------------------------------------------------------------------------------ normalisation
def _ascii_table(fold_digits: bool) -> np.ndarray:
    # Byte -> byte: what ascii_lower + replace_substring_regex("[^a-z0-9\\s]+", " ") keep (RE2's \s is
    # [\t\n\f\r ]), every other ASCII byte -> one space. A run of punctuation becomes a run of spaces
    # instead of one space: the same words once split on whitespace.
    lut = np.full(128, ord(" "), dtype=np.uint8)
    for c in b"\t\n\f\r 0123456789abcdefghijklmnopqrstuvwxyz":
        lut[c] = c
    lut[ord("A") : ord("Z") + 1] = np.arange(ord("a"), ord("z") + 1, dtype=np.uint8)
    if fold_digits:
        lut[ord("0") : ord("9") + 1] = ord("0")
    return lut


_ASCII_TABLES = {f: bytes(_ascii_table(f)) + b" " * 128 for f in (False, True)}
"""The two tables as ``bytes.translate`` tables (256 entries; bytes >= 0x80 never reach them: the fast
path takes ASCII only): the translation runs ~4x faster than the same lookup as numpy fancy indexing."""


_ASCII_LUTS = {f: np.frombuffer(_ASCII_TABLES[f], dtype=np.uint8) for f in (False, True)}
"""The same tables as uint8 arrays, for the compiled loop (:mod:`udfs.minhash_jit`)."""


def _ascii_fold(texts: pa.Array, fold_digits: bool) -> pa.Array:
    # The ASCII fast path's normalisation as one table lookup over the value bytes (no nulls, ASCII
    # only): 20x cheaper than the lowercase + regex pair it stands for.
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    large = texts.type == pa.large_string()
    odt = np.int64 if large else np.int32
    bufs = texts.buffers()
    offs = np.frombuffer(bufs[1], dtype=odt, count=len(texts) + 1, offset=texts.offset * np.dtype(odt).itemsize)
    data = memoryview(bufs[2] if bufs[2] is not None else b"")[int(offs[0]) : int(offs[-1])]
    folded = data.tobytes().translate(_ASCII_TABLES[fold_digits])
    return pa.Array.from_buffers(texts.type, len(texts), [None, pa.py_buffer(offs - offs[0]), pa.py_buffer(folded)])


def _normalized(texts: pa.Array, spec: ShingleSpec) -> tuple[pa.Array, bool]:
    # Lowercase, punctuation -> space, folds, unspaced scripts split. Runs of whitespace are left in
    # place: utf8_split_whitespace treats a run as one separator (collapsing them with a regex costs
    # more than every other step together). The flag says the ASCII fast path was taken: the output
    # then holds only [a-z0-9] and RE2's \s ([\t\n\f\r ]), on which ascii_split_whitespace splits as
    # utf8_split_whitespace does (they differ only on U+001C-U+001F, which the regex replaced).
    if not spec.fold_diacritics and pc.all(pc.string_is_ascii(texts)).as_py() is not False:
        # ASCII fast path (most English web text), same output as the Unicode path below: ASCII
        # letters/digits are the only ASCII characters in \p{L}\p{N}\p{M}, and no ASCII is unspaced.
        if texts.null_count == 0 and len(texts) and texts.type in (pa.string(), pa.large_string()):
            return _ascii_fold(texts, spec.fold_digits), True
        out = pc.replace_substring_regex(pc.ascii_lower(texts), r"[^a-z0-9\s]+", " ")
        return (pc.replace_substring_regex(out, r"[0-9]", "0") if spec.fold_digits else out), True
    out = pc.utf8_lower(texts)
    if spec.fold_diacritics:
        out = pc.replace_substring_regex(pc.utf8_normalize(out, "NFKD"), r"\p{Mn}+", "")
    out = pc.replace_substring_regex(out, _PUNCT, " ")
    if spec.fold_digits:
        out = pc.replace_substring_regex(out, r"\p{Nd}", "0")
    if spec.split_unspaced and pc.any(pc.match_substring_regex(out, _UNSPACED)).as_py():
        out = pc.replace_substring_regex(out, _UNSPACED, r" \1 ")
    return out, False


def normalize(texts: pa.Array, spec: ShingleSpec) -> pa.Array:
    """Normalised view used for shingling (Arrow compute kernels, no Python per document).

    Args:
        texts: string array; nulls stay null.
        spec: shingle settings.

    Returns:
        String array of the same length: lowercase, punctuation -> space, optional folds, unspaced
        scripts split per character, whitespace collapsed to one space and trimmed.

    Example:
        >>> normalize(pa.array(["Hello,  World!"]), ShingleSpec()).to_pylist()
        ['hello world']
    """
    lists = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(_normalized(texts, spec)[0]))
    return pc.binary_join(lists, pa.scalar(" ", lists.type.value_type))  # string or large_string


def _words(texts: pa.Array, spec: ShingleSpec) -> tuple[pa.Array, np.ndarray]:
    """Flat words of every document and per-document offsets into them (length n_docs + 1).

    Documents whose normalised view is empty (or null) get their whitespace-collapsed raw text as
    their words, and a document empty even raw gets the empty string as its one word, so every
    document has >= 1 word.
    """
    if texts.null_count:  # fill_null copies every text even when none is null (~5 % of the signature pass)
        texts = pc.fill_null(texts, "")
    norm, ascii_only = _normalized(texts, spec)
    # on the ASCII path's output (whitespace only [\t\n\f\r ]) the ASCII trim is the same and 3x cheaper
    norm = (pc.ascii_trim_whitespace if ascii_only else pc.utf8_trim_whitespace)(norm)
    empty = pc.equal(norm, "")
    if pc.any(empty).as_py():
        raw = pc.utf8_trim_whitespace(texts)
        norm = pc.if_else(empty, raw, norm)
        ascii_only = False  # raw text may hold U+001C-U+001F, whitespace to utf8 only
    # split of "" is [""]: a document empty even raw gets the empty string as its one word;
    # the ASCII split is 1.5x faster and the same on the ASCII path's output (see _normalized)
    lists = (pc.ascii_split_whitespace if ascii_only else pc.utf8_split_whitespace)(norm)
    counts = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return pc.list_flatten(lists), offsets


# ---------------------------------------------------------------------------------------- hashing
def md5_digests(texts: pa.Array) -> pa.Array:
    """MD5 of each string's UTF-8 bytes (a null hashes as the empty string), 16 bytes per element.

    The exact-duplicate key of the dedup stage, computed where the texts already are (the signature
    pass) instead of in the JVM: the same digests as Spark's ``md5(encode(coalesce(text, ''), 'UTF-8'))``
    (there as 32 hex characters). OpenSSL's MD5 through :mod:`hashlib`, one call per document over a
    zero-copy view of the value buffer.

    Args:
        texts: string or large_string array (chunked arrays are combined).

    Returns:
        binary array of the same length, every value 16 bytes, no nulls.

    Source: RFC 1321 (MD5); used as a fast, well-spread 128-bit hash, not for security.
    """
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    n = len(texts)
    if n == 0:
        return pa.array([], type=pa.binary())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    odt = np.int64 if texts.type == pa.large_string() else np.int32
    bufs = texts.buffers()
    offs = np.frombuffer(bufs[1], dtype=odt, count=n + 1, offset=texts.offset * np.dtype(odt).itemsize).tolist()
    data = memoryview(bufs[2] if bufs[2] is not None else b"")
    md5 = hashlib.md5
    digests = b"".join([md5(data[offs[i] : offs[i + 1]]).digest() for i in range(n)])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(0, 16 * (n + 1), 16, dtype=np.int32)),
                                                  pa.py_buffer(digests)])


def _fmix(h: np.ndarray, shifts: tuple[int, int, int], m1: np.integer, m2: np.integer) -> np.ndarray:
    dt = h.dtype.type
    h = h ^ (h >> dt(shifts[0]))
    h = h * m1
    h = h ^ (h >> dt(shifts[1]))
    h = h * m2
    return h ^ (h >> dt(shifts[2]))


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer on uint32, as datasketch's ``affine32`` pre-mix."""
    return _fmix(h, (16, 13, 16), _M32A, _M32B)


def hash_strings(words: pa.Array) -> np.ndarray:
    """64-bit hash of each string, vectorised over the Arrow value buffer.

    ``h(w) = fmix64(len(w) * K + sum_i fmix64(((i << 8) | byte_i) ^ SEED))``: each (position, byte)
    pair maps to a distinct pseudo-random value (``fmix64`` is a bijection), so two different words
    collide only by a 2^-64 accident of the sum.

    Args:
        words: string array without nulls.

    Returns:
        uint64 array, one hash per string.
    """
    words = words.cast(pa.large_string()) if words.type != pa.large_string() else words
    n = len(words)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    bufs = words.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=words.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offs[0] : offs[-1]]
    lengths = np.diff(offs)
    starts = offs[:-1] - offs[0]
    pos = np.arange(len(data), dtype=np.uint64) - np.repeat(starts.astype(np.uint64), lengths)
    per_byte = fmix64(((pos << np.uint64(8)) | data.astype(np.uint64)) ^ _WORD_SEED)
    sums = np.zeros(n, dtype=np.uint64)
    nonempty = lengths > 0
    if per_byte.size:
        sums[nonempty] = np.add.reduceat(per_byte, starts[nonempty])
    return fmix64(sums + lengths.astype(np.uint64) * _POS_MULT[0])


_WORD_TERMS = fmix64(((np.arange(256, dtype=np.uint64)[:, None] << np.uint64(8))
                      | np.arange(128, dtype=np.uint64)[None, :]) ^ _WORD_SEED) + _POS_MULT[0]
"""uint64 (256, 128): :func:`hash_strings`' term of ASCII byte c at position i of a word, plus the
length term's share (``_POS_MULT[0]`` per byte), looked up by the compiled loop instead of computed per
byte (256 KiB, held in a core's L2 cache)."""


def _fmix64_in_place(h: np.ndarray) -> np.ndarray:
    """:func:`fmix64` of a uint64 array the caller owns, overwriting it (one scratch array instead of
    a new array per step); returns ``h``."""
    t = np.empty_like(h)
    for mult in (_M64A, _M64B, None):
        np.right_shift(h, np.uint64(33), out=t)
        h ^= t
        if mult is not None:
            h *= mult
    return h


def _ngram_hashes(word_hash: np.ndarray, offsets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Combine word hashes into n-gram hashes within each document.

    ``g = fmix64(sum_k word_hash[j+k] * M_k)`` with one odd multiplier per position (order matters).
    The products are accumulated in place (one scratch array for all positions) and the windows that
    run past their document's end are masked by writing ``n - 1`` positions per document, not by a
    comparison over every word.

    Returns:
        (hashes uint64, shingle offsets int64 of length n_docs + 1). A document with m < n words gets
        one shingle of its m words (the same formula over m positions).
    """
    total = len(word_hash)
    counts = np.diff(offsets)
    acc = word_hash * _POS_MULT[0]
    scratch = np.empty(max(total - 1, 0), dtype=np.uint64)
    for k in range(1, min(n, total)):  # loop over n-gram positions (n ~ 5), never over shingles
        m = total - k
        np.multiply(word_hash[k:], _POS_MULT[k], out=scratch[:m])
        acc[:m] += scratch[:m]  # windows past the last word take no term, as if padded with zeros
    starts = offsets[:-1]
    short = counts < n
    keep = np.ones(total, dtype=bool)
    ends = offsets[1:][~short]
    if n > 1 and len(ends):  # a long document's last n - 1 windows run into the next document
        keep[(ends[:, None] - np.arange(1, n, dtype=np.int64)).ravel()] = False
    if short.any():  # a short document is one shingle of its words, at its first position
        s_start, s_len = starts[short], counts[short]
        fix = np.zeros(len(s_start), dtype=np.uint64)
        for k in range(n - 1):
            fix += np.where(k < s_len, word_hash[np.minimum(s_start + k, total - 1)], np.uint64(0)) * _POS_MULT[k]
        acc[s_start] = fix
        rest = s_len - 1
        if rest.sum():
            keep[np.repeat(s_start + 1 - (np.cumsum(rest) - rest), rest) + np.arange(rest.sum())] = False
    per_doc = np.where(short, 1, counts - n + 1)
    sh_off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(per_doc, out=sh_off[1:])
    return _fmix64_in_place(acc[keep]), sh_off


def load_compiled() -> bool:
    """Load the compiled loops (:mod:`udfs.minhash_jit`) now, in this process; True when loaded.

    The hashing functions load them themselves once a process has hashed
    :data:`udfs.compiled.AFTER_BYTES`. A missing numba, or one that cannot compile or cache here (logged
    as a warning), leaves the numpy forms in use: the same values."""
    return KERNELS.load() is not None


def _ascii_bytes(texts: pa.Array, spec: ShingleSpec) -> tuple[object, tuple] | None:
    """The compiled module and the leading arguments of its ASCII loops (bytes, offsets, which documents
    are ASCII, fold table, word terms, seeds, n) for ``texts``; None where the numpy form takes them all
    (kernels not loaded, ``fold_diacritics``, no ASCII document)."""
    if spec.fold_diacritics or not len(texts) or texts.type not in (pa.string(), pa.large_string()):
        return None
    jit = KERNELS.after(texts.nbytes)
    if jit is None:
        return None
    bufs = texts.buffers()
    odt = np.int64 if texts.type == pa.large_string() else np.int32
    offs = np.frombuffer(bufs[1], dtype=odt, count=len(texts) + 1, offset=texts.offset * np.dtype(odt).itemsize)
    offs = offs.astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    eligible = jit.ascii_documents(data, offs)
    if texts.null_count:  # a null's slot may hold bytes (Arrow allows it): never eligible
        eligible &= texts.is_valid().to_numpy(zero_copy_only=False)
    if not eligible.any():
        return None
    return jit, (data, offs, eligible, _ASCII_LUTS[spec.fold_digits], _WORD_TERMS, _WORD_SEED,
                 _POS_MULT, spec.ngram_size)


def shingle_hashes(texts: pa.Array, spec: ShingleSpec) -> tuple[np.ndarray, np.ndarray]:
    """64-bit ``fast`` shingle hashes of every document.

    ASCII documents go through the compiled loop (:func:`udfs.minhash_jit.ascii_shingle_hashes`, one
    pass over each document's bytes) once it is loaded (:func:`load_compiled`), the others (and all of
    them before that, where numba is missing or ``fold_diacritics`` is on) through the numpy form
    (distinct words hashed once per batch); both give the same hashes, and a document's hashes never
    depend on the rest of its batch.

    Args:
        texts: string array, one document per element.
        spec: shingle settings.

    Returns:
        ``(hashes, offsets)``: uint64 hashes of all shingles (duplicates kept) and int64 offsets of
        length ``len(texts) + 1``; document i owns ``hashes[offsets[i]:offsets[i+1]]`` (>= 1 shingle).
    """
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    view = _ascii_bytes(texts, spec)
    if view is None:
        return _shingle_hashes_np(texts, spec)
    jit, args = view
    h, counts = jit.ascii_shingle_hashes(*args)
    rest = np.flatnonzero(counts == 0)
    if rest.size:  # non-ASCII, null or no word once folded: the numpy form, spliced in document order
        h_rest, off_rest = _shingle_hashes_np(texts.take(pa.array(rest)), spec)
        counts[rest] = np.diff(off_rest)
        in_rest = np.zeros(len(texts), dtype=bool)
        in_rest[rest] = True
        in_rest = np.repeat(in_rest, counts)
        merged = np.empty(len(in_rest), dtype=np.uint64)
        merged[~in_rest] = h
        merged[in_rest] = h_rest
        h = merged
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return h, offsets


def _shingle_hashes_np(texts: pa.Array, spec: ShingleSpec) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_hashes` in numpy and Arrow kernels (every text; the reference of the compiled loop)."""
    words, offsets = _words(texts, spec)
    enc = pc.dictionary_encode(words).combine_chunks() if isinstance(words, pa.ChunkedArray) else pc.dictionary_encode(words)
    uniq = hash_strings(enc.dictionary)
    word_hash = uniq[enc.indices.to_numpy(zero_copy_only=False)] if len(words) else np.zeros(0, np.uint64)
    return _ngram_hashes(word_hash, offsets, spec.ngram_size)


def shingle_strings(texts: pa.Array, spec: ShingleSpec) -> list[list[bytes]]:
    """The shingles of each document as UTF-8 bytes (n-gram words joined by one space).

    This is the shingle definition of the datasketch-compatible schemes (a Python list per document;
    use it for cross-checks, not on the hot path).
    """
    words, offsets = _words(texts, spec)
    flat = words.to_pylist()
    n = spec.ngram_size
    out: list[list[bytes]] = []
    for i in range(len(texts)):
        w = flat[offsets[i] : offsets[i + 1]]
        if len(w) < n:
            out.append([" ".join(w).encode("utf-8")])
        else:
            out.append([" ".join(w[k : k + n]).encode("utf-8") for k in range(len(w) - n + 1)])
    return out


# ------------------------------------------------------------------------------------ permutations
def permutations(num_perm: int, seed: int, scheme: str) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters ``(a, b)`` drawn exactly as datasketch 2.0.0 ``MinHash._init_permutations``.

    Args:
        num_perm: number of permutations (>= 1).
        seed: 0 <= seed < 2^32 (``numpy.random.RandomState`` seed).
        scheme: one of :data:`SCHEMES`; ``fast`` uses the ``affine32`` draw.

    Returns:
        ``affine32``: uint32 arrays, ``a`` odd. ``legacy``: uint64 arrays in [1, 2^61-1) and [0, 2^61-1).

    Raises:
        ValueError: unknown scheme, or seed out of range.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"MinHash scheme {scheme!r} unknown; allowed: {list(SCHEMES)}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"MinHash seed {seed} out of range; allowed: 0 <= seed < 2^32 (numpy RandomState)")
    gen = np.random.RandomState(seed)
    if scheme == "datasketch_legacy":
        ab = np.array(
            [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
             for _ in range(num_perm)],
            dtype=np.uint64,
        ).T
        return ab[0], ab[1]
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _sha1_32(shingles: list[bytes]) -> np.ndarray:
    return np.fromiter((struct.unpack("<I", hashlib.sha1(s).digest()[:4])[0] for s in shingles), np.uint64, len(shingles))


_BLOCK_BYTES = 3 << 19
"""Bytes of one (num_perm x shingles) uint32 block of :func:`_min_per_doc`: 1.5 MiB, under a 2 MiB
per-core L2 cache (3,072 shingles at 128 permutations). Measured on the generated bench corpus at 128
permutations, 1,024-document batches: 3,072 shingles per block 1.6x faster on the permutation step
than 8,192 (4 MiB, spills L2), 1.15x on the whole of :func:`signatures`; 2,048 and fewer are slower
again (per-block ``reduceat`` overhead)."""


def _min_per_doc(h: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, legacy: bool,
                 chunk: int | None = None) -> np.ndarray:
    """Apply every permutation to every shingle hash and take the minimum per document.

    Works on (num_perm x shingles) blocks of whole documents, about ``chunk`` shingles each
    (default: :data:`_BLOCK_BYTES` of uint32 values), so a block stays in the core's L2 cache and the
    per-document minimum runs along contiguous memory (``reduceat`` along the last axis is ~10x faster
    than along the first). The block size changes the speed only, never the values.
    """
    if chunk is None:
        chunk = max(1024, _BLOCK_BYTES // (4 * max(len(a), 1)))
    n_docs = len(offsets) - 1
    out = np.empty((len(a), n_docs), dtype=np.uint32)
    a_col, b_col = a[:, None], b[:, None]
    buf = None
    d0 = 0
    while d0 < n_docs:
        d1 = int(np.searchsorted(offsets, offsets[d0] + chunk, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n_docs)
        s0, s1 = offsets[d0], offsets[d1]
        hv = h[None, s0:s1]
        if legacy:
            phv = (a_col * hv + b_col) % MERSENNE_PRIME
            phv &= MAX_HASH32
        else:
            if buf is None or buf.shape[1] < s1 - s0:
                buf = np.empty((len(a), max(chunk, s1 - s0)), dtype=np.uint32)
            phv = buf[:, : s1 - s0]
            np.multiply(a_col, hv, out=phv)
            phv += b_col
        out[:, d0:d1] = np.minimum.reduceat(phv, offsets[d0:d1] - s0, axis=1)
        d0 = d1
    return np.ascontiguousarray(out.T)


def signatures(texts: pa.Array, spec: ShingleSpec, num_perm: int, seed: int, scheme: str = "fast") -> np.ndarray:
    """MinHash signatures of every document of a batch.

    Args:
        texts: string array (n_docs,).
        spec: shingle settings.
        num_perm: permutations per signature.
        seed: permutation seed, 0 <= seed < 2^32.
        scheme: ``fast``, ``oph``, ``datasketch_affine32`` or ``datasketch_legacy`` (see module
            docstring).

    Returns:
        uint32 array (n_docs, num_perm). Row i equals
        ``datasketch.MinHash(num_perm, seed, scheme=...).update_batch(shingle_strings(...)[i])``'s
        ``hashvalues`` for the two datasketch schemes.

    Raises:
        ValueError: unknown scheme or seed out of range.

    Source: Broder 1997 "On the resemblance and containment of documents"; datasketch 2.0.0
    ``MinHash.update_batch`` (CPU path) for the permutation arithmetic.
    """
    a, b = permutations(num_perm, seed, scheme)
    if len(texts) == 0:
        return np.zeros((0, num_perm), dtype=np.uint32)
    if scheme in ("oph", "fast"):
        return _sketches(texts, spec, num_perm, seed, scheme, a, b)
    shingles = shingle_strings(texts, spec)
    counts = np.fromiter((len(s) for s in shingles), np.int64, len(shingles))
    offsets = np.zeros(len(shingles) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    hv = _sha1_32([s for doc in shingles for s in doc])
    if scheme == "datasketch_legacy":
        return _min_per_doc(hv, offsets, a, b, legacy=True)
    return _min_per_doc(fmix32(hv.astype(np.uint32)), offsets, a, b, legacy=False)


def _sketches(texts: pa.Array, spec: ShingleSpec, num_perm: int, seed: int, scheme: str, a: np.ndarray,
              b: np.ndarray) -> np.ndarray:
    """:func:`signatures` of the ``oph`` and ``fast`` schemes: the ASCII documents hashed and sketched in
    one compiled pass once the kernels are loaded (a document's row never depends on its batch), the
    rest from :func:`shingle_hashes`' numpy form."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts

    def sketch(h: np.ndarray, off: np.ndarray) -> np.ndarray:
        return one_permutation(h, off, num_perm, seed) if scheme == "oph" else affine_sketch(h, off, a, b)

    view = _ascii_bytes(texts, spec)
    if view is None:
        return sketch(*_shingle_hashes_np(texts, spec))
    jit, args = view
    if scheme == "oph":
        sig, done = jit.ascii_oph_sketches(*args, num_perm, _oph_multiplier(seed), _rightward(num_perm, seed))
    else:
        sig, done = jit.ascii_affine_sketches(*args, a, b)
    rest = np.flatnonzero(~done)
    if rest.size:  # non-ASCII, null or no word once folded
        sig[rest] = sketch(*_shingle_hashes_np(texts.take(pa.array(rest)), spec))
    return sig


def affine_sketch(h64: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The ``fast`` scheme's sketch of shingle hashes: per document and permutation p, the minimum over
    its shingles of ``a[p] * fmix32(hi ^ lo) + b[p] mod 2^32`` (hi, lo: the hash's 32-bit halves).

    Args:
        h64: uint64 shingle hashes (:func:`shingle_hashes`).
        offsets: int64 (n_docs + 1,); document i owns ``h64[offsets[i]:offsets[i+1]]``, >= 1 shingle.
        a, b: uint32 (num_perm,), :func:`permutations` of the ``fast`` scheme.

    Returns:
        uint32 (n_docs, num_perm). Compiled (:func:`udfs.minhash_jit.affine_min`) once loaded
        (:func:`load_compiled`), else :func:`_min_per_doc` over blocks: the same values.

    Source: datasketch 2.0.0 ``MinHash.update_batch`` with ``scheme="affine32"`` (the permutation).
    """
    if (jit := KERNELS.module) is not None:
        return jit.affine_min(h64, offsets, a, b)
    return _min_per_doc(fmix32(((h64 >> np.uint64(32)) ^ h64).astype(np.uint32)), offsets, a, b, legacy=False)


_EMPTY_BIN = np.uint64(1 << 32)
"""Above every 32-bit bin value: marks a bin no shingle fell in (:func:`one_permutation`)."""


def _oph_multiplier(seed: int) -> np.uint64:
    """The seed's odd 64-bit multiplier: ``fmix64(seed + golden ratio) | 1``."""
    return fmix64(np.array([seed], dtype=np.uint64) + _WORD_SEED)[0] | np.uint64(1)


def one_permutation(h64: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """One-permutation MinHash of every document: each shingle hashed once, whatever ``num_perm``.

    Each 64-bit shingle hash (already ``fmix64`` output, so uniformly spread) is multiplied by the
    seed's odd multiplier (a bijection of uint64): the high 32 bits of ``x = h * m`` pick one of
    ``num_perm`` bins (multiply-shift, ``(x >> 32) * num_perm >> 32``), the low 32 bits are the value,
    and a bin keeps the minimum value of the document's shingles that fall in it. Bins no shingle fell
    in are densified (:func:`_densified`), so the fraction of equal bins of two signatures is an
    unbiased estimate of the Jaccard similarity of the two shingle sets, as with ``num_perm``
    independent permutations; for documents with fewer shingles than bins its variance is larger.

    Args:
        h64: uint64 shingle hashes of all documents (:func:`shingle_hashes`), duplicates allowed.
        offsets: int64 (n_docs + 1,); document i owns ``h64[offsets[i]:offsets[i+1]]``, >= 1 shingle.
        num_perm: bins per signature (1 <= num_perm <= 2^16).
        seed: 0 <= seed < 2^32.

    Returns:
        uint32 array (n_docs, num_perm).

    Raises:
        ValueError: a document without shingles (it has no bin to densify from).

    Source: Li, Owen and Zhang 2012, "One Permutation Hashing" (NeurIPS); Shrivastava and Li 2014,
    "Improved Densification of One Permutation Hashing" (UAI), the random-direction densification.
    """
    counts = np.diff(offsets)
    if (counts < 1).any():
        raise ValueError(f"one_permutation: document {int(np.argmax(counts < 1))} has no shingles; every "
                         "document needs >= 1 (shingle_hashes gives each one)")
    if (jit := KERNELS.module) is not None:
        return jit.one_permutation(h64, offsets, num_perm, _oph_multiplier(seed), _rightward(num_perm, seed))
    return _one_permutation_np(h64, offsets, num_perm, seed)


def _rightward(k: int, seed: int) -> np.ndarray:
    """bool (k,): whether densification fills an empty bin at each position from the right."""
    return (fmix64(np.arange(k, dtype=np.uint64) + _oph_multiplier(seed)) >> np.uint64(63)).astype(bool)


def _one_permutation_np(h64: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """:func:`one_permutation` in numpy (the reference of the compiled loop)."""
    n_docs = len(offsets) - 1
    counts = np.diff(offsets)
    x = h64 * _oph_multiplier(seed)
    if num_perm > 1 and num_perm & (num_perm - 1) == 0:  # the same bins as the general formula, in one pass
        slot = x >> np.uint64(64 - num_perm.bit_length() + 1)
    else:
        slot = (x >> np.uint64(32)) * np.uint64(num_perm) >> np.uint64(32)
    slot += np.repeat(np.arange(0, n_docs * num_perm, num_perm, dtype=np.uint64), counts)
    out = np.full(n_docs * num_perm, _EMPTY_BIN, dtype=np.uint64)
    np.minimum.at(out, slot.view(np.int64), x & MAX_HASH32)
    empty = np.flatnonzero(out == _EMPTY_BIN)
    if empty.size:
        _densified(out, empty, num_perm, seed)
    return out.astype(np.uint32).reshape(n_docs, num_perm)


def _densified(flat: np.ndarray, empty: np.ndarray, k: int, seed: int) -> None:
    """Fill the empty bins of ``flat`` (rows of ``k`` bins, flattened) in place from their rows.

    Each empty bin takes the value of its row's nearest non-empty bin to the right or to the left,
    circularly; the direction is drawn per bin position from the seed, the same for every row. Cost
    O(empty bins x log(filled bins)), no loop over rows or bins. Every row has >= 1 filled bin.
    """
    full = np.flatnonzero(flat != _EMPTY_BIN)
    row = empty - empty % k
    first = full[np.searchsorted(full, row)]
    last = full[np.searchsorted(full, row + k) - 1]
    i = np.searchsorted(full, empty)
    right = np.where(i < len(full), full[np.minimum(i, len(full) - 1)], first)
    right = np.where(right < row + k, right, first)
    left = full[np.maximum(i - 1, 0)]
    left = np.where((i > 0) & (left >= row), left, last)
    rightward = _rightward(k, seed)
    flat[empty] = flat[np.where(rightward[empty % k], right, left)]


# --------------------------------------------------------------------------------------- similarity
def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Fraction of equal MinHash values per row pair: the unbiased Jaccard estimate (Broder 1997).

    Args:
        sig_a, sig_b: uint32 arrays (n_pairs, num_perm).

    Returns:
        float64 array (n_pairs,) in [0, 1].
    """
    return (sig_a == sig_b).mean(axis=1) if len(sig_a) else np.zeros(0)


def exact_jaccard(texts_a: pa.Array, texts_b: pa.Array, spec: ShingleSpec) -> np.ndarray:
    """Jaccard similarity of the shingle sets of each pair ``(texts_a[i], texts_b[i])``.

    Sets of 64-bit ``fast`` shingle hashes stand for the shingle sets (a false match needs a 2^-64
    collision). Fully vectorised: both sides' ``(pair, hash, side)`` rows in one sort by (pair, hash);
    each run of equal (pair, hash) is one distinct shingle of the pair, counted for a side when the run
    holds a row of it, shared when it holds rows of both.

    Returns:
        float64 array (n_pairs,) in [0, 1].
    """
    n = len(texts_a)
    if n == 0:
        return np.zeros(0)
    # One call for both sides: a shingle hash depends on its document only, not on the batch.
    h, offsets = shingle_hashes(pa.concat_arrays([_plain(texts_a), _plain(texts_b)]), spec)
    per_doc = np.diff(offsets)
    owner = np.concatenate([np.arange(n, dtype=np.int64)] * 2).repeat(per_doc)
    side_b = np.zeros(len(h), dtype=bool)
    side_b[offsets[n]:] = True
    order = pair_order(owner.view(np.uint64), h, major_bits=max(n - 1, 1).bit_length())
    h, owner, side_b = h[order], owner[order], side_b[order]
    start = np.ones(len(h), dtype=bool)
    start[1:] = (h[1:] != h[:-1]) | (owner[1:] != owner[:-1])
    run = np.cumsum(start) - 1
    in_a = np.zeros(int(run[-1]) + 1, dtype=bool)
    in_b = np.zeros_like(in_a)
    in_a[run[~side_b]] = True
    in_b[run[side_b]] = True
    run_pair = owner[start]
    size_a = np.bincount(run_pair[in_a], minlength=n)
    size_b = np.bincount(run_pair[in_b], minlength=n)
    inter = np.bincount(run_pair[in_a & in_b], minlength=n)
    return inter / (size_a + size_b - inter)


def _plain(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``texts`` as one ``large_string`` array (chunks combined), so two sides of any string type concatenate."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    return texts.cast(pa.large_string()) if texts.type != pa.large_string() else texts
