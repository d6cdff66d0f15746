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
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, BinaryIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from udfs.formats import ParseOptions, explode_split, is_splittable

if TYPE_CHECKING:  # a worker unpickling this module's parse functions then skips the config models (pydantic)
    from pipelines.ingest.config import IngestConfig

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


def small_splits_line(splits: list[tuple[str, str, int, int, int]], icfg: IngestConfig) -> str | None:
    """The warning for an ``ingest.split_bytes`` under
    :data:`pipelines.core.section.SMALL_SPLIT_BYTES` that cut a file of ``splits`` (:func:`plan_splits`),
    or ``None``.

    >>> from pipelines.ingest.config import IngestConfig
    >>> small_splits_line([("a.jsonl", "a.jsonl", 4096, 0, 2048), ("a.jsonl", "a.jsonl", 4096, 2048, 4096)],
    ...                   IngestConfig(split_bytes=2048))[:70]
    'ingest: WARNING: ingest.split_bytes=2048 cut 1 file(s) into 2 splits ('
    """
    from pipelines.core.section import SMALL_SPLIT_BYTES  # driver side only: workers skip pydantic

    if icfg.split_bytes >= SMALL_SPLIT_BYTES:
        return None
    cut = {path for path, _, _, start, _ in splits if start > 0}
    if not cut:
        return None
    n = sum(1 for path, *_ in splits if path in cut)
    default = type(icfg).model_fields["split_bytes"].default
    return (f"ingest: WARNING: ingest.split_bytes={icfg.split_bytes} cut {len(cut)} file(s) into {n} splits "
            f"(a Spark task each, unless ingest.input_partitions groups them); use at least "
            f"{SMALL_SPLIT_BYTES} (1 MiB; default {default})")


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
    spool: str | None = None,
) -> DataFrame:
    """Records of every split (rows of ``record_ddl``), parsed in ``mapInArrow`` a split at a time,
    with ``opts`` or the options ``by_path`` gives the split's file (``ingest.fields_by_input``).

    Partitions: :func:`partition_count`, filled round-robin.

    ``spool``: a folder on this machine (a ``local`` master only). Each task then writes its records
    whole to the folder (:func:`spool_batches`) and returns only what the tally needs of them: rows of
    :data:`pipelines.ingest.tally.PARTIAL_DDL` (:func:`pipelines.ingest.tally.tally_partials` adds them
    up); :func:`read_spool` gives the records back whole.
    """
    by_path = by_path or {}
    options = fs_options(spark)
    n = partition_count(spark, splits, icfg)
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

    if spool is None:
        return frame.mapInArrow(parse, record_ddl)

    def parse_to_spool(batches):
        from pyspark import TaskContext

        yield from spool_batches(parse(batches), spool, TaskContext.get().partitionId())

    from pipelines.ingest.tally import PARTIAL_DDL

    return frame.mapInArrow(parse_to_spool, PARTIAL_DDL)


def partition_count(
    spark: SparkSession, splits: list[tuple[str, str, int, int, int]], icfg: IngestConfig
) -> int:
    """Spark partitions of the parsed records: ``ingest.input_partitions``, else one per
    ``split_bytes`` of input, at least the default parallelism, at most one per split (>= 1)."""
    total = sum(end - start for _, _, _, start, end in splits)
    n = icfg.input_partitions or max(
        spark.sparkContext.defaultParallelism, math.ceil(total / icfg.split_bytes)
    )
    return max(1, min(n, len(splits)))


def spool_path(folder: str, part: int) -> str:
    """The spool file of Spark partition ``part``."""
    return f"{folder}/part-{part:05d}.arrow"


