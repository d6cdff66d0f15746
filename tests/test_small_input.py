"""A local run's stage on a small input runs without adaptive query execution (spark.small_input_mb)."""

from __future__ import annotations

from pyspark.sql import functions as F

from pipelines.core import runner as stage
from pipelines.core import tables


def _documents(spark, cfg):
    df = spark.range(20).select(F.col("id").cast("string").alias("doc_id"), F.lit("some text").alias("text"))
    tables.write_table(df, cfg, "documents")


def _run_stopped(spark, cfg, fake_run):
    """run_stage of dedup with ``fake_run`` as the stage, which ends by raising RuntimeError."""
    original = stage.stage_runner
    stage.stage_runner = lambda name: fake_run
    try:
        try:
            stage.run_stage(spark, cfg, "dedup")
        except RuntimeError:
            pass
    finally:
        stage.stage_runner = original


def test_small_table_input_turns_aqe_off_for_the_stage_only(spark, make_cfg):
    cfg = make_cfg()
    _documents(spark, cfg)
    assert 0 < stage.input_bytes(spark, cfg, "dedup") < 1_000_000
    settings = stage.small_input_settings(spark, cfg, "dedup")
    parts = min(4, 2 * spark.sparkContext.defaultParallelism)
    assert settings == {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(parts),
                        "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                        "spark.sql.limit.initialNumPartitions": str(parts)}
    before = spark.conf.get("spark.sql.adaptive.enabled")
    seen = {}

    def fake_run(spark_, cfg_):
        seen["aqe"] = spark_.conf.get("spark.sql.adaptive.enabled")
        raise RuntimeError("stop")

    _run_stopped(spark, cfg, fake_run)
    assert seen["aqe"] == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == before  # restored, also when the stage fails


def test_no_change_when_off_unknown_or_set_by_the_user(spark, make_cfg):
    cfg = make_cfg("spark.small_input_mb=0")
    _documents(spark, cfg)
    assert stage.small_input_settings(spark, cfg, "dedup") == {}
    explicit = make_cfg("spark.conf={spark.sql.adaptive.enabled: 'true'}", root=cfg.run.root)
    assert "spark.sql.adaptive.enabled" not in stage.small_input_settings(spark, explicit, "dedup")  # the user's
    missing = make_cfg(root=cfg.run.root + "-none")
    assert stage.input_bytes(spark, missing, "filter") is None  # deduped not written yet
    assert stage.small_input_settings(spark, missing, "filter") == {}


def test_ingest_counts_its_input_files(spark, make_cfg, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text('{"text": "a"}\n' * 10)
    cfg = make_cfg(f"ingest.inputs=[{f}]")
    assert stage.input_bytes(spark, cfg, "ingest") == f.stat().st_size


def test_every_stage_writes_tables_without_column_statistics_unless_the_user_asks(spark, make_cfg):
    key = "spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols"
    cfg = make_cfg()
    assert stage.stage_settings(spark, cfg, "dedup")[key] == "0"
    user = make_cfg(f"spark.conf={{{key}: '32'}}", root=cfg.run.root)
    assert key not in stage.stage_settings(spark, user, "dedup")
    spark.conf.set(key, "5")  # a cluster's own setting
    try:
        assert key not in stage.stage_settings(spark, cfg, "dedup")
    finally:
        spark.conf.unset(key)
    written = {}

    def writes_a_table(spark_, cfg_):
        df = spark_.range(3).select(F.col("id").cast("string").alias("doc_id"))
        path = tables.write_table(df, cfg_, "stats_probe")
        written["props"] = spark_.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["properties"]
        raise RuntimeError("stop")

    _run_stopped(spark, cfg, writes_a_table)
    assert written["props"]["delta.dataSkippingNumIndexedCols"] == "0"
    assert spark.conf.get(key, None) is None  # restored after the stage
