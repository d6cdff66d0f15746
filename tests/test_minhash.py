"""udfs/minhash.py without Spark: normalisation, shingles, datasketch bit-exactness, estimates, Jaccard."""

from __future__ import annotations

import gzip
import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datasketch import MinHash

from bench.corpus import generate_texts
from udfs import minhash
from udfs.minhash import ShingleSpec

SPEC = ShingleSpec()


def test_normalize_lowercases_strips_punctuation_and_splits_unspaced_scripts():
    got = minhash.normalize(pa.array(["Hello,  World!\n", "東京タワー", "Café 12", None]), SPEC).to_pylist()
    assert got == ["hello world", "東 京 タ ワ ー", "café 12", None]
    folded = minhash.normalize(pa.array(["Café 12"]), ShingleSpec(fold_digits=True, fold_diacritics=True))
    assert folded.to_pylist() == ["cafe 00"]


def test_short_and_empty_documents_get_one_shingle():
    texts = pa.array(["a b c d e f", "one two", "!!!", "", None])
    assert minhash.shingle_strings(texts, SPEC) == [[b"a b c d e", b"b c d e f"], [b"one two"], [b"!!!"], [b""], [b""]]
    _, offsets = minhash.shingle_hashes(texts, SPEC)
    assert offsets.tolist() == [0, 2, 3, 4, 5, 6]


def test_fast_shingle_hashes_equal_for_equal_shingles():
    h, off = minhash.shingle_hashes(pa.array(["x a b c d e y", "a b c d e"]), SPEC)
    assert h[off[0] + 1] == h[off[1]] and len(set(h[off[0] : off[1]].tolist())) == 3


