"""Delta table I/O under ``<run.root>/tables/`` and small files under the run root: every Delta read
and write of Winnow goes through this module.

Every stage publishes its outputs through :func:`publish`: each output table in one atomic Delta commit
that replaces it (:func:`write_table`) with the standard ``winnow.*`` table properties
(:func:`standard_properties`: stage, config fingerprint, stage fingerprint) plus the stage's own; its
removed documents into the shared ``removed`` table (:func:`write_removed`, an atomic ``replaceWhere
stage = ...`` overwrite, so re-running a stage replaces its own removals and never duplicates them; an
append where the table's log shows no row of the stage to replace);
and its effective config (:func:`write_effective_config`).

**Local tables** (a path on this machine, a local master): :func:`read_path` reads the Parquet files the
Delta log lists and :func:`table_properties` the log's metadata, both as delta-rs reads the log
(:mod:`pipelines.core.local_state`), without the Spark jobs Delta runs to rebuild a snapshot; a table
delta-rs cannot read as Delta does (deletion vectors, column mapping or another reader feature,
partitions, a commit coordinator) is read through Delta as before.

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
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core.cache import (  # noqa: F401  (re-exported: callers use tables.<name>)
    SMALL_BULK_TABLE_BYTES,
    SMALL_TABLE_BYTES,
    TEXT_CACHE,
    _cache_if_small,
    holds_bulk,
    release_cached,
)
from pipelines.core.chain import PREVIOUS, document_tables_before, switched_on, writer_of
from pipelines.core.chain import stage as chain_stage
from pipelines.core.config import WinnowConfig
from pipelines.core.files import (  # noqa: F401  (re-exported: callers use tables.<name>)
    _hadoop_path,
    _quoted,
    commit_metrics,
    delta_version,
    hadoop_path,
    is_table_name,
    on_this_machine,
    read_bytes,
    table_bytes,
    write_text,
)
from udfs.errors import UserError

PROPERTY_PREFIX = "winnow."

class MissingTableError(UserError, FileNotFoundError):
    """An input table does not exist: the stage that writes it has not run for this ``run.root``."""


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
    """The table a stage declared with ``input=PREVIOUS`` reads (filter, pii, tokenize).

    ``forced`` (the stage's ``input_table`` setting) wins; else the last stage before ``stage`` in
    ``pipeline.stages`` that writes a document table decides
    (:func:`pipelines.core.chain.document_tables_before`);
    when ``pipeline.stages`` holds none (the stage submitted alone), the last existing document table
    of the whole chain before it is used, else the last one declared. ``spark=None``: existing means a
    local Delta log (:func:`pipelines.core.local_state.delta_version`). A stage switched off in ``cfg``
    (:func:`pipelines.core.chain.switched_on`) writes no table and is passed over.
    """
    if forced:
        return forced
    configured = document_tables_before(stage, switched_on(cfg, cfg.pipeline.stages))
    if configured:
        return configured[-1]
    declared = document_tables_before(stage, switched_on(cfg))
    for name in reversed(declared):
        path = cfg.table_path(name)
        # spark=None: a plan made without a JVM, where delta_version reads local Delta logs
        exists = table_exists(spark, path) if spark is not None else delta_version(None, path) is not None
        if exists:
            return name
    return declared[-1]


def stage_input_table(cfg: WinnowConfig, stage: str, spark: SparkSession | None = None) -> str | None:
    """The table ``stage`` reads: its declared input (None: ingest, and the report, which reads every
    table), or for a stage declared with ``input=PREVIOUS`` (filter, pii, tokenize) its ``input_table``
    setting, else :func:`previous_document_table`."""
    declared = chain_stage(stage).input
    if declared != PREVIOUS:
        return declared
    return previous_document_table(cfg, stage, getattr(getattr(cfg, stage), "input_table", None), spark)


def table_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table (local or any Hadoop filesystem URI), or names a table."""
    from delta.tables import DeltaTable

    if is_table_name(path):
        return bool(spark.catalog.tableExists(path))
    if on_this_machine(spark, path):
        return delta_version(spark, path) is not None  # a commit in its _delta_log, listed without the JVM
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


ALL_FILES_IN_CRC = "spark.databricks.delta.allFilesInCrc.enabled"
"""Delta's setting (``DeltaSQLConf``, default on) that stores a small table's list of data files (under
50) in the checksum file of each commit, derived from the previous version's list. :func:`write_table`
and :func:`write_removed` turn it off for the commits they make on a local table of a local run:
creating a table, Delta derives the list in a Spark job of its own (no tasks) with its planning, 77
against 153 ms of the driver thread's CPU per table and one job instead of two; replacing one written
so costs what it did (281 against 286 ms, three jobs; same process, alternated rounds, bench/notes.md).
The checksum keeps ``tableSizeBytes`` and ``numFiles`` (:func:`table_bytes`) and the data files and
commits are the same; Winnow reads such tables through their log (:func:`_read_parquet_files`), not the
checksum's list."""


def write_table(
    df: DataFrame,
    cfg: WinnowConfig,
    name: str,
    *,
    properties: dict[str, Any] | None = None,
    partition_by: list[str] | None = None,
) -> str:
    """Atomically create or replace the Delta table ``name`` with ``df`` (one Delta commit). On a local
    table of a local run the commit's checksum file holds no list of data files (:data:`ALL_FILES_IN_CRC`).

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
    spark = df.sparkSession
    local = _local_table(spark, path)
    with _no_file_list_in_crc(spark, cfg, path):
        if local and not os.path.lexists(path):
            # Same commit without replacing: createOrReplace lists the (empty) files of the table it
            # replaces in a Spark job of its own, 0.1-0.3 s on 2 cores for each table of a new run root.
            writer.create()
        else:
            writer.createOrReplace()
    return path


def _no_file_list_in_crc(spark: SparkSession, cfg: WinnowConfig, path: str) -> Any:
    """A block whose commits on the local table ``path`` of a local run write their checksum file without
    its list of data files (:data:`ALL_FILES_IN_CRC` off), unless the user set it; else a block that
    changes nothing."""
    no_list = (_local_table(spark, path) and ALL_FILES_IN_CRC not in cfg.spark.conf
               and spark.conf.get(ALL_FILES_IN_CRC, None) is None)
    return session_conf(spark, {ALL_FILES_IN_CRC: "false"} if no_list else {})


def _local_table(spark: SparkSession, path: str) -> bool:
    # A local path under a local master (a path without scheme is on this machine). Anything else, a
    # table name or a location on another filesystem, is written as Delta's defaults have it.
    from pipelines.core import local_state

    return (not is_table_name(path) and local_state.is_local(path)
            and spark.sparkContext.master.startswith("local"))


def write_removed(df: DataFrame, cfg: WinnowConfig, stage: str) -> str:
    """Replace this stage's rows of the shared ``removed`` table with ``df`` (one atomic commit): a
    ``replaceWhere`` overwrite, or an append where :func:`holds_no_rows_of` shows nothing to replace.

    ``df`` holds the full removed rows plus ``reason`` (array<string>) and ``duplicate_of`` (string,
    nullable); the ``stage`` column is added here. New columns are merged into the table schema, so
    each stage may carry its own signal columns. On a local table of a local run the commit's checksum
    file holds no list of data files (:data:`ALL_FILES_IN_CRC`), as :func:`write_table`'s.

    Returns:
        The table path.
    """
    path = cfg.table_path("removed")
    out = df.withColumn("stage", F.lit(stage))
    if "duplicate_of" not in out.columns:
        out = out.withColumn("duplicate_of", F.lit(None).cast("string"))
    writer = out.write.format("delta").option("mergeSchema", "true")
    if holds_no_rows_of(path, stage):
        # Nothing of this stage to replace: a blind append writes the same rows without the Delta
        # snapshot rebuild and file scan a replaceWhere runs to find them; its userMetadata says whose.
        writer = writer.mode("append").option("userMetadata", _stage_predicate(stage))
    else:
        writer = writer.mode("overwrite").option("replaceWhere", _stage_predicate(stage))
    if is_table_name(path):
        _ensure_schema(out.sparkSession, path)
        writer.saveAsTable(path)
    else:
        with _no_file_list_in_crc(out.sparkSession, cfg, path):
            writer.save(path)
    return path


def _stage_predicate(stage: str) -> str:
    return f"stage = '{stage}'"


def holds_no_rows_of(path: str, stage: str) -> bool:
    """True when the log of the local ``removed`` table at ``path`` proves that none of its files holds a
    row of ``stage``: every live file was added by a :func:`write_removed` commit of another stage (its
    ``replaceWhere`` predicate, or the ``userMetadata`` of an append, names that stage). False when it
    cannot tell (a table name, no table yet, a file from a DELETE or another writer, a log this reader
    does not follow): the caller then replaces the stage's rows through Delta as before. Reads a few
    small JSON files; no Spark job. The run root's lock (:mod:`pipelines.core.lock`, one run at a time)
    keeps another writer from adding rows of the stage between this check and the append."""
    from pipelines.core import local_state

    if is_table_name(path) or not local_state.is_local(path):
        return False
    try:
        labels = local_state.file_labels(path)
    except local_state.NeedsSpark:
        return False
    known = re.compile(r"stage = '([^']*)'")
    stages = [known.fullmatch(label or "") for label in labels.values()]
    return all(m is not None and m.group(1) != stage for m in stages)


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
    if holds_no_rows_of(path, stage):
        return path  # the DELETE would match no row and commit nothing
    table = DeltaTable.forName(spark, path) if is_table_name(path) else DeltaTable.forPath(spark, path)
    table.delete(F.col("stage") == F.lit(stage))
    return path


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """All ``winnow.*`` table properties of the Delta table at ``path``, prefix stripped.

    A local table's come from its log (:func:`local_state.table_configuration`): ``DESCRIBE DETAIL``
    rebuilds the table's snapshot in a Spark job for them."""
    from pipelines.core import local_state

    props = None
    if not is_table_name(path) and local_state.is_local(path):
        try:
            props = local_state.table_configuration(path)
        except local_state.NeedsSpark:
            props = None
    if props is None:
        detail = spark.sql(f"DESCRIBE DETAIL {_delta_ident(spark, path)}").collect()[0]
        props = detail["properties"] or {}
    return {k[len(PROPERTY_PREFIX):]: v for k, v in props.items() if k.startswith(PROPERTY_PREFIX)}


def table_size_bytes(spark: SparkSession, cfg: WinnowConfig, name: str) -> int:
    """Bytes of the data files of the current version of table ``name`` (Delta's ``sizeInBytes``).

    Raises:
        MissingTableError: the table does not exist yet.
    """
    read_table(spark, cfg, name)  # the missing-table error, naming the stage to run
    detail = spark.sql(f"DESCRIBE DETAIL {_delta_ident(spark, cfg.table_path(name))}").collect()[0]
    return int(detail["sizeInBytes"] or 0)


def written_rows(spark: SparkSession, path: str) -> int:
    """Rows the latest commit of the Delta table at ``path`` wrote (its ``numOutputRows``): for a
    ``createOrReplace`` (:func:`write_table`) the table's row count. Falls back to counting the table
    when the commit holds no metrics."""
    n = commit_metrics(spark, path).get("numOutputRows")
    return int(n) if n is not None else read_path(spark, path).count()


def table_rows(spark: SparkSession, path: str, df: DataFrame | None = None) -> int:
    """Rows of the latest version of the Delta table at ``path``: from its log's per-file ``numRecords``
    where it is a local table of a local run (:func:`local_state.live_rows`), else a count of ``df`` (the
    table as the caller read it) or of the table.

    Why: the count is a Spark job with its planning (0.3-0.5 s on 2 cores for a ``make run`` stage); the
    log already holds the number.
    """
    from pipelines.core import local_state

    if _local_table(spark, path):
        try:
            return local_state.live_rows(path)
        except local_state.NeedsSpark:
            pass
    return (df if df is not None else read_path(spark, path)).count()


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
    direct = _read_parquet_files(spark, path, version)
    if direct is not None:
        return direct
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


DIRECT_READ_MAX_FILES = 32
"""Most data files :func:`_read_parquet_files` names to Spark's Parquet reader: Spark's
``spark.sql.sources.parallelPartitionDiscovery.threshold`` (default 32), above which it lists the paths
in a Spark job of its own."""


def _read_parquet_files(spark: SparkSession, path: str, version: int | None) -> DataFrame | None:
    """The local Delta table at ``path`` (at ``version``) read as the Parquet files its log lists, with
    the schema its log records; None where that is not the same read as Delta's (a non-local master or
    path, more than :data:`DIRECT_READ_MAX_FILES` files, or a log :func:`local_state.live_files` refuses).

    Why: reading through Delta rebuilds the table's snapshot from its log in a Spark job and lists the
    files of the scan in a second one, for each table each stage reads (2 of the ~8 Spark jobs of a small
    local stage, 0.3-0.9 s with their planning, bench/notes.md); the log of a table of a local run is a
    few small JSON files that delta-rs reads in milliseconds. Same files, same schema, same rows.
    """
    from pipelines.core import local_state

    if not local_state.is_local(path) or not spark.sparkContext.master.startswith("local"):
        return None
    try:
        files, schema_json = local_state.live_files(path, version)
    except local_state.NeedsSpark:
        return None
    if len(files) > DIRECT_READ_MAX_FILES:
        return None
    schema = T.StructType.fromJson(json.loads(schema_json))
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


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


def append_rows(spark: SparkSession, path: str, rows: list[dict[str, Any]], schema: T.StructType) -> str:
    """Append ``rows`` (held by the driver) to the Delta table at ``path`` (created when absent), in one
    atomic commit.

    A local table (a path on this machine, a local master) whose log delta-rs writes as Spark's Delta
    does (reader 1, writer 2, no table features) gets a delta-rs commit of one Parquet file; anything
    else goes through :func:`append` as a Spark write. Same table either way: the same schema in the
    log (Delta JSON of ``schema``, every field nullable as Spark records it), the same values (a naive
    ``datetime`` is read in the driver's local time zone, as pyspark's ``createDataFrame`` does). Only
    the encoding of a file differs (timestamps as INT64 microseconds, not Spark's INT96), which Spark's
    Delta, delta-rs and Databricks all read.

    Why: a Spark append of one row is a planned write job and a Delta commit with its post-commit work
    (~0.3-0.5 s of driver time on 2 cores); delta-rs writes it in ~15 ms.

    Args:
        rows: dicts keyed by ``schema``'s field names.
        schema: the rows' schema: string, long, double, timestamp and map<string, string|long> fields
            go through delta-rs; any other type through Spark.

    Returns:
        ``path``.

    Raises:
        TypeError, ValueError: a row does not fit ``schema`` (pyspark's type verifier).
    """
    table = _arrow_rows(spark, path, rows, schema)
    if table is None:
        return append(spark.createDataFrame(rows, schema).coalesce(1), path)
    from deltalake import write_deltalake

    write_deltalake(path, table, mode="append")
    return path


def java_hash_map_order(keys: list[str]) -> list[str]:
    """``keys`` (distinct strings, in a Python dict's order) in the order Spark stores a map that
    pyspark's ``createDataFrame`` sends to the JVM, and so the order Parquet and ``toJSON`` show them in.

    The JVM unpickles a dict of two or more items (Pyrolite's ``load_setitems``, Pyrolite 1.5 in
    pyspark's jars) by popping the pickled items, last first, into a new ``java.util.HashMap`` and then
    ``putAll`` of it into the ``HashMap(0)`` made for the dict; Spark copies that map's entries in its
    iteration order (``ArrayBasedMapData``). OpenJDK 17 ``HashMap``: bucket ``(h ^ (h >>> 16)) &
    (capacity - 1)`` with ``h`` the key's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around);
    iteration by bucket, each bucket in insertion order (a resize keeps it); a default map starts at 16
    buckets and doubles while more than 3/4 full; ``putAll`` into the empty ``HashMap(0)`` sizes it
    ``tableSizeFor((int) (n / 0.75f + 1))``. Buckets that turn into trees (8 keys in one bucket of a
    table of 64 or more) are not modelled.

    >>> java_hash_map_order(["x", "y", "z", "w", "v"])
    ['x', 'y', 'z', 'v', 'w']
    """
    if len(keys) < 2:
        return list(keys)

    def java_hash(key: str) -> int:
        data = key.encode("utf-16-be")
        h = 0
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return h ^ (h >> 16)

    def iteration(ordered: list[str], capacity: int) -> list[str]:
        buckets = sorted((java_hash(k) & (capacity - 1), i, k) for i, k in enumerate(ordered))
        return [k for _, _, k in buckets]

    popped = list(reversed(keys))
    capacity = 16
    while len(popped) > capacity * 3 // 4:
        capacity *= 2
    staged = iteration(popped, capacity)
    wanted = int(len(keys) / 0.75 + 1.0)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return iteration(staged, capacity)


def _arrow_type(dtype: T.DataType) -> Any:
    import pyarrow as pa

    simple = {T.StringType: pa.string(), T.LongType: pa.int64(), T.DoubleType: pa.float64(),
              T.TimestampType: pa.timestamp("us", tz="UTC")}
    if type(dtype) in simple:
        return simple[type(dtype)]
    if isinstance(dtype, T.MapType) and isinstance(dtype.keyType, T.StringType):
        value = simple.get(type(dtype.valueType))
        if value is not None and not isinstance(dtype.valueType, T.TimestampType):
            return pa.map_(pa.string(), value)
    return None


def _arrow_rows(spark: SparkSession, path: str, rows: list[dict[str, Any]], schema: T.StructType) -> Any:
    """``rows`` as a pyarrow Table for a delta-rs append to ``path``, or None where the append must go
    through Spark (see :func:`append_rows`)."""
    import pyarrow as pa
    from pyspark.sql.types import _make_type_verifier

    from pipelines.core import local_state

    local = local_state.is_local(path) and spark.sparkContext.master.startswith("local")
    types = [_arrow_type(f.dataType) for f in schema.fields]
    if is_table_name(path) or not local or any(t is None for t in types):
        return None
    if local_state.delta_version(path) is not None:
        try:
            existing = local_state.appendable_schema(path)
        except local_state.NeedsSpark:
            return None
        # Delta records every column of a Spark-written table as nullable.
        if T.StructType.fromJson(json.loads(existing)) != T.StructType(
                [T.StructField(f.name, f.dataType, True) for f in schema.fields]):
            return None  # another schema: Spark's append says why (or merges, as it would have)
    verify = _make_type_verifier(schema)
    for row in rows:
        verify(row)
    ts = T.TimestampType()
    columns = []
    for field, atype in zip(schema.fields, types, strict=True):
        values = []
        for row in rows:
            v = row[field.name]
            if isinstance(field.dataType, T.TimestampType) and v is not None:
                v = ts.toInternal(v)  # microseconds since the epoch, as pyspark converts them
            elif isinstance(field.dataType, T.MapType) and v is not None:
                v = [(k, v[k]) for k in java_hash_map_order(list(v))]
            values.append(v)
        if isinstance(field.dataType, T.TimestampType):
            columns.append(pa.array(values, pa.int64()).cast(atype))
        else:
            columns.append(pa.array(values, atype))
    fields = [pa.field(f.name, t) for f, t in zip(schema.fields, types, strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


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

    Raises:
        ValueError: ``removed`` given for a stage that :mod:`pipelines.core.chain` declares removes nothing.
        Whatever a write raises (the first in ``outputs`` order, ``removed`` last), once every write ended.
    """
    if removed is not None and not chain_stage(stage).removes:
        raise ValueError(f"stage {stage!r} is declared in pipelines/core/chain.py as removing nothing")
    writes: dict[str, Callable[[], str]] = {}
    for name, df in outputs.items():
        own = (table_properties or {}).get(name, {})
        props = {**standard_properties(cfg, stage), **(properties or {}), **own}
        writes[name] = partial(write_table, df, cfg, name, properties=props)
    if removed is not None:
        writes["removed"] = partial(write_removed, removed, cfg, stage)
    written = _write_side_by_side(spark, cfg, writes)
    write_effective_config(spark, cfg, stage)
    return written


def _write_side_by_side(spark: SparkSession, cfg: WinnowConfig,
                        writes: Mapping[str, Callable[[], str]]) -> dict[str, str]:
    """Run the table writes ``writes`` (name -> a write returning its location) at once, each on its own
    thread, and return ``name -> location`` in ``writes`` order.

    Each is a commit to another Delta table, so none waits on another's log. A write's driver side
    (planning, the commit, the snapshot after it: 0.15-0.7 s each on ``make run``'s sample) overlaps the
    others' Spark jobs instead of following them. The threads carry the caller's Spark local
    properties (job group, scheduler pool) and tags (``pyspark.inheritable_thread_target``). The
    data-file list is left out of the checksums (:func:`_no_file_list_in_crc`) around all of them at
    once: a session setting that each write changing and restoring would race on.
    """
    if len(writes) < 2:
        return {name: write() for name, write in writes.items()}
    from concurrent.futures import ThreadPoolExecutor

    from pyspark import inheritable_thread_target

    first = cfg.table_path(next(iter(writes)))
    if is_table_name(first):  # the tables' schema created once, here: a metastore may refuse two at once
        _ensure_schema(spark, first)
    with _no_file_list_in_crc(spark, cfg, first), \
            ThreadPoolExecutor(len(writes), thread_name_prefix="winnow-write") as pool:
        inherit = inheritable_thread_target(spark)  # the caller's local properties and tags, as of now
        futures = {name: pool.submit(inherit(write)) for name, write in writes.items()}
        errors = [f.exception() for f in futures.values()]  # waits for every write to end
    for err in filter(None, errors):
        raise err
    return {name: f.result() for name, f in futures.items()}


def write_effective_config(spark: SparkSession, cfg: WinnowConfig, stage: str) -> str:
    """Write the effective config of ``stage`` to ``<run.root>/config/<stage>.json``.

    The file holds the whole config, its fingerprint, the stage fingerprint
    (:meth:`WinnowConfig.stage_fingerprint`) and the versions of the libraries and model files that change
    the output (:func:`pipelines.core.versions.versions`): the run root's record of what the stage's
    tables were made with.

    Returns:
        The file path.
    """
    from pipelines.core.versions import versions

    path = f"{cfg.config_path}/{stage}.json"
    doc = {
        "stage": stage,
        "fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(stage),
        "config": cfg.model_dump(mode="json"),
        "versions": versions(cfg),
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


def local_frame(spark: SparkSession, rows: list[Any], schema: str | T.StructType) -> DataFrame:
    """``spark.createDataFrame(rows, schema)`` for rows the driver holds, without Python tasks.

    pyspark sends such rows to the JVM pickled in batches and then, to change the batching, adds an
    identity ``map`` over them (``RDD._reserialize`` in ``RDD._to_java_object_rdd``): every job that
    reads the frame then runs Python tasks for it, and the first one of a local session starts a Python
    worker daemon and workers of their own (~0.2 CPU-s each for start and imports). The JVM unpickles
    either batching alike (``SerDeUtil.pythonToJava`` flattens each pickled batch), so here the
    parallelized batches go to it as they are: the same rows in the same partitions, read in the JVM.

    Args:
        rows: tuples (or ``Row`` objects, or dicts) matching ``schema``.
        schema: a DDL string or a StructType.

    Returns:
        The DataFrame ``createDataFrame`` would give (rows checked against the schema as it does).

    Raises:
        TypeError, ValueError: a row does not fit the schema (pyspark's type verifier).
    """
    try:
        from pyspark.sql.types import _make_type_verifier, _parse_datatype_string

        jvm = spark.sparkContext._jvm
        create_from_local = spark._createFromLocal
    except Exception:  # Spark Connect or another pyspark build: createDataFrame, Python map and all
        return spark.createDataFrame(rows, schema)
    struct = schema if isinstance(schema, T.StructType) else _parse_datatype_string(schema)
    verify = _make_type_verifier(struct)
    for row in rows:
        verify(row)
    rdd, struct = create_from_local(rows, struct)
    java_rows = jvm.SerDeUtil.toJavaArray(jvm.SerDeUtil.pythonToJava(rdd._jrdd, True))
    df = DataFrame(spark._jsparkSession.applySchemaToPythonRDD(java_rows.rdd(), struct.json()), spark)
    df._schema = struct
    return df
