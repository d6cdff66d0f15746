"""Stage 1, ingest: raw files -> the ``documents`` and ``quarantine`` Delta tables.

Files are read with Spark's ``binaryFile`` source (any Hadoop filesystem: local, s3a, abfss, dbfs),
one row per file, and exploded into records by :func:`udfs.formats.explode_file` inside
``mapInArrow``, so line and record numbers are exact and nothing depends on how Spark splits files.
Bad records never fail the job: they go to ``quarantine`` with a reason from
:data:`udfs.formats.QUARANTINE_REASONS`.

``doc_id`` (stable, globally unique, independent of partitioning): ``<source>/<id>`` when the
source's own id is present and unique within the source; otherwise ``<source>/~<h>`` with ``h`` the
first 32 hex digits (128 bits) of sha256 over ``source``, the file path relative to its input glob and
the record number, so the same file gives the same ids on any machine or mount point.

Accounting: rows in (records the parser emitted, per file) = rows in ``documents`` + rows in
``quarantine``, the latter two counted from the written Delta tables.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import tables
from pipelines.chain import require_columns
from pipelines.config import IngestConfig, WinnowConfig
from pipelines.stage import StageReport
from udfs.errors import UserError
from udfs.formats import QUARANTINE_REASONS, ParseOptions, explode_file

STAGE = "ingest"
INPUT_COLUMNS = ("path", "content")
"""Columns of the ``binaryFile`` frame :func:`explode_files` needs (``key_path`` optional)."""
DOCUMENT_COLUMNS = ("doc_id", "text", "source", "url", "meta", "input_file", "n_chars", "n_bytes", "n_replaced")
"""The ``documents`` table (ARCHITECTURE.md)."""
QUARANTINE_COLUMNS = ("input_file", "record", "reason", "excerpt", "detail")
"""The ``quarantine`` table: ``record`` is the 1-based line/record/row number, 0 for the whole file."""
DOC_ID_SCHEME = "source/id if unique within source, else source/~sha256(source,key_path,record)[:32]"
RECORD_DDL = (
    "kind string, input_file string, key_path string, record bigint, source string, src_id string, url string, "
    "meta map<string,string>, text string, n_chars int, n_bytes int, n_replaced int, reason string, "
    "excerpt string, detail string"
)
"""Spark schema of :data:`udfs.formats.RECORD_SCHEMA` (a test keeps the two equal)."""


class NoInputFilesError(UserError, FileNotFoundError):
    """A glob of ``ingest.inputs`` matches no file (a typo, or the data is not where the config says)."""


_HASH_SEP = "\x1f"  # ASCII unit separator: cannot occur in a path and rarely in a source name
_GLOB_CHARS = re.compile(r"[*?\[{]")


def parse_options(cfg: IngestConfig) -> ParseOptions:
    """The :class:`udfs.formats.ParseOptions` of an ``ingest`` config section."""
    f, n = cfg.fields, cfg.normalize
    return ParseOptions(
        format=cfg.format, text_field=f.text, id_field=f.id, url_field=f.url, source_field=f.source,
        meta_fields=tuple(f.meta), nfc=n.nfc, newlines=n.newlines, strip_invisible=n.strip_invisible,
        strip_control=n.strip_control, max_doc_bytes=cfg.max_doc_bytes, html_extractor=cfg.html_extractor,
        excerpt_chars=cfg.excerpt_chars,
    )


def explode_files(files: DataFrame, cfg: IngestConfig) -> DataFrame:
    """Parse every file into records: documents, quarantined records and one summary row per file.

    Args:
        files: one row per file with ``path`` (string) and ``content`` (binary), e.g. Spark's
            ``binaryFile`` source; an optional ``key_path`` (string, the path relative to its input
            glob) feeds derived doc ids, else ``path`` is used.
        cfg: the ``ingest`` config section.

    Returns:
        Rows of :data:`udfs.formats.RECORD_SCHEMA`: ``kind`` is ``doc``, ``quarantine`` or ``file``.

    Raises:
        ValueError: ``files`` lacks ``path`` or ``content``.
    """
    require_columns(files, INPUT_COLUMNS, "explode_files")
    opts = parse_options(cfg)
    has_key = "key_path" in files.columns
    cols = [*INPUT_COLUMNS, "key_path"] if has_key else list(INPUT_COLUMNS)

    def parse(batches):
        for batch in batches:
            paths, contents = batch.column("path").to_pylist(), batch.column("content")
            keys = batch.column("key_path").to_pylist() if has_key else paths
            for i, path in enumerate(paths):
                yield from explode_file(path, contents[i].as_py() or b"", opts, keys[i])

    return files.select(*cols).mapInArrow(parse, RECORD_DDL)


def assign_doc_ids(records: DataFrame) -> DataFrame:
    """Keep the document rows of :func:`explode_files` and give each its ``doc_id``.

    The uniqueness test of source ids is one aggregation over ``(source, id)`` candidates; duplicated
    candidates (the same id twice in a source) fall back to the positional hash, for every copy, so
    the result does not depend on which copy Spark sees first.

    Returns:
        The document rows with a ``doc_id`` column (string, never null).
    """
    require_columns(records, ("kind", "source", "src_id", "key_path", "record"), "assign_doc_ids")
    docs = records.where(F.col("kind") == "doc")
    cand = F.when(F.col("src_id").isNotNull() & (F.col("src_id") != ""), F.concat_ws("/", "source", "src_id"))
    docs = docs.withColumn("_cand", cand)
    dups = (
        docs.where(F.col("_cand").isNotNull()).groupBy("_cand").count().where(F.col("count") > 1)
        .select("_cand", F.lit(True).alias("_dup"))
    )
    digest = F.sha2(F.concat_ws(_HASH_SEP, "source", "key_path", F.col("record").cast("string")), 256)
    hashed = F.concat(F.col("source"), F.lit("/~"), F.substring(digest, 1, 32))
    return (
        docs.join(dups, "_cand", "left")
        .withColumn("doc_id", F.when(F.col("_cand").isNull() | F.col("_dup").isNotNull(), hashed).otherwise(F.col("_cand")))
        .drop("_cand", "_dup")
    )


def to_documents(records: DataFrame) -> DataFrame:
    """The ``documents`` table of :func:`explode_files` rows: :data:`DOCUMENT_COLUMNS`."""
    return assign_doc_ids(records).sortWithinPartitions("input_file", "record").select(*DOCUMENT_COLUMNS)


def to_quarantine(records: DataFrame) -> DataFrame:
    """The ``quarantine`` table of :func:`explode_files` rows: :data:`QUARANTINE_COLUMNS`."""
    require_columns(records, ("kind", *QUARANTINE_COLUMNS), "to_quarantine")
    return records.where(F.col("kind") == "quarantine").select(*QUARANTINE_COLUMNS)


# ------------------------------------------------------------------------------------------ inputs
def _key_path(path: str, base: str) -> str:
    if path == base:
        return path.rsplit("/", 1)[-1]
    if path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")) + 1 :]
    return path


def list_files(spark: SparkSession, cfg: IngestConfig) -> list[tuple[str, str, int]]:
    """Expand ``ingest.inputs`` with the Hadoop filesystem of each glob (any scheme), on the driver.

    A glob may match files or folders (a folder stands for the files directly in it); names starting
    with ``_`` or ``.`` are skipped, as Spark's file sources do. Listing here, not through a Spark
    scan, keeps 0-byte files, which Spark's scans drop silently.

    Returns:
        Sorted ``(path, key_path, size_bytes)``: ``path`` fully qualified (e.g. ``file:/data/a.jsonl``),
        ``key_path`` the path relative to the fixed prefix of the first glob that matched it (the
        full path where two files would share one). A file matched by several globs appears once.

    Raises:
        NoInputFilesError: a glob matches no file (names the glob).
    """
    found: dict[str, tuple[str, int]] = {}
    for glob, base, entries in _matches(spark, cfg.inputs):
        if not entries:
            raise NoInputFilesError(f"ingest.inputs: {glob!r} matches no file; fix the glob or the path (--set 'ingest.inputs=[...]')")
        for path, size, _ in entries:
            found.setdefault(path, (_key_path(path, base), size))
    shared = {k for k, n in Counter(k for k, _ in found.values()).items() if n > 1}
    return sorted((p, p if k in shared else k, size) for p, (k, size) in found.items())


def input_files(spark: SparkSession, globs: list[str]) -> list[tuple[str, int, int]]:
    """Every file :func:`list_files` would read, as sorted ``(path, size_bytes, mtime_ms)``; no error
    when a glob matches nothing (the completion records use this to notice changed inputs)."""
    return sorted({e for _, _, entries in _matches(spark, globs) for e in entries})


def _matches(spark: SparkSession, globs: list[str]) -> Iterator[tuple[str, str, list[tuple[str, int, int]]]]:
    """Per glob: the glob, its fixed prefix qualified, and its files ``(path, size, mtime_ms)``."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    hconf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    for glob in globs:
        gpath = jvm.org.apache.hadoop.fs.Path(glob)
        fs = gpath.getFileSystem(hconf)
        m = _GLOB_CHARS.search(glob)
        base_raw = glob[: m.start()].rsplit("/", 1)[0] if m else glob.rstrip("/")
        base_path = jvm.org.apache.hadoop.fs.Path(base_raw or "/")
        base = str(fs.makeQualified(base_path).toString())
        entries = []
        for st in fs.globStatus(gpath) or []:
            children = fs.listStatus(st.getPath()) if st.isDirectory() else [st]
            for f in children:
                if f.isDirectory() or f.getPath().getName().startswith(("_", ".")):
                    continue
                entries.append((str(f.getPath().toString()), int(f.getLen()), int(f.getModificationTime())))
        yield glob, base, entries