@pytest.mark.parametrize("scheme,ds_scheme", [("datasketch_affine32", "affine32"), ("datasketch_legacy", "legacy")])
def test_bit_exact_with_datasketch_on_real_documents(shared_data, scheme, ds_scheme):
    path = next((shared_data / "web_crawl").glob("dolma_CC-*.jsonl.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(200), f, strict=False)]
    texts = pa.array(texts)
    sig = minhash.signatures(texts, SPEC, 128, 7, scheme)
    shingles = minhash.shingle_strings(texts, SPEC)
    for i in range(len(texts)):
        m = MinHash(num_perm=128, seed=7, scheme=ds_scheme)
        m.update_batch(shingles[i])
        assert np.array_equal(m.hashvalues, sig[i]), f"doc {i}"
    assert sig.shape == (200, 128)


def test_fast_estimates_match_datasketch_within_sampling_error():
    base = generate_texts(60, seed=3, mean_words=300)
    rng = np.random.default_rng(0)
    edited = []
    for t in base:
        w = t.split(" ")
        for p in rng.choice(len(w), size=int(rng.integers(1, 30)), replace=False):
            w[p] = "qq"
        edited.append(" ".join(w))
    a, b = pa.array(base), pa.array(edited)
    true = minhash.exact_jaccard(a, b, SPEC)
    fast = minhash.estimated_jaccard(minhash.signatures(a, SPEC, 256, 1), minhash.signatures(b, SPEC, 256, 1))
    ds = minhash.estimated_jaccard(
        minhash.signatures(a, SPEC, 256, 1, "datasketch_affine32"), minhash.signatures(b, SPEC, 256, 1, "datasketch_affine32")
    )
    sd = np.sqrt(true * (1 - true) / 256)  # binomial standard error of the estimate
    assert np.all(np.abs(fast - true) <= 4 * sd + 1e-9)
    assert abs(np.mean(fast - true)) < 0.01 and abs(np.mean(ds - true)) < 0.01


def test_exact_jaccard_over_shingle_sets():
    a = pa.array(["a b c d e f", "a b c d e f", "x", "a a a a a"])
    b = pa.array(["a b c d e g", "b c d e f a", "x", "a a a a a a a"])
    # {abcde,bcdef} vs {abcde,bcdeg}: 1/3; vs {bcdef,cdefa}: 1/3; identical singletons; repeats collapse
    assert minhash.exact_jaccard(a, b, SPEC).tolist() == [1 / 3, 1 / 3, 1.0, 1.0]


def test_signatures_never_empty_and_deterministic():
    texts = pa.array(["", "word", generate_texts(1, seed=5)[0]])
    s1 = minhash.signatures(texts, SPEC, 64, 42)
    s2 = minhash.signatures(texts.slice(1), SPEC, 64, 42)
    assert s1.dtype == np.uint32 and np.array_equal(s1[1:], s2)
    assert (s1 < np.iinfo(np.uint32).max).all()


def test_bad_scheme_and_seed():
    with pytest.raises(ValueError, match="scheme 'md5' unknown"):
        minhash.permutations(8, 1, "md5")
    with pytest.raises(ValueError, match="seed 4294967296 out of range"):
        minhash.permutations(8, 2**32, "fast")


def test_ascii_fast_path_equals_unicode_path():
    ascii_texts = ["Hello,  World!\t\x0bfoo_bar  ", "a-b c.d  12", "  "]
    fast = minhash.shingle_strings(pa.array(ascii_texts), SPEC)
    slow = minhash.shingle_strings(pa.array([*ascii_texts, "é"]), SPEC)[:3]  # one non-ASCII doc: Unicode path
    assert fast == slow == [[b"hello world foo bar"], [b"a b c d 12"], [b""]]


@pytest.mark.parametrize("scheme", ["fast", "datasketch_legacy"])
def test_block_size_changes_speed_never_values(scheme):
    texts = pa.array(generate_texts(60, seed=5) + ["", "one two", None])
    h64, offsets = minhash.shingle_hashes(texts, ShingleSpec())
    h = minhash.fmix32(((h64 >> np.uint64(32)) ^ h64).astype(np.uint32))
    a, b = minhash.permutations(64, 7, scheme)
    legacy = scheme == "datasketch_legacy"
    if legacy:
        h = h.astype(np.uint64)
    ref = minhash._min_per_doc(h, offsets, a, b, legacy=legacy)
    for chunk in (1, 37, 4096, 10**7):
        assert np.array_equal(minhash._min_per_doc(h, offsets, a, b, legacy=legacy, chunk=chunk), ref)


@pytest.mark.parametrize("fold_digits", [False, True])
@pytest.mark.parametrize("large", [False, True])
def test_ascii_words_equal_the_regex_and_unicode_split_on_every_ascii_character(fold_digits, large):
    # The ASCII path (byte table, ASCII split) against its definition: ascii_lower, the regex, the
    # UTF-8 split, over every ASCII character, sliced arrays and raw fallbacks holding U+001C-U+001F.
    rng = np.random.default_rng(3)
    alphabet = [chr(c) for c in range(128)] + ["Ab", "9", " "] * 10
    docs = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 40)))) for _ in range(300)]
    docs += ["\x1c\x1d!!\x1e\x1f", "?\x1c?", "ab\x1fcd", "x\x1cy z", ""]
    texts = pa.array(["skip"] + docs + ["skip"], pa.large_string() if large else pa.string()).slice(1, len(docs))
    spec = ShingleSpec(fold_digits=fold_digits)
    words, offsets = minhash._words(texts, spec)
    got = [words.to_pylist()[offsets[i] : offsets[i + 1]] for i in range(len(docs))]
    norm = pc.replace_substring_regex(pc.ascii_lower(texts), r"[^a-z0-9\s]+", " ")
    if fold_digits:
        norm = pc.replace_substring_regex(norm, r"[0-9]", "0")
    norm = pc.utf8_trim_whitespace(norm)
    norm = pc.if_else(pc.equal(norm, ""), pc.utf8_trim_whitespace(texts), norm)
    assert got == pc.utf8_split_whitespace(norm).to_pylist()


def test_normalize_and_signatures_take_large_strings_and_chunked_arrays():
    texts = pa.array(["Hello, World! foo bar baz qux", "A b", None])
    assert minhash.normalize(texts.cast(pa.large_string()), ShingleSpec()).to_pylist() == [
        "hello world foo bar baz qux", "a b", None]
    ref = minhash.signatures(texts, ShingleSpec(), 16, 1)
    assert np.array_equal(minhash.signatures(texts.cast(pa.large_string()), ShingleSpec(), 16, 1), ref)
    assert np.array_equal(minhash.signatures(pa.chunked_array([texts.slice(0, 1), texts.slice(1)]), ShingleSpec(), 16, 1), ref)


