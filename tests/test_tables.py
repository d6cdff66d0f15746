"""Delta table helpers: atomic replace with properties, idempotent `removed` writes, clear missing-table errors."""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipelines.core import cache, tables


def test_write_table_replaces_and_records_properties(spark, make_cfg):
    cfg = make_cfg()
    df = spark.createDataFrame([("a", "x"), ("b", "y")], "doc_id string, text string")
    tables.write_table(df, cfg, "documents", properties={"scheme": "s1", "obj": {"n": 1}})
    tables.write_table(df.where("doc_id = 'a'"), cfg, "documents", properties={"scheme": "s2"})
    path = cfg.table_path("documents")
    assert tables.table_properties(spark, path) == {"scheme": "s2"}
    assert tables.table_version(spark, path) == 1
    assertDataFrameEqual(tables.read_table(spark, cfg, "documents"), [("a", "x")], checkRowOrder=False)


def test_relative_run_root_is_a_path_not_a_table_name(spark, make_cfg, tmp_path):
    # run.root defaults to the relative "out": Delta reads delta.`out/...` as a table in schema "delta".
    cfg = make_cfg(root=os.path.relpath(tmp_path / "rel", os.getcwd()))
    path = tables.write_table(spark.createDataFrame([("a",)], "doc_id string"), cfg, "documents", properties={"k": "v"})
    assert tables.table_properties(spark, path) == {"k": "v"}
    assert (tmp_path / "rel" / "tables" / "documents" / "_delta_log").is_dir()


def test_write_removed_replaces_only_its_stage(spark, make_cfg):
    cfg = make_cfg()
    rows = spark.createDataFrame([("a", "x")], "doc_id string, text string").withColumn("reason", F.array(F.lit("r")))
    tables.write_removed(rows, cfg, "dedup")
    tables.write_removed(rows.withColumn("signal", F.lit(0.5)), cfg, "filter")
    tables.write_removed(rows, cfg, "dedup")  # a re-run must not duplicate
    got = spark.read.format("delta").load(cfg.table_path("removed")).select("doc_id", "stage", "signal")
    assertDataFrameEqual(got, [("a", "dedup", None), ("a", "filter", 0.5)], checkRowOrder=False)


def test_read_missing_table_names_the_stage(spark, make_cfg):
    cfg = make_cfg()
    with pytest.raises(tables.MissingTableError, match=r"'deduped' not found.*run the 'dedup' stage first"):
        tables.read_table(spark, cfg, "deduped", written_by="dedup")


def test_effective_config_written_with_fingerprints(spark, make_cfg):
    cfg = make_cfg()
    path = tables.write_effective_config(spark, cfg, "ingest")
    doc = json.loads(open(path).read())
    assert doc["fingerprint"] == cfg.fingerprint()
    assert doc["stage_fingerprint"] == cfg.stage_fingerprint("ingest")
    assert doc["config"]["run"]["root"] == cfg.run.root


def test_written_rows_and_small_table_cache(spark, make_cfg, monkeypatch):
    # Counts come from the commit just made (numOutputRows); a small table read with cache_under_bytes
    # stays cached until release_cached, a limit below its size leaves it uncached.
    cfg = make_cfg()
    df = spark.createDataFrame([(str(i), "x" * i) for i in range(7)], "doc_id string, text string")
    path = tables.write_table(df, cfg, "documents")
    assert tables.written_rows(spark, path) == 7
    assert tables.commit_metrics(spark, path)["numOutputRows"] == "7"
    size = tables.table_bytes(spark, path, tables.table_version(spark, path))
    assert size is not None and size > 0
    assert not tables.read_table(spark, cfg, "documents", cache_under_bytes=size - 1).is_cached
    cached = tables.read_table(spark, cfg, "documents", cache_under_bytes=size)
    assert cached.is_cached and cached.count() == 7
    # text is cached on local disk, never on the heap (a 120,000-document report died of it)
    assert cached.storageLevel == tables.TEXT_CACHE
    tables.release_cached(spark)
    monkeypatch.setattr(cache, "SMALL_BULK_TABLE_BYTES", size - 1)  # text over it: not cached at any limit
    assert not tables.read_table(spark, cfg, "documents", cache_under_bytes=1 << 30).is_cached
    tables.write_table(df.select("doc_id", F.length("text").alias("n")), cfg, "stats")
    small = tables.read_table(spark, cfg, "stats", cache_under_bytes=1 << 30)
    assert small.is_cached and not tables.holds_bulk(small) and small.storageLevel.useMemory
    tables.release_cached(spark)
    assert not cached.is_cached
    assert tables.commit_metrics(spark, cfg.table_path("missing")) == {}


