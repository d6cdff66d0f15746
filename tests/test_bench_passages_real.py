"""How the passages benchmark judges removals on labelled real text: reused words found against the source,
scores per label, dolma's byte offsets; the generated corpus's banner (the skew case)."""

from __future__ import annotations

from bench.passages import (
    build_corpus,
    cut_byte_spans,
    removal_figures,
    removed_line_origin,
    reuse_spans,
    score_levels,
)

SOURCE = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu."
COPY = "Intro words here. Alpha beta gamma delta epsilon zeta eta theta iota kappa! Own ending."


def test_reuse_spans_mark_words_of_long_shared_runs_only():
    spans = reuse_spans(COPY, SOURCE, k=8)
    words = [COPY[s:e] for s, e in spans]
    assert words == ["Alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa!"]
    assert reuse_spans("beta gamma delta epsilon. Other text entirely here now.", SOURCE, k=8) == []


def test_score_levels_counts_recall_per_label_and_precision_overall():
    docs = [("0-src", SOURCE), ("1-a", COPY), ("1-b", "Written from scratch with other words entirely.")]
    truth = {"0-src": [], "1-a": reuse_spans(COPY, SOURCE, k=8), "1-b": []}
    level = {"0-src": "orig", "1-a": "cut", "1-b": "non"}
    outputs = {"0-src": SOURCE, "1-a": "Intro words here. Own ending.", "1-b": "Written from scratch."}
    res = score_levels(docs, truth, level, outputs)
    assert res["cut"]["recall"] == 1.0
    assert res["non"]["recall"] is None and res["non"]["removed_share"] > 0
    assert res["all"]["precision"] < 1.0
    assert res["orig"]["removed_share"] == 0.0


def test_removal_figures_count_dropped_and_cut_documents():
    docs = [("a", "one two three"), ("b", "four five"), ("c", "six")]
    figs, masks = removal_figures(docs, {"a": "one three", "c": "six"})
    assert figs["docs_cut"] == 1 and figs["docs_dropped"] == 1
    assert figs["removed_chars"] == len("two") + len("fourfive")
    assert masks["c"].sum() == 0


def test_dolma_spans_are_cut_as_utf8_byte_offsets():
    text = "Ünïcode line\nrepeated line\nend"
    start = len("Ünïcode line\n".encode())
    assert cut_byte_spans(text, [[start, start + len("repeated line\n"), 1.0]]) == "Ünïcode line\nend"


def test_removed_line_origin_tells_earlier_pages_from_repeats_within_a_page():
    docs = [("a", "banner line here\nown text"), ("b", "chorus\nbanner line here\nchorus\nmore")]
    _, masks = removal_figures(docs, {"a": "banner line here\nown text", "b": "chorus\nmore"})
    seen = removed_line_origin(docs, masks)
    assert seen == {"other_page": len("bannerlinehere"), "same_page": len("chorus"), "other": 0}


def test_build_corpus_banner_is_the_last_paragraph_of_every_kth_document_and_truth_after_the_first():
    plain, plain_truth = build_corpus(30)
    docs, truth = build_corpus(30, banner_every=4)
    banner = docs[0][1].rsplit("\n\n", 1)[1]
    assert len(banner.split()) == 30
    holders = [i for i, (_, text) in enumerate(docs) if text.endswith("\n\n" + banner)]
    assert holders == list(range(0, 30, 4))
    for i in holders[1:]:
        doc_id, text = docs[i]
        start = len(text) - len(banner)
        assert truth[doc_id][-1] == (start, len(text))
    assert docs[1] == plain[1] and truth[docs[1][0]] == plain_truth[docs[1][0]]
    assert all(span[1] <= len(docs[0][1]) - len(banner) for span in truth[docs[0][0]])
