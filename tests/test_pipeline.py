"""Resume and idempotence of jobs/pipeline.py: completion records, the plan, --from/--force/--dry-run."""

from __future__ import annotations

import pytest

from jobs import pipeline
from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runs import PlanStep, latest_records, plan

DOC_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)


def _docs(spark, cfg, texts):
    rows = [(f"d{i}", t, "web", None, {}, "in.jsonl", len(t), len(t.encode()), 0) for i, t in enumerate(texts)]
    tables.write_table(spark.createDataFrame(rows, DOC_SCHEMA), cfg, "documents")


def _args(root, *extra):
    # spark.shuffle_partitions=4: main() applies it to the suite's shared session.
    return ["--set", f"run.root={root}", "--set", "pipeline.stages=[report]", "--set", "report.samples_per_reason=0",
            "--set", "spark.shuffle_partitions=4", *extra]


def test_rerun_skips_and_reruns_on_config_input_or_output_change(spark, tmp_path, capsys):
    root = tmp_path / "run"
    cfg = load_config(overrides=[f"run.root={root}", "pipeline.stages=[report]", "report.samples_per_reason=0"])
    _docs(spark, cfg, ["one two three", "four five"])

    assert pipeline.main(_args(root)) == 0
    out = capsys.readouterr().out
    assert "  report    run   no completion record" in out
    assert "[report] start: reads the run's tables (no completion record)" in out
    assert "[report] in=2 out=2" in out
    rec = latest_records(spark, cfg)["report"]
    assert (rec["rows_in"], rec["rows_out"], rec["inputs"]) == (2, 2, {"documents": "v0", "removed": "missing"})
    assert rec["stage_fingerprint"] == cfg.stage_fingerprint("report")
    assert rec["outputs"]["report/stats.json"].startswith("sha256:")

    # Same config, same inputs, outputs untouched: skipped.
    assert plan(spark, cfg, ["report"])[0].action == "skip"
    # --force and --from override the record.
    assert plan(spark, cfg, ["report"], force=True) == [PlanStep("report", "run", "--force")]
    assert plan(spark, cfg, ["report"], from_stage="report") == [PlanStep("report", "run", "--from report")]
    # The stage's own config section changes: run. Another stage's section does not matter.
    assert plan(spark, cfg.model_copy(update={"report": cfg.report.model_copy(update={"hist_bins": 7})}), ["report"]) == [
        PlanStep("report", "run", "config changed (report.hist_bins: 40 -> 7)")]
    other = load_config(overrides=[f"run.root={root}", "shard.num_shards=9", "report.samples_per_reason=0"])
    assert plan(spark, other, ["report"])[0].action == "skip"
    # Its output vanishes: run.
    stats = root / "report" / "stats.json"
    kept = stats.read_bytes()
    stats.unlink()
    step = plan(spark, cfg, ["report"])[0]
    assert step.action == "run" and step.why.startswith("output changed since completion (report/stats.json: sha256:")
    stats.write_bytes(kept)
    assert plan(spark, cfg, ["report"])[0].action == "skip"
    # An input table gets a new version: run.
    _docs(spark, cfg, ["one two three"])
    assert plan(spark, cfg, ["report"]) == [PlanStep("report", "run", "input changed (documents: v0 -> v1)")]


def test_dry_run_prints_plan_and_runs_nothing(spark, tmp_path, capsys):
    root = tmp_path / "run"
    cfg = load_config(overrides=[f"run.root={root}"])
    _docs(spark, cfg, ["a b"])
    assert pipeline.main([*_args(root), "--dry-run", "--quiet"]) == 0
    assert capsys.readouterr().out == "  report    run   no completion record\n"
    assert not (root / "report").exists() and latest_records(spark, cfg) == {}


