"""The compiled MinHash loops (udfs/minhash_jit.py) give the numpy forms' values bit for bit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udfs import minhash
from udfs.compiled import Kernels
from udfs.minhash import ShingleSpec

pytestmark = pytest.mark.skipif(not minhash.load_compiled(), reason="numba is not installed")

# ASCII with every class the fold treats apart: letters of both cases, digits, punctuation, RE2's \s,
# \v and the U+001C-U+001F separators (spaces after the fold), control bytes; a little non-ASCII.
_ASCII = st.text(alphabet=st.sampled_from(list("aAbBzZ09 5.,;!?-'\"\t\n\r\f\v\x1c\x1f\x00~_")), max_size=80)
_ANY = st.one_of(_ASCII, st.text(max_size=30), st.none())
SPECS = [ShingleSpec(), ShingleSpec(ngram_size=1), ShingleSpec(ngram_size=3, fold_digits=True), ShingleSpec(ngram_size=13)]


def _same_hashes(texts: pa.Array, spec: ShingleSpec) -> None:
    h, off = minhash.shingle_hashes(texts, spec)
    h_np, off_np = minhash._shingle_hashes_np(texts, spec)
    assert np.array_equal(off, off_np)
    assert np.array_equal(h, h_np)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ANY, min_size=1, max_size=12), st.sampled_from(SPECS))
def test_shingle_hashes_match_numpy(texts, spec):
    _same_hashes(pa.array(texts, pa.string()), spec)


def test_long_words_empty_views_and_array_layouts():
    texts = pa.array(["ab " + "x" * 300 + " cd ef gh ij kl", "Y" * 70 + "!z", "!!! ???", "", None, "  \t ",
                      "Ünïcode mixed with ascii words here", "plain ascii words one two three four five six"])
    for spec in SPECS:
        _same_hashes(texts, spec)
        _same_hashes(texts.cast(pa.large_string()), spec)
        _same_hashes(texts.slice(3), spec)
        _same_hashes(pa.chunked_array([texts.slice(0, 2), texts.slice(2)]), spec)


@settings(max_examples=60, deadline=None)
@given(st.lists(_ASCII, min_size=1, max_size=10), st.sampled_from([1, 3, 64, 128, 200]), st.integers(0, 2**32 - 1))
def test_sketches_match_numpy(texts, num_perm, seed):
    h, off = minhash.shingle_hashes(pa.array(texts, pa.string()), ShingleSpec())
    a, b = minhash.permutations(num_perm, seed, "fast")
    folded = minhash.fmix32(((h >> np.uint64(32)) ^ h).astype(np.uint32))
    assert np.array_equal(minhash.affine_sketch(h, off, a, b), minhash._min_per_doc(folded, off, a, b, legacy=False))
    assert np.array_equal(minhash.one_permutation(h, off, num_perm, seed),
                          minhash._one_permutation_np(h, off, num_perm, seed))


def test_small_runs_stay_on_numpy_until_the_byte_threshold(monkeypatch):
    monkeypatch.setattr(minhash, "KERNELS", Kernels("udfs.minhash_jit", after_bytes=200))
    texts = pa.array(["some plain ascii words here for the test"] * 3)
    minhash.shingle_hashes(texts, ShingleSpec())
    assert minhash.KERNELS.module is None
    minhash.shingle_hashes(texts, ShingleSpec())
    assert minhash.KERNELS.module is not None


def test_a_numba_that_cannot_compile_leaves_the_numpy_forms(monkeypatch, caplog):
    from udfs import minhash_jit

    def broken() -> None:
        raise RuntimeError("cannot cache function: no locator available")

    monkeypatch.setattr(minhash_jit, "warm", broken)
    monkeypatch.setattr(minhash, "KERNELS", Kernels("udfs.minhash_jit"))
    assert minhash.load_compiled() is False
    assert "could not be loaded" in caplog.text
    texts = pa.array(["plain ascii words one two three four five six"])
    assert np.array_equal(minhash.shingle_hashes(texts, ShingleSpec())[0],
                          minhash._shingle_hashes_np(texts, ShingleSpec())[0])


def test_generated_corpus_signatures_match_numpy(monkeypatch):
    from bench.corpus import generate_batch

    texts = generate_batch(300, seed=5).column("text")
    fast = minhash.signatures(texts, ShingleSpec(), 128, 42, "fast")
    oph = minhash.signatures(texts, ShingleSpec(), 128, 42, "oph")
    monkeypatch.setattr(minhash.KERNELS, "module", None)
    assert np.array_equal(fast, minhash.signatures(texts, ShingleSpec(), 128, 42, "fast"))
    assert np.array_equal(oph, minhash.signatures(texts, ShingleSpec(), 128, 42, "oph"))


@settings(max_examples=80, deadline=None)
@given(st.lists(_ANY, min_size=1, max_size=12), st.sampled_from(SPECS), st.sampled_from([1, 3, 64, 128]),
       st.integers(0, 2**32 - 1))
def test_fused_signatures_match_numpy(texts, spec, num_perm, seed):
    # signatures() hashes and sketches ASCII documents in one compiled pass; the rest go the numpy way
    arr = pa.array(texts, pa.string())
    h, off = minhash._shingle_hashes_np(arr, spec)
    a, b = minhash.permutations(num_perm, seed, "fast")
    folded = minhash.fmix32(((h >> np.uint64(32)) ^ h).astype(np.uint32))
    assert np.array_equal(minhash.signatures(arr, spec, num_perm, seed, "fast"),
                          minhash._min_per_doc(folded, off, a, b, legacy=False))
    assert np.array_equal(minhash.signatures(arr, spec, num_perm, seed, "oph"),
                          minhash._one_permutation_np(h, off, num_perm, seed))


def test_a_null_whose_slot_holds_bytes_is_hashed_as_null():
    # Arrow lets a null's slot keep bytes; the compiled pass must not read them as a document
    data = b"one two three four five six" + b"hidden words in a null slot" + b"seven eight nine ten eleven"
    offs = np.array([0, 27, 54, 81], dtype=np.int32)
    valid = pa.array([True, False, True]).buffers()[1]
    texts = pa.Array.from_buffers(pa.string(), 3, [valid, pa.py_buffer(offs), pa.py_buffer(data)], null_count=1)
    _same_hashes(texts, ShingleSpec())
    h, off = minhash._shingle_hashes_np(texts, ShingleSpec())
    assert np.array_equal(minhash.signatures(texts, ShingleSpec(), 64, 7, "oph"),
                          minhash._one_permutation_np(h, off, 64, 7))
