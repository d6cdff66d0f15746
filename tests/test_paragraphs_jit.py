"""udfs/paragraphs_jit.py: the compiled paragraph kernel gives the Python/numpy reference's rows, bit for bit."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from udfs import paragraphs as P
from udfs import paragraphs_jit as J


@pytest.fixture(autouse=True, scope="module")
def _kernels_loaded():
    # compiled=True runs the kernels only once they are loaded (udfs.compiled): load them for every test
    assert P.KERNELS.load() is not None


def test_kernels_load_after_the_byte_threshold_only(monkeypatch):
    from udfs.compiled import Kernels

    monkeypatch.setattr(P, "KERNELS", Kernels("udfs.paragraphs_jit", after_bytes=10))
    P.paragraph_batch(["a"], ["one two"], "line", 1, 2)
    assert P.KERNELS.module is None
    P.paragraph_batch(["a"], ["one two three"], "line", 1, 2)
    assert P.KERNELS.module is J


def test_a_whole_batch_counts_towards_the_threshold_before_its_slices(monkeypatch):
    from udfs.compiled import Kernels

    monkeypatch.setattr(P, "KERNELS", Kernels("udfs.paragraphs_jit", after_bytes=100))
    texts = pa.array(["word " * 10] * 3)  # 150 bytes: each slice of one text alone stays under the threshold
    P.count_input(texts)
    assert P.KERNELS.module is J
    blocks = P.gram_blocks(np.arange(3, dtype=np.int64), pa.array([[1, 2], [3], [4]], pa.list_(pa.int64())),
                           compiled=False)
    monkeypatch.setattr(P, "KERNELS", Kernels("udfs.paragraphs_jit", after_bytes=blocks.nbytes))
    list(P.first_holder_batches(iter([blocks])))  # its n-grams alone are a few dozen bytes
    assert P.KERNELS.module is J

# Whitespace of every kind str.isspace knows, sentence ends, LaTeX, letters that NFKC or lowercasing
# change (ligature, fraction, fullwidth, dotted I, combining accent), scripts beyond Latin, an emoji
# beyond the BMP, a lone surrogate and punctuation.
ALPHABET = list("abcXYZ019 ") + [
    "\n", "\n", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000",
    ".", "!", "?", "\u2026", ",", "-", "_", "$", "$$", "\\", "\\[", "\\]", "{", "}", "^",
    "\\begin{equation}", "\\end{equation}", "\\frac", "é", "É", "e\u0301", "\u0301", "ﬁ", "½", "Ｑ", "İ",
    "Ω", "σς", "日本語", "ي", "😀", "\ud800", "Straße",
]
WORDS = ["alpha", "beta", "Gamma,", "delta.", "epsilon!", "zeta?", "eta", "théta", "iota", "kappa…"]


def _random_texts(rng: np.random.Generator, n: int, surrogates: bool = True) -> list[str | None]:
    alphabet = ALPHABET if surrogates else [c for c in ALPHABET if c != "\ud800"]
    texts: list[str | None] = []
    for _ in range(n):
        kind = rng.integers(0, 4)
        if kind == 0:  # characters at random: every separator and class next to every other
            text = "".join(rng.choice(alphabet, int(rng.integers(0, 80))))
        else:  # lines of words, some repeated, blank lines and trailing spaces between
            lines = [" ".join(rng.choice(WORDS, int(rng.integers(0, 18)))) + rng.choice(["", " ", "\t"])
                     for _ in range(int(rng.integers(0, 8)))]
            text = rng.choice(["\n", "\n\n", "\n \n", "\r\n"]).join(lines)
        texts.append(text)
    texts[::17] = [None] * len(texts[::17])
    texts[3::19] = [""] * len(texts[3::19])
    return texts


def _both(ids, texts, **kw) -> tuple[pa.Table, pa.Table]:
    ref = P.paragraph_batch(ids, texts, compiled=False, **kw)
    jit = P.paragraph_batch(ids, texts, compiled=True, **kw)
    return pa.Table.from_batches([ref]), pa.Table.from_batches([jit])


@pytest.mark.parametrize("unit", P.UNITS)
@pytest.mark.parametrize(("min_words", "ngram_size", "key", "grams", "exempt_math"), [
    (5, 13, "collapsed_whitespace", True, True),
    (1, 2, "text", True, False),
    (0, 1, "collapsed_whitespace", False, True),
    (3, 4, "text", True, True),
])
def test_compiled_rows_equal_the_reference_on_random_text(unit, min_words, ngram_size, key, grams, exempt_math):
    rng = np.random.default_rng(len(unit) * 100 + ngram_size)
    texts = _random_texts(rng, 300)
    ids = [f"d{i:03d}" for i in range(len(texts))]
    ranks = rng.permutation(len(texts)) * 3
    ref, jit = _both(ids, texts, unit=unit, min_words=min_words, ngram_size=ngram_size, key=key, grams=grams,
                     ranks=ranks, exempt_math=exempt_math)
    assert ref.num_rows > 100
    assert jit.equals(ref)


@pytest.mark.parametrize("unit", P.UNITS)
def test_arrow_input_gives_the_rows_of_python_strings(unit):
    rng = np.random.default_rng(7)
    texts = _random_texts(rng, 200, surrogates=False)
    ids = [f"d{i:03d}" for i in range(len(texts))]
    ref = P.paragraph_batch(ids, texts, unit, 2, 3, compiled=False)
    arrow_texts = pa.array(texts, pa.string())
    for a, b in ((0, 200), (13, 150)):  # sliced arrays start at an offset into the buffers
        jit = P.paragraph_batch(pa.array(ids)[a:b], arrow_texts[a:b], unit, 2, 3, ranks=np.arange(a, b))
        expect = pa.Table.from_batches([ref]).filter(
            pa.compute.is_in(pa.Table.from_batches([ref]).column("doc_id"), pa.array(ids[a:b])))
        assert pa.Table.from_batches([jit]).equals(expect)
    large = P.paragraph_batch(pa.array(ids, pa.large_string()), arrow_texts.cast(pa.large_string()), unit, 2, 3)
    assert pa.Table.from_batches([large]).equals(pa.Table.from_batches([ref]))


def _sample_texts() -> list[str]:
    root = Path(__file__).resolve().parents[1] / "sample_data"
    texts = []
    for name in ("web_en-00000.jsonl.gz", "web_multi-00001.jsonl.gz", "web_evals-00002.jsonl.gz"):
        with gzip.open(root / name) as f:
            for raw in f:  # the sample holds deliberately broken lines (bad bytes, bad JSON): skipped
                try:
                    record = json.loads(raw.decode("utf-8"))
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("text"), str):
                    texts.append(record["text"])
    with gzip.open(root / "crawl-00000.warc.wet.gz") as f:
        texts += f.read().decode("utf-8", "replace").split("WARC/1.0")
    return texts


@pytest.mark.parametrize("unit", P.UNITS)
def test_compiled_rows_equal_the_reference_on_real_text(unit):
    texts = _sample_texts()
    texts += ["x = \\frac{a}{b}\n$$E = mc^2$$\nA line of plain words here.", "\uFB01ne ﬁsh ½ Ｑuick İstanbul"]
    ids = [f"s{i:04d}" for i in range(len(texts))]
    ref, jit = _both(ids, texts, unit=unit, min_words=5, ngram_size=13)
    assert ref.num_rows > 300 and jit.equals(ref)
    # Arrow holds UTF-8 only: the texts with a lone surrogate (one in the sample) stay Python strings
    utf8 = [t.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for t in texts]
    assert sum(a != b for a, b in zip(utf8, texts, strict=True)) == 1
    arrow = P.paragraph_batch(pa.array(ids), pa.array(utf8), unit, 5, 13)
    assert pa.Table.from_batches([arrow]).equals(_both(ids, utf8, unit=unit, min_words=5, ngram_size=13)[0])


def test_empty_and_null_texts_have_no_units():
    for texts in ([], [None], [""], [" \n\t "], [None, "", "\n\n"]):
        ids = [f"d{i}" for i in range(len(texts))]
        ref, jit = _both(ids, texts, unit="line", min_words=0, ngram_size=3)
        assert jit.num_rows == 0 and jit.equals(ref)
        arrow = P.paragraph_batch(pa.array(ids, pa.string()), pa.array(texts, pa.string()), "line", 0, 3)
        assert arrow.num_rows == 0 and arrow.schema == P.PARAGRAPH_SCHEMA


def test_units_past_the_id_limit_are_left_alone(monkeypatch):
    monkeypatch.setattr(P, "IDX_BITS", 2)  # four units per document get ids
    text = "\n".join(f"line {i} has some words" for i in range(7))
    ref, jit = _both(["a", "b"], [text, "one two"], unit="line", min_words=1, ngram_size=2)
    assert jit.column("idx").to_pylist() == [0, 1, 2, 3, 0] and jit.equals(ref)
    assert jit.column("cut_end").to_pylist()[3] == text.index("line 4")


def test_invalid_utf8_falls_back_to_the_reference():
    data = pa.py_buffer(b"ok text here\xff\xfe")
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 14], np.int32)), data])
    assert J.code_points(bad) is None
    with pytest.raises(UnicodeDecodeError):  # what the reference does with it
        P.paragraph_batch(pa.array(["d"]), bad, "line", 1, 2)


def test_xxh64_equals_the_xxhash_package_at_every_tail_length():
    import xxhash

    data = np.random.default_rng(7).integers(0, 256, 200, dtype=np.uint8)
    for n in [*range(0, 80), 127, 128, 129, 200]:
        for seed in P.KEY_SEEDS:
            assert int(J.xxh64(data, n, np.uint64(seed))) == xxhash.xxh64_intdigest(data[:n].tobytes(), seed), n


def test_exact_key_of_long_and_non_ascii_units_equals_the_reference():
    texts = ["a" * 55, "b" * 56, "c" * 64, "é" * 40 + " \t " + "😀" * 30, "x \ud800 y" * 20]
    batch = P.paragraph_batch(list("abcde"), texts, "line", 1, 13, key="text")
    assert batch.column("key").to_pylist() == [P.exact_key(t, "text") for t in texts]


def test_exact_key_of_collapsed_whitespace_runs_mixing_ascii_and_other_spaces_equals_the_reference():
    texts = ["a \u00a0 b", "a\u3000\u3000b \t c", "x\u2003 y\t\u00a0\u00a0z", "é  \u00a0é", "p q" * 40]
    batch = P.paragraph_batch(list("abcde"), texts, "line", 1, 13, key="collapsed_whitespace")
    assert batch.column("key").to_pylist() == [P.exact_key(t, "collapsed_whitespace") for t in texts]


@pytest.mark.parametrize("width", [1, 3, 4, 7, 8])
def test_low_bytes_are_numpys_little_endian_bytes(width):
    values = np.random.default_rng(width).integers(0, 2**63, 1000, dtype=np.int64).view(np.uint64) << np.uint64(1)
    expected = values.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :width].reshape(-1)
    assert np.array_equal(J.low_bytes(values, width), expected)


@pytest.mark.parametrize(("n", "rank_spread"), [(0, 1), (1, 1), (1000, 300), (1000, 1 << 30), (500, 1 << 39)])
@pytest.mark.parametrize("width", [5, 6])
def test_compiled_packing_of_first_holders_gives_numpys_bytes(n, rank_spread, width):
    rng = np.random.default_rng(n + width)
    hg = np.sort(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))
    hu = (rng.integers(0, rank_spread, n, dtype=np.int64) << P.IDX_BITS) | rng.integers(0, 40, n, dtype=np.int64)
    got = P._packed_holders(hg, hu, width, compiled=True)
    want = P._packed_holders(hg, hu, width, compiled=False)
    assert [np.array_equal(a, b) for a, b in zip(got[:2], want[:2], strict=True)] == [True, True]
    assert got[2:] == want[2:]


def test_space_table_is_str_isspace():
    table = J.space_table()
    assert [cp for cp in np.flatnonzero(table)] == [cp for cp in range(0x110000) if chr(cp).isspace()]


def _random_lists(rng: np.random.Generator, n_units: int, spread: int) -> list[list[int]]:
    """Sorted distinct n-gram lists; a small ``spread`` makes units share n-grams (repeats in a batch)."""
    if spread:  # 2 * spread hashes spread over 64 bits, as real ones are (distinct under P.gram_mask)
        table = np.random.default_rng(spread).integers(-(2**63), 2**63 - 1, 2 * spread, dtype=np.int64)
        return [sorted(set(table[rng.integers(0, 2 * spread, int(rng.integers(0, 40)))].tolist()))
                for _ in range(n_units)]
    return [sorted(set(rng.integers(-(2**63), 2**63 - 1, int(rng.integers(0, 40)), dtype=np.int64).tolist()))
            for _ in range(n_units)]


@pytest.mark.parametrize("spread", [0, 30, 5000])
@pytest.mark.parametrize("n_buckets", [1, 4, 6, 1024])
def test_compiled_gram_blocks_equal_the_reference(spread, n_buckets):
    rng = np.random.default_rng(spread + n_buckets)
    lists = _random_lists(rng, 500, spread)
    uids = rng.permutation(np.arange(500, dtype=np.int64) * 7 - 1000)
    grams = pa.array(lists, pa.list_(pa.int64()))
    for a, b in ((0, 500), (100, 357), (0, 0)):  # sliced lists start at an offset
        ref = P.gram_blocks(uids[a:b], grams[a:b], n_buckets, compiled=False)
        assert P.gram_blocks(uids[a:b], grams[a:b], n_buckets).equals(ref)
    dup = np.array([5, 5, 3, 3, 9], np.int64)  # equal unit ids count as one holder, as np.unique does
    few = pa.array([[1, 2], [2, 3], [1], [3, 4], [2]], pa.list_(pa.int64()))
    assert P.gram_blocks(dup, few, n_buckets).equals(P.gram_blocks(dup, few, n_buckets, compiled=False))


@pytest.mark.parametrize("n_buckets", [1, 6, 1024])
def test_a_units_repeated_grams_count_once_in_both_forms(n_buckets):
    rng = np.random.default_rng(n_buckets)
    distinct = _random_lists(rng, 300, 40)
    # Each list shuffled and a few of its values repeated: what the kernel gives without ``distinct``.
    repeated = []
    for values in distinct:
        extra = [values[int(i)] for i in rng.integers(0, len(values), int(rng.integers(0, 4)))] if values else []
        repeated.append([int(v) for v in rng.permutation(np.array(values + extra, np.int64))])
    uids = rng.permutation(np.arange(300, dtype=np.int64) * 5)
    want = P.gram_blocks(uids, pa.array(distinct, pa.list_(pa.int64())), n_buckets, compiled=False)
    lists = pa.array(repeated, pa.list_(pa.int64()))
    for compiled in (False, True):
        batch, repeats = P._gram_blocks(uids, lists, n_buckets, compiled=compiled)
        assert batch.equals(want)
        assert repeats.tolist() == [len(r) - len(d) for r, d in zip(repeated, distinct, strict=True)]


def test_units_without_distinct_lists_give_the_same_units_and_blocks():
    rng = np.random.default_rng(11)
    texts = pa.array(_random_texts(rng, 300, surrogates=False) + ["one two three one two three one two three"])
    ids = pa.array([f"d{i:03d}" for i in range(len(texts))])
    ref = P.paragraph_batch(ids, texts, "line", 2, 3, compiled=False)
    raw = P.paragraph_batch(ids, texts, "line", 2, 3, distinct=False)
    assert raw.drop_columns(["grams"]).equals(ref.drop_columns(["grams"]))
    assert [sorted(set(g)) for g in raw.column("grams").to_pylist()] == \
        [sorted(g) for g in ref.column("grams").to_pylist()]
    assert any(len(set(g)) < len(g) for g in raw.column("grams").to_pylist())  # repeats kept
    assert P.units_and_blocks(raw, True, 4).equals(P.units_and_blocks(ref, True, 4, compiled=False))
    for compiled in (False, True):  # without doc_ids: the same rows, doc_id null
        anon = P.paragraph_batch(None, texts, "line", 2, 3, compiled=compiled)
        assert anon.column("doc_id").null_count == anon.num_rows == ref.num_rows
        assert anon.drop_columns(["doc_id"]).equals(ref.drop_columns(["doc_id"]))


def test_sort_of_a_long_bucket_keeps_equal_keys_in_row_order(monkeypatch):
    monkeypatch.setattr(J, "_DIRECT_SORT_MAX", 64)  # the Python function reads the patched bound
    keys = np.random.default_rng(3).integers(0, 20, 1000).astype(np.uint64) << np.uint64(40)
    rows = np.arange(1000, dtype=np.int64)
    J._sort_pairs.py_func(keys, rows, np.empty(1000, np.uint64), np.empty(1000, np.int64), np.empty(2002, np.int64))
    assert all((keys[1:] > keys[:-1]) | (rows[1:] > rows[:-1]))


def test_compiled_sort_of_a_bucket_too_long_for_the_counting_pass(monkeypatch):
    monkeypatch.setattr(J, "_DIRECT_SORT_MAX", 64)  # the Python function reads the patched bound
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**63, 1000, dtype=np.int64).view(np.uint64)
    rows = np.arange(1000, dtype=np.int64)
    k, r = keys.copy(), rows.copy()
    J._sort_pairs.py_func(k, r, np.empty(1000, np.uint64), np.empty(1000, np.int64), np.empty(2002, np.int64))
    assert (k == np.sort(keys)).all() and (keys[r] == k).all()


@pytest.mark.parametrize("shared_low_bits", [0, 3, 24])
def test_sort_by_key_orders_as_the_pair_sort(shared_low_bits):
    # Keys sharing their low 24 bits (a bucket's masked n-grams) sort as one packed array; sharing too
    # few bits to number them all, as pairs: both give the pair sort's order, equal keys included.
    rng = np.random.default_rng(shared_low_bits)
    high = rng.integers(0, 2**40, 300, dtype=np.int64)[rng.integers(0, 300, 1000)]
    keys = ((high.astype(np.uint64) << np.uint64(24)) | np.uint64(0x5A5A5A)) >> np.uint64(24 - shared_low_bits)
    if shared_low_bits == 0:
        keys = keys + np.arange(1000, dtype=np.uint64) % np.uint64(2)
    rows = rng.permutation(1000).astype(np.int64)
    k1, r1, k2, r2 = keys.copy(), rows.copy(), keys.copy(), rows.copy()
    J._sort_pairs(k1, r1, np.empty(1000, np.uint64), np.empty(1000, np.int64), np.empty(2002, np.int64))
    J._sort_by_key(k2, r2, np.empty(1000, np.uint64), np.empty(1000, np.uint64), np.empty(1000, np.int64),
                   np.empty(2002, np.int64))
    assert (k1 == k2).all() and (r1 == r2).all()


def test_compiled_first_holders_of_one_buckets_masked_grams_equal_the_reference():
    rng = np.random.default_rng(3)
    mask, bucket = np.int64(P.gram_mask(1024)), 517
    table = (rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64) & mask & ~np.int64(1023)) | bucket
    grams = [np.unique(table[rng.integers(0, 3000, 2000)]) for _ in range(5)]
    uids = [rng.integers(0, 10**6, g.size) + 10**6 * i for i, g in enumerate(grams)]
    counts = [rng.integers(1, 4, g.size) for g in grams]
    args = [np.concatenate(xs).astype(np.int64) for xs in (grams, uids, counts)]
    assert P.first_holders(*args).equals(P.first_holders(*args, compiled=False))


@pytest.mark.parametrize("n_buckets", [1, 3, 4, 1024])
def test_compiled_unpack_equals_the_reference(n_buckets):
    rng = np.random.default_rng(n_buckets)
    batches = []
    for spread in (0, 1, 300, 5000, 1 << 40):  # uids as they are (0), then packed in 1 to 4 bytes
        lists = _random_lists(rng, 60, spread % 5000)
        uids = rng.permutation(np.arange(60, dtype=np.int64) * (spread or 1) * 2**P.IDX_BITS // 60 + 3)
        batches.append(P.gram_blocks(uids, pa.array(lists, pa.list_(pa.int64())), n_buckets))
    rows = pa.Table.from_batches(batches, schema=P.BLOCK_SCHEMA)
    blocks = rows.filter(rows.column("bucket").is_valid())
    for part in (blocks, blocks.slice(3, 40), blocks.slice(0, 0)):
        ref = P.unpack_blocks(part, compiled=False)
        got = P.unpack_blocks(part)
        assert all((a == b).all() and a.dtype == b.dtype for a, b in zip(got, ref, strict=True))
    bad = blocks.set_column(3, "counts", pa.array([b"\x00" * 13] * blocks.num_rows, pa.binary()))
    with pytest.raises(ValueError, match="12-byte"):
        P.unpack_blocks(bad)
    past = blocks.set_column(3, "counts", pa.array([b"\xff" * 12] * blocks.num_rows, pa.binary()))
    with pytest.raises(ValueError, match="point past"):
        P.unpack_blocks(past)


@pytest.mark.parametrize("spread", [10, 40, 0])
def test_compiled_first_holders_equal_the_reference(spread):
    rng = np.random.default_rng(spread)
    for _ in range(40):
        n_batches = int(rng.integers(0, 6))
        grams = [np.unique(rng.integers(-spread or -(2**62), spread or 2**62, int(rng.integers(0, 25))))
                 for _ in range(n_batches)]
        uids = [rng.integers(0, 1000, g.size) + 1000 * i for i, g in enumerate(grams)]  # a unit in one batch
        counts = [rng.integers(1, 4, g.size) for g in grams]
        args = [np.concatenate([x.astype(np.int64) for x in xs]) if xs else np.zeros(0, np.int64)
                for xs in (grams, uids, counts)]
        assert P.first_holders(*args).equals(P.first_holders(*args, compiled=False))
