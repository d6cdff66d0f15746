"""udfs/paragraphs.py: units and their code-point offsets, exact keys, n-gram hashes, removals (no Spark)."""

from __future__ import annotations

import pytest

from udfs import paragraphs as P


@pytest.mark.parametrize(("text", "unit", "expected"), [
    ("", "line", []),
    (None, "line", []),
    (" \n\t\n ", "line", []),
    ("a\nb\r\n\n c ", "line", ["a", "b", "c"]),
    ("a\nb\n\n \n c\n", "blank_line", ["a\nb", "c"]),
    ("Dr. Who? Yes. ok\nNext line", "sentence", ["Dr.", "Who?", "Yes.", "ok", "Next line"]),
])
def test_units_are_trimmed_non_empty_and_in_order(text, unit, expected):
    spans = P.split(text, unit)
    assert [text[a:b] for a, b in spans] == expected
    assert all(a < b for a, b in spans) and spans == sorted(spans)


def test_offsets_are_code_points_beyond_the_bmp():
    text = "😀 emoji line\n日本語の段落\né"
    spans = P.split(text)
    assert [text[a:b] for a, b in spans] == ["😀 emoji line", "日本語の段落", "é"]
    assert spans[1] == (13, 19)  # one code point per character, the emoji included


def test_unknown_unit_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unit 'para' unknown; allowed: \['line', 'blank_line', 'sentence'\]"):
        P.split("x", "para")


def test_exact_key_collapses_whitespace_only_when_asked():
    assert P.exact_key("a  b") == P.exact_key("a b")
    assert P.exact_key("a  b", "text") != P.exact_key("a b", "text")
    assert len(P.exact_key("")) == 16


def _batch(texts, **kw):
    args = {"unit": "line", "min_words": 3, "ngram_size": 4, **kw}
    return P.paragraph_batch([f"d{i}" for i in range(len(texts))], texts, **args).to_pylist()


def test_paragraph_rows_skip_short_units_but_keep_their_index():
    rows = _batch(["Menu\none two three four five\nHome", None, ""])
    assert [(r["doc_id"], r["idx"], r["start"], r["end"], r["cut_end"], r["n_words"]) for r in rows] == [
        ("d0", 1, 5, 28, 29, 5)]
    assert len(rows[0]["grams"]) == 2  # two distinct 4-grams of five words


def test_edits_in_case_and_punctuation_keep_the_grams():
    a, b = _batch(["The quick brown fox jumps.", "the QUICK, brown fox -- jumps"])
    assert a["grams"] == b["grams"] and a["key"] != b["key"]


def test_a_unit_shorter_than_the_ngram_is_one_gram_of_all_its_words():
    rows = _batch(["one two three", "one two three", "one two three four"])
    assert len(rows[0]["grams"]) == 1 and rows[0]["grams"] == rows[1]["grams"]
    assert rows[2]["grams"] != rows[0]["grams"]


def test_repeated_grams_count_once_per_unit():
    (row,) = _batch(["a b c d a b c d a b c d"])
    assert len(row["grams"]) == 4 and row["grams"] == sorted(row["grams"], key=lambda g: g % 2**64)


def test_exact_only_batches_have_empty_gram_lists():
    assert _batch(["one two three four"], grams=False)[0]["grams"] == []


def test_windows_and_their_spans():
    text = "Alpha beta, gamma delta epsilon."
    rows = P.window_batch(["x", "y"], [text, "too short"], 3).to_pylist()
    assert [(r["doc_id"], r["pos"]) for r in rows] == [("x", 0), ("x", 1), ("x", 2)]
    assert P.window_spans(text, [0, 1], 3) == [(0, 23)]
    assert P.window_spans(text, [0, 2], 2) == [(0, 10), (12, 23)]
    assert P.window_spans(text, [0, 2], 1) == [(0, 5), (12, 17)]
    assert P.window_spans(text, [], 3) == [] and P.window_spans(text, [5], 3) == []


def test_removals_rebuild_the_text_exactly():
    text = "Banner\nKeep me.\nBanner\n\nKeep too.\nBanner\n"
    spans = [(a, c) for a, _, c in [(0, 6, 7), (16, 22, 24)]]
    new, done = P.apply_removals(text, spans)
    assert new == "Keep me.\nKeep too.\nBanner\n"
    assert done == spans
    new, done = P.apply_removals(text, [*spans, (34, len(text))])
    assert new == "Keep me.\nKeep too." and done[-1] == (33, len(text))
    kept = [(b, a) for (_, b), (a, _) in zip([(0, 0), *done], [*done, (len(text), 0)], strict=True)]
    assert "".join(text[a:b] for a, b in kept) == new
    assert P.apply_removals("all gone", [(0, 8)]) == ("", [(0, 8)])


