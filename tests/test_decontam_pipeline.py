"""pipelines/decontam/stage.py: eval_ngrams build and reuse, both join paths, match rules, actions, tables."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.decontam import stage as decontam

DOCS_SCHEMA = "doc_id string, text string, source string, n_chars int"
Q1 = "Which river flows through the ancient city that hosted the first recorded chariot race in the valley?"
A1 = "The Amber River"
Q2 = "How many copper coins did the miller pay for seven sacks of barley at the autumn market?"
A2 = "Forty two"
SHORT_Q, SHORT_A = "Capital of Norland?", "Vesk"
FILLER = ("Gardeners in the region prefer raised beds because the soil drains slowly after heavy rain. " * 6)


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def qa_set(tmp_path):
    return _write_jsonl(tmp_path / "qa.jsonl", [
        {"id": "q1", "question": Q1, "answer": A1},
        {"id": "q2", "question": Q2, "answer": A2},
        {"id": "q3", "question": SHORT_Q, "answer": SHORT_A},
        {"id": "q4", "question": "", "answer": ""},  # no text: skipped, counted
    ])


def _cfg(make_cfg, qa, *extra):
    sets = json.dumps([{"name": "qa", "paths": [qa], "fields": ["question", "answer"], "id_field": "id"}])
    return make_cfg(f"decontam.eval_sets={sets}", *extra)


DOCS = {
    "clean": FILLER,
    "verbatim": FILLER + Q1 + " " + A1 + ". " + FILLER,
    "rewrapped": FILLER + "\n\n" + Q2.upper().replace(" ", "\n   ", 3) + "\n" + FILLER,
    "short": "Quiz night notes. capital of NORLAND: vesk! " + FILLER,
    "few_words": "Which river flows through the ancient city? Nobody knows. " + FILLER,
    "all_eval": Q1,
}


def _docs(spark, texts=DOCS):
    return spark.createDataFrame([(k, t, "src", len(t)) for k, t in texts.items()], DOCS_SCHEMA)


@pytest.mark.parametrize("join", ["broadcast", "shuffle"])
def test_matches_are_the_same_on_both_join_paths(spark, make_cfg, qa_set, join):
    cfg = _cfg(make_cfg, qa_set)
    index = decontam.build_eval_ngrams(spark, cfg)
    matches = decontam.find_matches(_docs(spark), index, cfg.decontam, join)
    plan = matches._jdf.queryExecution().executedPlan().toString()
    assert ("ShuffledHashJoin" in plan) == (join == "shuffle")  # the shuffle path really shuffles
    got = matches.select("doc_id", "contaminated_by", "decontam_items.item_id")
    assertDataFrameEqual(got, [
        Row("verbatim", ["qa"], ["q1"]), Row("rewrapped", ["qa"], ["q2"]), Row("short", ["qa"], ["q3"]),
        Row("all_eval", ["qa"], ["q1"]),
    ], checkRowOrder=False)
    assert index.summary["qa"]["skipped"] == {"no_text": 1}


def test_eval_ngrams_reused_for_the_same_fingerprint(spark, make_cfg, qa_set, tmp_path):
    cfg = _cfg(make_cfg, qa_set)
    first = decontam.build_eval_ngrams(spark, cfg)
    again = decontam.build_eval_ngrams(spark, cfg)
    assert (first.reused, again.reused) == (False, True) and first.fingerprint == again.fingerprint
    assert again.summary == first.summary and list(again.ngram_keys) == list(first.ngram_keys)
    other = decontam.build_eval_ngrams(spark, _cfg(make_cfg, qa_set, "decontam.ngram_size=8"))
    assert not other.reused and other.fingerprint != first.fingerprint


def test_min_matches_and_min_item_fraction_thresholds(spark, make_cfg, qa_set):
    # Q1 + A1 = 20 words -> 8 13-grams; "verbatim" holds all 8, "partial" 3 of them (15 words).
    words = Q1.split()
    texts = {"verbatim": DOCS["verbatim"], "partial": FILLER + " ".join(words[:15]) + " zzz. " + FILLER}
    docs = _docs(spark, texts)

    def matched(*overrides):
        cfg = _cfg(make_cfg, qa_set, *overrides)
        index = decontam.build_eval_ngrams(spark, cfg)
        return sorted(r.doc_id for r in decontam.find_matches(docs, index, cfg.decontam, "broadcast").collect())

    assert matched("decontam.min_matches=3", "decontam.min_item_fraction=null") == ["partial", "verbatim"]
    assert matched("decontam.min_matches=4", "decontam.min_item_fraction=null") == ["verbatim"]
    assert matched("decontam.min_matches=100", "decontam.min_item_fraction=0.375") == ["partial", "verbatim"]  # 3/8
    assert matched("decontam.min_matches=100", "decontam.min_item_fraction=0.376") == ["verbatim"]


def test_flag_keeps_everything_and_annotates(spark, make_cfg, qa_set):
    cfg = _cfg(make_cfg, qa_set, "decontam.action=flag")
    index = decontam.build_eval_ngrams(spark, cfg)
    docs = _docs(spark)
    out = decontam.decontaminate(docs, decontam.find_matches(docs, index, cfg.decontam), cfg.decontam, index.short_lengths)
    got = out.select("doc_id", "contaminated_by", "decontam_matched_ngrams", "decontam_cuts", "decontam_action")
    assertDataFrameEqual(got, [
        Row("clean", [], 0, None, "none"), Row("few_words", [], 0, None, "none"),
        Row("verbatim", ["qa"], 8, None, "flag"), Row("rewrapped", ["qa"], 5, None, "flag"),
        Row("short", ["qa"], 1, None, "flag"), Row("all_eval", ["qa"], 5, None, "flag"),
    ], checkRowOrder=False)
    assert out.where("doc_id = 'verbatim'").first()["text"] == DOCS["verbatim"]


def test_cut_removes_spans_and_drops_what_is_too_short(spark, make_cfg, qa_set):
    cfg = _cfg(make_cfg, qa_set, "decontam.action=cut", "decontam.cut_margin_chars=0", "decontam.min_chars_after_cut=100")
    index = decontam.build_eval_ngrams(spark, cfg)
    docs = _docs(spark)
    rows = {r.doc_id: r for r in decontam.decontaminate(
        docs, decontam.find_matches(docs, index, cfg.decontam), cfg.decontam, index.short_lengths).collect()}
    v = DOCS["verbatim"]
    start = v.index(Q1)
    assert [tuple(c) for c in rows["verbatim"].decontam_cuts] == [(start, start + len(Q1 + " " + A1))]
    assert rows["verbatim"].text == FILLER.strip() + "\n" + ". " + FILLER.strip()
    assert rows["verbatim"].decontam_action == "cut"
    assert rows["all_eval"].decontam_action == "drop" and rows["all_eval"].text == Q1  # nothing left
    assert rows["clean"].decontam_action == "none" and rows["clean"].text == FILLER


@pytest.mark.slow  # several Delta commits
def test_run_drop_writes_tables_and_balances(spark, make_cfg, qa_set):
    cfg = _cfg(make_cfg, qa_set, "decontam.action=drop")
    tables.write_table(_docs(spark), cfg, "refs_checked")
    report = decontam.run(spark, cfg).check()
    assert (report.rows_in, report.rows_out, report.removed) == (6, 2, {"decontam.qa": 4})
    kept = tables.read_table(spark, cfg, "decontaminated").select("doc_id", "decontam_action")
    assertDataFrameEqual(kept, [Row("clean", "none"), Row("few_words", "none")], checkRowOrder=False)
    removed = tables.read_table(spark, cfg, "removed").select("doc_id", "stage", "reason")
    assertDataFrameEqual(removed, [Row(k, "decontam", ["decontam.qa"]) for k in ("verbatim", "rewrapped", "short", "all_eval")],
                         checkRowOrder=False)
    qa = report.extra["sets"]["qa"]
    assert {k: qa[k] for k in ("items", "indexed", "items_found", "docs_matched")} == {
        "items": 3, "indexed": 3, "items_found": 3, "docs_matched": 4}
    assert qa["top_items"][0] == {"item_id": "q1", "docs": 2, "ngrams": 8 + 5}
    assert qa["ngrams_matched"] == 8 + 5 + 5 + 1
    # the report's section and the inspection sample (spans marked in the input text)
    from pipelines.decontam.report import OPEN, contamination, format_matches, matched_samples

    c = contamination(spark, cfg)
    assert c["actions"] == {"drop": 4, "none": 2} and c["join"] == "broadcast"
    assert [(s["set"], s["items_found"], s["docs_matched"]) for s in c["sets"]] == [("qa", 3, 4)]
    rows = {r["doc_id"]: r for r in matched_samples(spark, cfg, n=10, text_chars=100_000)}
    assert sorted(rows) == ["all_eval", "rewrapped", "short", "verbatim"]
    assert f"{OPEN}{Q1} {A1}]]" in rows["verbatim"]["text"]
    assert f"{OPEN}capital of NORLAND: vesk]]" in rows["short"]["text"]
    assert "qa/q1 (8 n-grams)" in format_matches(list(rows.values()), "hdr")


def test_join_path_follows_the_broadcast_threshold(make_cfg):
    index = decontam.EvalIndex(None, np.arange(10, dtype=np.uint64), np.zeros(0, np.uint64), [], {}, "fp", False)
    assert decontam.join_path(index, make_cfg("decontam.broadcast_max_ngrams=10").decontam) == "broadcast"
    assert decontam.join_path(index, make_cfg("decontam.broadcast_max_ngrams=9").decontam) == "shuffle"


def test_eval_set_from_a_delta_table(spark, make_cfg, tmp_path):
    path = str(tmp_path / "qa_table")
    spark.createDataFrame([("t1", Q1, A1), ("t2", Q2, None)], "id string, question string, answer string") \
        .write.format("delta").save(path)
    sets = json.dumps([{"name": "qa", "table": path, "fields": ["question", "answer"], "id_field": "id"}])
    cfg = make_cfg(f"decontam.eval_sets={sets}")
    index = decontam.build_eval_ngrams(spark, cfg)
    assert index.summary["qa"] == {"items": 2, "indexed": 2, "rows": 2, "skipped": {}, "missing_fields": {"answer": 1}}
    got = decontam.find_matches(_docs(spark), index, cfg.decontam).select("doc_id", "decontam_items.item_id")
    assertDataFrameEqual(got, [Row("verbatim", ["t1"]), Row("rewrapped", ["t2"]), Row("all_eval", ["t1"])],
                         checkRowOrder=False)
