"""Delta table I/O under ``<run.root>/tables/`` and small files under the run root: every Delta read
and write of Winnow goes through this module.

Every stage publishes its outputs through :func:`publish`: each output table in one atomic Delta commit
that replaces it (:func:`write_table`) with the standard ``winnow.*`` table properties
(:func:`standard_properties`: stage, config fingerprint, stage fingerprint) plus the stage's own; its
removed documents into the shared ``removed`` table (:func:`write_removed`, an atomic ``replaceWhere
stage = ...`` overwrite, so re-running a stage replaces its own removals and never duplicates them);
and its effective config (:func:`write_effective_config`).

**Metastore mode** (``run.catalog`` + ``run.schema``): :meth:`WinnowConfig.table_path` gives a table name
``<catalog>.<schema>.<name>`` instead of a folder, and every function here that takes a table location
accepts either: :func:`is_table_name` is the one switch, and each function reads and writes a name
through the catalog (managed Delta tables, e.g. Unity Catalog on Databricks, Spark's ``spark_catalog``
locally) and a path through ``delta.`path```. Versions, properties, time travel and ``replaceWhere``
behave the same in both modes, so completion records, the resume plan and ``inspect`` need no change.
Shards, the report and effective configs always go to paths (``shard.output``, ``run.root``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core.chain import PREVIOUS, document_tables_before, writer_of
from pipelines.core.chain import stage as chain_stage
from pipelines.core.config import WinnowConfig
from udfs.errors import UserError

PROPERTY_PREFIX = "winnow."

TEXT_CACHE = StorageLevel.DISK_ONLY
"""Storage level of every cached frame that holds document text (ingest's parsed records, dedup's
documents and annotations, each stage's checked rows before its two writes).

Why not ``MEMORY_AND_DISK``: on the heap, the cached text of 480,000 documents (1.7 GB) took the driver
of a local run with a 3 GB heap to ``OutOfMemoryError`` in dedup (Spark's columnar cache builds each
10,000-row batch on the heap beside the blocks it already holds); on local disk the same dedup ran with
3 GB in 153 s, against 159 s with a 6 GB heap and the memory cache (bench/notes.md, session 7). The
operating system's page cache keeps recently written blocks in memory anyway, outside the JVM heap.
"""


class MissingTableError(UserError, FileNotFoundError):
    """An input table does not exist: the stage that writes it has not run for this ``run.root``."""


def is_table_name(location: str) -> bool:
    """True when ``location`` is a metastore table name (``catalog.schema.table``), not a path.

    Paths from :meth:`WinnowConfig.table_path` always hold a ``/`` (``<root>/tables/<name>``), names never.

    >>> is_table_name("spark_catalog.winnow.documents"), is_table_name("out/tables/documents")
    (True, False)
    """
    return "/" not in location and ":" not in location


def _quoted(name: str) -> str:
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


_SCHEMAS: set[tuple[int, str]] = set()


def _ensure_schema(spark: SparkSession, name: str) -> None:
    # A table's schema (database) must exist before the table; created once per session.
    schema = name.rsplit(".", 1)[0]
    if (id(spark), schema) not in _SCHEMAS:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {_quoted(schema)}")
        _SCHEMAS.add((id(spark), schema))


def _delta_ident(spark: SparkSession, path: str) -> str:
    if is_table_name(path):
        return _quoted(path)
    # Delta takes delta.`p` for a path only when p is absolute; a relative one (run.root: out, the
    # default) would name a table in a schema "delta" (SCHEMA_NOT_FOUND). Qualify it as Spark's
    # readers do: against the driver's working directory / the filesystem's home.
    hpath = spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[attr-defined]
    if not hpath.isAbsolute():
        path = str(hpath.getFileSystem(spark._jsc.hadoopConfiguration()).makeQualified(hpath).toString())  # type: ignore[attr-defined]
    return "delta.`" + path.replace("`", "``") + "`"


def previous_document_table(cfg: WinnowConfig, stage: str, forced: str | None = None,
                            spark: SparkSession | None = None) -> str:
    """The table a stage declared with ``input=PREVIOUS`` reads (tokenize, pii).

    ``forced`` (the stage's ``input_table`` setting) wins; else the last stage before ``stage`` in
    ``pipeline.stages`` that writes a document table decides
    (:func:`pipelines.core.chain.document_tables_before`);
    when ``pipeline.stages`` holds none (the stage submitted alone), the last existing document table
    of the whole chain before it is used, else the last one declared. ``spark=None``: existing means a
    local Delta log (:func:`pipelines.core.local_state.delta_version`).
    """
    if forced:
        return forced
    configured = document_tables_before(stage, cfg.pipeline.stages)
    if configured:
        return configured[-1]
    declared = document_tables_before(stage)
    for name in reversed(declared):
        path = cfg.table_path(name)
        # spark=None: a plan made without a JVM, where delta_version reads local Delta logs
        exists = table_exists(spark, path) if spark is not None else delta_version(None, path) is not None
        if exists:
            return name
    return declared[-1]


def stage_input_table(cfg: WinnowConfig, stage: str, spark: SparkSession | None = None) -> str | None:
    """The table ``stage`` reads: its declared input (None: ingest, and the report, which reads every
    table), or for a stage declared with ``input=PREVIOUS`` (pii, tokenize) its ``input_table`` setting,
    else :func:`previous_document_table`."""
    declared = chain_stage(stage).input
    if declared != PREVIOUS:
        return declared
    return previous_document_table(cfg, stage, getattr(getattr(cfg, stage), "input_table", None), spark)


def table_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table (local or any Hadoop filesystem URI), or names a table."""
    from delta.tables import DeltaTable

    if is_table_name(path):
        return bool(spark.catalog.tableExists(path))
    return bool(DeltaTable.isDeltaTable(spark, path))


def read_table(
    spark: SparkSession,
    cfg: WinnowConfig,
    name: str,
    *,
    written_by: str | None = None,
    version: int | None = None,
    cache_under_bytes: int | None = None,
) -> DataFrame:
    """Read the Delta table ``name`` of this run (at ``version`` when given, else the latest).

    Args:
        name: table name, e.g. ``"documents"``.
        written_by: the stage that writes it, named in the error message; default: the stage the chain
            declares as its writer (:func:`pipelines.core.chain.writer_of`).
        cache_under_bytes: persist the rows (memory and disk) when the table's files hold at most this many
            bytes; rows with text or token bytes (:func:`holds_bulk`) only up to
            :data:`SMALL_BULK_TABLE_BYTES`, on local disk; kept until :func:`release_cached`
            (:func:`pipelines.core.runner.run_stage` calls it when the stage ends): for a stage that queries
            its input several times, each later query reads the cache instead of planning a Delta scan (a
            Spark job listing the snapshot's files) and reading Parquet again.

    Raises:
        MissingTableError: the table does not exist yet.
    """
    path = cfg.table_path(name)
    if not table_exists(spark, path):
        written_by = written_by or writer_of(name)
        hint = f"; run the {written_by!r} stage first" if written_by else ""
        raise MissingTableError(f"Delta table {name!r} not found at {path!r}{hint}")
    df = read_path(spark, path, version)
    if cache_under_bytes is not None:
        at = version if version is not None else delta_version(spark, path)
        if at is not None:
            _cache_if_small(spark, df, path, at, cache_under_bytes)
    return df


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
    if is_table_name(path):
        _ensure_schema(df.sparkSession, path)
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
    writer = (
        out.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"stage = '{stage}'")
        .option("mergeSchema", "true")
    )
    if is_table_name(path):
        _ensure_schema(out.sparkSession, path)
        writer.saveAsTable(path)
    else:
        writer.save(path)
    return path


def clear_removed(spark: SparkSession, cfg: WinnowConfig, stage: str, empty: DataFrame) -> str:
    """Delete this stage's rows of the ``removed`` table, for a stage that knows it removed nothing.

    Same end state as :func:`write_removed` with no rows, cheaper: a Delta DELETE whose condition no
    file's statistics can match rewrites nothing and commits nothing (``commitIfNeeded``), where an
    empty ``replaceWhere`` overwrite plans and runs a write job (0.6-0.9 s against 0.3-0.4 s, measured
    on a local table). When the table does not exist yet it is created, empty, by :func:`write_removed`
    with ``empty`` (its schema), so readers of ``removed`` find it.

    Args:
        empty: a frame of the removed rows' schema with no rows (used only to create the table).

    Returns:
        The table path.
    """
    from delta.tables import DeltaTable

    path = cfg.table_path("removed")
    if not table_exists(spark, path):
        return write_removed(empty, cfg, stage)
    table = DeltaTable.forName(spark, path) if is_table_name(path) else DeltaTable.forPath(spark, path)
    table.delete(F.col("stage") == F.lit(stage))
    return path


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """All ``winnow.*`` table properties of the Delta table at ``path``, prefix stripped."""
    detail = spark.sql(f"DESCRIBE DETAIL {_delta_ident(spark, path)}").collect()[0]
    props = detail["properties"] or {}
    return {k[len(PROPERTY_PREFIX):]: v for k, v in props.items() if k.startswith(PROPERTY_PREFIX)}


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jvm = spark._jvm  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath  # type: ignore[attr-defined]


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """``(FileSystem, Path)`` of the JVM's Hadoop API for ``path`` (local path or any Hadoop URI), for
    file operations Spark's writers do not do themselves (listing, renaming, deleting)."""
    return _hadoop_path(spark, path)


def table_size_bytes(spark: SparkSession, cfg: WinnowConfig, name: str) -> int:
    """Bytes of the data files of the current version of table ``name`` (Delta's ``sizeInBytes``).

    Raises:
        MissingTableError: the table does not exist yet.
    """
    read_table(spark, cfg, name)  # the missing-table error, naming the stage to run
    detail = spark.sql(f"DESCRIBE DETAIL {_delta_ident(spark, cfg.table_path(name))}").collect()[0]
    return int(detail["sizeInBytes"] or 0)


_LOCATIONS: dict[tuple[int, str], str] = {}


def delta_version(spark: SparkSession, path: str) -> int | None:
    """Latest committed version of the Delta table at ``path``, or None when there is none.

    Reads the file names of ``_delta_log/`` (the newest commit is always a ``NNN.json`` file, whatever
    checkpoints exist), which costs one listing instead of a Spark job per table. ``spark=None``: a
    local table, listed without Spark (:mod:`pipelines.core.local_state`). A table name is looked up in the
    catalog for its location; where that location cannot be listed (Unity Catalog managed storage),
    the table's history says.
    """
    if spark is None:
        from pipelines.core import local_state

        return local_state.delta_version(path)
    if is_table_name(path):
        if not spark.catalog.tableExists(path):
            return None
        key = (id(spark), path)
        if key not in _LOCATIONS:  # one catalog look-up per table: the plan asks for every table's version
            _LOCATIONS[key] = spark.sql(f"DESCRIBE DETAIL {_quoted(path)}").collect()[0]["location"]
        location = _LOCATIONS[key]
        try:
            return delta_version(spark, location)
        except Exception:  # noqa: BLE001 - storage not readable directly: ask Delta
            return int(spark.sql(f"DESCRIBE HISTORY {_quoted(path)} LIMIT 1").collect()[0]["version"])
    fs, log = _hadoop_path(spark, path.rstrip("/") + "/_delta_log")
    if not fs.exists(log):
        return None
    versions = [
        int(name[:-5])
        for name in (st.getPath().getName() for st in fs.listStatus(log))
        if name.endswith(".json") and name[:-5].isdigit()
    ]
    return max(versions) if versions else None


def commit_metrics(spark: SparkSession, path: str) -> dict[str, str]:
    """``operationMetrics`` of the latest commit of the Delta table at ``path`` (or named ``path``).

    Delta records them in each commit's ``commitInfo`` (``numOutputRows``, ``numFiles``,
    ``numOutputBytes``, ...; PROTOCOL.md "Commit Provenance Information", written while
    ``spark.databricks.delta.history.metricsEnabled`` is on, its default). Reading them costs one small
    file read, where counting the table just written costs a snapshot rebuild and a scan.

    Returns:
        Metric name -> value as Delta wrote it (strings); ``{}`` when the table or the metrics are missing.
    """
    if is_table_name(path):
        if not spark.catalog.tableExists(path):
            return {}
        row = spark.sql(f"DESCRIBE HISTORY {_quoted(path)} LIMIT 1").collect()[0]
        return {k: str(v) for k, v in (row["operationMetrics"] or {}).items()}
    version = delta_version(spark, path)
    if version is None:
        return {}
    data = read_bytes(spark, f"{path.rstrip('/')}/_delta_log/{version:020d}.json")
    for line in (data or b"").decode("utf-8").splitlines():
        if '"commitInfo"' in line:
            metrics = json.loads(line)["commitInfo"].get("operationMetrics") or {}
            return {k: str(v) for k, v in metrics.items()}
    return {}


def written_rows(spark: SparkSession, path: str) -> int:
    """Rows the latest commit of the Delta table at ``path`` wrote (its ``numOutputRows``): for a
    ``createOrReplace`` (:func:`write_table`) the table's row count. Falls back to counting the table
    when the commit holds no metrics."""
    n = commit_metrics(spark, path).get("numOutputRows")
    return int(n) if n is not None else read_path(spark, path).count()


def table_version(spark: SparkSession, path: str) -> int:
    """Latest committed version of the Delta table at ``path`` (:func:`delta_version`, which must exist).

    Raises:
        MissingTableError: no Delta table at ``path``.
    """
    version = delta_version(spark, path)
    if version is None:
        raise MissingTableError(f"no Delta table at {path!r}")
    return version


def read_path(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The Delta table at ``path`` (any location, e.g. ``dedup.reference``, or a table name), at
    ``version`` if given."""
    if is_table_name(path):
        at = f" VERSION AS OF {int(version)}" if version is not None else ""
        return spark.sql(f"SELECT * FROM {_quoted(path)}{at}")
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


_LOADED: dict[tuple[int, str, int], DataFrame] = {}


def read_if_exists(spark: SparkSession, cfg: WinnowConfig, name: str, *,
                   cache_under_bytes: int | None = None) -> DataFrame | None:
    """The Delta table ``name`` of this run at its latest version, or None when it does not exist.

    Args:
        cache_under_bytes: persist the table (memory and disk) when its data files hold at most this many
            bytes (:func:`table_bytes`; a table with text or token bytes only up to
            :data:`SMALL_BULK_TABLE_BYTES`, on local disk), until :func:`release_cached`. Every later query of
            it then reads the cache instead of planning a Delta scan (one Spark job listing the snapshot's
            files) and reading Parquet again: what a reader that queries a few small tables dozens of times
            (the report) wants. Tables of unknown size are not cached.
    """
    # One load per table version: the report and inspect read the same few tables many times, and
    # resolving a Delta snapshot costs a Spark job; the _delta_log listing that finds the version does not.
    path = cfg.table_path(name)
    version = delta_version(spark, path)
    if version is None:
        return None
    key = (id(spark), path, version)
    if key not in _LOADED:
        _LOADED[key] = read_path(spark, path, version)
    df = _LOADED[key]
    if cache_under_bytes is not None and not df.is_cached:
        _cache_if_small(spark, df, path, version, cache_under_bytes)
    return df


SMALL_TABLE_BYTES = 256 << 20
"""Default ``cache_under_bytes`` of the stages that re-read a table: files of at most 256 MB (a run of a
few hundred thousand documents); larger tables are scanned per query, as before."""

_PINNED: dict[int, list[DataFrame]] = {}


SMALL_BULK_TABLE_BYTES = 32 << 20
"""Largest table holding text or token bytes (:func:`holds_bulk`) that ``cache_under_bytes`` caches,
whatever larger limit it is given. The cache holds every column, where each query of an uncached
table reads only the columns it needs from Parquet: the report of the scaling run took 81 s at
120,000 documents with its text tables (150-250 MB each) cached on disk and 51 s at 480,000, where
they were over the limit and not cached (bench/notes.md, session 8)."""


def _cache_if_small(spark: SparkSession, df: DataFrame, path: str, version: int, limit: int) -> None:
    if holds_bulk(df):
        limit = min(limit, SMALL_BULK_TABLE_BYTES)
    size = table_bytes(spark, path, version)
    if size is not None and size <= limit:
        _persist(spark, df)


def _persist(spark: SparkSession, df: DataFrame) -> None:
    # Decoded, text takes several times its compressed size: cached on the heap, the report of 120,000
    # documents (five text tables of 150-250 MB) died with OutOfMemoryError in a 3 GB driver. Frames
    # with text or token bytes go to local disk (TEXT_CACHE).
    df.persist(TEXT_CACHE if holds_bulk(df) else StorageLevel.MEMORY_AND_DISK)
    _PINNED.setdefault(id(spark), []).append(df)


def holds_bulk(df: DataFrame) -> bool:
    """True when ``df`` carries document text or token bytes (a ``text`` column or any binary column):
    the frames :data:`TEXT_CACHE` is for."""
    return "text" in df.columns or any(isinstance(f.dataType, T.BinaryType) for f in df.schema.fields)


def release_cached(spark: SparkSession) -> None:
    """Unpersist every table :func:`read_table` / :func:`read_if_exists` cached for ``spark``."""
    for df in _PINNED.pop(id(spark), []):
        df.unpersist()


def table_bytes(spark: SparkSession, path: str, version: int) -> int | None:
    """Bytes of the data files of version ``version`` of the Delta table at ``path``, from the version's
    checksum file (``_delta_log/<version>.crc``, ``tableSizeBytes``; PROTOCOL.md "Version Checksum File"),
    which Delta writes with each commit; None when there is none (a table name, a writer that wrote no
    checksum) or it cannot be read. No Spark job."""
    if is_table_name(path):
        return None
    try:
        data = read_bytes(spark, f"{path.rstrip('/')}/_delta_log/{version:020d}.crc")
        return None if data is None else int(json.loads(data)["tableSizeBytes"])
    except (ValueError, KeyError, TypeError):
        return None


def append(df: DataFrame, path: str) -> str:
    """Append ``df`` to the Delta table at ``path`` (created when absent), in one atomic commit.

    Returns:
        ``path``.
    """
    if is_table_name(path):
        _ensure_schema(df.sparkSession, path)
        df.write.format("delta").mode("append").saveAsTable(path)
    else:
        df.write.format("delta").mode("append").save(path)
    return path


def standard_properties(cfg: WinnowConfig, stage: str) -> dict[str, str]:
    """The table properties every stage stamps on every table it writes (``winnow.`` prefix added on
    write): ``stage``, ``config_fingerprint`` (the whole config) and ``stage_fingerprint``
    (:meth:`WinnowConfig.stage_fingerprint`)."""
    return {
        "stage": stage,
        "config_fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(stage),
    }


def publish(
    spark: SparkSession,
    cfg: WinnowConfig,
    stage: str,
    outputs: Mapping[str, DataFrame],
    *,
    removed: DataFrame | None = None,
    properties: Mapping[str, Any] | None = None,
    table_properties: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """Write everything a stage outputs: its tables, its ``removed`` rows and its effective config.

    Args:
        stage: the stage publishing.
        outputs: table name -> rows, written in this order, each replacing its table in one commit.
        removed: this stage's removed documents (see :func:`write_removed`); None when it removes none.
        properties: stage-specific properties stamped on every table of ``outputs``, after
            :func:`standard_properties`.
        table_properties: per-table extra properties, by table name.

    Returns:
        ``name -> location`` of every table written (``removed`` included when written).
    """
    written: dict[str, str] = {}
    for name, df in outputs.items():
        own = (table_properties or {}).get(name, {})
        props = {**standard_properties(cfg, stage), **(properties or {}), **own}
        written[name] = write_table(df, cfg, name, properties=props)
    if removed is not None:
        if not chain_stage(stage).removes:
            raise ValueError(f"stage {stage!r} is declared in pipelines/core/chain.py as removing nothing")
        written["removed"] = write_removed(removed, cfg, stage)
    write_effective_config(spark, cfg, stage)
    return written


def read_bytes(spark: SparkSession, path: str, cfg: WinnowConfig | None = None) -> bytes | None:
    """Bytes of the file at ``path`` (local path, ``s3://`` through the shard storage settings of
    ``cfg``, or a Hadoop URI), or None when it does not exist.

    Only "not found" means absent: any other failure (access denied, a network error) raises, so a
    completion check never mistakes an unreadable marker for a missing one and silently reruns a stage.
    """
    if path.startswith("s3://") and cfg is not None:
        from pipelines.core import storage

        root, _, name = path.rpartition("/")
        try:
            return storage.get_bytes(root, name, cfg.shard.storage)
        except Exception as e:
            if storage.is_not_found(e):
                return None
            raise
    if "://" not in path and not path.startswith("dbfs:"):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
    fs, hpath = _hadoop_path(spark, path)
    if not fs.exists(hpath):
        return None
    stream = fs.open(hpath)
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small text file at ``path`` (local path or any Hadoop filesystem URI), replacing it."""
    if "://" not in path and not path.startswith("dbfs:"):
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
        return
    fs, hpath = _hadoop_path(spark, path)
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


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Spark session settings ``settings`` while the block runs, the earlier values (or unset) after."""
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