PAPER = ("We now define the energy of the system as follows in this section.\n"
         "\\begin{equation}\n"
         "E = \\frac{1}{2} m v^2 + V(x) \\label{eq:energy}\n"
         "\\end{equation}\n"
         "$$ \\int_0^1 f(x)\\,dx = F(1) - F(0) $$\n"
         "\\mathcal{L} = \\sum_{i=1}^{n} \\log p_\\theta(x_i \\mid x_{<i})\n"
         "The value $x$ of the state is small when the system is at rest here.")


def test_display_math_units_are_left_alone():
    rows = _batch([PAPER])
    kept = [PAPER[r["start"]:r["end"]] for r in rows]
    assert kept == ["We now define the energy of the system as follows in this section.",
                    "The value $x$ of the state is small when the system is at rest here."]
    assert len(_batch([PAPER], exempt_math=False)) == 5  # every unit of three words or more


def test_math_units_cover_equation_blocks_and_mostly_latex_lines():
    text = "Intro line.\n\\begin{align*}\nx + y = 1\n\\end{align*}\nA = B\nProse with $a$ in it."
    assert P.math_units(text, P.split(text)) == [False, True, True, True, False, False]
    assert P.latex_share("plain words only") == 0.0
    assert P.latex_share("\\alpha^{2} + \\beta_{i}") >= P.MATH_SHARE


def _blocks_by_reference(uids, lists):
    first: dict[int, int] = {}
    holders: dict[int, int] = {}
    for u, grams in zip(uids, lists, strict=True):
        for g in grams:
            first[g] = min(first.get(g, u), u)
            holders[g] = holders.get(g, 0) + 1
    seen = {u: sum(first[g] < u for g in grams) for u, grams in zip(uids, lists, strict=True)}
    return {u: k for u, k in seen.items() if k}, {g: first[g] for g in first if holders[g] > 1}


def _random_units(rng):
    """``n`` units with sorted distinct ids and random distinct n-gram lists (some empty)."""
    import numpy as np

    n = int(rng.integers(1, 40))
    uids = np.sort(rng.choice(1000, n, replace=False)).astype(np.int64)
    # 30 n-gram hashes spread over 64 bits, as real ones are (distinct under P.gram_mask)
    hashes = np.random.default_rng(0).integers(-(2**63), 2**63 - 1, 30, dtype=np.int64) & P.gram_mask(4)
    return n, uids, [sorted(set(hashes[rng.integers(0, 30, int(rng.integers(0, 8)))].tolist())) for _ in range(n)]


def test_gram_blocks_and_first_holders_match_a_direct_count_in_any_batching():
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(7)
    for _ in range(100):
        n, uids, lists = _random_units(rng)
        order = rng.permutation(n)
        cuts = [0, *sorted(set(rng.integers(0, n + 1, 3).tolist())), n]
        seen: dict[int, int] = {}
        shared: dict[int, int] = {}
        batches = []
        for a, b in zip(cuts, cuts[1:], strict=False):  # batches in any order, of any size (empty too)
            idx = order[a:b]
            batch = P.gram_blocks(uids[idx], pa.array([lists[i] for i in idx], pa.list_(pa.int64())), 4)
            batches.append(batch)
            for r in batch.to_pylist():
                if r["bucket"] is None:
                    seen[r["uid"]] = seen.get(r["uid"], 0) + r["seen"]
        rows = pa.Table.from_batches(batches, schema=P.BLOCK_SCHEMA)
        for bucket in set(rows.column("bucket").drop_null().to_pylist()):
            blocks = rows.filter(pa.compute.equal(rows.column("bucket"), bucket))
            for r in P.first_holders(*P.unpack_blocks(blocks)).to_pylist():
                if r["uid"] is not None:
                    seen[r["uid"]] = seen.get(r["uid"], 0) + r["seen"]
                else:
                    shared[r["gram"]] = r["first"]
        assert (seen, shared) == _blocks_by_reference(uids.tolist(), lists)


