"""The passages stage: exact and near repeats, reused passages, removal records, determinism, skew, config."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import functions as F
from pyspark.testing.utils import assertDataFrameEqual

from pipelines.core import chain, tables
from pipelines.core.config import ConfigError
from pipelines.passages import stage as passages_stage
from pipelines.passages.hooks import report_section
from pipelines.passages.inspect import sample_cut
from pipelines.passages.transform import ACTION_COLUMN, SPANS_COLUMN, annotate, passages

BANNER = "We use cookies to improve your experience on our site and to show you relevant advertising today."
BANNER_EDITED = "We use Cookies to improve your experience on our site, and to show you relevant advertising now."
REUSED = ("the committee found that the proposed changes to the zoning code would allow taller buildings "
          "near transit stations while keeping")


def _body(i: int) -> str:
    return f"Article number {i} discusses topic {i} with its own original wording and several details {i}."


DOCS = [
    ("d1", f"{_body(1)}\n{BANNER}\n{_body(11)}"),
    ("d2", f"{_body(2)}\n{BANNER}\n{_body(22)}"),          # exact repeat of d1's banner
    ("d3", f"{BANNER_EDITED}\n{_body(3)}\n{_body(33)}"),    # near repeat (case, punctuation, one word)
    ("d4", f"{BANNER}\n\n{BANNER}"),                         # nothing but seen text: removed whole
    ("d5", f"{_body(5)}\nShort line here, too short."),    # nothing repeated
]


def _cfg(make_cfg, *extra):
    return make_cfg("passages.enabled=true", "passages.min_chars_after=null", *extra).passages


def _spans(rows, doc_id):
    return [(s["start"], s["end"], s["kind"], s["first_seen_in"]) for s in rows[doc_id][SPANS_COLUMN] or []]


def test_exact_and_near_repeats_are_cut_after_their_first_occurrence(spark, make_cfg):
    docs = spark.createDataFrame(DOCS, "doc_id string, text string")
    rows = {r["doc_id"]: r for r in annotate(docs, _cfg(make_cfg)).collect()}
    b1 = len(_body(2)) + 1
    assert _spans(rows, "d1") == [] and rows["d1"][ACTION_COLUMN] == "keep"
    assert _spans(rows, "d2") == [(b1, b1 + len(BANNER) + 1, "exact", "d1")]
    assert rows["d2"]["text"] == f"{_body(2)}\n{_body(22)}"
    assert _spans(rows, "d3") == [(0, len(BANNER_EDITED) + 1, "near", "d1")]
    assert rows["d3"]["text"] == f"{_body(3)}\n{_body(33)}" and rows["d3"][ACTION_COLUMN] == "cut"
    assert rows["d4"][ACTION_COLUMN] == "passages.duplicate_text"
    assert _spans(rows, "d4") == [(0, len(BANNER) + 2, "exact", "d1"), (len(BANNER) + 2, 2 * len(BANNER) + 2, "exact", "d1")]
    assert rows["d4"]["_input_text"] == DOCS[3][1]
    assert rows["d5"][ACTION_COLUMN] == "keep" and rows["d5"]["text"] == DOCS[4][1]


def test_the_same_rows_whether_the_small_sides_are_broadcast_or_shuffled(spark, make_cfg, monkeypatch):
    from pipelines.passages import transform

    docs = spark.createDataFrame(DOCS, "doc_id string, text string")
    broadcast = annotate(docs, _cfg(make_cfg)).collect()
    monkeypatch.setattr(transform, "BROADCAST_ROWS", 0)
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # Spark's own broadcasts of tiny frames
    try:
        shuffled = annotate(spark.createDataFrame(DOCS, "doc_id string, text string"), _cfg(make_cfg))
        assert "BroadcastHashJoin" not in shuffled._jdf.queryExecution().executedPlan().toString()
        assertDataFrameEqual(shuffled, broadcast)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)


def test_key_counts_from_the_near_repeats_equal_every_units_key_counted(spark, make_cfg, monkeypatch):
    # Every occurrence of a key after its first is a near repeat, so the keys held twice or more are
    # found among the near repeats' keys (broadcast); counted over every unit, they are the same rows.
    from pipelines.passages import transform

    def counts():
        parts: dict = {}
        annotate(spark.createDataFrame(DOCS, "doc_id string, text string"), _cfg(make_cfg), parts=parts)
        return parts["key_counts"].collect()

    matched = counts()
    monkeypatch.setattr(transform, "BROADCAST_ROWS", 0)  # the near repeats too many to broadcast
    every = counts()
    assert sorted(matched) == sorted(every) and len(every) == 1 and every[0]["n"] == 4  # d1, d2, d4 twice


def test_overlap_threshold_just_inside_and_just_outside(spark, make_cfg):
    # 17 words, 5 distinct 13-grams; editing the last word leaves 4 of 5 seen (0.8).
    docs = spark.createDataFrame([("a", BANNER), ("b", BANNER.replace("today", "tomorrow"))], "doc_id string, text string")
    inside = annotate(docs, _cfg(make_cfg, "passages.overlap=0.8", "passages.doc_overlap=null")).where("doc_id = 'b'")
    outside = annotate(docs, _cfg(make_cfg, "passages.overlap=0.81", "passages.doc_overlap=null")).where("doc_id = 'b'")
    assert inside.first()[ACTION_COLUMN] == "cut" and outside.first()[ACTION_COLUMN] == "keep"


def test_short_units_are_left_alone_and_a_document_left_too_short_goes(spark, make_cfg):
    docs = spark.createDataFrame([("a", f"Read more\n{BANNER}"), ("b", f"Read more\n{BANNER}\nA short tail line.")],
                                 "doc_id string, text string")
    c = _cfg(make_cfg, "passages.doc_overlap=null", "passages.min_chars_after=19")
    rows = {r["doc_id"]: r for r in annotate(docs, c).collect()}
    assert rows["b"]["text"] == "Read more\nA short tail line." and rows["b"][ACTION_COLUMN] == "cut"
    c = _cfg(make_cfg, "passages.doc_overlap=null", "passages.min_chars_after=30")
    assert annotate(docs, c).where("doc_id = 'b'").first()[ACTION_COLUMN] == "passages.too_short_after"


def test_reused_passage_inside_paragraphs_is_cut_from_all_but_the_first_document(spark, make_cfg):
    docs = spark.createDataFrame([
        ("p2", f"Our city report: {REUSED} the old parks, said the mayor on Monday."),
        ("p1", f"In other news {REUSED} historic districts intact."),
        ("p3", "Nothing shared with the others in this one at all, none of it."),
    ], "doc_id string, text string")
    c = _cfg(make_cfg, "passages.spans=true", "passages.exact=false", "passages.near=false",
             "passages.min_span_words=8", "passages.doc_overlap=null")
    rows = {r["doc_id"]: r for r in annotate(docs, c).collect()}
    start = len("Our city report: ")
    assert _spans(rows, "p2") == [(start, start + len(REUSED), "span", "p1")]
    assert rows["p2"]["text"] == "Our city report:  the old parks, said the mayor on Monday."
    assert _spans(rows, "p1") == [] and _spans(rows, "p3") == []


def test_same_output_on_one_and_on_many_partitions(spark, make_cfg):
    docs = spark.createDataFrame(DOCS * 1, "doc_id string, text string")
    c = _cfg(make_cfg, "passages.spans=true", "passages.min_span_words=8")
    one = annotate(docs.repartition(1), c)
    many = annotate(docs.repartition(7, "text"), c)
    assertDataFrameEqual(one, many, checkRowOrder=False)


def test_a_banner_repeated_100000_times_is_counted_not_collected(spark, make_cfg):
    n = 100_000
    docs = spark.range(n).select(
        F.format_string("doc%06d", "id").alias("doc_id"),
        F.concat(F.lit(BANNER + "\n"), F.format_string("Unique closing words of document number %d here.", "id")).alias("text"))
    c = _cfg(make_cfg, "passages.doc_overlap=null")
    out = annotate(docs, c).select(SPANS_COLUMN)
    got = out.select(F.explode(SPANS_COLUMN).alias("s")).groupBy("s.kind", "s.first_seen_in").count().collect()
    assert [(r["kind"], r["first_seen_in"], r["count"]) for r in got] == [("exact", "doc000000", n - 1)]


def test_run_writes_cut_documents_removals_and_counts(spark, make_cfg):
    cfg = make_cfg("passages.enabled=true", "passages.min_chars_after=null")
    docs = spark.createDataFrame([(d, t, "web") for d, t in DOCS], "doc_id string, text string, source string")
    tables.write_table(docs.withColumn("n_chars", F.length("text")), cfg, "deduped")
    def stored() -> set[int]:
        return {i.id() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}

    before = stored()  # earlier tests' frames
    report = passages_stage.run(spark, cfg).check()
    # every frame the stage persisted or checkpointed is released when it ends (without blocking: the
    # block manager drops them a moment later)
    deadline = time.monotonic() + 30
    while (held := stored() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not held
    assert (report.rows_in, report.rows_out, report.removed) == (5, 4, {"passages.duplicate_text": 1})
    assert report.notes == {"cut": 2}
    (src,) = report.extra["by_source"]
    assert (src["source"], src["units_removed"], src["documents_removed"]) == ("web", 4, 1)
    top = report.extra["top_units"][0]
    assert (top["occurrences"], top["first_seen_in"], top["excerpt"]) == (4, "d1", BANNER)
    kept = tables.read_table(spark, cfg, "passages_deduped")
    assert kept.where("doc_id = 'd2'").first()["n_chars"] == len(f"{_body(2)}\n{_body(22)}")
    removed = tables.read_table(spark, cfg, "removed").where("stage = 'passages'")
    assertDataFrameEqual(removed.select("doc_id", "reason", "duplicate_of", "text"),
                         [("d4", ["passages.duplicate_text"], "d1", DOCS[3][1])])
    shown = {r["doc_id"]: r for r in sample_cut(spark, cfg, n=5, text_chars=1000)}
    assert sorted(shown) == ["d2", "d3", "d4"] and shown["d4"]["reason"] == ["passages.duplicate_text"]
    assert shown["d2"]["text"] == f"{_body(2)}\n⟦exact <- d1: {BANNER}\n⟧{_body(22)}"


def test_run_gives_the_same_tables_and_counts_whether_only_the_touched_documents_are_cut_or_all(
        spark, make_cfg, monkeypatch, tmp_path):
    from pipelines.passages import transform

    rows = [(d, t, s) for (d, t), s in zip(DOCS, ["web", "web", None, "books", "books"], strict=True)]
    docs = spark.createDataFrame(rows, "doc_id string, text string, source string")
    docs = docs.withColumn("n_chars", F.length("text") + 1).withColumn("n_bytes", F.lit(0))

    def run(root):
        cfg = make_cfg("passages.enabled=true", "passages.min_chars_after=null", root=root)
        tables.write_table(docs, cfg, "deduped")
        report = passages_stage.run(spark, cfg).check()
        out = [tables.read_table(spark, cfg, t).orderBy("doc_id") for t in ("passages_deduped", "removed")]
        return report, [df.drop("run_id", "removed_at").collect() for df in out]

    few, few_rows = run(tmp_path / "few")
    monkeypatch.setattr(transform, "BROADCAST_ROWS", 0)  # every document annotated and cached
    every, every_rows = run(tmp_path / "every")
    assert few_rows == every_rows and len(few_rows[0]) == 4 and len(few_rows[1]) == 1
    assert (few.rows_in, few.rows_out, few.removed, few.notes) == (
        every.rows_in, every.rows_out, every.removed, every.notes)
    assert few.extra == every.extra and len(few.extra["by_source"]) == 3


def test_disabled_stage_writes_no_table_and_the_next_stage_reads_its_input(spark, make_cfg):
    cfg = make_cfg()
    docs = spark.createDataFrame(DOCS, "doc_id string, text string")
    tables.write_table(docs, cfg, "deduped")
    report = passages_stage.run(spark, cfg).check()
    assert (report.rows_in, report.rows_out, report.removed) == (5, 5, {})
    assert tables.read_if_exists(spark, cfg, "passages_deduped") is None
    assert tables.stage_input_table(cfg, "filter", spark) == "deduped"
    assert tables.stage_input_table(make_cfg("passages.enabled=true"), "filter", spark) == "passages_deduped"


@pytest.mark.parametrize(("overrides", "expected"), [
    (("passages.enabled=true",), "passages_deduped"),
    (("passages.enabled=false",), "deduped"),
    (("passages.enabled=true", "pipeline.stages=[ingest, dedup, filter]"), "deduped"),
])
def test_filter_reads_passages_output_only_when_the_stage_is_on(overrides, expected):
    from pipelines.core.config import load_config

    cfg = load_config(overrides=list(overrides))
    assert tables.previous_document_table(cfg, "filter") == expected
    assert ("passages", "passages_deduped") in chain.main_tables()
    assert (("passages", "passages_deduped") in chain.main_tables(cfg)) == cfg.passages.enabled


def test_transform_drops_removed_documents(spark, make_cfg):
    docs = spark.createDataFrame(DOCS, "doc_id string, text string")
    out = docs.transform(lambda d: passages(d, _cfg(make_cfg)))
    assert sorted(r["doc_id"] for r in out.collect()) == ["d1", "d2", "d3", "d5"]
    assert out.columns == ["doc_id", "text", SPANS_COLUMN]


def test_missing_columns_are_named(spark, make_cfg):
    with pytest.raises(ValueError, match=r"passages: input is missing columns \['text'\]"):
        annotate(spark.createDataFrame([("a",)], "doc_id string"), _cfg(make_cfg))


@pytest.mark.parametrize(("override", "fragment"), [
    ("passages.unit=para", "passages.unit"),
    ("passages.overlap=0", "passages.overlap"),
    ("passages.overlap=1.5", "passages.overlap"),
    ("passages.min_words=0", "passages.min_words"),
    ("passages.min_span_words=1", "passages.min_span_words"),
    ("passages.bloom=true", "unknown config key 'passages.bloom'"),
    ("passages.exact=false", "nothing to find"),
])
def test_bad_configuration_names_the_key(make_cfg, override, fragment):
    extra = ["passages.near=false"] if override == "passages.exact=false" else []
    with pytest.raises(ConfigError, match=fragment):
        make_cfg("passages.enabled=true", override, *extra)


def test_report_section_escapes_every_value():
    part = {"by_source": [{"source": "<web>", "documents": 3, "documents_cut": 1, "documents_removed": 0,
                           "units_removed": 2, "passages_removed": 0, "chars_removed": 40, "chars_in": 900}],
            "top_units": [{"occurrences": 4, "first_seen_in": "d1", "excerpt": "<script>x</script> banner"}]}
    html = report_section(part)
    assert html.startswith("<h2>Repeated paragraphs and reused passages (passages)</h2>")
    assert "&lt;web&gt;" in html and "&lt;script&gt;" in html and "<script>" not in html
    assert "Most repeated units" in html
    assert "Most repeated units" not in report_section({**part, "top_units": []})


def test_repeated_display_equations_are_not_cut(spark, make_cfg):
    eq = ("\\begin{equation}\n\\mathcal{L}(\\theta) = - \\sum_{i=1}^{n} \\log p_\\theta(x_i \\mid x_{<i})\n"
          "\\end{equation}")
    display = "$$ \\nabla_\\theta \\mathcal{L} = \\mathbb{E}_{x}[ \\nabla_\\theta \\log p_\\theta(x) ] $$"
    docs = spark.createDataFrame([(f"p{i}", f"{_body(i)}\n{eq}\n{display}\n{BANNER}\n{_body(10 + i)}") for i in (1, 2)],
                                 "doc_id string, text string")
    rows = {r["doc_id"]: r for r in annotate(docs, _cfg(make_cfg)).collect()}
    assert [s[2:] for s in _spans(rows, "p2")] == [("exact", "p1")]
    assert rows["p2"]["text"] == f"{_body(2)}\n{eq}\n{display}\n{_body(12)}"
    off = {r["doc_id"]: r for r in annotate(docs, _cfg(make_cfg, "passages.exempt_math=false")).collect()}
    assert len(_spans(off, "p2")) > 1


def test_document_ranks_are_dense_and_in_doc_id_order_whatever_the_partitioning(spark):
    from pipelines.passages.transform import RANK_COLUMN, with_ranks

    ids = [f"doc-{i:03d}" for i in range(40)]
    docs = spark.createDataFrame([(i, "text") for i in reversed(ids)], "doc_id string, text string").repartition(7)
    ranked, ranks = with_ranks(docs)
    got = sorted((r["doc_id"], r[RANK_COLUMN]) for r in ranks.collect())
    ranked.unpersist()
    assert got == [(d, i) for i, d in enumerate(ids)]


@pytest.mark.parametrize(("ids", "message"), [
    (["a", "b", "a", "c", "a"], r"2 more copies of a doc_id another document holds \(e\.g\. 'a'\)"),
    (["a", None, "b", None], r"2 documents without a doc_id;"),
])
def test_documents_without_an_id_of_their_own_fail_the_stage_naming_them(spark, make_cfg, ids, message):
    from udfs.errors import UserError

    docs = spark.createDataFrame([(d, f"{_body(i)}\n{BANNER}") for i, d in enumerate(ids)], "doc_id string, text string")
    with pytest.raises(UserError, match=message):
        annotate(docs, _cfg(make_cfg))


def test_repeated_ids_are_counted_across_the_batches_of_a_sorted_partition():
    import pyarrow as pa

    from pipelines.passages.transform import _sorted_id_counts

    def batch(ids, first_m):
        return pa.record_batch([pa.array(ids, pa.string()), pa.array(range(first_m, first_m + len(ids)), pa.int64())],
                               names=["doc_id", "_m"])

    part = 3 << 33
    got = list(_sorted_id_counts(iter([batch([None, "a", "b"], part), batch([], part), batch(["b", "b", "c"], part + 3)])))
    assert [r.to_pylist() for r in got] == [[{"p": 3, "n": 6, "named": 5, "copies": 2}]]
    assert list(_sorted_id_counts(iter([]))) == []


def test_cache_settings_leave_what_the_user_or_the_session_set():
    from types import SimpleNamespace

    from pipelines.core.config import load_config

    key = next(iter(passages_stage.CACHE_SETTINGS))

    class Conf(dict):
        def get(self, k, default=None):
            return dict.get(self, k, default)

    cfg = load_config([], [])
    assert passages_stage._cache_settings(SimpleNamespace(conf=Conf()), cfg) == passages_stage.CACHE_SETTINGS
    assert passages_stage._cache_settings(SimpleNamespace(conf=Conf({key: "true"})), cfg) == {}
    user = load_config([], [f'spark.conf={{"{key}": "true"}}'])
    assert passages_stage._cache_settings(SimpleNamespace(conf=Conf()), user) == {}
