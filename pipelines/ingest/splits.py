"""Ingest's reading plan: files -> splits -> records, streamed by the Python workers.

* **Splits** (planned on the driver from the listing, no file is opened there): an uncompressed
  JSONL or Parquet file larger than ``ingest.split_bytes`` becomes byte ranges of about that size
  (JSONL: a range owns the lines that start in it, Hadoop style; Parquet: the row groups that start
  in it); every other file (gz/zst/bz2/xz streams, WARC/WET, text) is one split, streamed.
* **Reading**: each split is opened in the Python worker with ``pyarrow.fs`` (local ``file:`` paths
  and ``s3``/``s3a``/``s3n`` URIs; the ``fs.s3a.*`` endpoint and credentials of the Hadoop
  configuration are passed along, else the AWS default chain applies) and parsed by
  :func:`udfs.formats.explode_split` into Arrow batches of at most ``ingest.batch_rows`` rows /
  ``ingest.batch_bytes`` bytes. Files on other filesystems (abfss, dbfs, hdfs, gs) go through
  Spark's ``binaryFile`` source instead: one file per row, held whole (limit: 2 GB per file).
* **Line numbers**: a JSONL split numbers its lines from 1 and reports how many it owns; the driver
  adds the lines of the file's earlier splits (a prefix sum over the collected summary rows, joined
  back as a broadcast), so quarantine record numbers and derived doc ids do not depend on the
  splitting and no file is read twice. Parquet splits number rows from the footer directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any, BinaryIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.ingest.config import IngestConfig
from udfs.formats import ParseOptions, explode_split, is_splittable

SPLIT_DDL = "path string, key_path string, size bigint, start bigint, end bigint"
STREAM_SCHEMES = ("file", "s3", "s3a", "s3n")
_S3A_KEYS = {
    "endpoint": "fs.s3a.endpoint",
    "access_key": "fs.s3a.access.key",
    "secret_key": "fs.s3a.secret.key",
    "session_token": "fs.s3a.session.token",
    "region": "fs.s3a.endpoint.region",
    "path_style": "fs.s3a.path.style.access",
}


def scheme(path: str) -> str:
    """The URI scheme of a path (``file`` for scheme-less local paths)."""
    head, sep, _ = path.partition(":")
    return head.lower() if sep and "/" not in head else "file"


def streamable(path: str) -> bool:
    """True when Python workers open the file themselves (:data:`STREAM_SCHEMES`)."""
    return scheme(path) in STREAM_SCHEMES


def plan_splits(
    listing: list[tuple[str, str, int]], icfg: IngestConfig
) -> list[tuple[str, str, int, int, int]]:
    """Splits ``(path, key_path, size, start, end)`` of the streamable files of a listing, in order.

    A splittable file (:func:`udfs.formats.is_splittable`) over ``ingest.split_bytes`` is cut into
    ``ceil(size / split_bytes)`` ranges of equal size; any other file is one split ``(0, size)``.
    """
    out = []
    for path, key, size in listing:
        if not streamable(path):
            continue
        n = math.ceil(size / icfg.split_bytes) if is_splittable(path, icfg.format) else 1
        step = math.ceil(size / n) if n > 1 else size
        out += [(path, key, size, i * step, min(size, (i + 1) * step)) for i in range(max(n, 1))]
    return out


def fs_options(spark: SparkSession) -> dict[str, str]:
    """The ``fs.s3a.*`` settings of the session's Hadoop configuration that ``pyarrow.fs`` needs."""
    hconf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return {k: v for k, key in _S3A_KEYS.items() if (v := hconf.get(key))}


@lru_cache(maxsize=8)
def _filesystem(kind: str, options: tuple[tuple[str, str], ...]) -> Any:
    import pyarrow.fs as pafs

    if kind == "file":
        return pafs.LocalFileSystem()
    o = dict(options)
    endpoint = o.get("endpoint")
    kwargs: dict[str, Any] = {}
    if endpoint:
        scheme_, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host or scheme_, scheme=scheme_ if host else "https")
    if o.get("access_key"):
        kwargs.update(
            access_key=o["access_key"], secret_key=o.get("secret_key"), session_token=o.get("session_token")
        )
    if o.get("region"):
        kwargs["region"] = o["region"]
    if o.get("path_style", "").lower() == "true":
        kwargs["force_virtual_addressing"] = False
    return pafs.S3FileSystem(**kwargs)