def test_the_near_rule_compares_n_grams_on_the_bits_of_gram_mask():
    import numpy as np
    import pyarrow as pa

    mask = P.gram_mask()
    assert bin(mask & (2**64 - 1)).count("1") == P.GRAM_BITS
    g = -0x1234_5678_9ABC_DEF1
    other = g ^ (1 << 20)  # differs only in a bit the mask leaves out (between the bucket and the key)
    assert other & mask == g & mask
    batches = [P.gram_blocks(np.array([u], np.int64), pa.array([[x]], pa.list_(pa.int64())))
               for u, x in ((7, other), (3, g))]
    blocks = pa.Table.from_batches(batches).filter(pa.compute.is_valid(pa.Table.from_batches(batches)["bucket"]))
    out = P.first_holders(*P.unpack_blocks(blocks)).to_pylist()
    assert out == [{"uid": 7, "seen": 1, "gram": None, "first": None},
                   {"uid": None, "seen": None, "gram": g & mask, "first": 3}]


def test_first_holder_batches_pass_seen_rows_through_and_reduce_each_bucket_once():
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(11)
    for _ in range(50):
        n, uids, lists = _random_units(rng)
        cuts = [0, *sorted(set(rng.integers(0, n + 1, 3).tolist())), n]
        rows = pa.Table.from_batches([P.gram_blocks(uids[a:b], pa.array(lists[a:b], pa.list_(pa.int64())), 4)
                                      for a, b in zip(cuts, cuts[1:], strict=False)], schema=P.BLOCK_SCHEMA)
        rows = rows.take(np.argsort(rows.column("bucket").fill_null(-1).to_numpy(), kind="stable"))
        step = int(rng.integers(1, 6))  # a partition's rows in batches of any size
        out = pa.Table.from_batches(list(P.first_holder_batches(rows.to_batches(max_chunksize=step))),
                                    schema=P.FIRST_SCHEMA).to_pylist()
        seen: dict[int, int] = {}
        for r in out:
            if r["uid"] is not None:
                seen[r["uid"]] = seen.get(r["uid"], 0) + r["seen"]
        shared = [(r["gram"], r["first"]) for r in out if r["gram"] is not None]
        assert len(shared) == len({g for g, _ in shared})  # every bucket reduced in one call
        assert (seen, dict(shared)) == _blocks_by_reference(uids.tolist(), lists)


def test_paragraph_batch_over_text_slices_gives_the_rows_of_one_call():
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "Epsilon,", "zeta.", "eta", "theta", "iota", "kappa"]
    texts = ["\n".join(" ".join(rng.choice(words, int(rng.integers(1, 20)))) for _ in range(int(rng.integers(0, 6))))
             for _ in range(60)]
    texts[5] = None
    ids = [f"d{i:02d}" for i in range(len(texts))]
    ranks = np.arange(len(texts), dtype=np.int64)
    whole = P.paragraph_batch(ids, texts, "line", 2, 3, ranks=ranks)
    for budget in (1, 50, 400, 10**9):
        parts = [P.paragraph_batch(ids[a:b], texts[a:b], "line", 2, 3, ranks=ranks[a:b])
                 for a, b in P.text_slices(texts, budget)]
        assert pa.Table.from_batches(parts, schema=P.PARAGRAPH_SCHEMA).equals(pa.Table.from_batches([whole]))
    assert P.text_slices([]) == []


def test_unit_ids_order_as_document_rank_then_position():
    import numpy as np

    ids = P.unit_ids(np.array([0, 0, 1, 2]), np.array([0, (1 << P.IDX_BITS) - 1, 0, 3]))
    assert ids.tolist() == sorted(ids.tolist()) and ids[2] == 1 << P.IDX_BITS


def test_short_unit_hashes_equal_one_window_of_all_their_words():
    import numpy as np

    from udfs.decontam import ngram_windows, whole_hashes, word_hashes

    texts = ["one", "two words", "a b c d e f g", "x y", "", "the quick brown fox jumps over the lazy dog"]
    hashes, offsets = word_hashes(texts)[:2]
    rows = np.array([0, 1, 2, 3, 5], np.int64)
    expect = [int(ngram_windows(hashes[offsets[r]:offsets[r + 1]], np.array([0, offsets[r + 1] - offsets[r]]),
                                int(offsets[r + 1] - offsets[r]))[0][0]) for r in rows]
    assert whole_hashes(hashes, offsets, rows).tolist() == expect
    assert whole_hashes(hashes, offsets, rows[:0]).size == 0


