"""Stage 1, ingest: raw files -> the ``documents`` and ``quarantine`` Delta tables.

Files are listed on the driver, cut into splits and streamed by the Python workers
(:mod:`pipelines.ingest.splits`: byte ranges of large uncompressed JSONL/Parquet files, one split per
compressed stream or WARC), parsed into bounded Arrow batches by :func:`udfs.formats.explode_split`
inside ``mapInArrow``. Files on filesystems the workers cannot open go through Spark's ``binaryFile``
source (one file per row, :func:`explode_files`). Line and record numbers are exact and nothing
depends on the splitting. Bad records never fail the job: they go to ``quarantine`` with a reason
from :data:`udfs.formats.QUARANTINE_REASONS`.

``doc_id`` (stable, globally unique, independent of partitioning): ``<source>/<id>`` when the
source's own id is present and unique within the source (an id starting with ``~`` gets one more, so
that it never takes a derived id); otherwise ``<source>/~<h>`` with ``h`` the
first 32 hex digits (128 bits) of sha256 over ``source``, the file path relative to its input glob and
the record number, so the same file gives the same ids on any machine or mount point.

Accounting: rows in (records the parser emitted, per file) = rows in ``documents`` + rows in
``quarantine``, the latter two as the tables' Delta commits recorded them (``numOutputRows``), checked
against the tally of the parsed records (:mod:`pipelines.ingest.tally`).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.core import cache, tables
from pipelines.core.chain import require_columns
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import InvariantError, StageReport
from pipelines.ingest import splits as ingest_splits
from pipelines.ingest import spool as ingest_spool
from pipelines.ingest import tally as ingest_tally
from pipelines.ingest.config import IngestConfig, IngestFields
from pipelines.ingest.listing import (  # noqa: F401  (re-exported: callers use the stage module)
    _GLOB_CHARS,
    INPUT_GLOB_ERRORS,
    BadInputGlobError,
    NoInputFilesError,
    _key_path,
    _matches,
    input_files,
    list_files,
)
from udfs.errors import UserError
from udfs.formats import QUARANTINE_REASONS, ParseOptions, explode_file
from udfs.formats.records import no_text

STAGE = "ingest"
INPUT_COLUMNS = ("path", "content")
"""Columns of the ``binaryFile`` frame :func:`explode_files` needs (``key_path`` optional)."""
DOCUMENT_COLUMNS = ("doc_id", "text", "source", "url", "meta", "input_file", "n_chars", "n_bytes", "n_replaced",
                    "record_format", "markers_resolved")
"""The ``documents`` table (ARCHITECTURE.md); ``record_format`` (string) and ``markers_resolved``
(map<string,int>) are set for structured scientific records only (docs/ingest.md), null otherwise."""
QUARANTINE_COLUMNS = ("input_file", "record", "reason", "excerpt", "detail")
"""The ``quarantine`` table: ``record`` is the 1-based line/record/row number, 0 for the whole file."""
DOC_ID_SCHEME = ("source/id (a leading ~ doubled) if unique within source, "
                 "else source/~sha256(source,key_path,record)[:32]")
RECORD_DDL = (
    "kind string, input_file string, key_path string, split_start bigint, record bigint, source string, src_id string, url string, "
    "meta map<string,string>, text string, n_chars int, n_bytes int, n_replaced int, record_format string, "
    "markers_resolved map<string,int>, reason string, "
    "excerpt string, detail string"
)
"""Spark schema of :data:`udfs.formats.RECORD_SCHEMA` (a test keeps the two equal)."""
DOCUMENT_DDL = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int, record_format string, markers_resolved map<string,int>"
)
"""Spark schema of the ``documents`` table: :data:`DOCUMENT_COLUMNS` with the types of :data:`RECORD_DDL`
(a test keeps them equal)."""


class BadInputFileError(UserError):
    """Input files most of whose records were quarantined (``ingest.max_quarantine_fraction``): the
    format or the fields are wrong for them. Raised after the tables are written."""


MAX_FILE_COUNTS = 1000
"""Files whose decision counts (``extra.counts_by_file``) the stage report keeps: the completion record
stays small on runs of many thousands of WARC files (the totals, ``extra.counts``, cover them all)."""
MAX_SOURCE_COUNTS = 1000
"""Sources whose document counts the stage report keeps (``extra.documents_by_source``, first by name): a
``source`` field of many values (a domain per record) must not bloat the completion record."""
_HASH_SEP = ingest_splits.DOC_ID_HASH_SEP


def parse_options(cfg: IngestConfig, fields: IngestFields | None = None) -> ParseOptions:
    """The :class:`udfs.formats.ParseOptions` of an ``ingest`` config section (with ``fields`` in place
    of ``ingest.fields`` when given: those of one input glob, :meth:`IngestConfig.fields_for`)."""
    f, n = fields or cfg.fields, cfg.normalize
    return ParseOptions(
        format=cfg.format, text_field=f.text, id_field=f.id, url_field=f.url, source_field=f.source,
        meta_fields=tuple(f.meta), heading_field=f.heading, record_format=f.record_format,
        csv_header=cfg.csv_header, nfc=n.nfc, newlines=n.newlines, strip_invisible=n.strip_invisible,
        strip_control=n.strip_control, fix_mojibake=n.fix_mojibake,
        max_replacement_fraction=cfg.max_replacement_fraction, replacement_action=cfg.replacement_action,
        jats_tables=cfg.jats.tables, jats_figures=cfg.jats.figures, jats_references=cfg.jats.references,
        mediawiki_namespaces=tuple(cfg.mediawiki.namespaces), mediawiki_templates=cfg.mediawiki.templates,
        mediawiki_references=cfg.mediawiki.references, mediawiki_tables=cfg.mediawiki.tables,
        max_doc_bytes=cfg.max_doc_bytes, html_extractor=cfg.html_extractor,
        excerpt_chars=cfg.excerpt_chars, batch_rows=cfg.batch_rows, batch_bytes=cfg.batch_bytes,
    )


def options_by_path(icfg: IngestConfig, globs: dict[str, str] | None) -> dict[str, ParseOptions]:
    """The parse options of the files whose glob has an ``ingest.fields_by_input`` entry (``globs``:
    path -> the glob that matched it, :func:`list_files`); other files use :func:`parse_options`."""
    if not globs or not icfg.fields_by_input:
        return {}
    per_glob = {g: parse_options(icfg, icfg.fields_for(g)) for g in icfg.fields_by_input}
    return {path: per_glob[g] for path, g in globs.items() if g in per_glob}


def explode_files(files: DataFrame, cfg: IngestConfig, by_path: dict[str, ParseOptions] | None = None) -> DataFrame:
    """Parse every file into records: documents, quarantined records and one summary row per file.

    Args:
        files: one row per file with ``path`` (string) and ``content`` (binary), e.g. Spark's
            ``binaryFile`` source; an optional ``key_path`` (string, the path relative to its input
            glob) feeds derived doc ids, else ``path`` is used.
        cfg: the ``ingest`` config section.
        by_path: parse options of particular files (:func:`options_by_path`).

    Returns:
        Rows of :data:`udfs.formats.RECORD_SCHEMA`: ``kind`` is ``doc``, ``quarantine`` or ``file``.

    Raises:
        ValueError: ``files`` lacks ``path`` or ``content``.
    """
    require_columns(files, INPUT_COLUMNS, "explode_files")
    opts, by_path = parse_options(cfg), by_path or {}
    has_key = "key_path" in files.columns
    cols = [*INPUT_COLUMNS, "key_path"] if has_key else list(INPUT_COLUMNS)

    def parse(batches):
        for batch in batches:
            paths, contents = batch.column("path").to_pylist(), batch.column("content")
            keys = batch.column("key_path").to_pylist() if has_key else paths
            for i, path in enumerate(paths):
                yield from explode_file(path, contents[i].as_py() or b"", by_path.get(path, opts), keys[i])

    return files.select(*cols).mapInArrow(parse, RECORD_DDL)


candidate_id = ingest_tally.candidate_id


def assign_doc_ids(records: DataFrame, dups: DataFrame | None = None, *, unique: bool = False) -> DataFrame:
    """Keep the document rows of :func:`explode_files` and give each its ``doc_id``.

    Args:
        records: the parsed rows.
        dups: the candidate ids (``_cand`` = ``source/src_id``) held by more than one document, with a
            true ``_dup`` column (:func:`pipelines.ingest.tally.duplicated_ids`); ``None`` = computed
            here, as one aggregation over ``(source, id)`` candidates joined back.
        unique: no candidate id is held twice (known from the tally): no join at all.

    Duplicated candidates (the same id twice in a source) fall back to the positional hash, for every
    copy, so the result does not depend on which copy Spark sees first.

    Returns:
        The document rows with a ``doc_id`` column (string, never null).
    """
    require_columns(records, ("kind", "source", "src_id", "key_path", "record"), "assign_doc_ids")
    docs = records.where(F.col("kind") == "doc")
    digest = F.sha2(F.concat_ws(_HASH_SEP, "source", "key_path", F.col("record").cast("string")), 256)
    hashed = F.concat(F.col("source"), F.lit("/~"), F.substring(digest, 1, 32))
    docs = docs.withColumn("_cand", F.when(ingest_tally.has_src_id(), candidate_id()))
    if unique:
        return docs.withColumn("doc_id", F.coalesce(F.col("_cand"), hashed)).drop("_cand")
    if dups is None:
        dups = (
            docs.where(F.col("_cand").isNotNull()).groupBy("_cand").count().where(F.col("count") > 1)
            .select("_cand", F.lit(True).alias("_dup"))
        )
    return (
        docs.join(dups, "_cand", "left")
        .withColumn("doc_id", F.when(F.col("_cand").isNull() | F.col("_dup").isNotNull(), hashed).otherwise(F.col("_cand")))
        .drop("_cand", "_dup")
    )


def to_documents(records: DataFrame, dups: DataFrame | None = None, *, unique: bool = False,
                 in_order: bool = False) -> DataFrame:
    """The ``documents`` table of :func:`explode_files` rows: :data:`DOCUMENT_COLUMNS` (``dups`` and
    ``unique`` as in :func:`assign_doc_ids`), sorted by ``input_file`` and ``record`` within each
    partition. ``in_order``: they are already (:attr:`pipelines.ingest.tally.Tally.docs_in_order`) and
    no join moves them (``unique``): the sort, which copies every text once more, is left out."""
    docs = assign_doc_ids(records, dups, unique=unique)
    if not (in_order and unique):
        docs = docs.sortWithinPartitions("input_file", "record")
    return docs.select(*DOCUMENT_COLUMNS)


def _documents(records: DataFrame, dups: DataFrame | None, t: ingest_tally.Tally, spooled: Any) -> DataFrame:
    """The ``documents`` table of the numbered records (:func:`to_documents`), or, where no two documents
    share a source id (``dups`` ``None``) and the records are spooled, the same rows computed where the
    spool files are read (``spooled``: :func:`_read_kept`'s function, ``None`` where kept)."""
    if dups is not None or spooled is None:
        return to_documents(records, dups, unique=dups is None, in_order=t.docs_in_order)
    if t.docs_in_order:
        return spooled(DOCUMENT_COLUMNS, DOCUMENT_DDL)
    docs = spooled((*DOCUMENT_COLUMNS, "record"), DOCUMENT_DDL + ", record bigint")
    return docs.sortWithinPartitions("input_file", "record").select(*DOCUMENT_COLUMNS)


def to_quarantine(records: DataFrame, none: bool = False) -> DataFrame:
    """The ``quarantine`` table of :func:`explode_files` rows: :data:`QUARANTINE_COLUMNS`. ``none``: the
    tally found no quarantined row, so the table is written empty without reading the records again."""
    require_columns(records, ("kind", *QUARANTINE_COLUMNS), "to_quarantine")
    out = records.where(F.col("kind") == "quarantine").select(*QUARANTINE_COLUMNS)
    return out.limit(0) if none else out


def _hadoop_literal(path: str) -> str:
    # binaryFile treats its paths as globs: escape glob characters of real file names.
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", path)


def read_inputs(spark: SparkSession, listing: list[tuple[str, str, int]]) -> DataFrame:
    """The non-empty files of ``listing`` as a ``binaryFile`` frame: ``path``, ``content``, ``key_path``
    (the fallback for filesystems the Python workers cannot open: each file is held whole)."""
    nonempty = [(p, k) for p, k, size in listing if size > 0]
    key_df = spark.createDataFrame(nonempty, "path string, key_path string")
    if not nonempty:
        return key_df.withColumn("content", F.lit(None).cast("binary")).select("path", "content", "key_path")
    files = spark.read.format("binaryFile").load([_hadoop_literal(p) for p, _ in nonempty]).select(*INPUT_COLUMNS)
    return files.join(F.broadcast(key_df), "path")


def _driver_records(spark: SparkSession, listing: list[tuple[str, str, int]], opts: ParseOptions,
                    by_path: dict[str, ParseOptions]) -> DataFrame | None:
    """Rows for the 0-byte files of the ``binaryFile`` fallback (which drops them); ``None`` when there
    are none (an empty frame would still add tasks to every job over the records)."""
    rows = []
    for path, key, size in listing:
        if size == 0 and not ingest_splits.streamable(path):
            for batch in explode_file(path, b"", by_path.get(path, opts), key):
                rows += [{**r, **{k: dict(r[k]) for k in ("meta", "markers_resolved") if r[k] is not None}}
                         for r in batch.to_pylist()]
    return spark.createDataFrame(rows, RECORD_DDL) if rows else None


def read_records(spark: SparkSession, listing: list[tuple[str, str, int]], icfg: IngestConfig,
                 globs: dict[str, str] | None = None, spool: str | None = None) -> DataFrame:
    """Every record of the listed files (:data:`RECORD_DDL` rows, split-local JSONL line numbers):
    streamed splits for local/s3 files, ``binaryFile`` rows for the others. ``globs`` (path -> the
    glob that matched it, :func:`list_files`) selects the ``ingest.fields_by_input`` of each file.
    ``spool``: the records go whole to that folder and what comes back is the tally's partial rows
    (:data:`pipelines.ingest.tally.PARTIAL_DDL`; only where :func:`_spool_folder` gave it: every file
    streamed)."""
    opts, by_path = parse_options(icfg), options_by_path(icfg, globs)
    splits = ingest_splits.plan_splits(listing, icfg)
    frames = [df] if (df := _driver_records(spark, listing, opts, by_path)) is not None else []
    if splits:
        frames.append(ingest_splits.explode_splits(spark, splits, icfg, opts, RECORD_DDL, by_path, spool))
    if any(not ingest_splits.streamable(p) and size for p, _, size in listing):
        files = read_inputs(spark, [f for f in listing if not ingest_splits.streamable(f[0])])
        if icfg.input_partitions:
            files = files.repartition(icfg.input_partitions, "path")
        frames.append(explode_files(files, icfg, by_path))
    if not frames:
        return spark.createDataFrame([], ingest_tally.PARTIAL_DDL if spool else RECORD_DDL)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _empty_split_files(spark: SparkSession, summaries: list[Any]) -> tuple[DataFrame | None, list[dict[str, Any]]]:
    """``empty_file`` rows for files cut into several splits none of which found a record (a split
    alone cannot know): the driver decides from the summaries."""
    per_file: dict[str, list[Any]] = {}
    for r in summaries:
        per_file.setdefault(r["input_file"], []).append(r)
    rows = []
    for path, parts in per_file.items():
        if len(parts) > 1 and sum(int(r["record"]) for r in parts) == 0:
            first = min(parts, key=lambda r: r["split_start"])
            meta = dict(first["meta"])
            rows.append({"kind": "quarantine", "input_file": path, "key_path": first["key_path"], "split_start": 0,
                         "record": 0, "reason": "empty_file", "excerpt": meta.get("head") or None,
                         "detail": f"{meta['bytes']} bytes, no record"})
    if not rows:
        return None, []
    return spark.createDataFrame(rows, RECORD_DDL), rows


def _spool_folder(spark: SparkSession, listing: list[tuple[str, str, int]]) -> ingest_spool.Spool | None:
    """A new folder for the parsed records (:func:`pipelines.ingest.splits.spool_batches`), or ``None``
    where they are kept by :func:`keep_records` instead.

    Spooled where the master is ``local`` (the workers write files the next job's workers read, on the
    same machine) and every input file is streamed (no ``binaryFile`` or driver rows beside the splits).
    Why: kept rows cross Arrow into the JVM, are copied, Java-serialised to local disk and read back
    twice (by the tally's task that wrote them and by the ``documents`` write). Spooled, the parse job
    carries only the tally's sums of each batch and the source ids into the JVM
    (:func:`pipelines.ingest.tally.partial_rows`) and the texts cross once, into the write; the Arrow
    files are memory-mapped back (bench/notes.md, "Ingest's parsed records spooled as Arrow files").
    """
    if not listing or not _as_rows_master(spark) or not all(ingest_splits.streamable(p) for p, _, _ in listing):
        return None
    if _spool_fits_memory(listing):  # held by this run's lock: a later run removes it if this one dies
        return ingest_spool.held_spool(SPOOL_MEMORY_FOLDER)
    try:  # Spark's own local folder of this session: removed with it, should the driver die first
        env = spark.sparkContext._jvm.org.apache.spark.SparkEnv.get()  # type: ignore[union-attr]
        local = env.blockManager().diskBlockManager().localDirs()[0].getAbsolutePath()
    except Exception:  # another Spark build: the system's temporary folder
        local = None
    return ingest_spool.plain_spool(local)


SPOOL_MEMORY_FOLDER = "/dev/shm"
"""Linux's shared-memory filesystem (tmpfs): spool files there cost no disk filesystem's write path. On
the 2 shared cores of bench/notes.md, writing 200 MB of records to an ext4 folder cost the Python worker
~0.7 CPU-s of system time, to this folder ~0.05 (the same parse, one process, load 13)."""
SPOOL_MEMORY_SHARE = 0.25
"""Spool in :data:`SPOOL_MEMORY_FOLDER` only when the records' estimated size is at most this share of
both its free space and the memory the kernel reports available (tmpfs pages are memory until removed)."""
SPOOL_EXPANSION = 1.25
"""Estimated spooled bytes per byte of a plain text input: the records hold the text plus ~25 % of
columns and offsets."""


def _spooled_bytes(path: str, size: int) -> float | None:
    """Estimated bytes the records of one input file take spooled, or ``None`` where its size bounds
    nothing: a compressed stream (gz, zst, bz2, xz) may inflate many times (a repetitive one a
    hundredfold), and so may a Parquet file (dictionary and run-length pages: 100,000 copies of one
    2 KB text are a 0.7 MB file whose footer counts 1.2 MB of pages and whose records take 208 MB).
    A plain text file (JSONL, CSV, WARC...) holds at least the bytes of its texts."""
    from udfs.formats import file_format

    fmt, codec = file_format(path)
    if codec is not None or fmt == "parquet":
        return None
    return size * SPOOL_EXPANSION


def _spool_fits_memory(listing: list[tuple[str, str, int]]) -> bool:
    """Whether the records of ``listing`` fit :data:`SPOOL_MEMORY_FOLDER` (:data:`SPOOL_MEMORY_SHARE`;
    ``False`` where there is no such folder or ``/proc/meminfo``, or any file's size has no bound,
    :func:`_spooled_bytes`): a full tmpfs is memory the machine lacks, so a wrong guess must not land there."""
    import os
    import shutil

    est = 0.0
    for p, _, size in listing:
        if (b := _spooled_bytes(p, size)) is None:
            return False
        est += b
    try:
        free = shutil.disk_usage(SPOOL_MEMORY_FOLDER).free
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return False
    return os.access(SPOOL_MEMORY_FOLDER, os.W_OK) and est <= SPOOL_MEMORY_SHARE * min(free, avail)


def _read_kept(spark: SparkSession, listing: list[tuple[str, str, int]], icfg: IngestConfig,
               globs: dict[str, str]) -> tuple[DataFrame, ingest_tally.Tally, Any, Any]:
    """The parsed records (:data:`RECORD_DDL`), read by one parse job, with their tally, a function
    that frees what holds them: spooled (:func:`_spool_folder`) or kept (:func:`keep_records`), and
    where spooled a function giving the document rows with their ids straight from the spool files
    (:func:`pipelines.ingest.splits.read_spool_documents`; ``None`` where kept)."""
    spool = _spool_folder(spark, listing)
    if spool is None:
        parsed = keep_records(read_records(spark, listing, icfg, globs))
        try:
            return parsed, ingest_tally.tally(parsed), lambda: cache.release(parsed), None
        except BaseException:
            cache.release(parsed)
            raise
    try:
        t = ingest_tally.tally_partials(read_records(spark, listing, icfg, globs, spool.path))
        n = ingest_splits.partition_count(spark, ingest_splits.plan_splits(listing, icfg), icfg)
        parsed = ingest_splits.read_spool(spark, spool.path, n, RECORD_DDL, t.parts)
    except BaseException:
        spool.remove()
        raise

    def documents(columns: tuple[str, ...], ddl: str) -> DataFrame:
        return ingest_splits.read_spool_documents(spark, spool.path, n, t.parts, t.summaries, columns, ddl)

    return parsed, t, spool.remove, documents


def keep_records(records: DataFrame) -> DataFrame:
    """``records`` kept on local disk (:data:`pipelines.core.tables.TEXT_CACHE`) by the first job that
    reads them (the tally), for the jobs after it (the writes). Free them with
    :func:`pipelines.core.cache.release`.

    On a ``local`` master, as rows: a lazy local checkpoint. Spark's columnar cache turns every row into
    column buffers, gathers min/max statistics of every string (the texts too) and, under adaptive
    execution, fills the cache in a job of its own that the tally then reads back. On 408 MB of JSONL
    the executors spent about 1.7 CPU-s less on the rows in one pair of runs; whole-process totals of
    two more pairs did not tell the two apart (bench/notes.md, "Ingest's reads of its parsed
    records"). On a cluster the columnar cache stays: a checkpoint's blocks live on the executor that
    wrote them and a lost executor would fail the job, where a lost cache block is computed again.
    """
    if _as_rows(records):
        return records.localCheckpoint(eager=False, storageLevel=tables.TEXT_CACHE)
    return records.persist(tables.TEXT_CACHE)


def _as_rows(records: DataFrame) -> bool:
    """True where :func:`keep_records` keeps rows (a ``local`` master), False where it caches."""
    return _as_rows_master(records.sparkSession)


def _as_rows_master(spark: SparkSession) -> bool:
    """True on a ``local`` master (one machine: the executors' disk is the driver's)."""
    return spark.sparkContext.master.startswith("local")


# --------------------------------------------------------------------------------------------- run
_STAGE_CONF = {
    # One binaryFile row (a whole file) per Arrow batch into the Python worker; splits are tiny rows.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1",
    # The parsed records are kept once (keep_records) and read by the tally and the writes. Text is
    # stored as it is either way; compressing a columnar cache only spends CPU on trying (about 3 CPU-s
    # per GB).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}
"""Session settings while ingest runs (restored after): measured on one 1 GB JSONL file, bench/notes.md."""


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Ingest ``ingest.inputs`` into ``documents`` and ``quarantine`` (each replaced in one Delta commit).

    Spark jobs: one parses every split, keeps the records (:func:`_read_kept`: spooled or kept) and
    tallies them, the duplicated source ids included (:func:`pipelines.ingest.tally.tally`); one writes
    each table (none reads the records for an empty ``quarantine``).

    Returns:
        The :class:`StageReport`: ``rows_in`` = records read (parser count), ``rows_out`` = rows of
        ``documents`` (as its Delta commit recorded them), ``quarantined`` = rows of ``quarantine`` by
        reason (the tally, checked against the commit of the table), ``extra`` = files, bytes,
        formats, skipped non-document records, chars.

    Raises:
        NoInputFilesError: a glob of ``ingest.inputs`` matches no file.
        InvariantError: the quarantine table holds another number of rows than the tally counted.
    """
    icfg = cfg.ingest
    hidden: list[str] = []
    inner: list[str] = []
    globs: dict[str, str] = {}
    listing = list_files(spark, icfg, hidden, globs, inner)
    if hidden:
        print(skipped_line(hidden), file=sys.stderr, flush=True)
    if inner:
        print(subfolders_line(inner), file=sys.stderr, flush=True)
    if small := ingest_splits.small_splits_line(ingest_splits.plan_splits(listing, icfg), icfg):
        print(small, file=sys.stderr, flush=True)
    with tables.session_conf(spark, _STAGE_CONF):
        parsed, t, release, spooled_documents = _read_kept(spark, listing, icfg, globs)
        try:
            extra = _file_stats(t.summaries)
            records = ingest_splits.number_lines(parsed, t.summaries, spark)
            empty, empty_rows = _empty_split_files(spark, t.summaries)
            counts = t.counts + [(r["input_file"], r["reason"], 1) for r in empty_rows]
            if empty is not None:
                records = records.unionByName(empty)
                extra["records_read"] += len(empty_rows)
            # Per source from the same one tally: the chain checks shard.mix against the sources found here,
            # right after ingest, instead of at the shard stage (pipelines/shard/mix_check.py).
            by_source = sorted(t.by_source.items())
            extra.update(chars_out=t.chars, bytes_out=t.n_bytes, n_replaced=t.replaced,
                         documents_by_source=dict(by_source[:MAX_SOURCE_COUNTS]),
                         documents_by_source_omitted=max(0, len(by_source) - MAX_SOURCE_COUNTS))
            bad = bad_files(counts, t.summaries, icfg)
            docs = records.where(F.col("kind") == "doc")
            dups = ingest_tally.duplicated_ids(spark, docs, candidate_id(), t)
            outputs = tables.publish(
                spark, cfg, STAGE,
                {"documents": _documents(records, dups, t, spooled_documents),
                 "quarantine": to_quarantine(records, none=not any(r for _, r, _ in counts))},
                properties={"doc_id_scheme": DOC_ID_SCHEME},
                table_properties={"quarantine": {"reasons": sorted(QUARANTINE_REASONS)}},
            )
        finally:
            release()
    quarantined: Counter = Counter()
    for _, reason, n in counts:
        if reason is not None:
            quarantined[reason] += n
    written = tables.written_rows(spark, outputs["quarantine"])
    if written != sum(quarantined.values()):
        raise InvariantError(f"ingest: the quarantine table holds {written} rows, the parser quarantined "
                             f"{sum(quarantined.values())} ({dict(quarantined)})")
    if bad:
        for line in bad:
            print(line, file=sys.stderr, flush=True)
        if icfg.on_bad_file == "fail":
            kept = tables.written_rows(spark, outputs["documents"])
            raise BadInputFileError(
                f"ingest: {len(bad)} input file(s) mostly quarantined (lines above; tables written: {kept} "
                f"documents, {sum(quarantined.values())} records quarantined); fix what each line says "
                "(a file's name, ingest.format, ingest.fields), or set ingest.on_bad_file=continue to go on"
            )
        extra["bad_files"] = bad
    extra["skipped_files"] = hidden[:MAX_FILE_COUNTS]
    extra["skipped_files_omitted"] = max(0, len(hidden) - MAX_FILE_COUNTS)
    report = StageReport(
        stage=STAGE, rows_in=extra.pop("records_read"), rows_out=tables.written_rows(spark, outputs["documents"]),
        quarantined=dict(sorted(quarantined.items())), outputs=outputs, extra=extra,
        # Bytes that are not UTF-8 (a Latin-1 file read as JSONL) become U+FFFD: under
        # max_replacement_fraction a document stays, so the line says how many characters were replaced.
        notes={"skipped_files": len(hidden), "skipped_records": skipped_records(extra.get("skipped") or {}),
               "replaced_chars": int(extra.get("n_replaced") or 0)},
    )
    return report


def skipped_records(skipped: dict[str, int]) -> int:
    """Records read and skipped as no document (the stage report's ``extra.skipped``: MediaWiki redirects
    and other namespaces, WARC request and metadata records, NUL padding), blank lines left out: the
    count the stage's line shows as ``skipped_records=N``, so a reader of a dump whose documents are
    fewer than its pages sees where the rest went.

    >>> skipped_records({"blank_line": 4, "mediawiki_redirect": 2, "warc_request": 3})
    5
    """
    return sum(int(v) for k, v in skipped.items() if k != "blank_line")


SKIPPED_NAMES_SHOWN = 10
"""Skipped files the ingest line names (the stage report's ``extra.skipped_files`` keeps up to
:data:`MAX_FILE_COUNTS`)."""


def skipped_line(paths: list[str]) -> str:
    """The line naming the input files skipped for a name starting with ``_`` or ``.``.

    >>> skipped_line(["file:/d/_SUCCESS", "file:/d/.a.jsonl.crc"])
    "ingest: skipped 2 input file(s) whose names start with '_' or '.' (markers and hidden files, as Spark and Hadoop skip them; rename a file to read it): _SUCCESS, .a.jsonl.crc"
    """
    return (f"ingest: skipped {len(paths)} input file(s) whose names start with '_' or '.' (markers and hidden "
            f"files, as Spark and Hadoop skip them; rename a file to read it): {_first_names(paths)}")


def subfolders_line(paths: list[str]) -> str:
    """The line naming the folders inside input folders, whose files ingest does not read.

    >>> subfolders_line(["file:/d/2024", "file:/d/2025"])
    "ingest: not read: 2 folder(s) inside input folders (a folder in ingest.inputs stands for the files directly in it; add a glob such as 'DIR/*/*' to read theirs): 2024, 2025"
    """
    return (f"ingest: not read: {len(paths)} folder(s) inside input folders (a folder in ingest.inputs stands "
            f"for the files directly in it; add a glob such as 'DIR/*/*' to read theirs): {_first_names(paths)}")


def _first_names(paths: list[str]) -> str:
    """The base names of the first :data:`SKIPPED_NAMES_SHOWN` paths, then how many more."""
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in paths[:SKIPPED_NAMES_SHOWN]]
    more = f" and {len(paths) - SKIPPED_NAMES_SHOWN} more" if len(paths) > SKIPPED_NAMES_SHOWN else ""
    return ", ".join(names) + more


def bad_files(counts: list[tuple[str, str | None, int]], summaries: list[Any], icfg: IngestConfig) -> list[str]:
    """One line per file most of whose records were quarantined (``ingest.max_quarantine_fraction``
    over at least ``ingest.quarantine_min_records`` records), naming the file, its main reason and
    what its bytes look like.

    A file whose bytes are no text (:func:`udfs.formats.records.no_text`: compressed data under a name
    without its suffix, a known binary format, UTF-16 or UTF-32 text by a byte-order mark or the NUL
    pattern of ASCII) is named whatever its number of records: the floor keeps a few bad records of a small file
    from reading as a wrong format, and what its bytes are is no guess drawn from the records.

    Args:
        counts: ``(input_file, reason, rows)``; ``reason`` ``None`` for documents.
        summaries: the ``kind = "file"`` rows (``input_file``, ``split_start``, ``meta``).

    Returns:
        The lines, sorted by file (empty when every file is fine).
    """
    per_file: dict[str, Counter] = {}
    for path, reason, n in counts:
        per_file.setdefault(path, Counter())[reason] += n
    info = {r["input_file"]: dict(r["meta"]) for r in summaries if r["split_start"] == 0}
    lines = []
    for path, c in sorted(per_file.items()):
        total = sum(c.values())
        quarantined = total - c[None]
        meta = info.get(path, {})
        unparsable = no_text(str(meta.get("looks_like", "")))
        if ((total < icfg.quarantine_min_records and not unparsable)
                or quarantined <= icfg.max_quarantine_fraction * total):
            continue
        reason, k = max(((r, n) for r, n in c.items() if r is not None), key=lambda x: (x[1], x[0]))
        seen = (f"its columns: {meta['columns'] or '(none)'}" if "columns" in meta
                else f"looks like {meta.get('looks_like', 'unknown')}")
        lines.append(
            f"ingest: {path}: {quarantined} of {total} records quarantined "
            f"(> ingest.max_quarantine_fraction {icfg.max_quarantine_fraction}), mostly {reason} ({k}); "
            f"read as {meta.get('format', 'unknown')}, {seen}"
        )
    return lines


def _file_stats(rows: list[Any]) -> dict[str, Any]:
    formats: Counter = Counter()
    skipped: Counter = Counter()
    counted: Counter = Counter()
    by_file: dict[str, Counter] = {}
    n_bytes = 0
    for r in rows:
        meta = dict(r["meta"])
        fmt = meta.pop("format")
        if r["split_start"] == 0:  # a file's first split speaks for it
            formats[fmt] += 1
        n_bytes += int(meta.pop("bytes"))
        for k, v in meta.items():
            if k.startswith("skipped."):
                skipped[k.removeprefix("skipped.")] += int(v)
            elif k.startswith("count."):
                counted[k.removeprefix("count.")] += int(v)
                by_file.setdefault(r["input_file"], Counter())[k.removeprefix("count.")] += int(v)
    files = sorted(by_file)
    return {
        "records_read": sum(int(r["record"]) for r in rows), "files": len({r["input_file"] for r in rows}),
        "bytes_in": n_bytes,
        "formats": dict(sorted(formats.items())), "skipped": dict(sorted(skipped.items())),
        "counts": dict(sorted(counted.items())),
        # charset decisions and their sources, mojibake repairs, per file (the first MAX_FILE_COUNTS files)
        "counts_by_file": {f: dict(sorted(by_file[f].items())) for f in files[:MAX_FILE_COUNTS]},
        "counts_by_file_omitted": max(0, len(files) - MAX_FILE_COUNTS),
    }
