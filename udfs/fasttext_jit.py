"""fastText's supervised prediction (``predict`` of a list of lines) compiled with numba, bit for bit.

The language-ID model (``lid.176.ftz``) spends most of its time outside the arithmetic: for each word
outside its 7,235-word vocabulary, fastText 0.9.3 builds a ``std::string`` per character n-gram, hashes
it and looks it up in an ``unordered_map`` (the pruned bucket index), every time the word occurs. Here
the model keeps a table of the words it has met with their input rows (up to :data:`MAX_WORDS`), so a
word's n-grams are hashed once, incrementally on the UTF-8 bytes, through one bit per bucket; the
quantized input rows are decoded once at load. Everything else follows fastText's own code step for
step, in the same float32 arithmetic and the same order, so labels and probabilities are identical to
fastText's (the tests compare the two, byte for byte).

What is reproduced (fastText 0.9.3, ``src/``):

* ``Dictionary::readWord`` / ``getLine``: words are runs of bytes other than space, ``\\n``, ``\\r``,
  ``\\t``, ``\\v``, ``\\f`` and NUL; the line's end is the word ``</s>``; reading stops after the
  first ``</s>`` (a literal ``</s>`` in the text ends the line too); a word starting with ``__label__``
  is a label, not an input.
* ``addSubwords`` / ``computeSubwords`` / ``pushHash``: a vocabulary word brings its id and its
  n-grams; another word brings the n-grams of ``<word>`` of ``minn``..``maxn`` UTF-8 characters
  (32-bit FNV-1a over sign-extended bytes, modulo ``bucket``, through the pruned index).
* ``Model::computeHidden``: the input rows summed in order (``ProductQuantizer::addcode`` for a
  quantized matrix), times ``float(1.0 / count)``.
* ``HierarchicalSoftmaxLoss::dfs`` with ``std_log`` and libstdc++'s ``push_heap`` / ``pop_heap`` /
  ``sort_heap`` (so ties come out in fastText's order), then ``exp`` of each score.

Models other than supervised ones with hierarchical softmax (``loss hs``; ``lid.176`` is one), word
n-grams of one word, and a quantized or dense input matrix with a dense output matrix are not handled:
:func:`load` returns None for them and callers keep fastText.

Source: fastText 0.9.3 (github.com/facebookresearch/fastText, ``src/dictionary.cc``, ``model.cc``,
``loss.cc``, ``productquantizer.cc``, ``quantmatrix.cc``, ``fasttext.cc``): the file layout, the FNV
constants, ``std_log``'s ``1e-5``, the Huffman tree of the label counts.
"""

from __future__ import annotations

import os
import struct
import threading

import numba
import numpy as np
import pyarrow as pa

_MAGIC, _VERSION = 793712314, 12
_LOSS_HS, _MODEL_SUP = 1, 3
_LABEL = b"__label__"
_LABEL_BYTES = np.frombuffer(_LABEL, np.uint8).copy()
_EOS = b"</s>"
_KSUB = 256
MAX_WORDS = 200_000
"""Words (vocabulary included) a model's word table holds across calls before it starts again from the
vocabulary: ~30 MB at most per process (slots, n-gram rows, bytes; one call can add its own words beyond)."""


@numba.njit(cache=True)
def _fnv_step(h, byte):
    # fastText hashes each byte as int8_t widened to uint32 (sign-extended)
    v = np.uint64(byte) | np.uint64(0xFFFFFF00) if byte >= 128 else np.uint64(byte)
    return ((h ^ v) * np.uint64(16777619)) & np.uint64(0xFFFFFFFF)


@numba.njit(cache=True)
def _bucket(h, bucket, inv_bucket):
    """``h % bucket`` for ``h`` < 2^32 without a division: the quotient from a float product is off by
    at most one, and the remainder is corrected into [0, bucket)."""
    q = np.int64(np.float64(h) * inv_bucket)
    r = np.int64(h) - q * bucket
    if r < 0:
        r += bucket
    elif r >= bucket:
        r -= bucket
    return r