def test_packed_blocks_unpack_to_the_arrays_packed():
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(13)
    for n_buckets in (1, 3, 4, 1024):
        for spread in (1, 1 << 20, 1 << 45):  # documents near in rank, then too far apart for 32 bits
            hg = np.sort(rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64))
            bucket = (hg.view(np.uint64) % np.uint64(n_buckets)).astype(np.int64)
            by = np.argsort(bucket, kind="stable")
            hg, bucket = hg[by], bucket[by]
            ranks = rng.integers(0, spread, hg.size) - spread // 2
            hu = (ranks << P.IDX_BITS) | rng.integers(0, 40, hg.size)
            counts = np.where(rng.random(hg.size) < 0.1, rng.integers(2, 2**40, hg.size), 1)
            cuts = P._runs_of(bucket)
            batch = P._block_batch(bucket[cuts], cuts, hg, hu, counts, np.zeros(0, np.int64),
                                   np.zeros(0, np.int32), n_buckets)
            assert batch.schema == P.BLOCK_SCHEMA
            g, u, c = P.unpack_blocks(batch)
            hg = hg & np.int64(P.gram_mask(n_buckets))  # the bits the near rule compares come back
            assert (g == hg).all() and (u == hu).all() and (c == counts).all()
            assert (batch.column("uid_bits").to_numpy() >= 0).all() == (spread < 1 << 30)
            mixed = P.unpack_blocks(pa.Table.from_batches([batch, P._block_batch(
                bucket[cuts], cuts, hg, hu // 1024, counts, np.zeros(0, np.int64), np.zeros(0, np.int32),
                n_buckets)]))  # batches of different uid widths in one call
            assert (mixed[1] == np.r_[hu, hu // 1024]).all() and (mixed[0] == np.r_[hg, hg]).all()
            one = P.unpack_blocks(pa.concat_tables([pa.Table.from_batches([batch.slice(1)]),
                                                    pa.Table.from_batches([batch.slice(0, 1)])]))
            first = cuts[1] if cuts.size > 1 else hg.size
            assert (one[0] == np.r_[hg[first:], hg[:first]]).all() and (one[2] == np.r_[counts[first:],
                                                                                    counts[:first]]).all()
    assert [x.size for x in P.unpack_blocks(P.gram_blocks(np.zeros(0, np.int64), pa.array([], pa.list_(pa.int64()))))] \
        == [0, 0, 0]


def test_gram_blocks_keep_each_block_in_signed_gram_order():
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(11)
    lists = [sorted(set(rng.integers(-(2**63), 2**63 - 1, 50, dtype=np.int64).tolist())) for _ in range(40)]
    lists[5] = lists[3]  # shared grams: one first holder, the later one seen
    uids = rng.permutation(np.arange(40, dtype=np.int64) * 7)
    batch = P.gram_blocks(uids, pa.array(lists, pa.list_(pa.int64())), 4).to_pylist()
    packed = P.gram_blocks(uids, pa.array(lists, pa.list_(pa.int64())), 4)
    grams = [P.unpack_blocks(packed.slice(r, 1))[0] for r in range(packed.num_rows) if batch[r]["bucket"] is not None]
    assert all((np.diff(g) > 0).all() for g in grams) and sum(g.size for g in grams) == len(set().union(*lists))
    seen = {r["uid"]: r["seen"] for r in batch if r["bucket"] is None}
    assert seen == {int(max(uids[3], uids[5])): 50}


def test_units_and_blocks_hold_the_units_less_their_lists_then_their_blocks():
    import numpy as np
    import pyarrow as pa

    texts = ["alpha beta gamma delta\nalpha beta gamma delta epsilon", None, "zeta eta theta iota kappa"]
    units = P.paragraph_batch(["a", "b", "c"], texts, "line", 2, 3, ranks=np.array([4, 0, 9], np.int64))
    rows = P.units_and_blocks(units, True, 4)
    assert rows.schema == P.UNIT_BLOCK_SCHEMA
    is_unit = rows.column("n_grams").is_valid()
    kept = rows.filter(is_unit)
    assert kept.select(list(P.UNIT_COLUMNS[:-1])).to_pylist() == units.drop_columns(list(P.UNIT_DROPPED)).to_pylist()
    assert kept.column("n_grams").to_pylist() == [len(g) for g in units.column("grams").to_pylist()]
    blocks = rows.filter(pa.compute.invert(is_unit)).select(P.BLOCK_SCHEMA.names)
    assert blocks.equals(P.gram_blocks(units.column("uid").to_numpy(), units.column("grams"), 4))
    assert P.units_and_blocks(units, False, 4).num_rows == units.num_rows


def test_widen_reads_every_width_as_little_endian_unsigned():
    import numpy as np

    rng = np.random.default_rng(5)
    for width in range(1, 9):
        data = rng.integers(0, 256, width * 37, dtype=np.uint8)
        expect = [int.from_bytes(bytes(data[i:i + width]), "little") for i in range(0, data.size, width)]
        got = P._widen(data, width)
        assert got.dtype == np.uint64 and got.tolist() == expect
    assert P._ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