def spool_batches(batches: Iterable[Any], folder: str, part: int) -> Iterator[Any]:
    """Write ``batches`` (:data:`udfs.formats.RECORD_SCHEMA`) to the Arrow IPC file of partition
    ``part`` in ``folder`` and yield the tally's partial rows of each
    (:func:`pipelines.ingest.tally.partial_rows`): the records themselves need not cross into the JVM
    before the writes read them back.

    The file gets its name only once every batch is written (a task stopped early leaves none, and
    :func:`read_spool` then fails rather than miss records); a partition without records gets an
    empty file."""
    import os

    import pyarrow as pa

    from pipelines.ingest.tally import partial_rows
    from udfs.formats import RECORD_SCHEMA

    path = spool_path(folder, part)
    rows = 0
    tmp = f"{path}.{os.getpid()}.tmp"
    with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, RECORD_SCHEMA) as writer:
        for batch in batches:
            writer.write_batch(batch)
            yield from partial_rows(batch, part, rows).to_batches()
            rows += batch.num_rows
    os.replace(tmp, path)


def read_spool(spark: SparkSession, folder: str, n: int, record_ddl: str, parts: set[int]) -> DataFrame:
    """The records :func:`explode_splits` spooled to ``folder``, whole (rows of ``record_ddl``): partition
    ``i`` of ``n`` holds those of partition ``i`` of the parse, in the same order, so what the tally
    found per partition (:attr:`pipelines.ingest.tally.Tally.doc_splits`) holds here too.

    Raises (in the task): FileNotFoundError when a partition in ``parts`` (those that held records)
    has no spool file.
    """

    def read(batches):
        yield from spooled_batches(folder, parts, batches)

    return spark.range(0, n, 1, n).mapInArrow(read, record_ddl)


def spooled_batches(folder: str, parts: set[int], batches: Iterable[Any]) -> Iterator[Any]:
    """The spooled record batches (:data:`udfs.formats.RECORD_SCHEMA`) of the partitions whose numbers
    ``batches`` hold (first column), memory-mapped, in the order they were written.

    Raises:
        FileNotFoundError: a partition in ``parts`` (those that held records) has no spool file.
    """
    import os

    import pyarrow as pa

    for batch in batches:
        for part in batch.column(0).to_pylist():
            path = spool_path(folder, part)
            if not os.path.exists(path):
                if part in parts:
                    raise FileNotFoundError(f"ingest: no spooled records of partition {part}: {path}")
                continue
            # Memory-mapped: the batches point into the page cache, no copy before the JVM's.
            reader = pa.ipc.open_file(pa.memory_map(path))
            for k in range(reader.num_record_batches):
                yield reader.get_batch(k)


def read_spool_documents(spark: SparkSession, folder: str, n: int, parts: set[int], summaries: list[Any],
                         columns: Sequence[str], ddl: str) -> DataFrame:
    """The document rows of the records :func:`explode_splits` spooled to ``folder``, as the ``documents``
    table holds them (``columns``: ``doc_id`` and record columns, in the table's order; ``ddl`` their
    Spark schema), for sources whose ids no two documents share: the record numbers fixed as
    :func:`number_lines` fixes them and ``doc_id`` as :func:`pipelines.ingest.stage.assign_doc_ids`
    gives it with ``unique``, computed in the worker that reads the spool file
    (:func:`spooled_documents`). Partition ``i`` of ``n`` holds the documents of partition ``i`` of
    the parse in the same order, as :func:`read_spool`.

    Why: the rows then go from the Arrow batches straight to the Parquet writer; through
    :func:`read_spool` every record crosses into the JVM with all its columns, is joined with the line
    offsets, filtered and projected (one more copy of every text) before the write (bench/notes.md,
    "Ingest's documents computed where the spool is read").

    Raises (in the task): FileNotFoundError as :func:`read_spool`.
    """
    offsets = {(path, start): before for path, start, before in line_offsets(summaries)}
    names = list(columns)

    def read(batches):
        for records in spooled_batches(folder, parts, batches):
            if (out := spooled_documents(records, offsets, names)) is not None:
                yield out

    return spark.range(0, n, 1, n).mapInArrow(read, ddl)