@numba.njit(cache=True)
def _ngrams(word, n_bytes, minn, maxn, bucket, inv_bucket, nwords, pruned, bits, prune, out, n_out):
    """``computeSubwords`` of ``word[:n_bytes]`` (``<`` + word + ``>``) through ``pushHash``, appended to
    ``out`` from ``n_out``; returns the new count. With ``pruned``, only the buckets set in ``bits`` (one
    bit per bucket) are kept, renumbered by ``prune``."""
    for i in range(n_bytes):
        if (word[i] & 0xC0) == 0x80:
            continue
        h = np.uint64(2166136261)
        j = i
        n = 1
        while j < n_bytes and n <= maxn:
            h = _fnv_step(h, word[j])
            j += 1
            while j < n_bytes and (word[j] & 0xC0) == 0x80:
                h = _fnv_step(h, word[j])
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == n_bytes)):
                idx = _bucket(h, bucket, inv_bucket)
                if pruned:
                    if (bits[idx >> 6] >> np.uint64(idx & 63)) & np.uint64(1):
                        out[n_out] = nwords + prune[idx]
                        n_out += 1
                else:
                    out[n_out] = nwords + idx
                    n_out += 1
            n += 1
    return n_out


@numba.njit(cache=True)
def _hash64(data, s, e):
    """64-bit FNV-1a of ``data[s:e]``: the key of the word table (any hash would do; it only places
    words, and equal hashes are checked byte by byte)."""
    h = np.uint64(14695981039346656037)
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * np.uint64(1099511628211)
    return h


@numba.njit(cache=True)
def _home(h, log_cap):
    # the top bits of a multiplicative hash of ``h`` (FNV's low bits mix poorly: clustered probes)
    return np.int64((h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - log_cap))


@numba.njit(cache=True)
def _subword_table(voc_off, voc_data, n_voc, eos_id, ngram_args):
    """Every vocabulary entry's ``subwords`` (its id, then its n-grams, as ``initNgrams``): CSR."""
    minn, maxn, bucket, nwords, pruned, bits, prune = ngram_args
    starts = np.zeros(n_voc + 1, np.int64)
    cap = 16
    for w in range(n_voc):
        cap += 1 + maxn * (voc_off[w + 1] - voc_off[w] + 2)
    ids = np.empty(cap, np.int32)
    word = np.empty(4096, np.uint8)
    k = 0
    for w in range(n_voc):
        starts[w] = k
        ids[k] = w
        k += 1
        if w != eos_id:
            a, b = voc_off[w], voc_off[w + 1]
            if b - a + 2 > len(word):
                word = np.empty(2 * (b - a + 2), np.uint8)
            word[0] = 60  # "<"
            for t in range(b - a):
                word[1 + t] = voc_data[a + t]
            word[b - a + 1] = 62  # ">"
            k = _ngrams(word, b - a + 2, minn, maxn, bucket, 1.0 / bucket, nwords, pruned, bits, prune, ids,
                        k)
    starts[n_voc] = k
    return starts, ids[:k].copy()


@numba.njit(cache=True)
def _sift_up(hs, hi, hole, top, vs, vi):
    # libstdc++ __push_heap with comp(l, r) = l.score > r.score
    parent = (hole - 1) // 2
    while hole > top and hs[parent] > vs:
        hs[hole] = hs[parent]
        hi[hole] = hi[parent]
        hole = parent
        parent = (hole - 1) // 2
    hs[hole] = vs
    hi[hole] = vi


@numba.njit(cache=True)
def _adjust(hs, hi, hole, size, vs, vi):
    # libstdc++ __adjust_heap
    top = hole
    second = hole
    while second < (size - 1) // 2:
        second = 2 * (second + 1)
        if hs[second] > hs[second - 1]:
            second -= 1
        hs[hole] = hs[second]
        hi[hole] = hi[second]
        hole = second
    if (size & 1) == 0 and second == (size - 2) // 2:
        second = 2 * (second + 1)
        hs[hole] = hs[second - 1]
        hi[hole] = hi[second - 1]
        hole = second - 1
    _sift_up(hs, hi, hole, top, vs, vi)