def test_removed_slice_appended_only_when_the_log_proves_it_absent(spark, make_cfg):
    # write_removed appends (no snapshot rebuild) only where the log shows no file of the stage; a
    # DELETE's rewritten files are unlabelled, so the next write replaces through Delta again.
    cfg = make_cfg()
    path = cfg.table_path("removed")
    rows = spark.createDataFrame([("a", "x"), ("b", "y")], "doc_id string, text string").withColumn(
        "reason", F.array(F.lit("r"))).coalesce(1)  # one file: the DELETE below rewrites it
    assert not tables.holds_no_rows_of(path, "dedup")  # no table yet: created by a replaceWhere write
    tables.write_removed(rows, cfg, "dedup")
    assert tables.holds_no_rows_of(path, "filter") and not tables.holds_no_rows_of(path, "dedup")
    tables.write_removed(rows.limit(1), cfg, "filter")
    assert not tables.holds_no_rows_of(path, "filter") and tables.holds_no_rows_of(path, "pii")
    tables.clear_removed(spark, cfg, "pii", rows.limit(0))  # nothing of pii: no commit
    assert tables.table_version(spark, path) == 1
    tables.write_removed(rows.where("doc_id = 'b'"), cfg, "filter")  # a re-run replaces its slice
    got = tables.read_path(spark, path).select("doc_id", "stage")
    assertDataFrameEqual(got, [("a", "dedup"), ("b", "dedup"), ("b", "filter")], checkRowOrder=False)
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, path).delete("doc_id = 'a'")  # rewrites dedup's file: its stage unknown
    assert not tables.holds_no_rows_of(path, "pii")


def test_direct_parquet_read_matches_delta_read(spark, make_cfg):
    # read_path reads a local table's live files with the log's schema: same rows and schema as Delta,
    # at the latest version and at an earlier one, and an empty table.
    cfg = make_cfg()
    df = spark.createDataFrame([("a", 1, {"k": "v"}), ("b", 2, None)], "doc_id string, n int, meta map<string,string>")
    path = tables.write_table(df, cfg, "documents")
    tables.write_table(df.where("n = 2"), cfg, "documents")
    for version in (None, 0, 1):
        direct = tables.read_path(spark, path, version)
        via_delta = spark.read.format("delta").option("versionAsOf", 1 if version is None else version).load(path)
        assert "delta" not in direct._jdf.queryExecution().analyzed().toString().lower()
        assert direct.schema == via_delta.schema
        assertDataFrameEqual(direct, via_delta, checkRowOrder=False)
    empty = tables.read_path(spark, tables.write_table(df.limit(0), cfg, "quarantine"))
    assert empty.count() == 0 and empty.schema == spark.read.format("delta").load(cfg.table_path("quarantine")).schema


def test_local_frame_is_create_dataframe_without_python_tasks(spark):
    ddl = "path string, key_path string, size bigint, start bigint, end bigint"
    rows = [(f"p{i}", None if i % 3 == 0 else f"k{i}", i, 2 * i, 3 * i) for i in range(37)]
    mine, theirs = tables.local_frame(spark, rows, ddl), spark.createDataFrame(rows, ddl)
    assert mine.schema == theirs.schema
    # the same rows in the same partitions (so a round-robin repartition after it deals them alike)
    with_part = [F.spark_partition_id().alias("part"), "*"]
    assert mine.select(*with_part).collect() == theirs.select(*with_part).collect()
    # no Python task: the plan reads the rows in the JVM, where createDataFrame's maps them in Python
    assert "PythonRDD[" not in mine._jdf.queryExecution().toRdd().toDebugString()
    assert "PythonRDD[" in theirs._jdf.queryExecution().toRdd().toDebugString()
    assert tables.local_frame(spark, [{"a": 1, "b": "x"}], "a int, b string").collect()[0].asDict() == {"a": 1, "b": "x"}
    with pytest.raises(TypeError):
        tables.local_frame(spark, [("x", "y")], "a int, b string")