def test_from_must_be_a_configured_stage(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        pipeline.main([*_args(tmp_path), "--from", "dedup"])
    assert e.value.code == 2
    assert "--from 'dedup' is not one of pipeline.stages ['report']" in capsys.readouterr().err


def test_done_line_names_where_the_outputs_are():
    # It said "Outputs under <root>/ (tables/, shards/, report/, config/)" whatever ran: in metastore mode
    # (no <root>/tables) and for a chain without shard or report, a user looked for folders that are not there.
    ingest_only = pipeline.done_line(load_config(overrides=["run.root=r"]), ["ingest", "dedup"])
    assert ingest_only == "winnow: done. Outputs: tables r/tables/, effective configs r/config/"
    meta = load_config(overrides=["run.root=r", "run.catalog=spark_catalog", "run.schema=w", "shard.output=s3://b/x"])
    assert pipeline.done_line(meta, ["shard", "report"]) == (
        "winnow: done. Outputs: tables spark_catalog.w, shards s3://b/x/, report r/report/, effective configs r/config/")
    # With no document left the shard stage writes nothing: the line named a shards/ folder that was not there.
    empty = {"shard": {"rows_in": 0, "rows_out": 0, "extra": '{"empty": true}'}}
    assert pipeline.done_line(meta, ["shard", "report"], empty) == (
        "winnow: done. Outputs: tables spark_catalog.w, report r/report/, effective configs r/config/")


def test_plan_cascades_and_from_never_runs_earlier_stages(spark, tmp_path):
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}"])
    steps = plan(spark, cfg, ["ingest", "report"], from_stage="report")
    assert steps == [PlanStep("ingest", "skip", "before --from (stale: no completion record)"),
                     PlanStep("report", "run", "--from report")]
    assert [s.why for s in plan(spark, cfg, ["ingest", "report"])] == ["no completion record", "an upstream stage runs"]


def test_ingest_reruns_when_its_input_files_change(spark, tmp_path, capsys):
    from tests.chain import SAMPLE_DATA, has_sample_data, implemented_chain

    if "ingest" not in implemented_chain() or not has_sample_data():
        pytest.skip("needs the ingest stage and sample_data/")
    src = sorted(p for p in SAMPLE_DATA.iterdir() if p.name.endswith(".jsonl.gz"))[0]
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / src.name).write_bytes(src.read_bytes())
    root = tmp_path / "run"
    args = ["--set", f"run.root={root}", "--set", "pipeline.stages=[ingest]", "--set", f"ingest.inputs=[{inputs}/*]",
            "--set", "spark.shuffle_partitions=4"]
    assert pipeline.main(args) == 0
    assert "[ingest] start: reads files@sha256:" in capsys.readouterr().out
    cfg = load_config(overrides=args[1::2])
    assert plan(spark, cfg, ["ingest"])[0].action == "skip"
    (inputs / "more.jsonl").write_text('{"id": "x", "text": "one more document"}\n')
    step = plan(spark, cfg, ["ingest"])[0]
    assert step.action == "run" and step.why.startswith("input changed (files: sha256:")


def test_input_digest_covers_the_files_of_a_folder_glob(spark, tmp_path):
    """``ingest.inputs=[folder]`` reads the files in the folder, so the digest must change with them."""
    from pipelines.core.runs import input_files_digest
    from pipelines.ingest.stage import input_files

    def digest(globs):
        return input_files_digest(input_files(spark, globs))

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"text": "a"}\n')
    (folder / "_SUCCESS").write_text("")
    before = digest([str(folder)])
    assert before != digest([str(tmp_path / "nothing-here")])
    (folder / "b.jsonl").write_text('{"text": "b"}\n')
    assert digest([str(folder)]) != before
    assert digest([str(folder)]) == digest([f"{folder}/*.jsonl"])


def test_records_kept_in_process_equal_the_table(spark, make_cfg):
    # record_completion extends the in-process records with its own row; a fresh read of _runs agrees.
    import datetime as dt

    from pipelines.core import runs
    from pipelines.core.runner import StageReport

    cfg = make_cfg()
    for stage in ("ingest", "dedup", "ingest"):
        report = StageReport(stage, rows_in=3, rows_out=2, removed={"dedup.exact": 1} if stage == "dedup" else {})
        if stage == "ingest":
            report.quarantined, report.rows_out = {"x": 1}, 2
        runs.record_completion(spark, cfg, report, {"files": "sha256:0"}, dt.datetime.now(dt.UTC))
    kept = latest_records(spark, cfg)
    runs._RECORDS.clear()
    assert latest_records(spark, cfg) == kept and set(kept) == {"ingest", "dedup"}


