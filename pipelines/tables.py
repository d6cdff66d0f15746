"""Delta table I/O under ``<run.root>/tables/`` and small files under the run root.

Every stage writes its outputs through :func:`write_table` (one atomic Delta commit that replaces the
table, with ``winnow.*`` table properties such as the config fingerprint) and appends what it drops to
the shared ``removed`` table through :func:`write_removed` (an atomic ``replaceWhere stage = ...``
overwrite, so re-running a stage replaces its own removals and never duplicates them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.config import WinnowConfig

PROPERTY_PREFIX = "winnow."


class MissingTableError(FileNotFoundError):
    """An input table does not exist: the stage that writes it has not run for this ``run.root``."""


def _delta_ident(spark: SparkSession, path: str) -> str:
    # Delta takes delta.`p` for a path only when p is absolute; a relative one (run.root: out, the
    # default) would name a table in a schema "delta" (SCHEMA_NOT_FOUND). Qualify it as Spark's
    # readers do: against the driver's working directory / the filesystem's home.
    hpath = spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[attr-defined]
    if not hpath.isAbsolute():
        path = str(hpath.getFileSystem(spark._jsc.hadoopConfiguration()).makeQualified(hpath).toString())  # type: ignore[attr-defined]
    return "delta.`" + path.replace("`", "``") + "`"


def table_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table (local or any Hadoop filesystem URI)."""
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


def read_table(spark: SparkSession, cfg: WinnowConfig, name: str, *, written_by: str | None = None) -> DataFrame:
    """Read the Delta table ``name`` of this run.

    Args:
        name: table name, e.g. ``"documents"``.
        written_by: the stage that writes it, named in the error message.

    Raises:
        MissingTableError: the table does not exist yet.
    """
    path = cfg.table_path(name)
    if not table_exists(spark, path):
        hint = f"; run the {written_by!r} stage first" if written_by else ""
        raise MissingTableError(f"Delta table {name!r} not found at {path!r}{hint}")
    return spark.read.format("delta").load(path)


def write_table(
    df: DataFrame,
    cfg: WinnowConfig,
    name: str,
    *,
    properties: dict[str, Any] | None = None,
    partition_by: list[str] | None = None,
) -> str:
    """Atomically create or replace the Delta table ``name`` with ``df`` (one Delta commit).

    Args:
        properties: extra table properties; keys get the ``winnow.`` prefix, non-string values are
            stored as canonical JSON. Read back with :func:`table_properties`.
        partition_by: optional partition columns.

    Returns:
        The table path.
    """
    path = cfg.table_path(name)
    writer = df.writeTo(_delta_ident(df.sparkSession, path)).using("delta")
    for k, v in (properties or {}).items():
        key = k if k.startswith(PROPERTY_PREFIX) else PROPERTY_PREFIX + k
        writer = writer.tableProperty(key, v if isinstance(v, str) else json.dumps(v, sort_keys=True))
    if partition_by:
        writer = writer.partitionedBy(*[F.col(c) for c in partition_by])
    writer.createOrReplace()
    return path


def write_removed(df: DataFrame, cfg: WinnowConfig, stage: str) -> str:
    """Replace this stage's rows of the shared ``removed`` table with ``df`` (one atomic commit).

    ``df`` holds the full removed rows plus ``reason`` (array<string>) and ``duplicate_of`` (string,
    nullable); the ``stage`` column is added here. New columns are merged into the table schema, so
    each stage may carry its own signal columns.

    Returns:
        The table path.
    """
    path = cfg.table_path("removed")
    out = df.withColumn("stage", F.lit(stage))
    if "duplicate_of" not in out.columns:
        out = out.withColumn("duplicate_of", F.lit(None).cast("string"))
    (
        out.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"stage = '{stage}'")
        .option("mergeSchema", "true")
        .save(path)
    )
    return path


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """All ``winnow.*`` table properties of the Delta table at ``path``, prefix stripped."""
    detail = spark.sql(f"DESCRIBE DETAIL {_delta_ident(spark, path)}").collect()[0]
    props = detail["properties"] or {}
    return {k[len(PROPERTY_PREFIX):]: v for k, v in props.items() if k.startswith(PROPERTY_PREFIX)}


def table_version(spark: SparkSession, path: str) -> int:
    """Latest committed version of the Delta table at ``path``."""
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small text file at ``path`` (local path or any Hadoop filesystem URI), replacing it."""
    if "://" not in path and not path.startswith("dbfs:"):
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
        return
    jvm = spark._jvm  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def write_effective_config(spark: SparkSession, cfg: WinnowConfig, stage: str) -> str:
    """Write the effective config of ``stage`` to ``<run.root>/config/<stage>.json``.

    The file holds the whole config, its fingerprint and the stage fingerprint
    (:meth:`WinnowConfig.stage_fingerprint`).

    Returns:
        The file path.
    """
    path = f"{cfg.config_path}/{stage}.json"
    doc = {
        "stage": stage,
        "fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(stage),
        "config": cfg.model_dump(mode="json"),
    }
    write_text(spark, path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path