def test_write_table_creates_a_new_table_without_replacing(spark, make_cfg):
    # A new run root's table is created (no Spark job listing the files of a table to replace); an
    # existing one is replaced: same rows, properties and versions as createOrReplace gives.
    cfg = make_cfg()
    df = spark.createDataFrame([("a", "x"), ("b", "y")], "doc_id string, text string")
    path = tables.write_table(df, cfg, "documents", properties={"k": "1"})
    tables.write_table(df.limit(1), cfg, "documents", properties={"k": "2"})
    ops = [json.loads(line)["commitInfo"]["operation"]
           for v in (0, 1) for line in open(f"{path}/_delta_log/{v:020d}.json") if "commitInfo" in line]
    assert ops == ["CREATE TABLE AS SELECT", "CREATE OR REPLACE TABLE AS SELECT"]
    assert tables.table_properties(spark, path) == {"k": "2"} and tables.written_rows(spark, path) == 1


def test_java_hash_map_order_is_the_order_spark_stores_a_python_dict_in(spark, tmp_path):
    import random

    import pyarrow.parquet as pq

    rnd = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz._-0123456789éß€😀"
    dicts = [{"".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 20))): i for i in range(n)}
             for n in [*range(0, 40), 60, 100]]
    dicts.append({k: 1 for k in ["dedup.exact", "dedup.near", "filter.gopher.word_count", "filter.c4.lorem"]})
    rows = [(i, d) for i, d in enumerate(dicts)]
    spark.createDataFrame(rows, "i long, m map<string,long>").coalesce(1).write.parquet(str(tmp_path / "p"))
    stored = pq.read_table(next((tmp_path / "p").glob("*.parquet"))).to_pylist()
    assert len(stored) == len(dicts)
    for rec in stored:
        assert [k for k, _ in rec["m"]] == tables.java_hash_map_order(list(dicts[rec["i"]]))


