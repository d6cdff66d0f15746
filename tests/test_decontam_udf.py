"""udfs/decontam.py: normalisation, word and n-gram hashes, short items, cut spans (no Spark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from udfs import decontam as d

ITEM = "the quick brown fox jumps over the lazy dog while seven wizards quietly box"  # 14 words


def test_normalization_rules():
    assert d.normalized_words("Hello, WORLD!  x_1=2.5") == ["hello", "world", "x", "1", "2", "5"]
    # NFKC: fullwidth letters, ligatures, fractions; NFD accents compose; İ lowercases to i
    assert d.normalized_words("Ｆｕｌｌ ﬁne ½ cafe\u0301 İs") == ["full", "fine", "1", "2", "café", "is"]
    assert d.normalized_words("") == [] and d.normalized_words("  ...!?  \n") == []
    # numbers, CJK and Devanagari (marks stay inside words)
    assert d.normalized_words("in 2024: 東京 हिन्दी") == ["in", "2024", "東京", "हिन्दी"]


def test_word_offsets_point_into_the_input():
    text = "ﬁne, Ｆoo-bar"
    _, _, starts, ends = d.word_hashes([text])
    assert [text[s:e] for s, e in zip(starts, ends, strict=True)] == ["ﬁne", "Ｆoo", "bar"]


def test_same_words_same_hash_whatever_the_formatting():
    a = d.item_hashes([ITEM], 13)[0][0]
    b = d.item_hashes(["THE quick,\n    brown fox -- jumps over the LAZY dog; while seven wizards quietly box!"], 13)[0][0]
    assert a.size == 2 and np.array_equal(a, b)
    c = d.item_hashes([ITEM.replace("lazy", "sleepy")], 13)[0][0]
    assert not set(a) & set(c)


def test_windows_do_not_cross_documents():
    h, off, _, _ = d.word_hashes(["a b c", "d e", "", "f g h"])
    grams, first = d.ngram_windows(h, off, 2)
    assert first.tolist() == [0, 1, 3, 5, 6]
    one = d.ngram_windows(*d.word_hashes(["d e"])[:2], 2)[0]
    assert grams[2] == one[0]


def test_short_items_hash_their_whole_text():
    keys, words = d.item_hashes(["Paris is the capital"], 13)[0]
    assert words == 4 and keys.size == 1 and int(keys[0]) == d.text_hash("paris, IS the capital!")[0]
    assert d.item_hashes(["", "?!"], 13) [0][1] == 0


def test_doc_hashes_filtered_and_unfiltered():
    items = d.item_hashes([ITEM, "capital of france is paris"], 13)
    ngram_keys, short_keys = np.sort(items[0][0]), np.sort(items[1][0])
    docs = pa.array([f"Intro. {ITEM}. Outro.", "the capital of France is Paris, they say", "nothing here", None])
    got = d.doc_hashes(docs, 13, ngram_keys, [5], short_keys).to_pylist()
    assert sorted(np.array(got[0], np.int64).view(np.uint64).tolist()) == sorted(ngram_keys.tolist())
    assert np.array(got[1], np.int64).view(np.uint64).tolist() == short_keys.tolist()
    assert got[2] == [] and got[3] == []
    every = d.doc_hashes(docs, 13, None, [5], short_keys).to_pylist()
    assert len(every[0]) == 4  # 16 words -> 4 distinct 13-grams, every one kept
    assert every[1] == got[1]  # short k-grams are always filtered


def test_cut_spans_map_back_with_margin_and_merge():
    text = "x" * 300 + " " + ITEM + " " + "y" * 300
    keys = d.item_hashes([ITEM], 13)[0][0]
    start = text.index("the quick")
    end = start + len(ITEM)
    assert d.cut_spans(text, keys, 13, margin_chars=0) == [(start, end)]
    assert d.cut_spans(text, keys, 13, margin_chars=10) == [(start - 10, end + 10)]
    assert d.cut_spans(text, keys, 13, margin_chars=10_000) == [(0, len(text))]
    assert d.cut_spans(text, np.zeros(0, np.uint64), 13) == []
    cut = d.apply_cuts(text, d.cut_spans(text, keys, 13, margin_chars=0))
    assert cut == "x" * 300 + "\n" + "y" * 300


def test_cut_spans_for_short_items_and_non_nfkc_text():
    text = "Ａnswer: The capital of ＦＲＡＮＣＥ is Paris. More text."
    key = d.item_hashes(["capital of france is paris"], 13)[0][0]
    [(s, e)] = d.cut_spans(text, key, 13, [5], margin_chars=0)
    assert text[s:e] == "capital of ＦＲＡＮＣＥ is Paris"


@pytest.mark.parametrize("n", [1, 8, 13])
def test_ngram_hash_matches_a_direct_reference(n):
    words = [f"w{i % 17}" for i in range(40)]
    wh, off, _, _ = d.word_hashes([" ".join(words)])
    grams, _ = d.ngram_windows(wh, off, n)
    mask = (1 << 64) - 1
    for j in (0, 5, 40 - n):
        acc = 0
        for k in range(n):
            acc = (acc * int(d._Q) + int(wh[j + k])) & mask
        ref = d.fmix64(np.array([(acc + n * int(d._K)) & mask], dtype=np.uint64))[0]
        assert grams[j] == ref


def _lexsorted(major: np.ndarray, minor: np.ndarray) -> list[tuple[int, int]]:
    order = np.lexsort((minor, major))
    return list(zip(major[order].tolist(), minor[order].tolist(), strict=True))


@pytest.mark.parametrize("major_bits", [1, 5, 17, 40, 64])
def test_pair_order_sorts_as_lexsort(major_bits):
    rng = np.random.default_rng(major_bits)
    for n in (0, 1, 2, 1000):
        major = rng.integers(0, 2**major_bits, n, dtype=np.uint64, endpoint=False)
        minor = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
        minor[: n // 3] = minor[n // 3: 2 * (n // 3)]  # equal pairs too
        order = d.pair_order(major, minor, major_bits=major_bits)
        got = list(zip(major[order].tolist(), minor[order].tolist(), strict=True))
        assert got == _lexsorted(major, minor)


def test_pair_order_falls_back_when_the_packed_key_hides_the_order():
    # Same major, minors that differ only in their low bits (dropped from the key) and come reversed.
    major = np.zeros(4, np.uint64)
    minor = np.array([7, 6, 5, 4], np.uint64)
    order = d.pair_order(major, minor, major_bits=8)
    assert minor[order].tolist() == [4, 5, 6, 7]
    # The small one is the minor: the major loses its low bits.
    major = np.array([3, 2, 1, 0], np.uint64)
    order = d.pair_order(major, np.zeros(4, np.uint64), minor_bits=8)
    assert major[order].tolist() == [0, 1, 2, 3]


def test_distinct_lists_are_sorted_unsigned_and_distinct_per_row():
    rng = np.random.default_rng(3)
    values = rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64)
    values[:100] = values[100:200]
    rows = rng.integers(0, 30, 500)
    got = d.distinct_lists(values, rows, 32).to_pylist()
    for r in range(32):
        expect = sorted({int(v) for v, w in zip(values, rows, strict=True) if w == r}, key=lambda v: v % 2**64)
        assert got[r] == expect
