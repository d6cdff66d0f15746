"""pipelines/pii/stage.py: redact / flag / drop, pii_redacted + removed tables, accounting, config errors."""

from __future__ import annotations

import hashlib

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.config import ConfigError
from pipelines.pii.stage import OUTPUT_COLUMNS, OUTPUT_TABLE, arrow_batch_settings, redact_pii, run

DOCS_SCHEMA = "doc_id string, text string, source string"
# Invented values only.
TEXTS = {
    "clean": "Nothing personal here, version 1.2.3.4 released 2024-01-15.",
    "mail": 'Write to "jane.roe@corvid-mail.net" (office).',
    "lan": "The router answers on 192.168.1.1 only.",
    "dump": "a@kalo.net b@mire.org c@tovu.io\n",  # 3 findings in 32 chars = 93.75 per 1000
    "empty": "",
}


def _docs(spark, texts=TEXTS):
    return spark.createDataFrame([(k, t, "src") for k, t in texts.items()], DOCS_SCHEMA)


def _h(value: str, salt: str = "") -> str:
    return hashlib.sha256((salt + value).encode()).hexdigest()[:32]


def test_redact_rows(spark, make_cfg):
    out = _docs(spark).transform(redact_pii, make_cfg().pii)
    assert out.columns == ["doc_id", "text", "source", *OUTPUT_COLUMNS]
    assertDataFrameEqual(out.select("doc_id", "text", "pii_counts", "pii_action"), [
        Row("clean", TEXTS["clean"], {}, "none"),
        Row("mail", 'Write to "<EMAIL>" (office).', {"email": 1}, "redact"),
        Row("lan", TEXTS["lan"], {"ip_private": 1}, "flag"),  # report_only: reported, left in the text
        Row("dump", "<EMAIL> <EMAIL> <EMAIL>\n", {"email": 3}, "redact"),
        Row("empty", "", {}, "none"),
    ], checkRowOrder=False)
    spans = out.where("doc_id = 'mail'").select("pii_spans").first()[0]
    assert [tuple(s) for s in spans] == [("email", 10, 34, _h("jane.roe@corvid-mail.net"))]
    assert TEXTS["mail"][10:34] == "jane.roe@corvid-mail.net"
    again = _docs(spark).repartition(3).transform(redact_pii, make_cfg().pii)
    assertDataFrameEqual(again, out, checkRowOrder=False)


def test_flag_keeps_text(spark, make_cfg):
    out = _docs(spark).transform(redact_pii, make_cfg("pii.action=flag", "pii.hash_salt=x").pii)
    assertDataFrameEqual(out.select("doc_id", "text", "pii_action"), [
        Row(k, t, {"clean": "none", "empty": "none"}.get(k, "flag")) for k, t in TEXTS.items()
    ], checkRowOrder=False)
    spans = out.where("doc_id = 'mail'").select("pii_spans").first()[0]
    assert spans[0]["value_hash"] == _h("jane.roe@corvid-mail.net", "x")


@pytest.mark.parametrize("max_per_1k, dropped", [(93.0, True), (93.75, False)])
def test_drop_threshold_just_inside_and_outside(spark, make_cfg, max_per_1k, dropped):
    cfg = make_cfg("pii.action=drop", f"pii.max_per_1k_chars={max_per_1k}").pii
    out = _docs(spark).transform(redact_pii, cfg)
    got = out.where("doc_id = 'dump'").select("pii_action").first()[0]
    assert got == ("drop" if dropped else "redact")


def test_drop_needs_min_findings(spark, make_cfg):
    cfg = make_cfg("pii.action=drop", "pii.max_per_1k_chars=1", "pii.drop_min_findings=2").pii
    out = _docs(spark).transform(redact_pii, cfg)
    assertDataFrameEqual(out.select("doc_id", "pii_action"), [
        Row("clean", "none"), Row("mail", "redact"), Row("lan", "flag"), Row("dump", "drop"), Row("empty", "none"),
    ], checkRowOrder=False)


def test_disabled_and_kinds_switches(spark, make_cfg):
    out = _docs(spark).transform(redact_pii, make_cfg("pii.enabled=false").pii)
    assert out.select("pii_action").distinct().collect() == [Row("skipped")]
    assert out.where("size(pii_spans) > 0 or size(pii_counts) > 0").count() == 0
    no_mail = _docs(spark).transform(redact_pii, make_cfg("pii.kinds=[ip_private]").pii)
    assertDataFrameEqual(no_mail.select("doc_id", "pii_counts"), [
        Row("clean", {}), Row("mail", {}), Row("lan", {"ip_private": 1}), Row("dump", {}), Row("empty", {}),
    ], checkRowOrder=False)


def test_batches_cut_by_size_give_the_same_rows(spark, make_cfg):
    cfg = make_cfg("pii.batch_mb=1").pii
    assert arrow_batch_settings(cfg) == {"spark.sql.execution.arrow.maxBytesPerBatch": "1000000",
                                         "spark.sql.execution.arrow.maxRecordsPerBatch": "10000"}
    texts = {f"d{i}": f"{TEXTS['mail']} {'filler text ' * 40}{i}" for i in range(3000)}  # ~1.6 MB: 2 batches
    docs = _docs(spark, texts).repartition(1)
    by_rows = docs.transform(redact_pii, cfg).collect()
    with tables.session_conf(spark, arrow_batch_settings(cfg)):
        by_size = docs.transform(redact_pii, cfg).collect()
    assertDataFrameEqual(by_size, by_rows, checkRowOrder=False)
    assert {r["text"][:17] for r in by_size} == {'Write to "<EMAIL>'}