@numba.njit(cache=True)
def _pop_to(hs, hi, last):
    # libstdc++ __pop_heap(first, last, result=last): the front moves to ``last``
    vs, vi = hs[last], hi[last]
    hs[last] = hs[0]
    hi[last] = hi[0]
    _adjust(hs, hi, 0, last, vs, vi)


@numba.njit(cache=True)
def _std_log(x):
    # fastText's std_log(real x): log(x + 1e-5) in double, returned as float
    return np.float32(np.log(np.float64(x) + 1e-5))


@numba.njit(cache=True)
def _is_space(b):
    # Dictionary::readWord's separators
    return b == 32 or b == 10 or b == 13 or b == 9 or b == 11 or b == 12 or b == 0


@numba.njit(cache=True)
def _grow(a, need):
    if need <= len(a):
        return a
    out = np.empty(max(need, 2 * len(a)), a.dtype)
    out[:len(a)] = a
    return out


@numba.njit(cache=True)
def _key(data, s, e):
    """The table key of the word ``data[s:e]``: up to 8 bytes, the bytes themselves (no NUL occurs in
    a word, so the key and the length are the word); longer words, their 64-bit FNV-1a hash (checked
    against the bytes on a match)."""
    if e - s <= 8:
        key = np.uint64(0)
        for i in range(s, e):
            key |= np.uint64(data[i]) << np.uint64(8 * (i - s))
        return np.int64(key)
    return np.int64(_hash64(data, s, e))


@numba.njit(cache=True)
def _place(slots, slot_ent, log_cap, key, size, fs, fe, label, ent):
    """Put an entry in the first free slot from its home; returns the slot."""
    mask = (1 << log_cap) - 1
    slot = _home(np.uint64(key) + np.uint64(size), log_cap)
    while slots[slot, 2] >= 0:
        slot = (slot + 1) & mask
    slots[slot, 0] = key
    slots[slot, 1] = size | (np.int64(label) << 32)
    slots[slot, 2] = fs
    slots[slot, 3] = fe
    slot_ent[slot] = ent
    return slot


@numba.njit(cache=True)
def _rehash(slots, slot_ent, log_cap):
    """The same entries in a table of ``2 ** log_cap`` slots."""
    new = np.full((1 << log_cap, 4), -1, np.int64)
    new_ent = np.full(1 << log_cap, -1, np.int32)
    for s in range(len(slots)):
        if slots[s, 2] >= 0:
            _place(new, new_ent, log_cap, slots[s, 0], slots[s, 1] & 0xFFFFFFFF, slots[s, 2], slots[s, 3],
                   (slots[s, 1] >> 32) != 0, slot_ent[s])
    return new, new_ent


@numba.njit(cache=True)
def _vocab_table(voc_off, voc_data, voc_label, sub_start):
    """The word table of the vocabulary: ``(slots, slot_ent, log_cap)`` (see :func:`_predict_batch`)."""
    n_voc = len(voc_off) - 1
    log_cap = 4
    while (1 << log_cap) < 4 * n_voc:
        log_cap += 1
    slots = np.full((1 << log_cap, 4), -1, np.int64)
    slot_ent = np.full(1 << log_cap, -1, np.int32)
    for w in range(n_voc):
        a, b = voc_off[w], voc_off[w + 1]
        _place(slots, slot_ent, log_cap, _key(voc_data, a, b), b - a, sub_start[w], sub_start[w + 1],
               voc_label[w], w)
    return slots, slot_ent, log_cap


@numba.njit(cache=True)
def _is_label(data, ws, we):
    if we - ws < 9:
        return False
    for t in range(9):
        if data[ws + t] != _LABEL_BYTES[t]:
            return False
    return True


@numba.njit(cache=True)
def _subwords(data, ws, we, word, feats, n_feats, minn, maxn, bucket, inv_bucket, nwords, pruned, bits,
              prune):
    """``computeSubwords`` of a word outside the vocabulary, appended to ``feats``: (word buffer,
    feats, new count), the buffers grown as needed."""
    size = we - ws
    word = _grow(word, size + 2)
    word[0] = 60  # "<"
    for t in range(size):
        word[1 + t] = data[ws + t]
    word[size + 1] = 62  # ">"
    feats = _grow(feats, n_feats + maxn * (size + 2))
    n_feats = _ngrams(word, size + 2, minn, maxn, bucket, inv_bucket, nwords, pruned, bits, prune, feats,
                      n_feats)
    return word, feats, n_feats