DOC_ID_HASH_SEP = "\x1f"
"""Separator of the fields hashed into a derived ``doc_id`` (ASCII unit separator: cannot occur in a path
and rarely in a source name); :func:`pipelines.ingest.stage.assign_doc_ids` uses the same."""


def spooled_documents(batch: Any, offsets: dict[tuple[str, int], int], names: list[str]) -> Any:
    """The document rows of one spooled batch (:data:`udfs.formats.RECORD_SCHEMA`) as columns ``names``
    (``doc_id`` and record columns), or ``None`` when it holds none.

    ``record`` gains the lines of the file's earlier splits (``offsets``: ``(input_file, split_start)``
    -> lines before, :func:`line_offsets`) where it is above 0; ``doc_id`` is ``source/src_id`` (a
    leading ``~`` doubled, :func:`pipelines.ingest.tally.candidate_id`) where ``src_id`` is non-empty,
    else ``source/~`` and the first 32 hex digits of sha256 over ``source``, ``key_path`` and the record
    number joined by :data:`DOC_ID_HASH_SEP` (null fields left out, a null ``source`` giving a null id):
    Spark's ``concat_ws``, ``concat`` and ``sha2`` of
    :func:`pipelines.ingest.stage.assign_doc_ids` on the same values.
    """
    import hashlib

    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.ingest.tally import arrow_candidate_ids

    kind = batch.column("kind")
    is_doc = pc.equal(kind, "doc")
    n_doc = pc.sum(is_doc).as_py() or 0
    if n_doc == 0:
        return None
    if n_doc < batch.num_rows:
        batch = batch.filter(is_doc)
    record = batch.column("record")
    if offsets:
        files, starts = batch.column("input_file").to_pylist(), batch.column("split_start").to_pylist()
        before = pa.array([offsets.get((f, s), 0) for f, s in zip(files, starts, strict=True)], pa.int64())
        record = pc.if_else(pc.greater(record, 0), pc.add(record, before), record)
    source, src_id = batch.column("source"), batch.column("src_id")
    has_id = pc.and_(pc.is_valid(src_id), pc.fill_null(pc.not_equal(src_id, ""), False))
    cand = arrow_candidate_ids(source, src_id)
    if pc.all(has_id).as_py():
        doc_id = cand
    else:
        has, src, keys, recs = (has_id.to_pylist(), source.to_pylist(), batch.column("key_path").to_pylist(),
                                record.to_pylist())
        ids = cand.to_pylist()
        for i, ok in enumerate(has):
            if not ok:
                joined = DOC_ID_HASH_SEP.join(str(v) for v in (src[i], keys[i], recs[i]) if v is not None)
                digest = hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]
                ids[i] = None if src[i] is None else f"{src[i]}/~{digest}"
        doc_id = pa.array(ids, pa.string())
    cols = {"doc_id": doc_id, "record": record}
    return pa.RecordBatch.from_arrays([cols[c] if c in cols else batch.column(c) for c in names], names=names)


def line_offsets(summaries: list[Any]) -> list[tuple[str, int, int]]:
    """``(input_file, split_start, lines before)`` of every JSONL split after a file's first, from the
    collected ``kind = "file"`` rows (the lines each split owns, ``meta.lines``)."""
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
    return offsets


def number_lines(records: DataFrame, summaries: list[Any], spark: SparkSession) -> DataFrame:
    """Turn split-local JSONL line numbers into file line numbers.

    Args:
        records: the parsed rows (``input_file``, ``split_start``, ``kind``, ``record``).
        summaries: the collected ``kind = "file"`` rows (``input_file``, ``split_start``, ``meta``).

    Returns:
        ``records`` with ``record`` += the lines of the file's earlier splits (rows of a whole file,
        and file-level rows with ``record`` 0, unchanged).
    """
    offsets = line_offsets(summaries)
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