def test_a_stage_reading_previous_reruns_when_pipeline_stages_change_its_input(spark, tmp_path):
    # pii reads PREVIOUS: with pipeline.stages=[pii] the last existing document table (deduped), with
    # [ingest, pii] ingest's documents. The tables and pii's fingerprint are the same both times, so
    # only the table it reads tells the plan that pii's input changed.
    import datetime as dt

    from pipelines.core import runs
    from pipelines.core.runner import StageReport

    root = tmp_path / "run"
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    common = [f"run.root={root}", f"ingest.inputs=['{tmp_path}/in.jsonl']"]
    alone = load_config(overrides=[*common, "pipeline.stages=[pii]"])
    after_ingest = load_config(overrides=[*common, "pipeline.stages=[ingest, pii]"])
    assert alone.stage_fingerprint("pii") == after_ingest.stage_fingerprint("pii")
    _docs(spark, alone, ["one two three", "four five"])
    tables.write_table(tables.read_path(spark, alone.table_path("documents")), alone, "deduped")

    def record(cfg, stage):
        runs.record_completion(spark, cfg, StageReport(stage, rows_in=2, rows_out=2),
                               runs.input_state(spark, cfg, stage), dt.datetime.now(dt.UTC))

    record(alone, "pii")
    assert runs.input_state(spark, alone, "pii")["input_table"] == "deduped"
    assert [s.action for s in plan(spark, alone, ["pii"])] == ["skip"]
    record(after_ingest, "ingest")
    steps = plan(spark, after_ingest, ["ingest", "pii"])
    assert [(s.stage, s.action) for s in steps] == [("ingest", "skip"), ("pii", "run")]
    assert "input_table: deduped -> documents" in steps[1].why
    # The plan made without a JVM (--dry-run on local files) resolves PREVIOUS the same way.
    assert runs.input_state(None, alone, "pii")["input_table"] == "deduped"


def test_globs_hadoop_refuses_or_finds_empty_exit_2_without_a_traceback(spark, tmp_path, capsys):
    # Local globs are checked before Spark starts; these two pass that check and fail in Hadoop's listing.
    (tmp_path / "b[.jsonl").write_text('{"text": "one two three four five six seven eight nine ten"}\n')
    base = ["--set", f"run.root={tmp_path}/run", "--set", "pipeline.stages=[ingest]", "--set", "spark.shuffle_partitions=4"]
    for glob, said in ((f"{tmp_path}/b[.jsonl", "is not a valid Hadoop glob"),
                       (f"{tmp_path}/{{x,y}}.jsonl", "matches no file")):
        with pytest.raises(SystemExit) as stop:
            pipeline.main([*base, "--set", f"ingest.inputs=['{glob}']"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and "Py4J" not in err
    # The escape the message suggests reads the file.
    assert pipeline.main([*base, "--set", f"ingest.inputs=['{tmp_path}/b\\[.jsonl']"]) == 0
    assert "[ingest] in=1 out=1" in capsys.readouterr().out


def test_a_stage_run_alone_says_when_an_earlier_stage_is_out_of_date(spark, tmp_path, capsys):
    # After new input was ingested, jobs/report.py (or shard.py) alone read the tables of the old input
    # without a word: the run looked up to date while its shards came from the documents before.
    from jobs._cli import run_single_stage

    root = tmp_path / "run"
    args = [*_args(root), "--set", "pipeline.stages=[dedup, report]"]
    cfg = load_config(overrides=args[1::2])
    _docs(spark, cfg, ["one two three four five six", "seven eight nine ten eleven twelve"])
    assert pipeline.main(args) == 0
    capsys.readouterr()
    assert run_single_stage("report", args) == 0
    assert "WARNING" not in capsys.readouterr().err
    # Another config for an earlier stage is no sign of stale tables: jobs run one by one get the keys of
    # their own stage (the Databricks job gives ingest.inputs to ingest only).
    assert run_single_stage("report", [*args, "--set", "dedup.threshold=0.7"]) == 0
    assert "WARNING" not in capsys.readouterr().err
    _docs(spark, cfg, ["one two three four five six"])
    assert run_single_stage("report", args) == 0
    assert capsys.readouterr().err.splitlines() == [
        "[report] WARNING: dedup is out of date (input changed (documents: v0 -> v1)), so report reads tables"
        " made before that change; `winnow run` (jobs/pipeline.py) reruns dedup and the stages after it"]
    # the same from a chain that starts after the stage out of date (pipeline.stages without it)
    assert pipeline.main([*_args(root), "--set", "pipeline.stages=[report]"]) == 0
    assert "[report] WARNING: dedup is out of date" in capsys.readouterr().err
