"""Files and Delta logs read and written without a Spark job: small files on any filesystem, the latest
version and commit metrics of a Delta table, table names of metastore mode.

:mod:`pipelines.core.tables` builds on these; they are apart so that a caller that needs only a file or
a table's version does not read the table module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from pipelines.core.config import WinnowConfig


def is_table_name(location: str) -> bool:
    """True when ``location`` is a metastore table name (``catalog.schema.table``), not a path.

    Paths from :meth:`WinnowConfig.table_path` always hold a ``/`` (``<root>/tables/<name>``), names never.

    >>> is_table_name("spark_catalog.winnow.documents"), is_table_name("out/tables/documents")
    (True, False)
    """
    return "/" not in location and ":" not in location


def _quoted(name: str) -> str:
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jvm = spark._jvm  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath  # type: ignore[attr-defined]


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """``(FileSystem, Path)`` of the JVM's Hadoop API for ``path`` (local path or any Hadoop URI), for
    file operations Spark's writers do not do themselves (listing, renaming, deleting)."""
    return _hadoop_path(spark, path)


_LOCATIONS: dict[tuple[int, str], str] = {}


def on_this_machine(spark: SparkSession, path: str) -> bool:
    """True for a path without scheme (not ``s3://``, ``dbfs:``, ``file:``) under a local master: a file
    of this machine, which Python lists as the JVM's Hadoop API would, without a call into the JVM (a
    few ms each on 2 cores; the chain asks for table versions some 160 times)."""
    from pipelines.core import local_state

    local = local_state.is_local(path) and not is_table_name(path)
    return local and spark.sparkContext.master.startswith("local")


def delta_version(spark: SparkSession, path: str) -> int | None:
    """Latest committed version of the Delta table at ``path``, or None when there is none.

    Reads the file names of ``_delta_log/`` (the newest commit is always a ``NNN.json`` file, whatever
    checkpoints exist), which costs one listing instead of a Spark job per table. ``spark=None``: a
    local table, listed without Spark (:mod:`pipelines.core.local_state`). A table name is looked up in the
    catalog for its location; where that location cannot be listed (Unity Catalog managed storage),
    the table's history says.
    """
    if spark is None or on_this_machine(spark, path):
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
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(p)
        except BaseException:  # a full disk or Ctrl-C: no partial .tmp file left behind
            tmp.unlink(missing_ok=True)
            raise
        return
    fs, hpath = _hadoop_path(spark, path)
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


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
