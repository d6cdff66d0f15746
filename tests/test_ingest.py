"""pipelines/ingest/stage.py end to end on the shared SparkSession: bad input, doc ids, determinism, sample and real data."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.runner import run_stage
from pipelines.ingest import stage as ingest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "sample_data"))
from generate import EXPECTED  # noqa: E402


def _uri(p: Path) -> str:
    return f"file:{p}"


def _read(spark, cfg, name):
    return spark.read.format("delta").load(cfg.table_path(name))


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory) -> Path:
    """Every kind of bad input ingest quarantines, plus one good line, in one folder."""
    d = tmp_path_factory.mktemp("bad")
    lines = [
        b'{"id": "ok", "text": "A good line."}',
        b'{"id": "cut", "text": "truncated in the mid',
        b'{"id": "null", "text": null}',
        b'{"id": "five", "text": 5}',
        b'{"id": "none", "body": "no text key"}',
        b'{"id": "bytes", "text": "bad \xff\xfe bytes"}',
        b'{"id": "lone", "text": "lone \\ud83d surrogate"}',
        b'{"id": "nul", "text": "a\x00b and an escaped \\u0000 NUL"}',
        b'{"id": "zw", "text": "\\u200b\\ufeff  "}',
        b'{"id": "big", "text": "' + b"x" * 5_000_000 + b'"}',
    ]
    (d / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "zero.jsonl.gz").write_bytes(b"")
    good = gzip.compress(b"".join(  # ids repeat (g0, g1): doc ids fall back to hashes
        b'{"id": "g%d", "text": "line %d %s"}\n' % (i % 2, i, hashlib.sha256(b"%d" % i).hexdigest().encode())
        for i in range(400)), mtime=0)
    (d / "truncated.jsonl.gz").write_bytes(good[: len(good) // 2])
    (d / "notes.md").write_bytes(b"# not an input format\n")
    return d


@pytest.fixture(scope="module")
def bad_run(spark, bad_dir, tmp_path_factory):
    from pipelines.core.config import load_config

    root = tmp_path_factory.mktemp("bad_run")
    cfg = load_config(overrides=[f"run.root={root}", f"ingest.inputs=['{bad_dir}/*']"])
    return cfg, run_stage(spark, cfg, "ingest")


def test_bad_input_is_quarantined_with_reasons(spark, bad_run, bad_dir):
    cfg, report = bad_run
    got = _read(spark, cfg, "quarantine").where("input_file not like '%truncated%'").select("input_file", "record", "reason")
    f = _uri(bad_dir / "bad.jsonl")
    assertDataFrameEqual(got, [
        (f, 2, "malformed_json"), (f, 3, "text_missing"), (f, 4, "text_not_string"), (f, 5, "text_missing"),
        (f, 9, "empty_after_normalization"), (f, 10, "too_large"),
        (_uri(bad_dir / "empty.jsonl"), 0, "empty_file"), (_uri(bad_dir / "zero.jsonl.gz"), 0, "empty_file"),
        (_uri(bad_dir / "notes.md"), 0, "unsupported_format"),
    ], checkRowOrder=False)
    assert report.rows_in == report.rows_out + report.n_quarantined
    assert report.quarantined["unreadable_file"] == 1


def test_excerpts_are_truncated_raw_records(spark, bad_run):
    cfg, _ = bad_run
    rows = {r["record"]: r for r in _read(spark, cfg, "quarantine").where("input_file like '%bad.jsonl'").collect()}
    assert rows[2]["excerpt"] == '{"id": "cut", "text": "truncated in the mid'
    assert rows[10]["excerpt"] == "x" * 200 and "5000000 characters (so at least as many UTF-8 bytes) > max_doc_bytes 4000000" in rows[10]["detail"]


def test_repaired_documents(spark, bad_run, bad_dir):
    cfg, report = bad_run
    got = _read(spark, cfg, "documents").where("input_file like '%bad.jsonl'").select("doc_id", "text", "n_replaced", "n_chars")
    assertDataFrameEqual(got, [
        ("bad/ok", "A good line.", 0, 12),
        ("bad/bytes", "bad \ufffd\ufffd bytes", 2, 12),
        ("bad/lone", "lone \ufffd surrogate", 1, 16),
        ("bad/nul", "ab and an escaped  NUL", 0, 22),
    ], checkRowOrder=False)
    assert report.extra["skipped"] == {}
    assert report.extra["formats"] == {"jsonl": 4, "unknown": 1}
    # the stage's line says how many characters were replaced (the other files replace none)
    assert " replaced_chars=3" in report.summary_line(), report.summary_line()


def test_truncated_gzip_keeps_the_records_before_the_damage(spark, bad_run):
    cfg, _ = bad_run
    q = _read(spark, cfg, "quarantine").where("input_file like '%truncated%'").select("record", "reason").collect()
    docs = _read(spark, cfg, "documents").where("input_file like '%truncated%'")
    n_docs = docs.count()
    # The salvaged prefix ends inside a line: that partial line is malformed, the rest is flagged once.
    assert sorted(tuple(r) for r in q) == [(0, "unreadable_file"), (n_docs + 1, "malformed_json")]
    assert 0 < n_docs < 400
    # duplicated source ids (g1, g2 repeat) fall back to positional hashes, all distinct
    assert docs.select("doc_id").distinct().count() == n_docs
    assert docs.where("doc_id like 'truncated/~%'").count() == n_docs


@pytest.fixture(scope="module")
def sample_run(spark, tmp_path_factory):
    """sample_data/ ingested with every file in one input partition."""
    from pipelines.core.config import load_config

    root = tmp_path_factory.mktemp("sample_run")
    inputs = [str(REPO / "sample_data" / name) for name in EXPECTED]
    cfg = load_config(overrides=[f"run.root={root}", f"ingest.inputs={json.dumps(inputs)}", "ingest.input_partitions=1"])
    return cfg, run_stage(spark, cfg, "ingest")


def test_sample_data_counts(spark, sample_run):
    cfg, report = sample_run
    assert report.rows_out == sum(e["documents"] for e in EXPECTED.values())
    assert report.rows_in == sum(e["records"] for e in EXPECTED.values())
    assert report.extra["n_replaced"] == sum(e["n_replaced"] for e in EXPECTED.values())
    expected_q: dict[str, int] = {}
    for e in EXPECTED.values():
        for k, v in e["quarantine"].items():
            expected_q[k] = expected_q.get(k, 0) + v
    assert report.quarantined == dict(sorted(expected_q.items()))
    assert report.extra["skipped"] == {"blank_line": 1, "warc_warcinfo": 1}
    assert " skipped_records=1 " in report.summary_line(), report.summary_line()  # blank lines left out
    docs = _read(spark, cfg, "documents")
    assert docs.select("doc_id").distinct().count() == report.rows_out
    # the three exact copies keep their own, distinct source ids
    assert docs.where("doc_id in ('web_en-00000/en-0262', 'web_en-00000/en-0263', 'web_en-00000/en-0264')").select("text").distinct().count() == 1
    wet = docs.where("input_file like '%.wet.gz'").select("doc_id", "url").orderBy("url").first()
    assert wet["doc_id"].startswith("crawl-00000/urn:uuid:") and wet["url"] == "https://crawl.example/0"
    props = tables.table_properties(spark, cfg.table_path("documents"))
    assert props["stage_fingerprint"] == cfg.stage_fingerprint("ingest")


def test_same_contents_with_4_partitions_elsewhere_and_on_rerun(spark, sample_run, make_cfg, tmp_path):
    a, first = sample_run
    cols = [c for c in ingest.DOCUMENT_COLUMNS if c != "input_file"]
    before = _read(spark, a, "documents").select(cols).collect()
    copy = tmp_path / "elsewhere"
    shutil.copytree(REPO / "sample_data", copy)
    b = make_cfg("ingest.input_partitions=4", f"ingest.inputs=['{copy}/*.jsonl.gz', '{copy}/*.wet.gz']")
    ingest.run(spark, b)
    assertDataFrameEqual(_read(spark, b, "documents").select(cols), before)
    again = run_stage(spark, a, "ingest")  # a re-run replaces the tables: no duplicated rows
    assert (again.rows_in, again.rows_out, again.quarantined) == (first.rows_in, first.rows_out, first.quarantined)
    assertDataFrameEqual(_read(spark, a, "documents").select(cols), before)
    assert tables.table_version(spark, a.table_path("documents")) == 1


def test_a_source_id_shaped_like_a_derived_id_never_takes_one(spark, make_cfg, tmp_path):
    # Two records share id "d", so both get derived ids "src/~<hex>"; a third record whose own id is
    # "~<hex>" of one of them would have taken the same doc_id: a leading "~" is doubled instead.
    path = tmp_path / "src.jsonl"
    lines = ['{"id": "d", "text": "first text here"}', '{"id": "d", "text": "second text here"}']
    path.write_text("\n".join(lines) + "\n")
    cfg = make_cfg(f"ingest.inputs=['{path}']")
    ingest.run(spark, cfg)
    derived = sorted(r.doc_id for r in _read(spark, cfg, "documents").select("doc_id").collect())
    assert all(d.startswith("src/~") for d in derived)
    own = derived[0].removeprefix("src/")
    path.write_text("\n".join([*lines, json.dumps({"id": own, "text": "third text here"})]) + "\n")
    ingest.run(spark, cfg)
    ids = sorted(r.doc_id for r in _read(spark, cfg, "documents").select("doc_id").collect())
    assert ids == sorted([*derived, f"src/~{own}"])


def test_missing_glob_fails_naming_it(spark, make_cfg, tmp_path):
    cfg = make_cfg(f"ingest.inputs=['{tmp_path}/nothing-*.jsonl']")
    with pytest.raises(ingest.NoInputFilesError, match=r"ingest.inputs: '.*nothing-\*.jsonl' matches no file"):
        ingest.run(spark, cfg)


def test_fields_by_input_glob_whose_files_an_earlier_glob_takes_fails_naming_both(spark, make_cfg, tmp_path):
    """The first matching glob's fields apply: an entry for a later glob that only re-matches files of an
    earlier one would apply to nothing, so the run stops instead of reading those files with other fields."""
    from pipelines.ingest.listing import ShadowedInputGlobError

    (tmp_path / "papers-1.jsonl").write_text('{"id": "a", "body": "Text."}\n')
    every, papers = f"{tmp_path}/*.jsonl", f"{tmp_path}/papers-*.jsonl"
    cfg = make_cfg(f"ingest.inputs=['{every}', '{papers}']", f"ingest.fields_by_input={{'{papers}': {{'text': 'body'}}}}")
    with pytest.raises(ShadowedInputGlobError, match=r"'.*papers-\*.jsonl' applies to no file: .* first by '.*/\*.jsonl'"):
        ingest.list_files(spark, cfg.ingest, globs={})
    ordered = make_cfg(f"ingest.inputs=['{papers}', '{every}']", f"ingest.fields_by_input={{'{papers}': {{'text': 'body'}}}}")
    globs: dict[str, str] = {}
    ingest.list_files(spark, ordered.ingest, globs=globs)
    assert list(globs.values()) == [papers]


def test_record_ddl_matches_the_arrow_schema(spark):
    from pyspark.sql.pandas.types import from_arrow_schema

    from udfs.formats import RECORD_SCHEMA

    assert spark.createDataFrame([], ingest.RECORD_DDL).schema == from_arrow_schema(RECORD_SCHEMA)


def test_document_ddl_is_the_document_columns_of_the_record_ddl(spark):
    from pyspark.sql import functions as F

    records = spark.createDataFrame([], ingest.RECORD_DDL).withColumn("doc_id", F.lit(None).cast("string"))
    assert spark.createDataFrame([], ingest.DOCUMENT_DDL).schema == records.select(*ingest.DOCUMENT_COLUMNS).schema


def test_transforms_name_missing_columns(spark, make_cfg):
    df = spark.createDataFrame([("a",)], "path string")
    with pytest.raises(ValueError, match=r"missing columns \['content'\]"):
        ingest.explode_files(df, make_cfg().ingest)


def test_real_web_crawl_files(spark, shared_data, make_cfg):
    folder = shared_data / "web_crawl"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    cfg = make_cfg(f"ingest.inputs=['{folder}/*']")
    report = run_stage(spark, cfg, "ingest")
    per_file = {
        r["input_file"].rsplit("/", 1)[-1]: r["count"]
        for r in _read(spark, cfg, "documents").groupBy("input_file").count().collect()
    }
    assert per_file == {
        "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz": 670,  # of 697 records: 27 have text ""
        "dolma_ccnet_cc_en_head-0091.jsonl": 10,
        "dolma_ccnet_cc_en_head-0174.jsonl": 10,
        "dclm_human_quality_labels_A.jsonl": 246,
        "dolma_warc_sample-0000.warc.gz": 22,
        "dolma_warc_sample-0001.warc.gz": 15,
    }
    assert report.quarantined == {"empty_after_normalization": 27} and report.rows_in == 1000
    assert report.extra["skipped"] == {"warc_metadata": 2, "warc_request": 37, "warc_resource": 4, "warc_warcinfo": 2}
    # charset decisions per file: 5 of the 15 pages of sample-0001 declare theirs in <meta> only
    counts = {f.rsplit("/", 1)[-1]: c for f, c in report.extra["counts_by_file"].items()}
    assert counts["dolma_warc_sample-0001.warc.gz"] == {
        "charset.utf-8": 15, "charset_source.http": 10, "charset_source.meta": 5}
    assert report.extra["counts"]["charset_source.http"] == 31