def _hadoop_literal(path: str) -> str:
    # binaryFile treats its paths as globs: escape glob characters of real file names.
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", path)


def read_inputs(spark: SparkSession, listing: list[tuple[str, str, int]]) -> DataFrame:
    """The non-empty files of ``listing`` as a ``binaryFile`` frame: ``path``, ``content``, ``key_path``."""
    nonempty = [(p, k) for p, k, size in listing if size > 0]
    key_df = spark.createDataFrame(nonempty, "path string, key_path string")
    if not nonempty:
        return key_df.withColumn("content", F.lit(None).cast("binary")).select("path", "content", "key_path")
    files = spark.read.format("binaryFile").load([_hadoop_literal(p) for p, _ in nonempty]).select(*INPUT_COLUMNS)
    return files.join(F.broadcast(key_df), "path")


def _empty_file_records(spark: SparkSession, listing: list[tuple[str, str, int]], opts: ParseOptions) -> DataFrame:
    rows = []
    for path, key, size in listing:
        if size == 0:
            for batch in explode_file(path, b"", opts, key):
                rows += [{**r, "meta": dict(r["meta"]) if r["meta"] is not None else None} for r in batch.to_pylist()]
    return spark.createDataFrame(rows, RECORD_DDL)


# --------------------------------------------------------------------------------------------- run
def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Ingest ``ingest.inputs`` into ``documents`` and ``quarantine`` (each replaced in one Delta commit).

    Returns:
        The :class:`StageReport`: ``rows_in`` = records read (parser count), ``rows_out`` = rows of
        ``documents``, ``quarantined`` = rows of ``quarantine`` by reason (both counted from the
        written tables), ``extra`` = files, bytes, formats, skipped non-document records, chars.

    Raises:
        NoInputFilesError: a glob of ``ingest.inputs`` matches no file.
    """
    icfg = cfg.ingest
    listing = list_files(spark, icfg)
    files = read_inputs(spark, listing)
    if icfg.input_partitions:
        files = files.repartition(icfg.input_partitions, "path")
    # One file per Arrow batch into the Python worker: files can be hundreds of MB each.
    batch_key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old_batch = spark.conf.get(batch_key)
    spark.conf.set(batch_key, "1")
    records = (
        explode_files(files, icfg).unionByName(_empty_file_records(spark, listing, parse_options(icfg)))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        extra = _file_stats(records.where(F.col("kind") == "file").select("record", "meta").collect())
        stats = (
            records.where(F.col("kind") == "doc")
            .agg(F.sum("n_chars").alias("chars"), F.sum("n_bytes").alias("bytes"), F.sum("n_replaced").alias("replaced"))
            .collect()[0]
        )
        extra.update(chars_out=int(stats["chars"] or 0), bytes_out=int(stats["bytes"] or 0),
                     n_replaced=int(stats["replaced"] or 0))
        outputs = tables.publish(
            spark, cfg, STAGE, {"documents": to_documents(records), "quarantine": to_quarantine(records)},
            properties={"doc_id_scheme": DOC_ID_SCHEME},
            table_properties={"quarantine": {"reasons": sorted(QUARANTINE_REASONS)}},
        )
    finally:
        records.unpersist()
        spark.conf.set(batch_key, old_batch)
    rows_out = tables.read_path(spark, outputs["documents"]).count()
    quarantined = {
        r["reason"]: int(r["count"])
        for r in tables.read_path(spark, outputs["quarantine"]).groupBy("reason").count().collect()
    }
    report = StageReport(
        stage=STAGE, rows_in=extra.pop("records_read"), rows_out=rows_out, quarantined=dict(sorted(quarantined.items())),
        outputs=outputs, extra=extra,
    )
    return report


def _file_stats(rows: list[Any]) -> dict[str, Any]:
    formats: Counter = Counter()
    skipped: Counter = Counter()
    n_bytes = 0
    for r in rows:
        meta = dict(r["meta"])
        formats[meta.pop("format")] += 1
        n_bytes += int(meta.pop("bytes"))
        for k, v in meta.items():
            skipped[k.removeprefix("skipped.")] += int(v)
    return {
        "records_read": sum(int(r["record"]) for r in rows), "files": len(rows), "bytes_in": n_bytes,
        "formats": dict(sorted(formats.items())), "skipped": dict(sorted(skipped.items())),
    }
