"""Small and empty runs: no survivor, fewer documents than shards."""

from __future__ import annotations

import json

import pytest

from jobs import pipeline
from pipelines.core.config import load_config
from pipelines.core.outcome import EXIT_EMPTY, small_run
from pipelines.core.runner import StageReport

CFG = load_config(overrides=["run.root=/tmp/x"])


def _reports(*rows: tuple[str, int, int, dict], shard: dict | None = None) -> dict[str, StageReport]:
    out = {name: StageReport(name, rows_in=i, rows_out=o, removed=r) for name, i, o, r in rows}
    if shard is not None:
        out["shard"] = StageReport("shard", rows_in=shard["docs"], rows_out=shard["docs"], extra=shard["extra"])
    return out


def test_ordinary_run_says_nothing():
    stages = _reports(("dedup", 5, 5, {}), shard={"docs": 5, "extra": {"totals": {"shards": 2}, "shards_requested": 2}})
    assert small_run(CFG, stages) == (0, None)


def test_no_survivor_names_the_stage_its_reasons_and_what_to_change():
    stages = _reports(("ingest", 2, 2, {}), ("dedup", 2, 2, {}),
                      ("filter", 2, 0, {"filter.gopher_quality": 1, "filter.c4": 1}))
    status, line = small_run(CFG, stages)
    assert status == EXIT_EMPTY == 3
    assert line.startswith("winnow: no document survived: filter kept 0 of 2 (filter.c4=1, filter.gopher_quality=1);")
    assert "/tmp/x/report/report.html when the report stage runs" in line and "rule_actions" in line and "\n" not in line
    # The report stage ran: the line said "when the report stage runs" of a report.html that was there.
    status, line = small_run(CFG, {**stages, "report": StageReport("report")})
    assert "; the report shows the funnel: /tmp/x/report/report.html. To change:" in line


def test_no_input_record():
    status, line = small_run(CFG, {"ingest": StageReport("ingest")})
    assert status == EXIT_EMPTY and "ingest read no document" in line
    # A later stage that read an empty table pointed at its own settings ("check dedup.threshold"),
    # which cannot have emptied it.
    status, line = small_run(CFG, {"dedup": StageReport("dedup")})
    assert status == EXIT_EMPTY and "dedup read no document;" in line
    assert "To change: its input table was empty, so look at the stages before dedup, or give more input." in line


def test_skipped_stages_count_from_their_completion_records():
    record = {"rows_in": 3, "rows_out": 0, "removed": {}, "quarantined": {"malformed_json": 3}, "extra": "{}"}
    status, line = small_run(CFG, {"ingest": record})
    assert status == EXIT_EMPTY and "ingest kept 0 of 3 (malformed_json=3)" in line


def test_fewer_documents_than_shards_is_capped_and_said():
    stages = _reports(shard={"docs": 1, "extra": {"totals": {"shards": 1}, "shards_requested": 2}})
    status, line = small_run(CFG, stages)
    assert status == 0
    assert line.startswith("winnow: only 1 document for 2 shards: wrote 1 shard") and "shard.num_shards" in line



def test_the_short_set_and_its_setting_are_named_with_a_validation_split():
    by_split = {"train": {"requested": 2, "shards": 1, "documents": 1, "setting": "shard.num_shards"},
                "validation": {"requested": 1, "shards": 1, "documents": 58}}
    stages = _reports(shard={"docs": 59, "extra": {"totals": {"shards": 2}, "shards_requested": 3, "by_split": by_split}})
    status, line = small_run(CFG, stages)
    assert status == 0
    assert line.startswith("winnow: only 1 document in the train set for 2 shards: wrote 1 shard")
    assert "set shard.num_shards to 1 or fewer" in line
    by_split = {"train": {"requested": 2, "shards": 2, "documents": 50},
                "validation": {"requested": 3, "shards": 2, "documents": 2, "setting": "shard.split.validation_shards"}}
    stages = _reports(shard={"docs": 52, "extra": {"totals": {"shards": 4}, "shards_requested": 5, "by_split": by_split}})
    line = small_run(CFG, stages)[1]
    assert "2 documents in the validation set for 3 shards" in line and "shard.split.validation_shards to 2" in line

