"""pipelines/refs/stage.py: signals and refs_action per policy, refs_checked + removed tables, accounting."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.runner import run_stage
from pipelines.refs.stage import OUTPUT_COLUMNS, check_refs
from udfs.refs import undo_repair

DOCS_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int, lang string"
)
TEXTS = {
    "clean": "No references here at all. Just prose about one table we built.",
    "ok": "Results are in Table 1.\n\nTable 1: Results\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "one": "We measured twice. As shown in table one, results hold. The end.",
    "two": "See Fig. 2 for details. Also [4] agrees. Nothing else.",
    "de": "Wie Tabelle 2 zeigt, steigt der Wert. Ende.",
    "gone": "See Figure 3.",
}


def _docs(spark, texts=TEXTS):
    rows = [
        (k, t, "src", None, {}, "in.jsonl", len(t), len(t.encode()), 0, "de" if k == "de" else "en")
        for k, t in texts.items()
    ]
    return spark.createDataFrame(rows, DOCS_SCHEMA)


def test_flag_signals(spark, make_cfg):
    out = _docs(spark).transform(check_refs, make_cfg().refs)
    got = out.select("doc_id", "n_mentions", "n_dangling", "dangling_ratio", "dangling_by_kind", "refs_action")
    assertDataFrameEqual(got, [
        Row("clean", 0, 0, 0.0, {}, "none"),
        Row("ok", 1, 0, 0.0, {}, "none"),
        Row("one", 1, 1, 1.0, {"table": 1}, "flag"),
        Row("two", 2, 2, 1.0, {"figure": 1, "citation": 1}, "flag"),
        Row("de", 1, 1, 1.0, {"table": 1}, "flag"),
        Row("gone", 1, 1, 1.0, {"figure": 1}, "flag"),
    ], checkRowOrder=False)
    mentions = out.where("doc_id = 'one'").select("ref_mentions").first()[0]
    assert [tuple(m) for m in mentions] == [("table", "1", 31, 40, True)]
    assert set(OUTPUT_COLUMNS) <= set(out.columns)
    # deterministic whatever the partitioning
    again = _docs(spark).repartition(3).transform(check_refs, make_cfg().refs)
    assertDataFrameEqual(again.drop("meta"), out.drop("meta"), checkRowOrder=False)


def test_dangling_mentions_of_targets_ingest_dropped_are_told_apart(spark, make_cfg):
    from pipelines.refs.stage import DROPPED_COLUMN, _stats

    text = "Table 1 lists the runs. Figure 2 plots them, as [3] predicted. Section 4 concludes."
    metas = {"jats_drop": {"dropped_structures": "figure,reference,table"},  # ingest.jats.*: drop
             "tables_only": {"dropped_structures": "table"}, "none_dropped": {}, "no_meta": None}
    rows = [(k, text, "src", None, m, "in.nxml", len(text), len(text), 0, "en") for k, m in metas.items()]
    out = spark.createDataFrame(rows, DOCS_SCHEMA).transform(check_refs, make_cfg().refs).cache()
    every = {"table": 1, "figure": 1, "section": 1, "citation": 1}
    assertDataFrameEqual(out.select("doc_id", "dangling_by_kind", DROPPED_COLUMN), [
        Row("jats_drop", every, {"table": 1, "figure": 1, "citation": 1}),  # section 4 truly missing
        Row("tables_only", every, {"table": 1}),
        Row("none_dropped", every, {}),
        Row("no_meta", every, {}),
    ], checkRowOrder=False)
    # Still dangling (the text points at what the data does not hold): the action is unchanged.
    assert {r["refs_action"] for r in out.collect()} == {"flag"}
    stats = _stats(out)
    assert stats["dangling_by_kind"] == {"citation": 4, "figure": 4, "section": 4, "table": 4}
    assert stats[DROPPED_COLUMN] == {"citation": 1, "figure": 1, "table": 2}
    # A table without a meta column at all (refs run on a hand-made table): an empty map.
    bare = spark.createDataFrame([("b", text)], "doc_id string, text string").transform(check_refs, make_cfg().refs)
    assert bare.select(DROPPED_COLUMN).first()[0] == {}


def test_author_year_citations_dangle_where_ingest_dropped_the_reference_list(spark, make_cfg):
    from pipelines.refs.stage import DROPPED_COLUMN

    text = "The chora is read as a maternal space (Lee et al., 2011)."
    metas = {"refs_dropped": {"dropped_structures": "reference"}, "none_dropped": {}}
    rows = [(k, text, "src", None, m, "in.xml", len(text), len(text), 0, "en") for k, m in metas.items()]
    out = spark.createDataFrame(rows, DOCS_SCHEMA).transform(check_refs, make_cfg().refs)
    assertDataFrameEqual(out.select("doc_id", "n_dangling", DROPPED_COLUMN), [
        Row("refs_dropped", 1, {"citation": 1}),  # the page had a bibliography: the citation dangles
        Row("none_dropped", 0, {}),  # a page that never had one: nothing is missing
    ], checkRowOrder=False)


def test_missing_column_is_named(spark, make_cfg):
    with pytest.raises(ValueError, match=r"missing columns \['text'\]"):
        check_refs(spark.createDataFrame([("a",)], "doc_id string"), make_cfg().refs)


def test_repair_rewrites_text_and_is_undoable(spark, make_cfg):
    out = _docs(spark).transform(check_refs, make_cfg("refs.policy=repair").refs)
    rows = {r["doc_id"]: r for r in out.collect()}
    assert rows["one"]["text"] == "We measured twice. The end."
    assert rows["one"]["refs_action"] == "repair"
    assert rows["gone"]["refs_action"] == "drop"  # nothing left after the repair
    assert rows["ok"]["text"] == TEXTS["ok"] and rows["ok"]["refs_repairs"] is None
    for k in ("one", "two", "de"):
        spans = [(s["start"], s["end"], s["text"]) for s in rows[k]["refs_repairs"]]
        assert undo_repair(rows[k]["text"], spans) == TEXTS[k]


@pytest.mark.slow  # four Delta commits: ~10-20 s on an idle 2-core machine
def test_run_drop_writes_tables_and_balances(spark, make_cfg):
    cfg = make_cfg("refs.policy=drop", "refs.max_dangling=1")
    tables.write_table(_docs(spark), cfg, "filtered")
    report = run_stage(spark, cfg, "refs")
    assert (report.rows_in, report.rows_out, report.removed) == (6, 5, {"refs.dangling": 1})
    assert report.extra["actions"] == {"drop": 1, "flag": 3, "none": 2}
    kept = tables.read_table(spark, cfg, "refs_checked").select("doc_id", "refs_action")
    assertDataFrameEqual(kept, [("clean", "none"), ("ok", "none"), ("one", "flag"), ("de", "flag"), ("gone", "flag")],
                         checkRowOrder=False)
    removed = spark.read.format("delta").load(cfg.table_path("removed")).select("doc_id", "stage", "reason", "n_dangling")
    assertDataFrameEqual(removed, [("two", "refs", ["refs.dangling"], 2)])
    assert tables.table_properties(spark, cfg.table_path("refs_checked"))["policy"] == "drop"


def test_disabled_passes_through(spark, make_cfg):
    out = _docs(spark).transform(check_refs, make_cfg("refs.enabled=false").refs)
    assertDataFrameEqual(out.select("doc_id", "text", "n_dangling", "refs_action"),
                         [(k, t, None, "skipped") for k, t in TEXTS.items()], checkRowOrder=False)