@numba.njit(cache=True)
def _hs_top(hidden, k, log_thr, wo, left, right, osz, hs, hi, stack_node, stack_score):
    """``HierarchicalSoftmaxLoss::predict``: the ``k`` best leaves into ``hs`` (log-probability) / ``hi``
    (label), best first; returns how many. Depth first, the left child before the right."""
    dim = len(hidden)
    size = 0
    stack_node[0] = 2 * osz - 2
    stack_score[0] = np.float32(0.0)
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        score = stack_score[sp]
        if score < log_thr or (size == k and score < hs[0]):
            continue
        if left[node] == -1 and right[node] == -1:
            hs[size] = score
            hi[size] = node
            size += 1
            _sift_up(hs, hi, size - 1, 0, hs[size - 1], hi[size - 1])
            if size > k:
                _pop_to(hs, hi, size - 1)
                size -= 1
            continue
        row = node - osz
        d = np.float32(0.0)
        for j in range(dim):
            d += wo[row, j] * hidden[j]
        f = np.float32(1.0 / np.float64(np.float32(1.0) + np.exp(-d)))
        stack_node[sp] = right[node]
        stack_score[sp] = score + _std_log(f)
        stack_node[sp + 1] = left[node]
        stack_score[sp + 1] = score + _std_log(np.float32(1.0 - np.float64(f)))
        sp += 2
    last = size
    while last > 1:  # sort_heap
        last -= 1
        _pop_to(hs, hi, last)
    return size