def test_append_rows_writes_what_a_spark_append_writes(spark, tmp_path):
    # The completion records' table appended by delta-rs: same schema, same rows (map entries in the
    # same order, timestamps the same instants) as Spark's append of the same rows, and readable by
    # Spark's Delta and by local_state; a table Spark created takes delta-rs appends and vice versa.
    import datetime as dt

    from pipelines.core import local_state
    from pipelines.core.runs import RUNS_SCHEMA

    def row(i: int) -> dict:
        return {"stage": f"s{i}", "stage_fingerprint": "f", "config_fingerprint": "c",
                "inputs": {f"t{j}": f"v{j}" for j in range(i + 3)}, "outputs": {"documents": "v1"},
                "rows_in": 10, "rows_out": 9 - i, "removed": {"dedup.exact": 1, "dedup.near": i, "x.y": 2},
                "quarantined": {}, "elapsed_s": 1.25, "started_at": dt.datetime(2026, 12, 6, 5, 0, 0, 123456),
                "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None), "extra": json.dumps({"i": i})}

    rows = [row(i) for i in range(3)]
    via_spark, via_rs = str(tmp_path / "spark"), str(tmp_path / "rs")
    for r in rows:
        tables.append(spark.createDataFrame([r], RUNS_SCHEMA).coalesce(1), via_spark)
        tables.append_rows(spark, via_rs, [r], RUNS_SCHEMA)
    engines = {json.loads(line)["commitInfo"].get("engineInfo", "") for v in range(3)
               for line in open(f"{via_rs}/_delta_log/{v:020d}.json") if "commitInfo" in line}
    assert all(e.startswith("delta-rs") for e in engines)
    a, b = (spark.read.format("delta").load(p) for p in (via_spark, via_rs))
    assert a.schema == b.schema
    assert sorted(a.toJSON().collect()) == sorted(b.toJSON().collect())
    key = lambda r: r["stage"]  # noqa: E731
    assert sorted(local_state.read_records(via_spark), key=key) == sorted(local_state.read_records(via_rs), key=key)
    last = row(3)
    tables.append_rows(spark, via_spark, [last], RUNS_SCHEMA)  # delta-rs after Spark
    tables.append(spark.createDataFrame([last], RUNS_SCHEMA).coalesce(1), via_rs)  # Spark after delta-rs
    a, b = (spark.read.format("delta").load(p) for p in (via_spark, via_rs))
    assert sorted(a.toJSON().collect()) == sorted(b.toJSON().collect()) and a.count() == 4


def test_table_rows_from_the_log_match_a_count(spark, make_cfg, monkeypatch):
    # Rows from the per-file numRecords of the log (no Spark job), with column statistics off as the
    # stages write them; appends and replaces add and drop files; a count where the log cannot say.
    from pipelines.core import local_state

    cfg = make_cfg()
    df = spark.createDataFrame([(str(i), "x") for i in range(9)], "doc_id string, text string").repartition(3)
    with tables.session_conf(spark, {"spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols": "0"}):
        path = tables.write_table(df, cfg, "documents")
    assert local_state.live_rows(path) == 9 and tables.table_rows(spark, path) == 9
    tables.append(df.limit(4), path)
    assert tables.table_rows(spark, path) == 13 == spark.read.format("delta").load(path).count()
    tables.write_table(df.limit(2), cfg, "documents")
    assert tables.table_rows(spark, path) == 2
    tables.write_table(df.limit(0), cfg, "documents")
    assert local_state.live_rows(path) == 0

    def refuse(table, version=None):
        raise local_state.NeedsSpark("no statistics")

    monkeypatch.setattr(local_state, "live_rows", refuse)
    assert tables.table_rows(spark, path, df) == 9  # the caller's frame is counted


def test_write_table_leaves_the_file_list_out_of_local_checksums(spark, make_cfg):
    # Created and replaced tables: one checksum per commit with the table's size and file count, no
    # list of files (Delta's allFilesInCrc, off for these commits), the session setting left as it was.
    cfg = make_cfg()
    df = spark.createDataFrame([("a", "x"), ("b", "y")], "doc_id string, text string")
    path = tables.write_table(df, cfg, "documents")
    tables.write_table(df.limit(1), cfg, "documents")
    for version in (0, 1):
        crc = json.loads(open(f"{path}/_delta_log/{version:020d}.crc").read())
        assert crc["numFiles"] >= 1 and crc["tableSizeBytes"] > 0 and "allFiles" not in crc
    assert spark.conf.get(tables.ALL_FILES_IN_CRC, None) is None
    assert tables.table_rows(spark, path) == 1
    assertDataFrameEqual(spark.read.format("delta").load(path), [("a", "x")], checkRowOrder=False)
    # and so do write_removed's appends and replaceWhere overwrites of the shared removed table
    gone = df.withColumn("reason", F.array(F.lit("r")))
    removed = tables.write_removed(gone, cfg, "dedup")
    tables.write_removed(gone, cfg, "filter")
    tables.write_removed(gone.limit(1), cfg, "dedup")
    for version in (0, 1, 2):
        crc = json.loads(open(f"{removed}/_delta_log/{version:020d}.crc").read())
        assert crc["numFiles"] >= 1 and "allFiles" not in crc
    assert spark.conf.get(tables.ALL_FILES_IN_CRC, None) is None
    assert tables.table_rows(spark, removed) == 3


def test_publish_writes_its_tables_side_by_side(spark, make_cfg):
    # Two outputs and the removed rows, written at once on their own threads: every table as a serial
    # write leaves it (checksums without file lists), the session setting restored, and the jobs of the
    # write threads carry the caller's job group.
    cfg = make_cfg()
    df = spark.createDataFrame([("a", "x"), ("b", "y")], "doc_id string, text string")
    sc = spark.sparkContext
    sc.setJobGroup("winnow-test-publish", "publish side by side")
    try:
        out = tables.publish(spark, cfg, "filter", {"filtered": df, "deduped": df.limit(1)},
                             removed=df.where("doc_id = 'b'").withColumn("reason", F.array(F.lit("r"))))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(out) == ["filtered", "deduped", "removed"]
    assert [tables.table_rows(spark, out[n]) for n in out] == [2, 1, 1]
    for path in out.values():
        assert "allFiles" not in json.loads(open(f"{path}/_delta_log/{0:020d}.crc").read())
    assert spark.conf.get(tables.ALL_FILES_IN_CRC, None) is None
    assert sc.statusTracker().getJobIdsForGroup("winnow-test-publish")
    assert os.path.isfile(f"{cfg.config_path}/filter.json")


def test_publish_raises_a_failed_write_once_the_others_ended(spark, make_cfg):
    cfg = make_cfg()
    df = spark.createDataFrame([("a", "x")], "doc_id string, text string")
    bad = df.select("doc_id", F.raise_error(F.lit("a write that fails")).cast("string").alias("text"))
    with pytest.raises(Exception, match="a write that fails"):
        tables.publish(spark, cfg, "filter", {"filtered": bad, "deduped": df})
    assert tables.table_rows(spark, cfg.table_path("deduped")) == 1
    assert not tables.table_exists(spark, cfg.table_path("filtered"))
    assert spark.conf.get(tables.ALL_FILES_IN_CRC, None) is None
    with pytest.raises(ValueError, match="removing nothing"):
        tables.publish(spark, cfg, "ingest", {"documents": df}, removed=df)


def test_partition_values_name_the_partition_sparks_hash_sends_them_to(spark):
    from pyspark.sql import functions as F

    values = cache.partition_values(16)
    assert len(set(values)) == 16
    rows = spark.createDataFrame([(v,) for v in values], "v int").select(
        F.hash("v").alias("h"), F.pmod(F.hash("v"), F.lit(16)).alias("t")).collect()
    assert [r["h"] for r in rows] == [cache._murmur3_int(v) for v in values]
    assert [r["t"] for r in rows] == list(range(16))
    with pytest.raises(ValueError, match="at least 1"):
        cache.partition_values(0)


def test_a_frame_shuffled_apart_reads_only_its_groups_partitions(spark, tmp_path):
    # One shuffle, written once: each group's frame holds exactly its rows, in partitions no other
    # group's frame reads; rows with one key share a partition; release drops the shuffle's files.
    from pyspark.sql import functions as F

    marks = tmp_path / "marks"
    marks.mkdir()

    def tag(batches):
        import uuid

        for b in batches:
            (marks / uuid.uuid4().hex).touch()
            yield b

    df = (spark.range(0, 3000, 1, 3).withColumn("k", F.col("id") % 7)
          .mapInArrow(tag, "id long, k long"))
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    evens, odds = cache.shuffled_apart(df, (F.col("id") % 2).cast("int"), 2, F.col("k"))
    ran = len(list(marks.iterdir()))
    assert evens.rdd.getNumPartitions() == odds.rdd.getNumPartitions() == parts
    assert evens.count() == 1500 and evens.where("id % 2 = 1").count() == 0
    assert sorted(r["id"] for r in odds.where("id < 6").collect()) == [1, 3, 5]
    assert len(list(marks.iterdir())) == ran
    for frame in (evens, odds):
        per_key = frame.withColumn("p", F.spark_partition_id()).groupBy("k").agg(
            F.countDistinct("p").alias("n")).collect()
        assert {r["n"] for r in per_key} == {1}
    cache.release(evens)
    cache.release(odds)
    with pytest.raises(Exception, match=r"outside \[0, 2\)"):
        cache.shuffled_apart(spark.range(3), F.col("id") - 1, 2, F.col("id"))
