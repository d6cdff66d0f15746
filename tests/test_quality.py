"""udfs/quality.py: hand-computed signals on crafted texts (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from udfs import quality as q


def signals(*texts):
    return q.quality_signals(pa.array(list(texts), pa.string())).to_pylist()


def test_gopher_quality_hand_computed():
    # words: a - b c • d ... the end …  (10; symbol words: - • ... …)
    (s,) = signals("a\n\n- b c\n• d...\n\n\nthe end …\n")
    g = s["gopher_quality"]
    assert g["word_count"] == 6
    assert g["mean_word_length"] == pytest.approx(10 / 6)
    assert g["ellipsis_word_ratio"] == pytest.approx(2 / 10)
    assert g["hash_word_ratio"] == 0.0
    # 4 non-blank lines (blank lines are not lines): 2 bullets, 2 ending with an ellipsis (... and …)
    assert g["bullet_lines_ratio"] == pytest.approx(0.5)
    assert g["ellipsis_lines_ratio"] == pytest.approx(0.5)
    # whitespace words (the paper): a - b c • d... the end … -> 6 of 9 hold a letter
    assert g["alpha_words_ratio"] == pytest.approx(6 / 9)
    dt = q.quality_signals(pa.array(["a\n\n- b c\n• d...\n\n\nthe end …\n"]), alpha_words_reading="datatrove")
    assert dt.to_pylist()[0]["gopher_quality"]["alpha_words_ratio"] == pytest.approx(0.6)  # 6 of 10 tokens
    assert g["stop_words"] == 1
    f = s["fineweb"]
    assert f["line_punct_ratio"] == pytest.approx(0.25)  # only "• d..." ends with terminal punctuation
    assert f["short_line_ratio"] == 1.0
    assert f["newline_ratio"] == pytest.approx(7 / 10)


def test_stop_words_are_distinct_and_case_insensitive():
    (s,) = signals("The cat and the dog. THE end, with AND")
    assert s["gopher_quality"]["stop_words"] == 3  # the, and, with


def test_empty_whitespace_and_null_texts_have_defined_values():
    rows = q.quality_signals(pa.array(["", "  \n\n ", None], pa.string())).to_pylist()
    for s in rows:
        assert s["gopher_quality"]["word_count"] == 0
        assert s["gopher_quality"]["mean_word_length"] == 0.0
        assert s["gopher_repetition"]["dup_line_frac"] == 0.0
        assert s["c4"]["lines"] == 0 and s["c4"]["kept_sentences"] == 0
        assert s["fineweb"]["line_punct_ratio"] == 0.0


def test_cjk_text_is_one_word_per_unspaced_run():
    (s,) = signals("日本語のテキスト。次の文。")
    g = s["gopher_quality"]
    assert (g["word_count"], g["mean_word_length"]) == (1, 12.0)
    assert s["fineweb"]["line_punct_ratio"] == 1.0  # 。 is terminal punctuation


def test_repetition_hand_computed():
    text = "x " * 11 + "x"  # 12 words, 23 characters
    (s,) = signals(text)
    r = s["gopher_repetition"]
    # "x x" occurs 11 times, 3 characters each
    assert r["top_2gram_char_frac"] == pytest.approx(33 / 23)
    # occurrences after the first of the 5-gram cover words 1..11: 11 characters
    assert r["dup_5gram_char_frac"] == pytest.approx(11 / 23)
    assert r["dup_10gram_char_frac"] == pytest.approx(11 / 23)
    # words that touch without a space are measured joined by one: past 1 too (the docstring said [0, 1])
    (s,) = signals("今日は、晴れ。")  # words 今日は、晴れ and 。; joined by a space: 8 characters of 7
    assert s["gopher_repetition"]["top_2gram_char_frac"] == pytest.approx(8 / 7)


def test_duplicate_lines_and_paragraphs():
    text = "alpha beta\n\nalpha beta\ngamma\n\n\nalpha beta\ngamma\n"
    (s,) = signals(text)
    r = s["gopher_repetition"]
    # lines: alpha beta, alpha beta, gamma, alpha beta, gamma -> 3 repeats of 5
    assert r["dup_line_frac"] == pytest.approx(3 / 5)
    assert r["dup_line_char_frac"] == pytest.approx((10 + 10 + 5) / len(text))
    # paragraphs: "alpha beta", "alpha beta\ngamma", "alpha beta\ngamma" -> 1 repeat of 3
    assert r["dup_para_frac"] == pytest.approx(1 / 3)
    assert r["dup_para_char_frac"] == pytest.approx(16 / len(text))
    assert s["fineweb"]["char_dup_ratio"] == pytest.approx(25 / (len(text) - text.count("\n")))


def test_top_ngram_ties_take_the_earliest():
    # every 2-gram occurs once: the first one ("aa b", 4 chars) is the top one
    (s,) = signals("aa b ccc dddd")
    assert s["gopher_repetition"]["top_2gram_char_frac"] == pytest.approx(4 / 13)


def test_c4_line_rules_and_page_flags():
    text = "\n".join([
        "This line has enough words.",
        "No terminal punctuation here",
        "Two words.",
        "Please enable JavaScript to view it.",
        "We use cookies on this site.",
        "Dr. Who met Mr. Smith. Then they left! Why? Fine.[1]",
        "Lorem ipsum dolor sit amet",
        "a {b} c",
    ])
    (s,) = signals(text)
    c = s["c4"]
    assert c["lines"] == 8
    assert c["lines_no_terminal_punct"] == 3
    assert c["lines_too_few_words"] == 1
    assert c["lines_javascript"] == 1
    assert c["lines_policy"] == 1
    assert c["kept_lines"] == 2
    # sentence ends: 1 + (Dr. Mr. Smith. left! Why? Fine.) 6
    assert c["kept_sentences"] == 7
    # page-level, anywhere on the page (paper), even in lines the line rules drop
    assert c["has_lorem_ipsum"] and c["has_curly_bracket"]


def test_c4_long_word_line():
    (s,) = signals("x" * 1001 + " a b.\n" + "y" * 1000 + " a b.")
    assert s["c4"]["lines_long_word"] == 1
    assert s["c4"]["kept_lines"] == 1


def test_batch_results_do_not_depend_on_batch_composition():
    texts = ["one two three. one two three.", "", "b c d e f g h i j k b c d e f g h i j k", "a\n\na"]
    together = signals(*texts)
    alone = [signals(t)[0] for t in texts]
    assert together == alone


def test_bad_input_types_and_families():
    with pytest.raises(TypeError, match="string array"):
        q.quality_signals(pa.array([1, 2]))
    with pytest.raises(ValueError, match="unknown signal families"):
        q.quality_signals(pa.array(["a"]), families=("gopher",))


def test_ngram_chunks_and_sorts_agree_with_one_pass():
    import numpy as np

    from udfs.quality import gopher

    texts = ["a b c a b c a b c d", "", "x y x y x y x y x y x y", "one", "p q r s t p q r s t u p q r s t"]
    p = q.parse(pa.array(texts))
    whole = q.gopher_repetition(p).to_pylist()
    words = np.bincount(p.word_doc, minlength=p.n)
    assert gopher._word_chunks(words, 12) == [(0, 10), (10, 22), (22, 23), (23, 39)]
    # a document longer than the chunk is a chunk of its own
    assert gopher._word_chunks(np.array([30, 2]), 12) == [(0, 30), (30, 32)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gopher, "CHUNK_WORDS", 12)
        assert q.gopher_repetition(p).to_pylist() == whole
    gram = np.array([5, 3, 5, 9, 3], dtype=np.int64)
    pos = np.array([0, 1, 2, 3, 4], dtype=np.int64)
    assert [a.tolist() for a in gopher._sorted_pairs(gram, pos)] == [[3, 3, 5, 5, 9], [1, 4, 0, 2, 3]]
    big = np.array([1 << 60, 3], dtype=np.int64)  # does not pack with positions: the lexicographic sort
    assert [a.tolist() for a in gopher._sorted_pairs(big, np.array([7, 9], dtype=np.int64))] == [[3, 1 << 60], [9, 7]]


def test_byte_level_counts_match_their_string_definitions():
    import numpy as np

    from udfs.quality import gopher
    from udfs.quality.parse import _edge_in, _per_doc

    texts = ["a.... b...... c… #x ## é…", "", "…...…", ".. .", "x" * 3 + "..." + "\n" + "...y"]
    arr = pa.array(texts)
    assert gopher._ellipses(arr).tolist() == [t.count("...") + t.count("…") for t in texts]
    assert _edge_in(arr, ["...", "…"], end=True).tolist() == [t.endswith(("...", "…")) for t in texts]
    assert _edge_in(arr, list("é#a"), end=False).tolist() == [t.startswith(("é", "#", "a")) for t in texts]
    (s,) = signals(texts[0])
    assert s["gopher_quality"]["hash_word_ratio"] > 0
    # per-document sums: the sorted fast path and bincount agree, empty documents included
    doc = np.array([0, 0, 2, 2, 2, 5])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert _per_doc(doc, 7).tolist() == np.bincount(doc, minlength=7).tolist()
    assert _per_doc(doc, 7, w).tolist() == np.bincount(doc, weights=w, minlength=7).tolist()
    assert _per_doc(doc[::-1], 7, w).tolist() == np.bincount(doc[::-1], weights=w, minlength=7).tolist()


def test_c4_words_and_long_words_per_line_read_as_re2_does():
    # runs of non-space (RE2's \s is [\t\n\f\r ]): a no-break space at a line's edge is stripped, one
    # inside a line is part of a word; a citation marker removed leaves fewer words; a vertical tab
    # joins two runs for RE2
    lines = ["\u00a0 one two", "alpha \u00a0 beta", "foo [1] bar", "a\vb c", "end.", "w" * 1001 + " x", "\u00a0" + "y" * 1000]
    opts = q.C4Options(min_words_per_line=3, end_marks=".oarcxy", page_checks="page", sentences_in="kept_lines")
    c = q.c4(q.parse(pa.array(lines)), opts).to_pylist()
    # expected few-word lines: "one two" (2), "foo  bar" (2), "a\vb c" (2), "end." (1), "y..." (1)
    assert [r["lines_too_few_words"] for r in c] == [1, 0, 1, 1, 1, 0, 1]
    assert [r["lines_long_word"] for r in c] == [0, 0, 0, 0, 0, 1, 0]


def test_pieces_tokenize_as_they_do_alone_urls_included():
    from udfs.quality.parse import _tokenize_joined

    pieces = ["km-long", "http://a-b.example/x-y),", "(www.a-b.org/c-d).", "see-www.x-y.com", "x-www.a",
              "Mr.", "U.S.", "don't", "a/b", "ftp://x:y@h-z", "plain", "e—f", "(end).", "www.", "://"]
    got = _tokenize_joined(pa.array(pieces)).to_pylist()
    assert [g.split() for g in got] == [q.tokenize_spacing(pa.array([p])).to_pylist()[0].split() for p in pieces]
    # the same when the URL pieces are all there is, or there are none
    for subset in (pieces[1:3], pieces[5:9]):
        got = _tokenize_joined(pa.array(subset)).to_pylist()
        assert [g.split() for g in got] == [q.tokenize_spacing(pa.array([p])).to_pylist()[0].split() for p in subset]


def test_edges_stop_words_and_word_sums_per_document():
    import numpy as np

    from udfs.quality.parse import _edge_in

    lines = ["• item", "- dash", "*star", "x...", "y…", "", "‣", "…", ".."]
    arr = pa.array(lines)
    from udfs.quality.gopher import BULLETS

    bullets = list(BULLETS)
    assert _edge_in(arr, bullets, end=False).tolist() == [t.startswith(tuple(bullets)) for t in lines]
    assert _edge_in(arr, ["...", "…"], end=True).tolist() == [t.endswith(("...", "…")) for t in lines]
    assert _edge_in(arr.slice(3, 4), ["...", "…"], end=True).tolist() == [True, True, False, False]
    texts = ["The cat and THE dog, with... the bird", "", "to be or not to be, that is", "nothing here", "With"]
    p = q.parse(pa.array(texts))
    (s0, s1, s2, s3, s4) = q.gopher_quality(p).to_pylist()
    assert [s["stop_words"] for s in (s0, s1, s2, s3, s4)] == [3, 0, 3, 0, 1]
    assert p.words.tolist() == np.bincount(p.word_doc, minlength=len(texts)).tolist()
    assert p.word_char_sum.tolist() == np.bincount(p.word_doc, p.word_chars, minlength=len(texts)).astype(int).tolist()


def test_c4_phrases_are_found_in_any_case():
    import pyarrow.compute as pc

    lines = ["Read our PRIVACY POLICY now.", "PR\u0130VACY POL\u0130CY here.", "Enable JavaScript please.",
             "Lorem Ipsum dolor sit.", "JAVA\u017fCRIPT is not javascript to TFDS? no.", "Plain words end here."]
    c = q.c4(q.parse(pa.array(["\n".join(lines)])), q.C4Options(min_words_per_line=1)).to_pylist()[0]
    lower = pc.utf8_lower(pa.array(lines)).to_pylist()
    assert c["lines_policy"] == sum("privacy policy" in t for t in lower) == 2
    assert c["lines_javascript"] == sum("javascript" in t for t in lower) == 2
