"""The ``auto`` profile choice on invented documents, the source-loss warning, and LID agreeing with its
shares."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from bench.auto_profile import invented
from pipelines.core.runner import StageReport
from pipelines.filter import stage as fs
from pipelines.filter.config import FilterConfig
from tests.test_filter import DOCS_SCHEMA
from udfs.langid import agree_with_shares
from udfs.quality import profile as P


def test_auto_picks_the_profile_each_invented_document_was_written_as():
    docs = invented()
    got = P.auto_profile(pa.array([t for *_, t in docs])).to_pylist()
    assert {i: g for (i, want, _), g in zip(docs, got, strict=True) if g != want} == {}
    assert set(got) == set(P.AUTO_PROFILES)


def test_empty_and_whitespace_text_are_web_with_zero_signals():
    sig = P.profile_signals(pa.array(["", "  \n ", None])).to_pylist()
    assert all(v == 0 for s in sig for v in s.values())
    assert P.choose(P.profile_signals(pa.array(["", None]))).to_pylist() == ["web", "web"]


_SPACE_CASES = ["", " ", "\n\n", "a\x0bb", "\xa0x y\u2003z", "  lead trail  ", "x", "é à\tü\r\nß",
                "🙂 🙂🙂\n\n🙂", "a\x0cb\x85c", "```\ncode\n```\nprose ~~~\nmore\n~~~", "```open\n{ a; }"]


def test_space_counts_match_re2s_own_counts():
    texts = pa.array(_SPACE_CASES, pa.string()).slice(1)  # a sliced array too: offsets not from 0
    words, nonblank = P._space_counts(texts)
    assert words.tolist() == pc.count_substring_regex(texts, r"\S+").to_pylist()
    assert nonblank.tolist() == pc.utf8_length(pc.replace_substring_regex(texts, r"\s+", "")).to_pylist()


def test_code_share_counts_fenced_blocks_of_backticks_and_tildes():
    texts = pa.array(["```\nx = 1\n```\nSome prose line here.", "~~~\nx\n~~~", "no fence at all ~ ` here"])
    share = P._code_share(texts, P._space_counts(texts)[1])
    assert share.tolist() == [9 / (9 + 18), 1.0, 0.0]  # the fence lines count as code too


def test_science_headings_just_inside_and_outside():
    para = "The river carried the old boat past the quiet village in the spring. " * 3
    cites = " See Table 1 and Fig. 2 [1] [2] [3]."
    one = f"Introduction\n\n{para}{cites}\n\nSome other heading\n\n{para}"
    two = f"Introduction\n\n{para}{cites}\n\nConclusion\n\n{para}"
    assert P.auto_profile(pa.array([one, two])).to_pylist() == ["web", "science"]


def test_the_choice_skips_heading_and_chapter_counts_only_where_they_decide_nothing():
    para = "The river carried the old boat past the quiet village in the spring. " * 3
    headed = "Introduction\n\n" + para + "\n\nMethods\n\n" + para + "\n\nResults\n\n" + para  # no marks
    few_marks = headed.replace("Results", "See Table 1 for results\n\nResults")
    chapters = "".join(f"Chapter {i}\n\n" + para * 50 + "\n\n" for i in range(1, 4))  # > MIN_BOOK_WORDS words
    short_chapters = "".join(f"Chapter {i}\n\n{para}\n\n" for i in range(1, 4))
    texts = pa.array([headed, few_marks, chapters, short_chapters, "", None, *(t for *_, t in invented())])
    full = P.profile_signals(texts)
    assert P.auto_profile(texts).to_pylist() == P.choose(full).to_pylist()
    assert P.auto_profile(texts).to_pylist()[:4] == ["web", "science", "books", "web"]
    lazy = P._signals(texts, for_choice=True)
    assert lazy.field("paper_headings").to_pylist()[:4] == [0, 3, 0, 0]  # not counted: no marks
    assert full.field("paper_headings").to_pylist()[0] == 3
    assert lazy.field("chapters").to_pylist()[:4] == [0, 0, 3, 0]
    assert full.field("chapters").to_pylist()[3] == 3


def test_a_response_to_reviewers_is_headed_like_a_paper():
    para = "The river carried the old boat past the quiet village in the spring. " * 3
    letter = f"Reviewer 1\n\n{para}\n\nResponse:\n\n{para}\n\nResponse to the reviewers\n\n{para}"
    forum = f"Reviewer wanted\n\n{para}\n\nReply:\n\n{para}"
    assert P.profile_signals(pa.array([letter, forum])).field("paper_headings").to_pylist() == [3, 0]


def test_a_table_of_contents_is_not_a_paper():
    toc = "\n".join(f"{i} Section number {i}" for i in range(1, 9)) + "\n\n" + "Short text. [1]\n"
    assert P.profile_signals(pa.array([toc])).field("paper_headings").to_pylist() == [0]


def test_legal_enumerations_ending_in_semicolons_are_not_code():
    text = "\n".join(f"the holder shall keep record number {i} of the register (see article {i});" for i in range(20))
    assert P.profile_signals(pa.array([text])).field("code_share").to_pylist() == [0.0]


def test_auto_profiles_match_the_rules_table():
    from pipelines.filter.rules import AUTO_CHOICES

    assert AUTO_CHOICES == P.AUTO_PROFILES


def test_auto_config_is_accepted_and_expanded():
    cfg = FilterConfig(default_profile="auto", profile_by_source={"c4*": "c4"})
    assert cfg.profiles_in_use() == ["wiki", "science", "code", "books", "web", "c4"]
    assert cfg.uses_auto() and FilterConfig().uses_auto() and not FilterConfig(default_profile="web").uses_auto()
    with pytest.raises(ValueError, match="'auto' is the per-document profile choice"):
        FilterConfig(profiles={"auto": {}})
    with pytest.raises(ValueError, match="allowed: .*'auto'"):
        FilterConfig(default_profile="automatic")


def test_auto_records_the_picked_profile_through_the_stage(spark):
    cfg = FilterConfig(default_profile="auto", profile_by_source={"forced": "web"})
    docs = {d[0]: d[2] for d in invented()}
    picks = [("wiki_article", "wiki", "wiki"), ("science_plain", "papers", "science"), ("code_c", "repo", "code"),
             ("web_news", "news", "web"), ("code_python", "forced", "web")]
    rows = [(i, docs[i], src, None, {}, "f", len(docs[i]), len(docs[i].encode()), 0) for i, src, _ in picks]
    out = fs.filter_documents(spark.createDataFrame(rows, DOCS_SCHEMA), cfg)
    assertDataFrameEqual(out.select("doc_id", "filter_profile"), [(i, want) for i, _, want in picks])
    assert fs.rule_ids(cfg)  # every profile auto can pick has its rules listed
    assert out.where(F.col("filter_profile") == "auto").count() == 0


def test_auto_gives_pages_the_mediawiki_reader_rendered_the_wiki_profile(spark):
    """Rendered pages hold no markup left to show that they are Wikipedia: the reader's meta says so."""
    cfg = FilterConfig(default_profile="auto", profile_by_source={"forced": "web"})
    text = dict((d[0], d[2]) for d in invented())["web_news"]
    rendered = {"templates_rendered": "3", "templates_dropped": "1"}
    rows = [(i, text, src, None, meta, "f", len(text), len(text.encode()), 0)
            for i, src, meta in (("page", "enwiki", rendered), ("news", "news", {}), ("forced", "forced", rendered))]
    out = fs.filter_documents(spark.createDataFrame(rows, DOCS_SCHEMA), cfg)
    assertDataFrameEqual(out.select("doc_id", "filter_profile"), [("page", "wiki"), ("news", "web"), ("forced", "web")])