@numba.njit(cache=True)
def _predict_batch(offsets, data, k, threshold, table, eos_rows, ngram_args, rows, wo, left, right):  # noqa: C901, PLR0915
    """Predictions of the texts ``data[offsets[i]:offsets[i + 1]]`` (see :meth:`CompiledModel.predict_flat`)
    and the word table after them.

    ``table`` (a copy of the vocabulary's, or what an earlier call returned) is one open-addressing table of
    the vocabulary and of the words met outside it: a slot holds the word's key and length (:func:`_key`)
    and the range of its input rows in ``feats`` (a vocabulary word's id and n-grams, another word's
    n-grams, none for a label), so a lookup reads one slot and a word's n-grams are hashed once. The
    lookup stays inline in this one loop: moved into a function of its own, the whole ran 1.7x slower."""
    slots, slot_ent, log_cap, count, ent_boff, ent_bytes, feats, n_feats = table
    minn, maxn, bucket, nwords, pruned, bits, prune = ngram_args
    osz = len(wo)
    n = len(offsets) - 1
    dim = wo.shape[1]
    word = np.empty(256, np.uint8)
    out_off = np.zeros(n + 1, np.int64)
    out_lab = np.empty(n * k, np.int32)
    out_prob = np.empty(n * k, np.float32)
    hidden = np.empty(dim, np.float32)
    hs = np.empty(k + 1, np.float32)
    hi = np.empty(k + 1, np.int32)
    stack_node = np.empty(2 * osz + 2, np.int32)
    stack_score = np.empty(2 * osz + 2, np.float32)
    log_thr = _std_log(threshold)
    inv_bucket = 1.0 / bucket
    m = 0
    for r in range(n):
        e = offsets[r + 1]
        pos = offsets[r]
        for j in range(dim):
            hidden[j] = np.float32(0.0)
        nf = 0
        while True:
            while pos < e and _is_space(data[pos]):
                pos += 1
            ws = pos
            while pos < e and not _is_space(data[pos]):
                pos += 1
            we = pos
            size = we - ws
            # the text's end reads as the line's end, </s>; a literal </s> ends the line too
            eos = size == 0 or (size == 4 and data[ws] == 60 and data[ws + 1] == 47 and data[ws + 2] == 115
                                and data[ws + 3] == 62)
            if eos:
                fs, fe = eos_rows
                label = False
            else:
                key = _key(data, ws, we)
                mask = (1 << log_cap) - 1
                slot = _home(np.uint64(key) + np.uint64(size), log_cap)
                found = False
                while slots[slot, 2] >= 0:
                    if slots[slot, 0] == key and (slots[slot, 1] & 0xFFFFFFFF) == size:
                        found = True
                        if size > 8:
                            a = ent_boff[slot_ent[slot]]
                            for t in range(size):
                                if ent_bytes[a + t] != data[ws + t]:
                                    found = False
                                    break
                        if found:
                            break
                    slot = (slot + 1) & mask
                if found:
                    fs, fe, label = slots[slot, 2], slots[slot, 3], (slots[slot, 1] >> 32) != 0
                else:  # a word outside the vocabulary, first met: its n-grams
                    ent = count
                    count += 1
                    ent_boff = _grow(ent_boff, count + 1)
                    ent_bytes = _grow(ent_bytes, ent_boff[ent] + size)
                    a = ent_boff[ent]
                    for t in range(size):
                        ent_bytes[a + t] = data[ws + t]
                    ent_boff[ent + 1] = a + size
                    label = _is_label(data, ws, we)
                    fs = n_feats
                    if not label:
                        word, feats, n_feats = _subwords(data, ws, we, word, feats, n_feats, minn, maxn,
                                                         bucket, inv_bucket, nwords, pruned, bits, prune)
                    fe = n_feats
                    slots[slot, 0] = key
                    slots[slot, 1] = size | (np.int64(label) << 32)
                    slots[slot, 2] = fs
                    slots[slot, 3] = fe
                    slot_ent[slot] = ent
                    if 2 * (count + 1) > (1 << log_cap):
                        log_cap += 1
                        slots, slot_ent = _rehash(slots, slot_ent, log_cap)
            if not label:
                # Model::computeHidden: the rows added in input order
                for t in range(fs, fe):
                    f = feats[t]
                    for j in range(dim):
                        hidden[j] += rows[f, j]
                nf += fe - fs
            if eos:
                break
        if nf > 0:  # FastText::predict returns no prediction for an empty input
            scale = np.float32(1.0 / nf)
            for j in range(dim):
                hidden[j] *= scale
            kept = _hs_top(hidden, k, log_thr, wo, left, right, osz, hs, hi, stack_node, stack_score)
            for t in range(kept):
                out_lab[m] = hi[t]
                out_prob[m] = np.exp(hs[t])
                m += 1
        out_off[r + 1] = m
    return out_off, out_lab[:m], out_prob[:m], (slots, slot_ent, log_cap, count, ent_boff, ent_bytes, feats,
                                                 n_feats)


