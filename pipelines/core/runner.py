"""What every stage returns, and where the chain finds each stage's ``run`` function.

A stage package ``pipelines/<stage>/`` exports

* a plain ``DataFrame -> DataFrame`` transform (composable with ``df.transform``), and
* ``run(spark, cfg) -> StageReport``: read its input table, apply the transform, write its output
  tables (through :mod:`pipelines.core.tables`) and the effective config, and report counts.

``jobs/<stage>.py`` and ``jobs/pipeline.py`` only ever call ``run`` through :func:`stage_runner`.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig
from pipelines.core.section import DELTA_STATS_COLUMNS

StageRun = Callable[..., "StageReport"]


class InvariantError(AssertionError):
    """Rows in != rows out + rows removed (+ quarantined): a stage lost or invented documents."""


@dataclass
class StageReport:
    """Counts and timings of one stage run. Units: rows are documents (ingest: input records).

    Attributes:
        stage: stage name.
        rows_in: documents (ingest: records) read.
        rows_out: documents written to the stage's main output table.
        removed: documents removed, by reason id (a document with several reasons counts once, under
            its first reason, so ``sum(removed.values())`` is the number of removed documents).
        quarantined: ingest only: bad records by reason.
        outputs: output table name (or path) -> location.
        extra: stage-specific figures (e.g. LSH S-curve, shard balance), JSON-serialisable.
        elapsed_s: wall time in seconds.
        first_reason_only: a document can fail several rules and ``removed`` counts its first only
            (filter); the summary line says so.
        notes: kept-but-notable counts for the summary line, e.g. refs' ``{"flagged": 5}``.
        warnings: sentences the summary line ends with, each after ``WARNING:`` (a source that lost
            most of its documents).
        detail: the stage's own figures in words for the end of the summary line, e.g. the shard
            stage's shards, tokens and samples per split ("" for none).
    """

    stage: str
    rows_in: int = 0
    rows_out: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    first_reason_only: bool = False
    notes: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def n_removed(self) -> int:
        """Documents removed (each counted once)."""
        return sum(self.removed.values())

    @property
    def n_quarantined(self) -> int:
        """Records quarantined (ingest)."""
        return sum(self.quarantined.values())

    def check(self) -> StageReport:
        """Assert rows in = rows out + removed + quarantined.

        Raises:
            InvariantError: the accounting does not balance.
        """
        if self.rows_in != self.rows_out + self.n_removed + self.n_quarantined:
            raise InvariantError(
                f"{self.stage}: rows in {self.rows_in} != out {self.rows_out} + removed {self.n_removed}"
                f" + quarantined {self.n_quarantined}"
            )
        return self

    def summary_line(self) -> str:
        """One human line: ``[dedup] in=… out=… removed=… (reason=n, …) 12.3s``.

        With several reasons per document (filter), each document counts under its first failing rule
        and the line says so; the report's removals table counts every failing rule.
        """
        parts = [f"[{self.stage}] in={self.rows_in} out={self.rows_out}"]
        if self.removed:
            by = "by first failing rule: " if self.first_reason_only and len(self.removed) > 1 else ""
            parts.append(f"removed={self.n_removed} ({by}" + ", ".join(f"{k}={v}" for k, v in sorted(self.removed.items())) + ")")
        if self.quarantined:
            parts.append(
                f"quarantined={self.n_quarantined} ("
                + ", ".join(f"{k}={v}" for k, v in sorted(self.quarantined.items()))
                + ")"
            )
        parts += [f"{k}={v}" for k, v in self.notes.items() if v]
        if self.detail:
            parts.append(f"({self.detail})")
        parts.append(f"{self.elapsed_s:.1f}s")
        parts += [f"WARNING: {w}" for w in self.warnings]
        return " ".join(parts)

    def to_json(self) -> str:
        """The report as JSON (sorted keys)."""
        return json.dumps(asdict(self), sort_keys=True, default=str)


class Timer:
    """Context manager measuring wall time in seconds (``.elapsed``)."""

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        self.elapsed = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self._t0


def stage_runner(stage: str) -> StageRun:
    """Return ``pipelines.<stage>.run``.

    Raises:
        ValueError: unknown stage name (lists the allowed ones).
        NotImplementedError: the stage module has no ``run`` yet.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; allowed: {list(STAGES)}")
    try:
        module = importlib.import_module(f"pipelines.{stage}")
    except ModuleNotFoundError as e:
        if e.name == f"pipelines.{stage}":
            raise NotImplementedError(f"stage {stage!r} is not implemented yet (no pipelines/{stage}/)") from None
        raise
    try:
        run = module.run
    except AttributeError:
        raise NotImplementedError(f"pipelines/{stage}/__init__.py exports no run(spark, cfg) function") from None
    return run