def test_source_warning_just_inside_and_outside():
    by_source = {"half": {"in": 4, "kept": 2, "removed": {"c4.min_sentences": 2}},
                 "most": {"in": 4, "kept": 1, "removed": {"lang.allowed": 1, "c4.min_sentences": 2}},
                 "empty": {"in": 0, "kept": 0, "removed": {}}}
    got = fs.source_warnings(by_source, 0.5)
    assert [(w["source"], w["share"], w["top_reason"]) for w in got] == [("most", 0.75, "c4.min_sentences")]
    assert fs.source_warnings(by_source, None) == []
    assert [w["source"] for w in fs.source_warnings(by_source, 0.49)] == ["half", "most"]


def test_stage_line_ends_with_the_warning():
    line = StageReport("filter", rows_in=4, rows_out=1, removed={"x": 3},
                       warnings=["source 'a' lost 3 of 4 documents"]).summary_line()
    assert line.endswith("WARNING: source 'a' lost 3 of 4 documents")


def test_report_puts_the_warning_at_the_top():
    from pipelines.report import html

    stats = {"filter_breakdown": {"source_warnings": [{"line": "source 'a' lost 3 of 4 documents"}]}}
    assert html._PARTS[0] is html._warnings
    assert "source &#x27;a&#x27; lost 3 of 4" in html._warnings(stats, "svg", 10)
    assert html._warnings({"filter_breakdown": {"source_warnings": []}}, "svg", 10) is None


def test_lang_agrees_with_its_largest_share():
    lang, score = agree_with_shares(
        pa.array(["el", "pt", "de"]), pa.array([0.7, 0.9, 0.95]),
        [[{"lang": "en", "score": 0.8}, {"lang": "el", "score": 0.2}], [], [{"lang": "de", "score": 1.0}]])
    assert lang.to_pylist() == ["en", "pt", "de"]
    assert score.to_pylist() == [0.8, 0.9, 0.95]


@pytest.mark.slow
def test_run_names_the_source_that_lost_most_of_its_documents(spark, make_cfg):
    from pipelines.core import tables
    from pipelines.filter.report import filter_breakdown
    from tests.test_filter import GOOD, SHORT

    cfg = make_cfg("filter.default_profile=auto")
    rows = [(i, t, src, None, {}, "f", len(t), len(t.encode()), 0)
            for i, t, src in (("a", GOOD, "news"), ("b", SHORT, "papers"), ("c", "", "papers"))]
    tables.write_table(spark.createDataFrame(rows, DOCS_SCHEMA), cfg, tables.stage_input_table(cfg, "filter"))
    report = fs.run(spark, cfg)
    line = ("source 'papers' lost 2 of 2 documents (100%; filter.warn_source_removed=0.5), "
            "most to gopher_quality.word_count (1)")  # the other: lang.score (ties go by name)
    assert report.warnings == [line]
    assert report.summary_line().endswith(f"WARNING: {line}")
    assert report.notes["profile.web"] == 3
    assert [w["line"] for w in filter_breakdown(spark, cfg, None)["source_warnings"]] == [line]
