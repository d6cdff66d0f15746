"""shard.mix sources checked as early as the data allows (pipelines/shard/mix_check.py): before Spark when file
names decide the sources, right after ingest from its counts per source otherwise; exit 2 naming the key."""

from __future__ import annotations

import json

import pytest

from jobs import _cli, pipeline
from pipelines.core.config import load_config
from pipelines.core.preflight import PreflightError, check
from pipelines.core.runs import latest_records
from pipelines.shard import mix_check
from tests.chain import session_conf_kept


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _args(root, inputs, mix, stages="[ingest, shard]"):
    return ["--set", f"run.root={root}", "--set", f"ingest.inputs=[{inputs}]", "--set", f"pipeline.stages={stages}",
            "--set", f"shard.mix={mix}", "--set", "spark.shuffle_partitions=2", "--set", "pipeline.progress_s=0"]


def test_file_names_decide_the_sources_of_formats_without_fields(tmp_path):
    (tmp_path / "web.txt").write_text("a web page\n")
    (tmp_path / "wiki-00001.txt.gz").write_bytes(b"")  # the stem is the name less format and compression
    (tmp_path / "notes.md").write_text("no known format: quarantined whole, no source\n")
    cfg = load_config(overrides=[f"ingest.inputs=[{tmp_path}/*]"])
    assert mix_check.file_sources(cfg.ingest) == {"web", "wiki-00001"}
    # JSONL records may name their source, unless ingest.fields.source is null.
    _jsonl(tmp_path / "books.jsonl", [{"text": "x", "source": "novels"}])
    assert mix_check.file_sources(cfg.ingest) is None
    off = load_config(overrides=[f"ingest.inputs=[{tmp_path}/*]", "ingest.fields.source=null"])
    assert mix_check.file_sources(off.ingest) == {"web", "wiki-00001", "books"}
    assert mix_check.file_sources(load_config(overrides=["ingest.inputs=[s3://b/*.txt]"]).ingest) is None


def test_an_unknown_source_fails_before_spark_when_file_names_decide(tmp_path, capsys):
    (tmp_path / "web.txt").write_text("a web page\n")
    (tmp_path / "wiki.txt").write_text("an article\n")
    mix = "{web: {epochs: 1}, wikii: {epochs: 2}}"
    cfg = load_config(overrides=_args(tmp_path / "run", f"{tmp_path}/*.txt", mix)[1::2])
    with pytest.raises(PreflightError, match=r"^shard.mix.wikii: no such source among the input files .*"
                                             r"sources found: \['web', 'wiki'\]"):
        check(cfg, cfg.pipeline.stages)
    check(cfg.model_copy(update={"pipeline": cfg.pipeline.model_copy(update={"stages": ["ingest"]})}), ["ingest"])
    with pytest.raises(SystemExit) as e:  # preflight runs before the session is built
        pipeline.main(_args(tmp_path / "run", f"{tmp_path}/*.txt", mix))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("pipeline.py: shard.mix.wikii: no such source") and len(err.splitlines()) == 1
    assert not (tmp_path / "run" / "tables").exists()


def test_recorded_counts_decide_when_records_name_their_source():
    extra = {"documents_by_source": {"web": 4, "wiki": 2}, "documents_by_source_omitted": 0}
    with pytest.raises(mix_check.MixSourceError, match=r"^shard.mix.books: no such source among the documents "
                                                       r"ingest wrote; sources found: \['web', 'wiki'\]"):
        mix_check.check_ingested_sources({"web": 1, "books": 1}, extra)
    assert mix_check.check_ingested_sources({"web": 1}, extra) == [
        "winnow: warning: shard.mix.wiki: source 'wiki' has 2 documents after ingest but no mix entry; the shard "
        "stage will refuse it if any of them are left after filtering (e.g. --set shard.mix.wiki.epochs=1)"]
    assert mix_check.check_ingested_sources({"web": 1, "wiki": 1}, extra) == []
    assert mix_check.check_ingested_sources({}, extra) == []
    assert mix_check.check_ingested_sources({"books": 1}, {}) == []  # a record from before the counts
    # Only the first sources by name are recorded: one not among them may still have documents.
    assert mix_check.check_ingested_sources({"zz": 1}, {**extra, "documents_by_source_omitted": 3}) == [
        "winnow: warning: shard.mix.web: source 'web' has 4 documents after ingest but no mix entry; the shard "
        "stage will refuse it if any of them are left after filtering (e.g. --set shard.mix.web.epochs=1)",
        "winnow: warning: shard.mix.wiki: source 'wiki' has 2 documents after ingest but no mix entry; the shard "
        "stage will refuse it if any of them are left after filtering (e.g. --set shard.mix.wiki.epochs=1)"]


def test_chain_stops_right_after_ingest_and_again_from_its_record(spark, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [{"text": f"document {i} " * 5, "source": "wiki" if i % 3 == 0 else "web"} for i in range(6)])
    root = tmp_path / "run"
    args = _args(root, src, "{web: {weight: 0.5}, books: {weight: 0.5}}")
    with session_conf_kept(spark):
        with pytest.raises(SystemExit) as e:
            pipeline.main(args)
        assert e.value.code == 2
        out, err = capsys.readouterr()
        assert "[ingest] in=6 out=6" in out and "[shard]" not in out
        assert err.splitlines()[-1] == (
            "pipeline.py: shard.mix.books: no such source among the documents ingest wrote; sources found: "
            "['web', 'wiki'] (a source is the record's ingest.fields.source field, else the input file name's stem)")
        cfg = load_config(overrides=args[1::2])
        assert sorted(latest_records(spark, cfg)) == ["ingest"]
        assert json.loads(latest_records(spark, cfg)["ingest"]["extra"])["documents_by_source"] == {"web": 4, "wiki": 2}
        # Rerun with the same mix: ingest is up to date and skipped, its record still says no.
        with pytest.raises(SystemExit) as e:
            pipeline.main(args)
        assert e.value.code == 2
        out, err = capsys.readouterr()
        assert "[ingest] skip: up to date" in out and err.startswith("pipeline.py: shard.mix.books: no such source")


def test_the_ingest_job_alone_checks_too(spark, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    _jsonl(src, [{"text": f"document {i} " * 5, "source": "wiki" if i % 3 == 0 else "web"} for i in range(6)])
    root = tmp_path / "run"
    with session_conf_kept(spark):
        assert _cli.run_single_stage("ingest", _args(root, src, "{web: {epochs: 1}}")) == 0
        assert "shard.mix.wiki: source 'wiki' has 2 documents after ingest but no mix entry" in capsys.readouterr().err
        with pytest.raises(SystemExit) as e:  # a Databricks ingest task fails: the dedup task never starts
            _cli.run_single_stage("ingest", _args(root, src, "{web: {epochs: 1}, wiki: {epochs: 1}, books: {epochs: 1}}"))
        assert e.value.code == 2
        assert capsys.readouterr().err.startswith("ingest.py: shard.mix.books: no such source among the documents")
