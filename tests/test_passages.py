"""udfs/passages.py and pipelines/passages/stage.py: paragraph spans, cuts, the first occurrence kept,
the passage_deduped and removed tables, accounting."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.config import ConfigError
from pipelines.passages.stage import OUTPUT_TABLE, REMOVED_REASON, find_repeats, remove_repeats, run
from udfs import passages

BOILER = "This article is distributed under the terms of a licence that permits use and sharing in any medium."
LONG = "A paragraph long enough to be compared, written once for this test and repeated on purpose here."


def test_paragraph_spans_skip_blank_and_short_paragraphs():
    spans = passages.paragraph_spans(pa.array([f"Title\n\n{LONG}\n \n{BOILER}", "", None]), min_chars=20)
    first = spans[0].as_py()
    end = 7 + len(LONG) + len("\n \n")
    assert [(s["start"], s["end"]) for s in first] == [(7, end), (end, end + len(BOILER))]
    assert first[0]["hash"] == passages.paragraph_key(LONG)
    assert spans[1].as_py() == [] and spans[2].as_py() == []


@pytest.mark.parametrize(("text", "key_of"), [("a  b\n c", "a b c"), ("\ta b c ", "a b c")])
def test_paragraph_key_ignores_whitespace(text, key_of):
    assert passages.paragraph_key(text) == passages.paragraph_key(key_of)


def test_min_chars_just_inside_and_outside():
    text = "x" * 10
    assert len(passages.paragraph_spans(pa.array([text]), min_chars=10)[0].as_py()) == 1
    assert passages.paragraph_spans(pa.array([text]), min_chars=11)[0].as_py() == []


def _docs(spark):
    rows = [("a", f"Intro of a.\n\n{BOILER}"), ("b", f"{BOILER}\n\nBody of b, its own."),
            ("c", BOILER), ("d", "Nothing repeated here.")]
    return spark.createDataFrame(rows, "doc_id string, text string")


def test_first_occurrence_in_doc_id_order_is_kept(spark, make_cfg):
    cfg = make_cfg("passages.min_chars=20").passages
    assertDataFrameEqual(find_repeats(_docs(spark), cfg), [
        Row(doc_id="b", start=0, end=len(BOILER) + 2, first_seen_in="a"),
        Row(doc_id="c", start=0, end=len(BOILER), first_seen_in="a"),
    ])
    out = remove_repeats(_docs(spark), cfg)
    assert out.columns == ["doc_id", "text", "passage_cuts"]
    assertDataFrameEqual(out.select("doc_id", "text"), [
        Row("a", f"Intro of a.\n\n{BOILER}"), Row("b", "Body of b, its own."), Row("c", ""),
        Row("d", "Nothing repeated here."),
    ])


def test_disabled_passes_documents_unchanged(spark, make_cfg):
    out = remove_repeats(_docs(spark), make_cfg("passages.enabled=false").passages)
    assertDataFrameEqual(out.select("doc_id", "text"), _docs(spark))
    assert {r[0] for r in out.selectExpr("size(passage_cuts)").collect()} == {0}


def test_run_writes_tables_and_balances(spark, make_cfg):
    cfg = make_cfg("passages.min_chars=20", "pipeline.stages=[passages]")
    tables.write_table(_docs(spark), cfg, "decontaminated")
    report = run(spark, cfg).check()
    assert (report.rows_in, report.rows_out, report.removed) == (4, 3, {REMOVED_REASON: 1})
    assert report.extra == {"documents_cut": 2, "paragraphs_cut": 2, "chars_cut": 2 * len(BOILER) + 2}
    kept = tables.read_table(spark, cfg, OUTPUT_TABLE)
    assert sorted(r[0] for r in kept.select("doc_id").collect()) == ["a", "b", "d"]
    removed = tables.read_table(spark, cfg, "removed").where("stage = 'passages'")
    assertDataFrameEqual(removed.select("doc_id", "reason"), [Row("c", [REMOVED_REASON])])


def test_config_errors_name_the_key(make_cfg):
    with pytest.raises(ConfigError, match="passages.min_chars"):
        make_cfg("passages.min_chars=0")