def test_missing_column_is_named(spark, make_cfg):
    with pytest.raises(ValueError, match=r"missing columns \['text'\]"):
        redact_pii(spark.createDataFrame([("a",)], "doc_id string"), make_cfg().pii)


def test_bad_config_names_key_and_allowed(make_cfg):
    with pytest.raises(ConfigError, match=r"pii.kinds.*unknown PII kinds \['mail'\]"):
        make_cfg("pii.kinds=[mail]")
    with pytest.raises(ConfigError, match=r"pii.action.*'erase'"):
        make_cfg("pii.action=erase")
    with pytest.raises(ConfigError, match=r"pii.phone_regions.*\['XX'\]"):
        make_cfg("pii.phone_regions=[XX]")
    with pytest.raises(ConfigError, match=r"pii.batch_mb"):
        make_cfg("pii.batch_mb=0")


def test_run_writes_tables_and_balances(spark, make_cfg):
    # The default chain puts decontam before pii; pin pii's input so the test needs only one table.
    cfg = make_cfg("pii.action=drop", "pii.input_table=refs_checked")
    tables.write_table(_docs(spark), cfg, "refs_checked")
    report = run(spark, cfg).check()
    assert (report.rows_in, report.rows_out, report.removed) == (5, 4, {"pii.email": 1})
    assert report.extra["findings_by_kind"] == {"email": 4, "ip_private": 1}
    assert report.extra["documents_by_kind"] == {"email": 2, "ip_private": 1}
    assert report.extra["actions"] == {"drop": 1, "flag": 1, "none": 2, "redact": 1}
    kept = tables.read_table(spark, cfg, OUTPUT_TABLE)
    assert sorted(r[0] for r in kept.select("doc_id").collect()) == ["clean", "empty", "lan", "mail"]
    removed = tables.read_table(spark, cfg, "removed").where("stage = 'pii'")
    assertDataFrameEqual(removed.select("doc_id", "text", "reason"), [
        Row("dump", "<EMAIL> <EMAIL> <EMAIL>\n", ["pii.email"]),  # redacted: no personal data stored again
    ])


def test_mark_pii_hides_values_redacted_or_flagged():
    from pipelines.tools.inspect import mark_pii

    text = "a jane@corvid-mail.net b 10.0.0.1 c"
    spans = [{"kind": "email", "start": 2, "end": 22, "value_hash": "0123456789abcdef"},
             {"kind": "ip_private", "start": 25, "end": 33, "value_hash": "fedcba9876543210"}]
    stored = "a <EMAIL> b 10.0.0.1 c"  # ip_private is report_only: left in the text
    assert mark_pii(stored, spans, {"email": "<EMAIL>"}) == "a ⟦email #01234567⟧ b ⟦ip_private #fedcba98⟧ c"
    assert mark_pii(text, spans, {}) == "a ⟦email #01234567⟧ b ⟦ip_private #fedcba98⟧ c"


def test_report_and_inspect_after_run(spark, make_cfg):
    from pipelines.report.stage import pii_summary
    from pipelines.tools.inspect import sample_pii

    # The default chain puts decontam before pii; pin pii's input so the test needs only one table.
    cfg = make_cfg("pii.action=drop", "pii.input_table=refs_checked")
    tables.write_table(_docs(spark), cfg, "refs_checked")
    run(spark, cfg)
    assert pii_summary(spark, cfg) == {
        "by_kind": [{"kind": "email", "findings": 4, "documents": 2}, {"kind": "ip_private", "findings": 1, "documents": 1}],
        "documents": {"drop": 1, "flag": 1, "none": 2, "redact": 1},
        "dropped": [{"reason": "pii.email", "documents": 1}],
    }
    rows = {r["doc_id"]: r for r in sample_pii(spark, cfg, n=10)}
    assert sorted(rows) == ["lan", "mail"]
    assert rows["mail"]["text"] == f'Write to "⟦email #{_h("jane.roe@corvid-mail.net")[:8]}⟧" (office).'
    assert rows["lan"]["text"] == f"The router answers on ⟦ip_private #{_h('192.168.1.1')[:8]}⟧ only."
    dropped = sample_pii(spark, cfg, reason="pii.email")
    assert [r["doc_id"] for r in dropped] == ["dump"] and "@" not in dropped[0]["text"]


@pytest.mark.parametrize(("stage", "stages", "forced", "expected"), [
    ("pii", "[ingest, dedup, filter, refs, pii]", None, "refs_checked"),
    ("pii", "[ingest, filter, pii, tokenize]", None, "filtered"),
    ("pii", "[ingest, refs, pii]", "deduped", "deduped"),
    ("tokenize", "[ingest, dedup, filter, refs, pii, tokenize]", None, "pii_redacted"),
])
def test_pii_reads_the_previous_document_table_and_tokenize_reads_its_output(stage, stages, forced, expected):
    from pipelines.core.config import load_config

    cfg = load_config(overrides=[f"pipeline.stages={stages}"] + ([f"pii.input_table={forced}"] if forced else []))
    assert tables.previous_document_table(cfg, stage, getattr(cfg, stage).input_table) == expected