def _edited_pairs(n: int, mean_words: int, seed: int) -> tuple[pa.Array, pa.Array]:
    base = generate_texts(n, seed=seed, mean_words=mean_words)
    rng = np.random.default_rng(seed)
    edited = []
    for t in base:
        w = t.split(" ")
        for p in rng.choice(len(w), size=int(rng.integers(1, max(2, len(w) // 4))), replace=False):
            w[p] = "qq"
        edited.append(" ".join(w))
    return pa.array(base), pa.array(edited)


@pytest.mark.parametrize("mean_words", [300, 40])
def test_oph_estimates_are_unbiased_and_as_accurate_as_permutations_on_long_documents(mean_words):
    """Documents of ~300 words (a few short ones among them) estimate as well as 256 permutations;
    documents of ~40 words leave most bins to densification, with a larger but bounded error."""
    a, b = _edited_pairs(80, mean_words, seed=4)
    true = minhash.exact_jaccard(a, b, SPEC)
    errors = {"fast": [], "oph": []}
    for seed in range(4):
        for scheme, err in errors.items():
            est = minhash.estimated_jaccard(minhash.signatures(a, SPEC, 256, seed, scheme),
                                            minhash.signatures(b, SPEC, 256, seed, scheme))
            err.append(est - true)
    rmse = {k: float(np.sqrt(np.mean(np.square(v)))) for k, v in errors.items()}
    assert abs(np.mean(errors["oph"])) < 0.01
    assert rmse["oph"] < (1.15 * rmse["fast"] if mean_words >= 300 else 0.06)


@pytest.mark.parametrize("num_perm", [1, 3, 64, 100, 128])
def test_oph_bins_filled_deterministic_and_independent_of_batching(num_perm):
    texts = pa.array(["", "word", "a b c d e f g", *generate_texts(5, seed=6, mean_words=200)])
    sig = minhash.signatures(texts, SPEC, num_perm, 7, "oph")
    assert sig.shape == (8, num_perm) and sig.dtype == np.uint32
    assert np.array_equal(sig[2:], minhash.signatures(texts.slice(2), SPEC, num_perm, 7, "oph"))
    assert len(set(sig[1].tolist())) == 1  # one shingle: every bin densified from the one filled bin
    assert not np.array_equal(sig, minhash.signatures(texts, SPEC, num_perm, 8, "oph"))


def test_oph_power_of_two_bins_equal_the_general_formula():
    h64, offsets = minhash.shingle_hashes(pa.array(generate_texts(20, seed=8)), SPEC)
    x = h64 * minhash._oph_multiplier(3)
    general = (x >> np.uint64(32)) * np.uint64(128) >> np.uint64(32)
    assert np.array_equal(general, x >> np.uint64(57))
    sig = minhash.one_permutation(h64, offsets, 128, 3)
    doc = np.repeat(np.arange(20), np.diff(offsets))
    for d in range(20):  # every filled bin holds the minimum low half of its shingles
        mine = general[doc == d]
        for b in np.unique(mine)[:5]:
            assert sig[d, b] == (x[doc == d][mine == b] & minhash.MAX_HASH32).min()


def test_oph_rejects_a_document_without_shingles():
    h64 = np.arange(3, dtype=np.uint64)
    with pytest.raises(ValueError, match="document 1 has no shingles"):
        minhash.one_permutation(h64, np.array([0, 3, 3]), 16, 0)
    assert minhash.one_permutation(h64[:0], np.array([0]), 16, 0).shape == (0, 16)


def _ngram_reference(word_hash: np.ndarray, offsets: np.ndarray, n: int) -> list[int]:
    # The formula of _ngram_hashes, one window at a time in Python integers (mod 2^64).
    out = []
    for d in range(len(offsets) - 1):
        words = [int(h) for h in word_hash[offsets[d] : offsets[d + 1]]]
        windows = [words] if len(words) < n else [words[j : j + n] for j in range(len(words) - n + 1)]
        for w in windows:
            acc = sum(h * int(minhash._POS_MULT[k]) for k, h in enumerate(w)) % 2**64
            out.append(int(minhash.fmix64(np.array([acc], dtype=np.uint64))[0]))
    return out


@pytest.mark.parametrize("n", [1, 2, 5, 7])
def test_ngram_hashes_equal_the_per_window_formula(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        counts = rng.integers(1, 12, rng.integers(1, 15))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        word_hash = rng.integers(0, 2**63, offsets[-1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        hashes, sh_off = minhash._ngram_hashes(word_hash, offsets, n)
        assert hashes.tolist() == _ngram_reference(word_hash, offsets, n)
        assert np.diff(sh_off).tolist() == [max(1, c - n + 1) for c in counts]


def test_md5_digests_are_hashlib_md5_of_the_utf8_bytes_and_null_as_empty():
    texts = pa.array(["abc", None, "", "h\u00e9llo w\u00f6rld", "x" * 5000]).slice(1)
    expected = [hashlib.md5((t or "").encode("utf-8")).digest() for t in texts.to_pylist()]
    assert minhash.md5_digests(texts).to_pylist() == expected
    assert minhash.md5_digests(texts.cast(pa.large_string())).to_pylist() == expected
    assert minhash.md5_digests(pa.chunked_array([texts, texts])).to_pylist() == expected * 2
    assert minhash.md5_digests(pa.array([], pa.string())).to_pylist() == []