def opener(path: str, options: dict[str, str]) -> Callable[[], BinaryIO]:
    """A function opening ``path`` (local or s3 URI) as a seekable binary file in a worker.

    Raises:
        ValueError: the scheme is not one of :data:`STREAM_SCHEMES`.
    """
    kind = scheme(path)
    if kind not in STREAM_SCHEMES:
        raise ValueError(f"{path!r}: Python workers open {STREAM_SCHEMES} paths only")
    if kind == "file":
        rest = path.split(":", 1)[1] if path.startswith("file:") else path
        local = "/" + rest.lstrip("/") if rest.startswith("/") else rest
        fs, inner = _filesystem("file", ()), local
    else:
        fs, inner = _filesystem("s3", tuple(sorted(options.items()))), path.split("://", 1)[1]
    return lambda: fs.open_input_file(inner)


def explode_splits(
    spark: SparkSession,
    splits: list[tuple[str, str, int, int, int]],
    icfg: IngestConfig,
    opts: ParseOptions,
    record_ddl: str,
    by_path: dict[str, ParseOptions] | None = None,
) -> DataFrame:
    """Records of every split (rows of ``record_ddl``), parsed in ``mapInArrow`` a split at a time,
    with ``opts`` or the options ``by_path`` gives the split's file (``ingest.fields_by_input``).

    Partitions: ``ingest.input_partitions``, else one per ``split_bytes`` of input (at least the
    default parallelism, at most one per split), filled round-robin.
    """
    by_path = by_path or {}
    options = fs_options(spark)
    total = sum(end - start for _, _, _, start, end in splits)
    n = icfg.input_partitions or max(
        spark.sparkContext.defaultParallelism, math.ceil(total / icfg.split_bytes)
    )
    n = max(1, min(n, len(splits)))
    from pipelines.core.tables import local_frame  # driver side only: the workers need not import it

    frame = local_frame(spark, splits, SPLIT_DDL)
    frame = frame.repartition(n) if n > 1 else frame.coalesce(1)

    def parse(batches):
        for batch in batches:
            for s in batch.to_pylist():
                yield from explode_split(
                    s["path"],
                    opener(s["path"], options),
                    s["size"],
                    by_path.get(s["path"], opts),
                    s["key_path"],
                    s["start"],
                    s["end"],
                )

    return frame.mapInArrow(parse, record_ddl)


def number_lines(records: DataFrame, summaries: list[Any], spark: SparkSession) -> DataFrame:
    """Turn split-local JSONL line numbers into file line numbers.

    Args:
        records: the parsed rows (``input_file``, ``split_start``, ``kind``, ``record``).
        summaries: the collected ``kind = "file"`` rows (``input_file``, ``split_start``, ``meta``).

    Returns:
        ``records`` with ``record`` += the lines of the file's earlier splits (rows of a whole file,
        and file-level rows with ``record`` 0, unchanged).
    """
    per_file: dict[str, list[tuple[int, int]]] = {}
    for r in summaries:
        lines = dict(r["meta"]).get("lines")
        if lines is not None:
            per_file.setdefault(r["input_file"], []).append((int(r["split_start"]), int(lines)))
    offsets = []
    for path, parts in per_file.items():
        seen = 0
        for start, lines in sorted(parts):
            if seen:
                offsets.append((path, start, seen))
            seen += lines
    if not offsets:
        return records
    from pipelines.core.tables import local_frame  # driver side only: the workers need not import it

    off = local_frame(spark, offsets, "input_file string, split_start bigint, _lines_before bigint")
    fixed = F.when(
        (F.col("kind") != "file") & (F.col("record") > 0),
        F.col("record") + F.coalesce("_lines_before", F.lit(0)),
    )
    return (
        records.join(F.broadcast(off), ["input_file", "split_start"], "left")
        .withColumn("record", fixed.otherwise(F.col("record")))
        .select(*records.columns)
    )