# ------------------------------------------------------------------ the whole chain on a tiny input
def _one_clean_sample_document() -> str:
    """The first English sample document (sample_data/) that the default filter keeps: chosen by the
    filter's own rules without Spark (sample_data/check.py)."""
    import gzip
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parents[1] / "sample_data"
    sys.path.insert(0, str(here))
    from check import reasons

    texts = []
    with gzip.open(here / "web_en-00000.jsonl.gz", "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("text"), str) and "Table" not in rec["text"]:
                texts.append(rec["text"])
            if len(texts) == 20:
                break
    return next(t for t, r in zip(texts, reasons(texts), strict=True) if not r)


def _chain_args(root, inputs) -> list[str]:
    return ["--conf", "conf/local.yaml", "--set", f"run.root={root}", "--set", f"ingest.inputs=[{inputs}]",
            "--set", "spark.shuffle_partitions=4", "--set", "report.samples_per_reason=0"]


@pytest.mark.parametrize(("texts", "status", "shards"), [
    (None, 0, 1),  # one survivor, conf/local.yaml asks for 2 shards
    (["too short", "buy now buy now"], EXIT_EMPTY, 0),  # nobody survives the filter
])
def test_tiny_input_through_the_whole_chain(spark, tmp_path, capsys, texts, status, shards):
    texts = texts or [_one_clean_sample_document()]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    root = tmp_path / "run"
    (root / "shards").mkdir(parents=True)
    (root / "shards" / "manifest.json").write_text("{}")  # an earlier run's, to be retracted either way
    assert pipeline.main(_chain_args(root, src)) == status
    out = capsys.readouterr().out.rstrip("\n").split("\n")
    stats = json.loads((root / "report" / "stats.json").read_text())  # the report is written either way
    funnel = {row["step"]: row for row in stats["funnel"]}
    if status == EXIT_EMPTY:
        assert out[-1].startswith("winnow: no document survived: filter kept 0 of 2 (gopher_quality.word_count=2)")
        assert f"the report shows the funnel: {root}/report/report.html." in out[-1]
        assert not any(line.startswith("winnow: done.") for line in out), out  # no survivor: not "done"
        assert not (root / "shards" / "manifest.json").exists()
        # The stages after the filter are not run (one line says so); the report is, down to zero.
        assert "winnow: filter left no document; not run: refs, decontam, pii, tokenize, shard" in out
        assert not any(line.startswith(("[refs]", "[tokenize]", "[shard]")) for line in out), out
        assert funnel["filter"]["documents"] == 0 and "tokenize" not in funnel, funnel
    else:
        assert out[-1].startswith("winnow: only 1 document for 2 shards: wrote 1 shard")
        manifest = json.loads((root / "shards" / "manifest.json").read_text())
        assert manifest["totals"]["documents"] == 1
    assert len(list((root / "shards").glob("*/megatron/*.bin"))) == shards  # train/ and validation/ sets


# ------------------------------------------------------------------ --dry-run without Spark
def test_local_plan_equals_the_spark_plan(spark, tmp_path):
    from pipelines.core import local_state
    from pipelines.core.runs import latest_records, plan
    from tests.test_pipeline import _args, _docs

    root = tmp_path / "run"
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    cfg = load_config(overrides=[f"run.root={root}", "pipeline.stages=[report]", "report.samples_per_reason=0",
                                 f"ingest.inputs=[{src}]"])
    assert local_state.can_plan(cfg)
    assert plan(None, cfg, ["ingest", "report"]) == plan(spark, cfg, ["ingest", "report"])  # nothing yet
    _docs(spark, cfg, ["one two three", "four five"])
    assert pipeline.main([*_args(root), "--set", f"ingest.inputs=[{src}]"]) == 0
    assert latest_records(None, cfg)["report"] == latest_records(spark, cfg)["report"]
    for stages in (["report"], ["ingest", "report"]):
        assert plan(None, cfg, stages) == plan(spark, cfg, stages)
    assert plan(None, cfg, ["report"])[0].action == "skip"
    from pipelines.ingest.stage import input_files

    assert local_state.input_files([str(src), str(tmp_path)]) == input_files(spark, [str(src), str(tmp_path)])


def test_dry_run_starts_no_jvm(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    code = (
        "import sys; from jobs import pipeline; "
        "rc = pipeline.main(sys.argv[1:]); "
        "from pyspark import SparkContext; "
        "print('jvm', SparkContext._gateway is not None, SparkContext._jvm is not None); sys.exit(rc)"
    )
    src = tmp_path / "in.jsonl"
    src.write_text("")
    out = subprocess.run([sys.executable, "-c", code, "--conf", "conf/local.yaml", "--set", f"run.root={tmp_path / 'r'}",
                          "--set", f"ingest.inputs=[{src}]", "--dry-run"], cwd=repo, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "jvm False False" in out.stdout and "  ingest    run   no completion record" in out.stdout


def test_remote_or_hadoop_glob_runs_need_spark():
    from pipelines.core import local_state

    assert not local_state.can_plan(load_config(overrides=["run.root=s3://bucket/run"]))
    assert not local_state.can_plan(load_config(overrides=['ingest.inputs=["data/{a,b}.jsonl"]']))
    assert local_state.can_plan(load_config(overrides=["run.root=out/x", "ingest.inputs=[data/*.jsonl]"]))
