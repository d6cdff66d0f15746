"""pipelines/filter/stage.py + jobs/filter.py: signals as columns, decisions from config, accounting, --decide-only."""

from __future__ import annotations

import json
import re

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.config import ConfigError
from pipelines.filter import stage as fs
from pipelines.filter.config import FilterConfig

DOCS_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)
GOOD = (
    "The history of the city is long and full of change. Its people have worked with care to build "
    "schools, roads and parks that serve the whole region. Many visitors come to see the old market, "
    "and they often stay to enjoy the food and the music that fill the streets at night. Local leaders "
    "say that the next ten years will bring new homes and better transport for everyone who lives there. "
    "The council meets every month to plan this work."
)
SHORT = "Too short to keep."
FRENCH = (
    "La ville est connue pour son marché ancien et ses rues étroites. Les habitants aiment se retrouver "
    "sur la place le soir pour discuter et partager un repas. Chaque année, un grand festival attire des "
    "milliers de visiteurs venus de toute la région pour écouter de la musique et goûter la cuisine locale."
)


def _docs(spark, texts):
    rows = [(f"d{i}", t, "test", None, {}, "f.jsonl", len(t), len(t.encode()), 0) for i, t in enumerate(texts)]
    return spark.createDataFrame(rows, DOCS_SCHEMA)


def test_missing_columns_are_named(spark, make_cfg):
    with pytest.raises(ValueError, match=r"missing columns \['text'\]"):
        fs.filter_documents(spark.createDataFrame([("a",)], "doc_id string"), make_cfg())


@pytest.mark.slow
def test_run_accounting_reasons_and_decide_only(spark, make_cfg):
    cfg = make_cfg()
    docs = _docs(spark, [GOOD, SHORT, FRENCH, ""])
    tables.write_table(docs, cfg, tables.stage_input_table(cfg, "filter"))
    report = fs.run(spark, cfg)
    assert (report.rows_in, report.rows_out, report.n_removed) == (4, 1, 3)
    report.check()
    kept = spark.read.format("delta").load(cfg.table_path("filtered"))
    assertDataFrameEqual(kept.select("doc_id", "lang", "filter_flags"), [("d0", "en", [])])
    removed = spark.read.format("delta").load(cfg.table_path("removed"))
    got = removed.select("doc_id", "stage", F.array_contains("reason", "gopher_quality.word_count").alias("wc"),
                         F.array_contains("reason", "lang.allowed").alias("lang"))
    assertDataFrameEqual(got, [("d1", "filter", True, False), ("d2", "filter", False, True),
                               ("d3", "filter", True, False)])
    assert set(removed.columns) >= {*fs.SIGNAL_COLUMNS, "text", "meta", "reason", "duplicate_of"}

    # --decide-only with French allowed and word_count flagged equals the full transform with that config
    # (computed in memory: a second full run would cost three more Delta commits)
    cfg2 = make_cfg("filter.langid.allowed=[en, fr]", "filter.gopher_quality.rule_actions={word_count: flag}")
    again = fs.run(spark, cfg2, decide_only=True)
    full = fs.filter_documents(docs, cfg2).select("doc_id", "filter_reasons", "filter_flags").cache()
    expected_kept = full.filter(F.size("filter_reasons") == 0).select("doc_id", "filter_flags")
    expected_removed = full.filter(F.size("filter_reasons") > 0).select("doc_id", F.col("filter_reasons").alias("reason"))
    assert (again.rows_in, again.rows_out, again.n_removed) == (4, expected_kept.count(), expected_removed.count())
    assertDataFrameEqual(expected_kept, [("d0", [])])  # French now passes lang.allowed but fails other rules
    assertDataFrameEqual(spark.read.format("delta").load(cfg2.table_path("filtered")).select("doc_id", "filter_flags"),
                         expected_kept)
    assertDataFrameEqual(spark.read.format("delta").load(cfg2.table_path("removed")).select("doc_id", "reason"),
                         expected_removed)
    full.unpersist()
    # A setting that shapes the signals cannot be re-decided: it fails naming the key (it was ignored).
    with pytest.raises(ConfigError, match=r"filter.profiles.web.signals_from: signals computed with 'text', "
                                          r"asked 'prose'"):
        fs.run(spark, make_cfg("filter.profiles={web: {signals_from: prose}}"), decide_only=True)


