"""The Databricks Asset Bundle (conf/databricks/databricks.yml) is a valid job whose tasks run our jobs."""

from __future__ import annotations

import glob
import importlib
import re
from pathlib import Path

import pytest
import yaml
from databricks.sdk.service.jobs import JobSettings

from jobs._cli import parse_config, stage_parser
from pipelines.core.chain import STAGES

REPO = Path(__file__).resolve().parents[1]
BUNDLE_DIR = REPO / "conf" / "databricks"
JOB_RUN_ID = "914220537"


@pytest.fixture(scope="module")
def bundle() -> dict:
    """The bundle with ``${var.*}`` replaced by the variables' defaults and ``${workspace.file_path}``
    by the project root (where ``sync.paths: [../..]`` puts the files)."""
    text = (BUNDLE_DIR / "databricks.yml").read_text()
    raw = yaml.safe_load(text)
    defaults = {k: str(v["default"]) for k, v in raw["variables"].items()}
    text = re.sub(r"\$\{var\.(\w+)\}", lambda m: defaults[m.group(1)], text)
    text = text.replace("${workspace.file_path}", str(REPO))
    # Databricks fills in the dynamic value references of task parameters when the job runs.
    text = text.replace("{{job.run_id}}", JOB_RUN_ID)
    assert "${" not in text, "unresolved bundle substitution"
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def job(bundle) -> dict:
    return bundle["resources"]["jobs"]["winnow_pipeline"]


def test_job_round_trips_through_databricks_sdk(job):
    settings = JobSettings.from_dict(job)
    assert settings.as_dict() == job
    assert settings.schedule.pause_status.value == "PAUSED"
    assert settings.schedule.quartz_cron_expression == "0 0 3 * * ?"


def test_one_task_per_stage_chained_on_the_job_cluster(job):
    tasks = job["tasks"]
    assert [t["task_key"] for t in tasks] == list(STAGES)
    assert [t.get("depends_on") for t in tasks] == [None] + [[{"task_key": s}] for s in STAGES[:-1]]
    clusters = {c["job_cluster_key"] for c in job["job_clusters"]}
    assert {t["job_cluster_key"] for t in tasks} == clusters == {"winnow_cluster"}
    assert all(t["libraries"] == [{"whl": "../../dist/*.whl"}] for t in tasks)


def test_referenced_files_exist(bundle, job):
    assert (BUNDLE_DIR / bundle["artifacts"]["winnow_wheel"]["path"] / "pyproject.toml").is_file()
    for sync_path in bundle["sync"]["paths"]:
        assert (BUNDLE_DIR / sync_path).resolve() == REPO
    for t in job["tasks"]:
        assert (BUNDLE_DIR / t["spark_python_task"]["python_file"]).resolve() == REPO / "jobs" / f"{t['task_key']}.py"
        # The wheel is built by the bundle's artifact step; its glob points where `pip wheel -w dist` writes.
        assert Path(glob.escape(str(BUNDLE_DIR)) + "/" + t["libraries"][0]["whl"]).parent.resolve() == REPO / "dist"


@pytest.mark.parametrize("stage", STAGES)
def test_task_parameters_parse_with_the_jobs_own_parser(job, stage):
    task = next(t for t in job["tasks"] if t["task_key"] == stage)
    module = importlib.import_module(f"jobs.{stage}")
    parser = module.parser() if hasattr(module, "parser") else stage_parser(stage)
    args, cfg = parse_config(parser, task["spark_python_task"]["parameters"])
    assert args.quiet is True
    assert (cfg.run.root, cfg.run.seed, cfg.spark.shuffle_partitions) == ("dbfs:/winnow/runs/default", 42, 64)
    assert cfg.pipeline.stages == list(STAGES)
    # Stage tables by name in the catalog, MLflow on.
    assert cfg.table_path("documents") == "main.winnow.documents"
    assert (cfg.tracking.mlflow, cfg.tracking.experiment) == (True, "/Shared/winnow")
    # Every task of one job run logs under the same parent MLflow run, keyed by the job run id.
    assert cfg.tracking.parent_key == JOB_RUN_ID
    if stage == "ingest":
        assert cfg.ingest.inputs == ["dbfs:/winnow/raw/*.jsonl.gz"]


def test_wheel_leaves_the_runtime_spark_alone(job):
    """The bundle installs the bare wheel on a Databricks runtime, which brings its own pyspark and
    Delta: the wheel may require them only through the ``spark`` extra."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not names & {"pyspark", "delta-spark"}
    assert any(d.startswith("pyspark==") for d in project["optional-dependencies"]["spark"])
    libs = [lib for t in job["tasks"] for lib in t.get("libraries", [])]
    assert libs and all(set(lib) == {"whl"} and "[" not in lib["whl"] for lib in libs)