class CompiledModel:
    """A loaded fastText model whose :meth:`predict` runs compiled (see the module docstring).

    Attributes:
        labels: the model's label strings (``__label__en``...), in label-id order.
    """

    def __init__(self, parts: dict) -> None:
        self._p = parts
        self._table = None  # the words met so far and their input rows (see _predict_batch)
        self._lock = threading.Lock()
        self.labels: list[str] = parts["labels"]

    def predict_flat(self, texts: list[str] | pa.Array, k: int = 1,
                     threshold: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predictions of ``n`` lines as flat arrays.

        Args:
            texts: ``n`` strings without ``\\n`` (a list or an Arrow string array; nulls read as ``""``).
            k: labels kept per line (>= 1), best first.
            threshold: probability below which a label is not returned.

        Returns:
            offsets int64[n + 1] (line ``i``'s predictions are ``offsets[i]:offsets[i + 1]``), label ids
            int32 (indices into :attr:`labels`) and probabilities float32, as fastText returns them.

        Raises:
            ValueError: ``k`` < 1, or a text holds ``\\n`` (fastText's list path refuses it too).
        """
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        arr = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
        if arr.null_count:
            arr = arr.fill_null("")
        wide = pa.types.is_large_string(arr.type)
        bufs = arr.buffers()
        off = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[arr.offset: arr.offset + len(arr) + 1]
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        if np.any(data[off[0]: off[-1]] == 10):
            raise ValueError("predict processes one line at a time (remove '\\n')")
        p = self._p
        with self._lock:
            if self._table is None or self._table[3] > MAX_WORDS:
                slots, slot_ent, log_cap, voc_off, voc_data, sub_ids = p["vocab"]
                self._table = (slots.copy(), slot_ent.copy(), log_cap, len(voc_off) - 1, voc_off.copy(),
                               voc_data.copy(), sub_ids.copy(), len(sub_ids))
            off, lab, prob, self._table = _predict_batch(
                off.astype(np.int64), data, int(k), np.float32(threshold), self._table, p["eos_rows"],
                p["ngram_args"], p["rows"], p["wo"], p["left"], p["right"])
        return off, lab, prob

    def predict(self, texts: list[str], k: int = 1,
                threshold: float = 0.0) -> tuple[list[list[str]], list[np.ndarray]]:
        """fastText's ``model.predict(list_of_str, k, threshold)``: per line, its labels (best first) and
        their probabilities (float32 array). Raises as :meth:`predict_flat`."""
        off, lab, prob = self.predict_flat(texts, k, threshold)
        names = [self.labels[i] for i in lab.tolist()]
        bounds = list(zip(off[:-1].tolist(), off[1:].tolist(), strict=True))
        return [names[a:b] for a, b in bounds], [prob[a:b] for a, b in bounds]

    def top_labels(self, texts: list[str] | pa.Array) -> list[str]:
        """The best label of each line (``predict(texts, 1)``'s labels, flat).

        Raises:
            ValueError: a line got no label (an input without any word, which ``lid.176`` never gives),
                or as :meth:`predict_flat`.
        """
        off, lab, _ = self.predict_flat(texts, 1)
        if len(lab) != len(off) - 1:
            raise ValueError("fastText returned no label for a text")
        names = self.labels
        return [names[i] for i in lab.tolist()]


class _Reader:
    def __init__(self, raw: bytes) -> None:
        self.raw, self.pos = raw, 0

    def take(self, fmt: str):
        vals = struct.unpack_from("<" + fmt, self.raw, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def array(self, dtype, count: int) -> np.ndarray:
        out = np.frombuffer(self.raw, dtype, count, self.pos).copy()
        self.pos += out.nbytes
        return out


def _quant_rows(r: _Reader, dim: int) -> np.ndarray:
    """A ``QuantMatrix`` read from the file, decoded: float32[m, dim], row ``t`` holding what
    ``ProductQuantizer::addcode`` adds for it (``alpha * centroid``, each product rounded to float32 as
    fastText rounds it before adding)."""
    qnorm, m, _n, codesize = r.take("?qqi")
    codes = r.array(np.uint8, codesize)
    pq_dim, nsubq, dsub, lastdsub = r.take("4i")
    centroids = r.array(np.float32, pq_dim * _KSUB)
    alpha = np.ones(m, np.float32)
    if qnorm:
        norm_codes = r.array(np.uint8, m)
        ndim = r.take("4i")[0]
        alpha = r.array(np.float32, ndim * _KSUB)[norm_codes]
    codes = codes.reshape(m, nsubq)
    rows = np.zeros((m, dim), np.float32)
    for q in range(nsubq):
        d = lastdsub if q == nsubq - 1 else dsub
        cent = centroids[q * _KSUB * dsub: q * _KSUB * dsub + _KSUB * d].reshape(_KSUB, d)
        rows[:, q * dsub: q * dsub + d] = alpha[:, None] * cent[codes[:, q]]
    return rows


def _tree(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``HierarchicalSoftmaxLoss::buildTree``: left and right child of each node (-1 for a leaf)."""
    osz = len(counts)
    count = np.full(2 * osz - 1, 10**15, np.int64)
    count[:osz] = counts
    left = np.full(2 * osz - 1, -1, np.int32)
    right = np.full(2 * osz - 1, -1, np.int32)
    leaf, node = osz - 1, osz
    for i in range(osz, 2 * osz - 1):
        mini = [0, 0]
        for j in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini[j], leaf = leaf, leaf - 1
            else:
                mini[j], node = node, node + 1
        left[i], right[i] = mini
        count[i] = count[mini[0]] + count[mini[1]]
    return left, right


def _parse(path: str) -> dict | None:
    with open(path, "rb") as f:
        r = _Reader(f.read())
    if r.take("ii") != (_MAGIC, _VERSION):
        return None
    dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, maxn, _lr_rate = r.take("12i")
    r.take("d")
    if model != _MODEL_SUP or loss != _LOSS_HS or word_ngrams > 1:
        return None
    size, nwords, nlabels, _ntokens, prune_size = r.take("iiiqq")
    words, types, counts = [], [], []
    for _ in range(size):
        end = r.raw.index(b"\0", r.pos)
        words.append(r.raw[r.pos:end])
        r.pos = end + 1
        c, t = r.take("qb")
        counts.append(c)
        types.append(t)
    # the pruned bucket index as a bit per bucket (fits in a core's cache) and the new numbers
    pruned = prune_size >= 0
    prune = np.full(bucket if pruned else 0, -1, np.int32)
    bits = np.zeros((bucket + 63) // 64 if pruned else 0, np.uint64)
    if prune_size > 0:
        pairs = r.array(np.int32, 2 * prune_size).reshape(-1, 2)
        prune[pairs[:, 0]] = pairs[:, 1]
        np.bitwise_or.at(bits, pairs[:, 0] >> 6,
                         np.left_shift(np.uint64(1), (pairs[:, 0] & 63).astype(np.uint64)))
    if r.take("?"):
        rows = _quant_rows(r, dim)
    else:
        m, n = r.take("qq")
        rows = r.array(np.float32, m * n).reshape(m, n)
    if r.take("?"):  # a quantized output matrix: not handled
        return None
    m, n = r.take("qq")
    wo = r.array(np.float32, m * n).reshape(m, n)
    voc_off = np.zeros(size + 1, np.int64)
    voc_off[1:] = np.cumsum([len(w) for w in words])
    voc_data = np.frombuffer(b"".join(words), np.uint8).copy()
    eos_id = words.index(_EOS) if _EOS in words else -1
    ngram_args = (minn, maxn, bucket, nwords, pruned, bits, prune)
    sub_start, sub_ids = _subword_table(voc_off, voc_data, size, eos_id, ngram_args)
    voc_label = np.array(types, np.int8) != 0
    voc_slots, voc_slot_ent, voc_log_cap = _vocab_table(voc_off, voc_data, voc_label, sub_start)
    label_counts = np.array([c for c, t in zip(counts, types, strict=True) if t == 1], np.int64)
    left, right = _tree(label_counts)
    return {"labels": [w.decode("utf-8", "replace") for w in words[nwords:]],
            "vocab": (voc_slots, voc_slot_ent, voc_log_cap, voc_off, voc_data, sub_ids),
            # the input rows of </s> (its id alone), none where the vocabulary lacks it
            "eos_rows": (int(sub_start[eos_id]), int(sub_start[eos_id + 1])) if eos_id >= 0 else (0, 0),
            "ngram_args": ngram_args, "rows": rows, "wo": wo, "left": left, "right": right}


_MODELS: dict[str, CompiledModel | None] = {}
_LOCK = threading.Lock()


def load(path: str) -> CompiledModel | None:
    """The compiled form of the fastText model at ``path`` (cached per process by absolute path), or None
    when the model is not one this module reproduces (see the module docstring).

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    key = os.path.abspath(path)
    if key not in _MODELS:
        with _LOCK:
            if key not in _MODELS:
                if not os.path.isfile(key):
                    raise FileNotFoundError(f"fastText model not found: {path!r}")
                parts = _parse(key)
                _MODELS[key] = CompiledModel(parts) if parts is not None else None
    return _MODELS[key]


def warm() -> None:
    """Compile (or load from numba's cache) the prediction kernels on ``lid.176.ftz`` and one line
    (:mod:`udfs.compiled` calls it when it loads this module).

    Raises:
        Exception: whatever numba raises.
    """
    from udfs import langid

    model = load(langid.default_model_path())
    if model is not None:
        model.predict_flat(["warm up the kernels"], 2)
        model.top_labels(["warm up"])