def test_decide_only_refuses_settings_that_shape_the_signals():
    stored = json.loads(json.dumps(fs.signal_settings(FilterConfig())))
    fs.check_decide_only(stored, FilterConfig(langid={"allowed": ["en", "de"], "min_score": 0.5}))  # decisions: fine
    fs.check_decide_only(None, FilterConfig(signals_from="prose"))  # a table from before the record: no check
    for over, key in (({"langid": {"sample_windows": 8}}, "filter.langid.sample_windows"),
                      ({"langid": {"confident_score": None}}, "filter.langid.confident_score"),
                      ({"profile_by_source": {"wiki*": "wiki"}}, "filter.profile_by_source"),
                      ({"profiles": {"wiki": {"c4": {"clean_lines": True}}}}, "filter.profiles.wiki.c4.clean_lines")):
        with pytest.raises(ConfigError, match=re.escape(key) + ": signals computed with "):
            fs.check_decide_only(stored, FilterConfig(**over))


def test_rule_thresholds_just_inside_and_outside(spark, make_cfg):
    signals = fs.compute_signals(_docs(spark, [GOOD]), make_cfg().filter).cache()
    row = signals.first()
    wc = row["gopher_quality"]["word_count"]
    mwl = row["gopher_quality"]["mean_word_length"]
    score = row["lang_score"]

    def decided(*overrides):
        return fs.decide(signals, make_cfg(*overrides).filter).first()["filter_reasons"]

    assert decided() == []
    assert decided(f"filter.gopher_quality.min_words={wc}") == []
    assert decided(f"filter.gopher_quality.min_words={wc + 1}") == ["gopher_quality.word_count"]
    assert decided(f"filter.gopher_quality.max_words={wc - 1}") == ["gopher_quality.word_count"]
    assert decided(f"filter.gopher_quality.min_mean_word_length={mwl!r}") == []
    assert decided(f"filter.gopher_quality.min_mean_word_length={mwl + 1e-9!r}") == ["gopher_quality.mean_word_length"]
    assert decided(f"filter.gopher_quality.max_mean_word_length={mwl - 1e-9!r}") == ["gopher_quality.mean_word_length"]
    assert decided(f"filter.langid.min_score={score - 1e-9}") == []
    assert decided(f"filter.langid.min_score={min(1.0, score + 1e-6)}") == ["lang.score"]
    # a rule switched off, a rule restricted to another language, a null threshold
    assert decided(f"filter.gopher_quality.min_words={wc + 1}", "filter.gopher_quality.rule_actions={word_count: off}") == []
    assert decided(f"filter.gopher_quality.min_words={wc + 1}", "filter.gopher_quality.languages=[fr]") == []
    assert decided("filter.gopher_quality.min_words=null", "filter.gopher_quality.max_words=null") == []
    flagged = fs.decide(signals, make_cfg(f"filter.gopher_quality.min_words={wc + 1}",
                                          "filter.gopher_quality.action=flag").filter).first()
    assert (flagged["filter_reasons"], flagged["filter_flags"]) == ([], ["gopher_quality.word_count"])
    # decide judges by the profiles in use only; a row of another profile fails loudly, not kept unjudged
    other = signals.withColumn("filter_profile", F.lit("science"))
    assert fs.decide(other, make_cfg("filter.profile_by_source={'x*': science}").filter).first()["filter_reasons"] == []
    with pytest.raises(Exception, match="filter_profile science is not one of the profiles in use"):
        fs.decide(other, make_cfg("filter.default_profile=web").filter).first()
    signals.unpersist()


def test_disabled_stage_passes_documents_through(spark, make_cfg):
    cfg = make_cfg("filter.enabled=false")
    tables.write_table(_docs(spark, [SHORT, FRENCH]), cfg, tables.stage_input_table(cfg, "filter"))
    report = fs.run(spark, cfg)
    assert (report.rows_in, report.rows_out, report.n_removed) == (2, 2, 0)


def test_job_parser_accepts_decide_only(tmp_path):
    from jobs.filter import main

    with pytest.raises(SystemExit) as e:
        main(["--set", "filter.fineweb.action=maybe", "--decide-only"])
    assert e.value.code == 2
