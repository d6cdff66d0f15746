"""Completion records and the resume plan: which stages of a run are up to date and which must run.

After a stage has committed its outputs, :func:`record_completion` appends one row to the Delta table
``<run.root>/tables/_runs`` (one atomic Delta commit): stage name, stage config fingerprint
(:meth:`WinnowConfig.stage_fingerprint`), the state of its inputs (Delta versions of the upstream tables,
a digest of the raw input files for ingest), the state of its outputs (Delta versions, sha256 of
``manifest.json`` / ``stats.json``), row counts and timings.

Why a table of its own rather than the outputs' table properties: a stage writes several things (two
tables and a slice of the shared ``removed`` table, or shard files), each committed on its own; one
record written after all of them is the single point at which the stage counts as complete. A crash
before that commit leaves no record, so the stage runs again, which is safe because every output is
written idempotently (``createOrReplace``, ``replaceWhere stage = ...``, shards then manifest last).
Recording the output versions as well catches a stage rerun alone (``jobs/<stage>.py``) or an output
replaced by hand after the record was written.

:func:`plan` compares the latest record of each stage with the current config and table state and
marks the first stage that differs, and every stage after it, to run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.chain import STAGES, marker_files
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.core.tables import delta_version, read_bytes

RUNS_TABLE = "_runs"
"""Name of the completion-record table under ``<run.root>/tables/``."""

RUNS_SCHEMA = T.StructType(
    [
        T.StructField("stage", T.StringType(), False),
        T.StructField("stage_fingerprint", T.StringType(), False),
        T.StructField("config_fingerprint", T.StringType(), False),
        T.StructField("inputs", T.MapType(T.StringType(), T.StringType()), False),
        T.StructField("outputs", T.MapType(T.StringType(), T.StringType()), False),
        T.StructField("rows_in", T.LongType(), False),
        T.StructField("rows_out", T.LongType(), False),
        T.StructField("removed", T.MapType(T.StringType(), T.LongType()), False),
        T.StructField("quarantined", T.MapType(T.StringType(), T.LongType()), False),
        T.StructField("elapsed_s", T.DoubleType(), False),
        T.StructField("started_at", T.TimestampType(), False),
        T.StructField("finished_at", T.TimestampType(), False),
        T.StructField("extra", T.StringType(), False),
    ]
)
"""Schema of ``_runs``: one row per completed stage run; the latest row of a stage is its record."""


# --------------------------------------------------------------------------------- filesystem state
def raw_input_files(spark: SparkSession | None, cfg: WinnowConfig, stage: str) -> list[tuple[str, int, int]] | None:
    """The raw files ``stage`` reads, ``(path, size, mtime)`` sorted (its ``input_files`` hook,
    :mod:`pipelines.core.hooks`; ``spark=None``: listed without Spark), or None for a stage that reads
    tables only."""
    from pipelines.core import hooks

    input_files = hooks.hook(stage, "input_files")
    return None if input_files is None else input_files(spark, cfg)


def input_files_digest(files: list[tuple[str, int, int]]) -> str:
    """sha256 over the ``(path, length, modification time)`` of raw input files, sorted.

    Stands for the raw inputs of a stage that reads files (its ``input_files`` hook,
    :mod:`pipelines.core.hooks`; ingest): a file added, removed, grown or touched changes it. The files
    are those the stage reads (a glob naming a folder stands for the files in it).
    """
    entries = [f"{path}\t{size}\t{mtime}" for path, size, mtime in files]
    return "sha256:" + hashlib.sha256("\n".join(entries).encode()).hexdigest()


def _file_state(spark: SparkSession, cfg: WinnowConfig, path: str) -> str:
    data = read_bytes(spark, path, cfg)
    return "missing" if data is None else "sha256:" + hashlib.sha256(data).hexdigest()


def _table_state(spark: SparkSession, cfg: WinnowConfig, name: str) -> str:
    v = delta_version(spark, cfg.table_path(name))
    return "missing" if v is None else f"v{v}"


def input_state(spark: SparkSession, cfg: WinnowConfig, stage: str,
                files: list[tuple[str, int, int]] | None = None) -> dict[str, str]:
    """What ``stage`` reads, as ``name -> state``: the tables of every upstream stage that exist, and for
    a stage declared with ``input=PREVIOUS`` (pii, tokenize) ``input_table``: the table it reads.

    A superset of what the stage really reads (e.g. dedup's ``dup_clusters`` for filter): it may rerun
    a stage that would not have changed, never skip one that would. The shared ``removed`` table is an
    input of the report only, since every other stage writes its own slice of it. Ingest's input is
    the digest of its raw files (:func:`input_files_digest`; ``files``: their listing, when made). A stage
    that reads more than the run's tables adds their state (its ``extra_inputs`` hook: decontam's
    evaluation sets).
    """
    state: dict[str, str] = {}
    if files is None:
        files = raw_input_files(spark, cfg, stage)
    if files is not None:
        state["files"] = input_files_digest(files)
    if chain.stage(stage).input == chain.PREVIOUS:
        # Which table PREVIOUS is depends on pipeline.stages and on the tables that exist, neither of
        # which the stage fingerprint holds: the same upstream tables read through another one is a
        # changed input (tokenize reading deduped after a chain without pii read pii_redacted).
        state["input_table"] = tables.stage_input_table(cfg, stage, spark)
    for up in STAGES[: STAGES.index(stage)]:
        for name in chain.stage(up).outputs:
            s = _table_state(spark, cfg, name)
            if s != "missing":
                state[name] = s
        for label, path in marker_files(cfg, up).items():
            s = _file_state(spark, cfg, path)
            if s != "missing":
                state[label] = s
    for name in chain.stage(stage).also_reads:
        state[name] = _table_state(spark, cfg, name)
    from pipelines.core import hooks

    extra = hooks.hook(stage, "extra_inputs")
    if extra is not None:
        state.update(extra(spark, cfg))
    return state


def output_state(spark: SparkSession, cfg: WinnowConfig, stage: str) -> dict[str, str]:
    """The state of what ``stage`` writes: its Delta tables' versions and its marker files' sha256."""
    state = {name: _table_state(spark, cfg, name) for name in chain.stage(stage).outputs}
    for label, path in marker_files(cfg, stage).items():
        state[label] = _file_state(spark, cfg, path)
    return state


# ----------------------------------------------------------------------------------------- records
def record_completion(
    spark: SparkSession,
    cfg: WinnowConfig,
    report: StageReport,
    inputs: dict[str, str],
    started_at: dt.datetime,
    tracking: str | None = None,
) -> dict[str, Any]:
    """Append the completion record of one finished stage to ``_runs`` (one atomic Delta commit).

    Args:
        report: the stage's checked report.
        inputs: :func:`input_state` taken just before the stage ran.
        started_at: UTC wall-clock start of the stage.
        tracking: MLflow tracking status (``ok`` or ``failed: ...``), kept as ``tracking`` in ``extra``;
            None when tracking is off.

    Returns:
        The record as a dict (the row written).
    """
    row = {
        "stage": report.stage,
        "stage_fingerprint": cfg.stage_fingerprint(report.stage),
        "config_fingerprint": cfg.fingerprint(),
        "inputs": inputs,
        "outputs": output_state(spark, cfg, report.stage),
        "rows_in": int(report.rows_in),
        "rows_out": int(report.rows_out),
        "removed": {k: int(v) for k, v in report.removed.items()},
        "quarantined": {k: int(v) for k, v in report.quarantined.items()},
        "elapsed_s": float(report.elapsed_s),
        "started_at": started_at.replace(tzinfo=None),
        "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
        "extra": json.dumps({**report.extra, **({"tracking": tracking} if tracking else {})}, sort_keys=True,
                            default=str),
    }
    path = cfg.table_path(RUNS_TABLE)
    before = tables.delta_version(spark, path)
    known = _RECORDS.get((path, before)) if before is not None else {}
    tables.append_rows(spark, path, [row], RUNS_SCHEMA)
    after = tables.delta_version(spark, path)
    if known is not None and after == (-1 if before is None else before) + 1:
        # Our append was the only commit since the version we had read: the next version's records
        # are those plus this row, so the chain's next stage need not read _runs back (a Delta
        # snapshot rebuild and a collect, 7 Spark jobs per stage). Any other commit in between: no
        # entry, and the next read goes to the table.
        latest = known.get(report.stage)
        keep_old = latest is not None and latest["finished_at"] > row["finished_at"]
        _RECORDS[(path, after)] = {**known, **({} if keep_old else {report.stage: dict(row)})}
    return row


def latest_records(spark: SparkSession, cfg: WinnowConfig) -> dict[str, dict[str, Any]]:
    """The latest completion record of every stage of this run (``{}`` when none was ever written).

    ``spark=None``: read from the local Delta log and Parquet files (:mod:`pipelines.core.local_state`;
    raises :class:`~pipelines.core.local_state.NeedsSpark` when that is not possible).
    """
    path = cfg.table_path(RUNS_TABLE)
    if spark is None:
        from pipelines.core import local_state

        rows = sorted(local_state.read_records(path), key=lambda r: r["finished_at"])
        return {r["stage"]: r for r in rows}
    version = delta_version(spark, path)
    if version is None:
        return {}
    # Records of one table version never change: read each version once (a plan checks every stage).
    key = (path, version)
    if key not in _RECORDS:
        rows = tables.read_path(spark, path, version).orderBy(F.col("finished_at").asc()).collect()
        _RECORDS[key] = {r["stage"]: r.asDict(recursive=True) for r in rows}
    return {k: dict(v) for k, v in _RECORDS[key].items()}


_RECORDS: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
"""``(_runs location, version) -> {stage: record}``: read once per version, and extended in place by
:func:`record_completion` when its own append made the next version."""


# -------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class PlanStep:
    """One stage of the plan: ``action`` is ``run`` or ``skip``; ``why`` says which rule decided."""

    stage: str
    action: str
    why: str

    def line(self) -> str:
        """The step as one line of the printed plan."""
        return f"  {self.stage:<9} {self.action:<4}  {self.why}"


def _diff(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    for name in sorted(set(recorded) | set(current)):
        a, b = recorded.get(name, "missing"), current.get(name, "missing")
        if a != b:
            return f"{name}: {_short(a)} -> {_short(b)}"
    return None


def _short(state: str) -> str:
    return state[:19] if state.startswith("sha256:") else state


def plan(
    spark: SparkSession,
    cfg: WinnowConfig,
    stages: list[str],
    *,
    from_stage: str | None = None,
    force: bool = False,
) -> list[PlanStep]:
    """Decide, for each of ``stages`` in order, whether it runs or is skipped.

    A stage is skipped when its latest record has the current stage fingerprint, the inputs it
    recorded are unchanged and its outputs are still the ones it wrote. The first stage that fails
    one of these runs, and so does every stage after it (their inputs are about to change).

    Args:
        stages: the stages to consider, in chain order (``pipeline.stages``).
        from_stage: run this stage and every later one whatever their records say; earlier stages
            are never run (the plan says when one of them is stale).
        force: run every stage.

    Returns:
        One :class:`PlanStep` per stage, in order.

    Raises:
        ValueError: ``from_stage`` is not one of ``stages``.
    """
    if from_stage is not None and from_stage not in stages:
        raise ValueError(f"--from {from_stage!r} is not one of the configured stages {stages}")
    records = latest_records(spark, cfg)
    steps: list[PlanStep] = []
    rerun = False
    for stage in stages:
        stale = _staleness(spark, cfg, stage, records.get(stage))
        if from_stage is not None and STAGES.index(stage) < STAGES.index(from_stage):
            why = "before --from" + (f" (stale: {stale})" if stale else "")
            steps.append(PlanStep(stage, "skip", why))
            continue
        if force:
            why = "--force"
        elif from_stage is not None:
            why = f"--from {from_stage}"
        elif rerun:
            why = "an upstream stage runs"
        elif stale:
            why = stale
        else:
            rec = records[stage]
            steps.append(PlanStep(stage, "skip", f"up to date (completed {rec['finished_at']:%Y-%m-%d %H:%M:%S} UTC)"))
            continue
        rerun = True
        steps.append(PlanStep(stage, "run", why))
    return steps


def _staleness(spark: SparkSession, cfg: WinnowConfig, stage: str, rec: dict[str, Any] | None) -> str | None:
    if rec is None:
        return "no completion record"
    if rec["stage_fingerprint"] != cfg.stage_fingerprint(stage):
        from pipelines.core import provenance

        doc = provenance.recorded_config(spark, cfg, stage, rec)
        changes = provenance.config_changes(cfg, stage, doc) if doc is not None else []
        return f"config changed ({provenance.describe_changes(changes)})" if changes else "config changed"
    changed = _diff(rec["inputs"], input_state(spark, cfg, stage))
    if changed:
        return f"input changed ({changed})"
    changed = _diff(rec["outputs"], output_state(spark, cfg, stage))
    if changed:
        return f"output changed since completion ({changed})"
    return None


def stale_upstream(spark: SparkSession | None, cfg: WinnowConfig, stage: str) -> str | None:
    """The warning a stage run alone (``jobs/<stage>.py``), or first in a chain that starts after ingest
    (``pipeline.stages: [tokenize, shard]``), prints when the tables it reads predate a change.

    Such a stage reads its input tables as they are. When an earlier stage switched on in the config
    (:func:`pipelines.core.chain.switched_on`, in ``pipeline.stages`` or not) read tables that have
    changed since (new input ingested after it ran) or its own outputs changed,
    the tables after it were made from the old data: ``jobs/pipeline.py`` would rerun from that stage,
    and running this one alone would build on them without a word. Only the tables are compared, not
    the config or ingest's raw files: jobs run one by one are given the keys of their own stage (the
    Databricks job passes ``ingest.inputs`` to ingest only), so another config is no sign of stale data;
    nor are the files a stage reads besides the tables (decontam's evaluation sets), found through it.
    Stages with no record are passed over (a chain run stage by stage writes one as each completes).

    Args:
        spark: the session, or None to read the state from local files as the plan does.
        stage: the stage about to run.

    Returns:
        One line naming the first out-of-date earlier stage, why, and what to run; None when every
        earlier stage with a record is up to date.

    Raises:
        pipelines.core.local_state.NeedsSpark: ``spark`` is None and the run's state is not local.
    """
    records = latest_records(spark, cfg)
    # the chain's tables and marker files; not ingest's files, input_table or a stage's extra inputs
    # (decontam's evaluation sets), which follow the config given
    written = {x for s in STAGES for x in (*chain.stage(s).outputs, *(m.label for m in chain.stage(s).markers))}

    def tables_only(state: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in state.items() if k in written}

    for up in chain.switched_on(cfg):
        if STAGES.index(up) >= STAGES.index(stage) or up not in records:
            continue
        rec = records[up]
        why = None
        if changed := _diff(tables_only(rec["inputs"]), tables_only(input_state(spark, cfg, up, files=[]))):
            why = f"input changed ({changed})"
        elif changed := _diff(rec["outputs"], output_state(spark, cfg, up)):
            why = f"output changed since completion ({changed})"
        if why:
            return (f"[{stage}] WARNING: {up} is out of date ({why}), so {stage} reads tables made before that"
                    f" change; `winnow run` (jobs/pipeline.py) reruns {up} and the stages after it")
    return None


# --------------------------------------------------------------------------------------------- run
def start_line(stage: str, inputs: dict[str, str], reads: str | None = None, why: str | None = None) -> str:
    """One human line announcing a stage, its input and why it runs:
    ``[dedup] start: reads documents@v3 (config changed (dedup.threshold: 0.8 -> 0.7))``.

    Args:
        inputs: what the completion record compares (:func:`input_state`): every upstream table (13 of
            them for the report), of which the line names only what the stage reads.
        reads: the table the stage reads (:func:`pipelines.core.tables.stage_input_table`); None for a
            stage that reads raw files (``files`` in ``inputs``) or every table (the report).
        why: the plan's reason for running it (:class:`PlanStep`), when known.

    >>> start_line("dedup", {"documents": "v3", "quarantine": "v3"}, "documents", "an upstream stage runs")
    '[dedup] start: reads documents@v3 (an upstream stage runs)'
    >>> start_line("report", {"documents": "v0", "removed": "v2"})
    "[report] start: reads the run's tables"
    """
    if reads is not None and reads in inputs:
        what = f"{reads}@{_short(inputs[reads])}"
    elif "files" in inputs:
        what = f"files@{_short(inputs['files'])}"
    else:
        what = "the run's tables"
    return f"[{stage}] start: reads {what}" + (f" ({why})" if why else "")


def _input_rows(spark: SparkSession, cfg: WinnowConfig, stage: str) -> int | None:
    # Rows of the stage's input table as its writer recorded them (no count): the progress estimate.
    table = tables.stage_input_table(cfg, stage, spark)
    if table is None:
        return None
    writer = chain.writer_of(table)
    rec = latest_records(spark, cfg).get(writer) if writer else None
    return int(rec["rows_out"]) if rec else None


def run_and_record(spark: SparkSession, cfg: WinnowConfig, stage: str, *, log: Any = None, tracker: Any = None,
                   why: str | None = None, **options: Any) -> StageReport:
    """Run one stage (:func:`pipelines.core.runner.run_stage`), track it, and append its completion record.

    Args:
        log: callable taking one line (e.g. ``print``); None = silent. Gets the start line.
        tracker: a :class:`pipelines.core.tracking.Tracker` logging the stage as a nested MLflow run, or None;
            its status goes into the record.
        why: the plan's reason for running the stage, for the start line (:func:`start_line`).
        options: passed to the stage's ``run`` (:func:`pipelines.core.runner.run_stage`).

    Returns:
        The stage's checked report.
    """
    from contextlib import nullcontext

    from pipelines.core.progress import Progress
    from pipelines.core.runner import run_stage

    # The raw files' listing serves the input state and the progress line's bytes of input: listed once.
    files = raw_input_files(spark, cfg, stage)
    inputs = input_state(spark, cfg, stage, files)
    if log is not None:
        log(start_line(stage, inputs, tables.stage_input_table(cfg, stage, spark), why))
    started = dt.datetime.now(dt.UTC)
    show = log is not None and cfg.pipeline.progress_s > 0
    progress = Progress(spark, stage, cfg.pipeline.progress_s, _input_rows(spark, cfg, stage),
                        total_bytes=sum(size for _, size, _ in files) if files is not None else None)
    with progress if show else nullcontext():
        report = run_stage(spark, cfg, stage, **options)
    status = tracker.log_stage(report, inputs) if tracker is not None else None
    record_completion(spark, cfg, report, inputs, started, None if status == "off" else status)
    return report
