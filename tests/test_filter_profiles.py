"""Filter profiles: config, the profile differences on invented documents, C4 as TFDS built it,
Gopher's word reading, line cleaning, LID on prose, and the profile column through the stage."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipelines.core.config import ConfigError, load_config
from pipelines.filter import rules as filter_rules
from pipelines.filter import stage as fs
from pipelines.filter.config import FilterConfig
from tests.test_filter import DOCS_SCHEMA, GOOD
from udfs import quality as q
from udfs.quality.gopher import whitespace_alpha_ratio

OTHER = (
    "Farmers in the valley grow wheat, apples and grapes on land that their families have held for "
    "generations. When the river floods in spring, they move the animals to higher ground and wait with "
    "patience until the water falls again. A small museum near the bridge tells this story with old tools, "
    "letters and photographs. Children from nearby villages visit it each autumn to learn how earlier "
    "farmers lived and what they ate through the long winters."
)
LATEX_PAPER = (
    "\\section{Introduction}\n" + GOOD + "\nWe write the energy as $E = \\frac{1}{2} m v^{2}$ and the "
    "momentum as $p = m v$, see \\cite{ref1} and \\ref{eq:one}.\n" + OTHER
)
CODE_PAGE = (
    GOOD + "\nThe following function does the work:\ndef mean(values) {\n  return sum(values) / len(values);\n}\n"
    + OTHER
)
ONE_LINE_ARTICLE = GOOD + " " + OTHER + " And more about the valley without an end mark"
WIKI_ARTICLE = (
    "{{Infobox settlement\n| name = Example Town\n| population = 12,000\n}}\n'''Example Town''' is a town. "
    + GOOD + "\n== History ==\n" + OTHER + "\n{{Reflist}}"
)


def _signals(texts, profile, base=None):
    cfg = (base or FilterConfig()).profile_config(profile)
    c = cfg.c4
    opts = q.C4Options(c.min_words_per_line, c.end_marks, c.page_checks, c.sentences_in)
    return q.quality_signals(pa.array(texts), alpha_words_reading=cfg.gopher_quality.alpha_words_reading,
                             c4_options=opts).to_pylist()


# ------------------------------------------------------------------------------------------- config
def test_builtin_profiles_and_c4_values_from_tfds():
    cfg = FilterConfig()
    assert cfg.profile_names() == ["web", "c4", "science", "wiki", "code", "books"]
    c4 = cfg.profile_config("c4").c4
    assert (c4.min_words_per_line, c4.min_sentences, c4.end_marks, c4.page_checks, c4.clean_lines) == (
        5, 3, '.?!"', "kept_lines", True)
    assert cfg.profile_config("web").gopher_quality.alpha_words_reading == "datatrove"
    assert cfg.profile_config("science").gopher_quality.alpha_words_reading == "whitespace"
    assert all(o.key in filter_rules.profile_keys() for p in filter_rules.PROFILES.values() for o in p)


def test_profile_config_errors_name_key_and_allowed():
    with pytest.raises(ConfigError, match="profile_by_source.arxiv.*'paper' is not a profile"):
        load_config(overrides=["filter.profile_by_source={arxiv: paper}"])
    with pytest.raises(ConfigError, match="filter.profiles.science"):
        load_config(overrides=["filter.profiles={science: {c4: {min_sentences: -1}}}"])
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(overrides=["filter.profiles={science: {tokenize: {}}}"])
    # LID sampling is filter-wide (one LID pass per document): in a profile it was silently ignored.
    with pytest.raises(ConfigError, match=r"filter.profiles.wiki.langid.sample_windows: .* set "
                                          r"filter.langid.sample_windows instead \(per profile: \['action', "
                                          r"'allowed', 'enabled', 'min_score'\]\)"):
        load_config(overrides=["filter.profiles={wiki: {langid: {sample_windows: 8, min_score: 0.5}}}"])
    assert load_config(overrides=["filter.profiles={wiki: {langid: {min_score: 0.5}}}"]).filter.profile_config(
        "wiki").langid.min_score == 0.5
    cfg = load_config(overrides=["filter.profiles={mine: {c4: {min_sentences: 1}}}",
                                 "filter.profile_by_source={'src*': mine}"])
    assert cfg.filter.profile_config("mine").c4.min_sentences == 1


# ----------------------------------------------------------------------------------- Gopher's words
def test_alpha_words_whitespace_reading_just_inside_and_outside():
    inside = " ".join(["word"] * 8 + ["(1)", "2.5"])  # 8 of 10 whitespace words hold a letter: 0.8
    outside = " ".join(["word"] * 7 + ["(1)", "2.5", "x=3"] + ["4"])  # 8 of 11
    assert whitespace_alpha_ratio(pa.array([inside, outside])).tolist() == [0.8, pytest.approx(8 / 11)]
    math = "We set E=mc^2, so E(1) holds (see [2], [3]) for x=1.5."  # tokens: punctuation counts against it
    paper, dt = _signals([math], "science")[0], _signals([math], "web")[0]
    assert paper["gopher_quality"]["alpha_words_ratio"] > dt["gopher_quality"]["alpha_words_ratio"]


# ------------------------------------------------------------------------------------ C4 as built
def test_c4_line_rules_as_tfds_built_them():
    four_words = "Four words end here."
    quote_end = "He said it was 'fine'"  # ends with ' : a kept line for datatrove, not for TFDS
    web = _signals([four_words, quote_end + "."[:0]], "web")
    c4 = _signals([four_words, quote_end], "c4")
    assert [s["c4"]["kept_lines"] for s in web] == [1, 1]
    assert [s["c4"]["kept_lines"] for s in c4] == [0, 0]
    # `{` in a line the line rules drop: TFDS never looks at it, the paper's page rule does
    brace = "function f() {\n" + GOOD
    assert _signals([brace], "web")[0]["c4"]["has_curly_bracket"] is True
    assert _signals([brace], "c4")[0]["c4"]["has_curly_bracket"] is False


def test_sentences_in_text_counts_a_one_line_article():
    web, wiki = _signals([ONE_LINE_ARTICLE], "web")[0], _signals([ONE_LINE_ARTICLE], "wiki")[0]
    assert web["c4"]["kept_sentences"] == 0
    assert wiki["c4"]["kept_sentences"] == 9
    assert _signals([GOOD.replace(". ", ".\n")], "science")[0]["c4"]["kept_sentences"] == 5


def test_c4_line_cleaning_removes_lines_and_counts_them():
    text = "Home | About | Contact\n" + GOOD + "\nPlease enable JavaScript to see the comments below today.\n"
    cleaned, lines, chars = q.c4_clean(q.parse(pa.array([text, ""])), q.C4Options(5, '.?!"', "kept_lines"))
    assert cleaned.to_pylist() == [GOOD, ""]
    assert lines.tolist() == [2, 0]
    assert chars.tolist() == [len(text) - len(GOOD), 0]


# ---------------------------------------------------------------------------------------- LID
def test_lid_reads_prose_not_preamble_or_code():
    from udfs import langid

    model = langid.load_model(langid.default_model_path())
    german = ("Die Stadt hat eine lange Geschichte und viele alte Häuser. Die Menschen arbeiten gern "
              "zusammen und bauen Schulen, Straßen und Parks für die ganze Region.")
    code = "```\n" + "\n".join(f"# compute the total of the values in list number {i} for the report" for i in range(30)) + "\n```"
    latex = "\\documentclass{article}\n\\usepackage{amsmath}\n" + "\\newcommand{\\R}{\\mathbb{R}}\n" * 30 + "\\begin{document}\n"
    texts = pa.array([code + "\n" + german, latex + german + "\n\\end{document}"])
    lang, score, topk = langid.identify(model, texts, 1000, 4, 100_000, 3)
    assert lang.to_pylist() == ["de", "de"]
    assert all(0.0 <= s <= 1.0 for s in score.to_pylist())
    mixed = pa.array([german + "\n" + GOOD])
    shares = langid.identify(model, mixed, 1000, 4, 100_000, 3)[2].to_pylist()[0]
    assert {s["lang"] for s in shares} == {"de", "en"}
    assert sum(s["score"] for s in shares) == pytest.approx(1.0)


def test_lid_topk_from_the_sample_slices():
    from udfs import langid

    model = langid.load_model(langid.default_model_path())
    german = ("Die Stadt hat eine lange Geschichte und viele alte Häuser. Die Menschen arbeiten gern "
              "zusammen und bauen Schulen, Straßen und Parks für die ganze Region. ")
    english = ("The town has a long history and many old houses. People like to work together and build "
               "schools, roads and parks for the whole region. ")
    long_mixed = pa.array([german * 6 + "\n" + english * 20, english * 3])
    lang, score, topk = langid.identify(model, long_mixed, 1000, 4, None, 3)
    shares = topk.to_pylist()[0]
    assert shares[0]["lang"] == "en" and lang.to_pylist()[0] == "en"  # three of four slices are English
    assert {s["lang"] for s in shares} == {"de", "en"}
    assert sum(s["score"] for s in shares) == pytest.approx(1.0)
    # a text no longer than the sample is one slice: its lines are judged, each language by its share
    assert topk.to_pylist()[1] == [{"lang": "en", "score": 1.0}]
    two_lines = pa.array([german + "\n" + english + "\n" + english])
    assert [s["lang"] for s in langid.identify(model, two_lines, 1000, 4, None, 3)[2].to_pylist()[0]] == ["en", "de"]


def test_window_shares_tie_keeps_the_sample_language():
    from udfs import langid, langid_prose

    model = langid.load_model(langid.default_model_path())
    de = "Die Menschen arbeiten gern zusammen und bauen Schulen"
    en = "People like to work together and they build schools!!"  # as long as de: a tie
    got = langid_prose.window_shares(model, [[en, de, de, en], ["kurz"]], ["de", "en"], 3,
                                     langid.canonical_code)
    assert [s["lang"] for s in got[0]] == ["de", "en"]
    assert got[1] == []
    got = langid_prose.window_shares(model, [[en, de, de, en]], ["en"], 3, langid.canonical_code)
    assert [s["lang"] for s in got[0]] == ["en", "de"]


# --------------------------------------------------------------------------------- through Spark
@pytest.mark.slow
def test_profiles_by_source_decide_the_invented_documents(spark, make_cfg):
    cfg = make_cfg("filter.profile_by_source={arxiv: science, 'blog*': code, wiki: wiki}",
                   "filter.default_profile=web").filter
    texts = [("p", LATEX_PAPER, "arxiv"), ("c", CODE_PAGE, "blog-tech"), ("o", ONE_LINE_ARTICLE, "wiki"),
             ("w", WIKI_ARTICLE, "wiki")]
    rows = [(i, t, s, None, {}, "f", len(t), len(t.encode()), 0) for i, t, s in texts]
    rows += [(i + "_web", t, "web", None, {}, "f", len(t), len(t.encode()), 0) for i, t, _ in texts]
    out = fs.filter_documents(spark.createDataFrame(rows, DOCS_SCHEMA), cfg)
    got = out.select("doc_id", "filter_profile", F.array_contains("filter_reasons", "c4.curly_bracket").alias("brace"),
                     (F.size("filter_reasons") == 0).alias("kept"))
    assertDataFrameEqual(got, [
        ("p", "science", False, True), ("c", "code", False, True), ("o", "wiki", False, True),
        ("w", "wiki", False, True),
        ("p_web", "web", True, False), ("c_web", "web", True, False), ("o_web", "web", False, False),
        ("w_web", "web", True, False),
    ])


def test_report_thresholds_per_profile_and_constant_signals():
    from pipelines.filter.report import constant_signals, profile_thresholds

    cfg = load_config(overrides=["filter.profile_by_source={'crawl*': c4}", "filter.default_profile=web"]).filter
    got = profile_thresholds(cfg, "c4.kept_sentences")
    assert got == [{"key": "c4.min_sentences", "value": 5.0, "keeps": ">="},
                   {"key": "c4.min_sentences (c4)", "value": 3.0, "keeps": ">="}]
    assert constant_signals({"a": [1.0, 1.0], "b": [1.0, 2.0], "c": []}) == {"a": 1.0}
