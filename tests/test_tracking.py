"""MLflow tracking (pipelines/core/tracking.py) against a real `mlflow server` on 127.0.0.1, a `file:` store,
and a server that is down (the run goes on, `_runs` says tracking failed)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jobs import pipeline
from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runs import latest_records
from tests.chain import REPO

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """One `mlflow server` for the module: SQLite backend store and artifacts under a temp folder."""
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the mlflow command is not installed (make test installs the dev extra)")
    base = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = open(base / "server.log", "w")
    proc = subprocess.Popen(
        [exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{base}/mlflow.db", "--artifacts-destination", str(base / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, cwd=base,
        # no job runner: the tests submit no server jobs, and its store is a folder in /dev/shm that
        # the server leaves behind
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600  # ~10 s on an idle machine; minutes on a 2-core one shared by many jobs
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"mlflow server did not start: {(base / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    yield uri
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _run_report(spark, root, *tracking):
    cfg = load_config(overrides=[f"run.root={root}", "report.samples_per_reason=0"])
    df = spark.createDataFrame([("d0", "one two three"), ("d1", "four five")], "doc_id string, text string")
    tables.write_table(df, cfg, "documents")
    args = ["--set", f"run.root={root}", "--set", "pipeline.stages=[report]", "--set", "report.samples_per_reason=0",
            "--set", "spark.shuffle_partitions=4", "--set", "tracking.mlflow=true", "--set", "tracking.experiment=wt",
            *[a for t in tracking for a in ("--set", t)]]
    assert pipeline.main(args) == 0
    return cfg


def _check_runs(client, cfg):
    exp = client.get_experiment_by_name("wt")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
    child = next(r for r in runs if r.data.tags.get("winnow.stage") == "report")
    parent = client.get_run(child.data.tags["mlflow.parentRunId"])
    assert parent.info.status == child.info.status == "FINISHED"
    assert child.data.params["report.hist_bins"] == "40" and child.data.params["run.seed"] == "42"
    assert child.data.metrics["rows_in"] == 2 and child.data.metrics["rows_out"] == 2
    assert child.data.metrics["elapsed_s"] > 0
    assert child.data.tags["winnow.input.documents"] == "v0"
    assert child.data.tags["winnow.config_fingerprint"] == parent.data.tags["winnow.config_fingerprint"]
    assert "winnow.version" in child.data.tags
    assert parent.data.params["dedup.threshold"] == "0.8"  # the whole config on the chain run
    assert parent.data.metrics["report.rows_out"] == 2
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert arts == {"report/report.html", "report/stats.json"}
    assert [a.path for a in client.list_artifacts(parent.info.run_id, "config")] == ["config/report.json"]
    got = Path(client.download_artifacts(parent.info.run_id, "report/stats.json")).read_bytes()
    assert got == Path(cfg.report_path, "stats.json").read_bytes()


def test_tracking_server_records_params_metrics_tags_artifacts(spark, tmp_path, mlflow_server, capsys):
    cfg = _run_report(spark, tmp_path / "run", f"tracking.uri={mlflow_server}")
    assert "winnow: MLflow run " in capsys.readouterr().out
    _check_runs(MlflowClient(mlflow_server), cfg)
    assert json.loads(latest_records(spark, cfg)["report"]["extra"])["tracking"] == "ok"


def test_file_store(spark, tmp_path):
    store = f"file:{tmp_path / 'mlruns'}"
    cfg = _run_report(spark, tmp_path / "run", f"tracking.uri={store}")
    _check_runs(MlflowClient(store), cfg)


def test_server_down_warns_and_the_run_goes_on(spark, tmp_path, capsys):
    t0 = time.time()
    cfg = _run_report(spark, tmp_path / "run", f"tracking.uri=http://127.0.0.1:{_free_port()}")
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "MLflow tracking" in line]
    assert len(warnings) == 1 and warnings[0].startswith("winnow: warning: MLflow tracking start failed (")
    assert warnings[0].endswith("the run goes on without tracking")
    rec = latest_records(spark, cfg)["report"]
    assert rec["rows_out"] == 2
    assert json.loads(rec["extra"])["tracking"].startswith("failed: start: ")
    assert time.time() - t0 < 120


def test_stage_metrics_name_every_reason(tmp_path):
    from pipelines.core.runner import StageReport
    from pipelines.core.tracking import Tracker

    store = f"file:{tmp_path / 'mlruns'}"
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}", "tracking.mlflow=true", f"tracking.uri={store}",
                                 "tracking.experiment=units"])
    tracker = Tracker(cfg)
    tracker.start(["dedup"])
    rep = StageReport("dedup", rows_in=10, rows_out=7, removed={"dedup.exact": 2, "dedup.near": 1},
                      extra={"lsh": {"bands": 14, "rows": 9}, "note": "x"})
    assert tracker.log_stage(rep, {"documents": "v3"}) == "ok"
    client = MlflowClient(store)
    child = next(r for r in client.search_runs([client.get_experiment_by_name("units").experiment_id])
                 if r.data.tags.get("winnow.stage") == "dedup")
    assert child.data.metrics == {"rows_in": 10, "rows_out": 7, "removed": 3, "elapsed_s": 0.0,
                                  "removed.dedup.exact": 2, "removed.dedup.near": 1,
                                  "extra.lsh.bands": 14, "extra.lsh.rows": 9}
    assert child.data.params["dedup.threshold"] == "0.8" and child.data.tags["winnow.input.documents"] == "v3"


def _task(stage, root, inputs, store, key):
    """One Databricks-like task: jobs/<stage>.py in its own process (its own JVM) with the job run's key."""
    args = [sys.executable, f"jobs/{stage}.py", "--quiet", "--set", f"run.root={root}",
            "--set", f"ingest.inputs=[{inputs}]", "--set", "spark.master=local[1]", "--set", "spark.shuffle_partitions=2",
            "--set", "spark.conf={spark.ui.enabled: 'false'}", "--set", "tracking.mlflow=true",
            "--set", f"tracking.uri={store}", "--set", "tracking.experiment=jobs", "--set", f"tracking.parent_key={key}"]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_tasks_of_one_job_run_are_one_parent_run_with_a_nested_run_each(tmp_path, monkeypatch):
    inputs = tmp_path / "in" / "web.jsonl"
    inputs.parent.mkdir()
    inputs.write_text("".join(json.dumps({"id": str(i), "text": f"document {i} " + "word " * (20 + i)}) + "\n"
                              for i in range(6)))
    store, root = f"file:{tmp_path / 'mlruns'}", tmp_path / "run"
    for stage in ("ingest", "dedup"):  # two tasks of job run 5150, one after the other
        r = _task(stage, root, inputs, store, 5150)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        assert "MLflow tracking" not in r.stderr, r.stderr[-2000:]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads its file store only when allowed
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("jobs").experiment_id])
    parents = [r for r in runs if r.data.tags.get("winnow.parent_key") == "5150"]
    assert len(parents) == 1 and len(runs) == 3
    parent = parents[0]
    children = {r.data.tags["winnow.stage"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert sorted(children) == ["dedup", "ingest"]
    assert children["ingest"].data.metrics["rows_out"] == 6 and children["dedup"].data.metrics["rows_in"] == 6
    assert parent.info.status == "FINISHED" and parent.data.metrics["dedup.rows_out"] == 6
    assert parent.data.params["tracking.parent_key"] == "5150"
    assert sorted(a.path for a in client.list_artifacts(parent.info.run_id, "config")) == [
        "config/dedup.json", "config/ingest.json"]
    # Neither task wrote a report: the parent holds none (not one left by an earlier job run).
    assert client.list_artifacts(parent.info.run_id, "report") == []


def test_processes_that_create_a_parent_at_once_converge_on_the_first(tmp_path, monkeypatch):
    from pipelines.core.runner import StageReport
    from pipelines.core.tracking import Tracker

    store = f"file:{tmp_path / 'mlruns'}"
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}", "tracking.mlflow=true", f"tracking.uri={store}",
                                 "tracking.experiment=race", "tracking.parent_key=job-7"])
    first = Tracker(cfg)
    first.start(["ingest"])
    assert first.log_stage(StageReport("ingest", rows_in=3, rows_out=3), {}) == "ok"
    # The second process searched before the first one's parent was visible, so it made its own.
    second = Tracker(cfg)
    real, searches = Tracker._parents, []

    def late_first_search(self, key):
        searches.append(key)
        return [] if len(searches) == 1 else real(self, key)

    monkeypatch.setattr(Tracker, "_parents", late_first_search)
    second.start(["dedup"])
    assert len(searches) == 2  # found nothing, created one, searched again
    assert second.run_id == first.run_id  # converged at once: the earliest parent of the key
    assert second.log_stage(StageReport("dedup", rows_in=3, rows_out=2), {}) == "ok"
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("race").experiment_id])
    assert [r.info.run_id for r in runs if "winnow.parent_key" in r.data.tags] == [first.run_id]
    assert sorted(r.data.tags["winnow.stage"] for r in runs if r.data.tags.get("mlflow.parentRunId") == first.run_id) == [
        "dedup", "ingest"]


def test_a_keyed_parent_with_the_server_down_warns_and_goes_on(tmp_path):
    from pipelines.core.tracking import Tracker

    lines = []
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}", "tracking.mlflow=true", "tracking.parent_key=9",
                                 f"tracking.uri=http://127.0.0.1:{_free_port()}", "tracking.timeout_s=2"])
    tracker = Tracker(cfg, warn=lines.append)
    tracker.start(["ingest"])
    assert tracker.status.startswith("failed: start: ") and len(lines) == 1


def test_the_parent_key_is_not_part_of_the_config_fingerprint():
    assert load_config(overrides=["tracking.parent_key=1"]).fingerprint() == load_config().fingerprint()
    assert load_config(overrides=["tracking.parent_key=123"]).tracking.parent_key == "123"
    from pipelines.core.config import ConfigError

    with pytest.raises(ConfigError, match="tracking.parent_key"):
        load_config(overrides=["tracking.parent_key='a b'"])