def input_bytes(spark: Any, cfg: WinnowConfig, stage: str) -> int | None:
    """Bytes ``stage`` will read, found without a Spark job, or None when unknown.

    a stage that reads raw files (an ``input_files`` hook, :mod:`pipelines.core.hooks`; ingest): their
    sizes (compressed as they are on disk); a stage that reads a table
    of the chain: the data files of its latest version (``tableSizeBytes`` of Delta's checksum,
    :func:`pipelines.core.tables.table_bytes`); the report, which reads every table: ``documents``. None
    for a table that does not exist (the stage will say so), a catalog table or a table without checksum.
    """
    from pipelines.core import hooks, tables

    input_files = hooks.hook(stage, "input_files")
    if input_files is not None:
        return sum(size for _, size, _ in input_files(spark, cfg))
    path = cfg.table_path(tables.stage_input_table(cfg, stage, spark) or "documents")
    version = tables.delta_version(spark, path)
    return None if version is None else tables.table_bytes(spark, path, version)


def small_input_settings(spark: Any, cfg: WinnowConfig, stage: str) -> dict[str, str]:
    """Spark settings for a stage of a local run on a small input (``spark.small_input_mb``): adaptive
    query execution off, at most 2 shuffle partitions per core, expressions and operators interpreted
    instead of compiled, a collected ``limit(n)`` scanning up to as many partitions as a shuffle has in
    its first Spark job. Empty otherwise; a setting named in ``spark.conf`` is left as the user set it.

    Why: with AQE every shuffle's query stage runs as a Spark job of its own and is re-planned; on a
    few MB there is nothing to coalesce, split or broadcast at run time, and ``make run``'s chain spent
    more driver time between its ~270 jobs than inside them (bench/notes.md, "Fixed cost"). Whole-stage
    code generation compiles Java source for every new plan with Janino (~630 compilations, ~7 CPU-s
    in ``make run``), which pays back only over many rows; ``spark.sql.codegen.factoryMode=NO_CODEGEN``
    (Spark's interpreted projections, orderings and predicates; a SQLConf Spark itself tests every
    expression with) skips the rest. A collected limit runs a job over its first partition only
    (Spark's ``spark.sql.limit.initialNumPartitions``, 1) and another over the rest when that partition
    holds fewer than ``n`` rows, as on a small input; the rows taken are the first ``n`` in partition
    order either way. Results do not depend on partitioning or on code generation
    (tests/identity.py compares whole runs).
    """
    sc = cfg.spark
    if spark is None or sc.small_input_mb == 0 or not spark.sparkContext.master.startswith("local"):
        return {}
    n = input_bytes(spark, cfg, stage)
    if n is None or n > sc.small_input_mb * 1_000_000:
        return {}
    parts = min(sc.shuffle_partitions, 2 * spark.sparkContext.defaultParallelism)
    settings = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(parts),
                "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                "spark.sql.limit.initialNumPartitions": str(parts)}
    return {k: v for k, v in settings.items() if k not in sc.conf}


NO_COLUMN_STATS = {DELTA_STATS_COLUMNS: "0"}
"""Delta collects min/max/null statistics of the first 32 columns of every file it writes, for data
skipping (Delta's ``delta.dataSkippingNumIndexedCols``, default 32): 1.9 of 9.9 CPU-s to write 590 MB of
filtered documents, most of it for ``text``. No reader of Winnow's tables filters on a column whose
per-file ranges could skip a file (doc ids are spread over every file). Row counts (``numRecords``) stay."""


def stage_settings(spark: Any, cfg: WinnowConfig, stage: str) -> dict[str, str]:
    """Spark settings while ``stage`` runs: :data:`NO_COLUMN_STATS` on the tables it creates, and
    :func:`small_input_settings`. A setting named in ``spark.conf``, or already set in the session (a
    cluster's or spark-submit's own settings), is left as the user set it."""
    if spark is None:
        return {}
    return {**unless_set(spark, cfg, NO_COLUMN_STATS), **small_input_settings(spark, cfg, stage)}


def unless_set(spark: Any, cfg: WinnowConfig, settings: dict[str, str]) -> dict[str, str]:
    """``settings`` less those named in ``spark.conf`` or already set in the session (a cluster's or
    spark-submit's own): what a stage may set for its run without overriding the user."""
    return {k: v for k, v in settings.items() if k not in cfg.spark.conf and spark.conf.get(k, None) is None}


def run_stage(spark: Any, cfg: WinnowConfig, stage: str, **options: Any) -> StageReport:
    """Run one stage, time it, check its accounting invariant, and return its report.

    ``options`` go to the stage's ``run`` (e.g. filter's ``decide_only``). The stage runs with
    :func:`stage_settings`.
    """
    from pipelines.core.tables import release_cached, session_conf

    try:
        with Timer() as t, session_conf(spark, stage_settings(spark, cfg, stage)):
            report = stage_runner(stage)(spark, cfg, **options)
    finally:
        if spark is not None:
            release_cached(spark)  # the inputs the stage cached (tables.read_table's cache_under_bytes)
    report.elapsed_s = t.elapsed
    return report.check()
