"""The state of a run read straight from the local filesystem, without Spark: what ``--dry-run`` needs.

The resume plan (:func:`pipelines.core.runs.plan`) compares completion records with the versions of Delta
tables, the sha256 of marker files and a digest of ingest's input files. On a local run all of these
are files: Delta versions are the names of ``_delta_log/NNN.json``, completion records are the Parquet
files the ``_runs`` log adds, input files are a glob. Reading them directly answers ``--dry-run`` in
about a second instead of starting a JVM (about a minute on a busy machine).

:func:`can_plan` says when this is possible; otherwise (an object store, a Hadoop glob, a ``_runs`` log
whose early commits were cleaned up behind a checkpoint, or a Delta reader feature this reader does not
implement) the caller starts Spark as before. Source: the Delta transaction log protocol
(``PROTOCOL.md`` of delta-io/delta: actions ``add`` / ``remove``, one JSON commit per version).
"""

from __future__ import annotations

import glob as globlib
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pipelines.core.config import WinnowConfig

_LOCAL_GLOB = re.compile(r"[{}]")
"""Hadoop brace alternatives (``{a,b}``) have no Python glob equivalent: those globs need Spark."""
_GLOB = re.compile(r"[*?\[\]{}\\]")
"""Characters Hadoop's path globbing expands: a data file path holding one is left to Delta's reader."""


class NeedsSpark(RuntimeError):
    """The state cannot be read without Spark (the message says why)."""


def is_local(path: str) -> bool:
    """A plain local path (no scheme: not ``s3://``, ``dbfs:``, ``file:``)."""
    return ":" not in path.split("/", 1)[0]


def can_plan(cfg: WinnowConfig) -> bool:
    """Every location the plan reads is a local path, and every ingest glob is a Python glob.

    Metastore mode (``run.catalog``) never plans here: its tables live where the catalog says."""
    if cfg.run.catalog:
        return False
    paths = [cfg.run.root, cfg.shard_root, cfg.report_path]
    return all(is_local(p) for p in paths) and all(is_local_glob(g) for g in cfg.ingest.inputs)


def is_local_glob(glob: str) -> bool:
    """A local path or glob that Python's ``glob`` expands as Hadoop does (no ``{a,b}`` alternatives)."""
    return is_local(glob) and not _LOCAL_GLOB.search(glob)


def _commits(table: str) -> list[int]:
    log = Path(table) / "_delta_log"
    if not log.is_dir():
        return []
    names = [p.name[:-5] for p in log.iterdir() if p.name.endswith(".json")]
    return sorted(int(n) for n in names if n.isdigit())


def delta_version(table: str) -> int | None:
    """Latest committed version of the local Delta table at ``table``, or None when there is none."""
    versions = _commits(table)
    return versions[-1] if versions else None


def read_records(table: str) -> list[dict[str, Any]]:
    """All rows of a local append-only Delta table (the ``_runs`` records), from its log and Parquet files.

    Returns:
        Rows as dicts (maps as dicts, timestamps as naive UTC ``datetime``); ``[]`` when there is no table.

    Raises:
        NeedsSpark: commits before a checkpoint were cleaned up, or the table uses a reader feature
            (deletion vectors, column mapping, ...) that this reader does not implement.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not _commits(table):
        return []
    rows: list[dict[str, Any]] = []
    for rel in file_labels(table):  # the live files, in the order the log adds them
        # ParquetFile, not pq.read_table: that imports pyarrow.dataset (and pandas), a second of start-up.
        t = pq.ParquetFile(Path(table) / unquote(rel)).read()
        us = pa.timestamp("us")  # Spark's INT96 reads as nanoseconds; records hold microseconds
        fields = [pa.field(f.name, us if pa.types.is_timestamp(f.type) else f.type) for f in t.schema]
        t = t.cast(pa.schema(fields))
        maps = {f.name for f in t.schema if pa.types.is_map(f.type)}
        for r in t.to_pylist():
            rows.append({k: dict(v) if k in maps and v is not None else v for k, v in r.items()})
    return rows


def _log(table: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The commits of the local Delta table at ``table``, oldest first, each as ``(commitInfo, actions)``
    read from its ``_delta_log/NNN.json`` (Delta protocol, "Delta Log Entries"): which commit added each
    file, which delta-rs does not expose.

    Raises:
        NeedsSpark: what :func:`_delta_table` refuses, or a log whose JSON commits do not all remain from
            version 0 (cleaned up after a checkpoint): the caller asks Delta instead.
    """
    _delta_table(table)
    versions = _commits(table)
    if not versions or versions != list(range(len(versions))):
        raise NeedsSpark(f"{table}: no complete Delta log")
    out = []
    for v in versions:
        text = (Path(table) / "_delta_log" / f"{v:020d}.json").read_text(encoding="utf-8")
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        out.append((next((a["commitInfo"] for a in actions if "commitInfo" in a), {}), actions))
    return out


def _delta_table(table: str, version: int | None = None):
    """The ``deltalake.DeltaTable`` of the local table at ``table`` (at ``version``), for a table delta-rs
    reads as Spark's Delta does: reader protocol 1 (no deletion vectors, column mapping or other reader
    feature), no partition columns, no commit coordinator.

    Raises:
        NeedsSpark: no table or version there, delta-rs cannot load it, or it is one of the above: the
            caller asks Delta instead.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, DeltaProtocolError, TableNotFoundError

    try:
        dt = DeltaTable(table, version=version)
        protocol, meta = dt.protocol(), dt.metadata()
    except (TableNotFoundError, DeltaProtocolError, DeltaError, OSError) as e:
        raise NeedsSpark(f"{table}: delta-rs cannot load it ({e})") from None
    if protocol.min_reader_version > 1 or protocol.reader_features:
        raise NeedsSpark(f"{table}: reader protocol {protocol}")
    if meta.partition_columns:
        raise NeedsSpark(f"{table}: partitioned")
    coordinated = [f for f in [*(protocol.writer_features or []), *meta.configuration]
                   if "oordinatedCommits" in f or "catalogOwned" in f or "catalogManaged" in f]
    if coordinated:
        raise NeedsSpark(f"{table}: commits managed by a coordinator ({coordinated})")
    return dt


def live_files(table: str, version: int | None = None) -> tuple[list[str], str]:
    """The Parquet data files of version ``version`` (default: the latest) of the local Delta table at
    ``table``, and its schema, as delta-rs reads its log (:func:`_delta_table`; no Spark job).

    Returns:
        ``(absolute file paths, the table's schema as Delta's JSON, which Spark's
        ``StructType.fromJson`` reads)``.

    Raises:
        NeedsSpark: what :func:`_delta_table` refuses, or a file outside the table or whose path holds a
            glob character: the caller reads the table through Delta instead.
    """
    dt = _delta_table(table, version)
    root = os.path.abspath(table)
    # delta-rs gives local paths percent-encoded (a space as %20), with or without a file: scheme.
    files = [os.path.abspath(unquote(f.removeprefix("file://"))) for f in dt.file_uris()]
    outside = any(not f.startswith(root + os.sep) or not os.path.isfile(f) for f in files)
    # A Hadoop path with glob characters would be expanded by Spark's reader, not read as named.
    if outside or any(_GLOB.search(f) for f in files):
        raise NeedsSpark(f"{table}: a data file missing or outside the table, or a glob character")
    return files, dt.schema().to_json()


def live_rows(table: str, version: int | None = None) -> int:
    """Rows of version ``version`` (default: the latest) of the local Delta table at ``table``: the sum of
    the ``numRecords`` statistic of its live data files, as delta-rs reads its log (:func:`_delta_table`;
    no Spark job). Spark's Delta writes ``numRecords`` for every file it adds, whatever the
    ``delta.dataSkippingNumIndexedCols`` (Delta ``PROTOCOL.md``, "Per-file Statistics").

    Returns:
        The row count (int, >= 0).

    Raises:
        NeedsSpark: what :func:`_delta_table` refuses, or a live file without ``numRecords`` (a writer
            that wrote no statistics): the caller counts the rows with Spark instead.
    """
    import pyarrow as pa

    actions = pa.table(_delta_table(table, version).get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    counts = actions.column("num_records") if "num_records" in actions.column_names else None
    if counts is None or counts.null_count:
        raise NeedsSpark(f"{table}: a data file without a numRecords statistic")
    return int(sum(counts.to_pylist()))


def appendable_schema(table: str) -> str:
    """The schema (Delta's JSON) of the local Delta table at ``table``, for a table delta-rs appends to as
    Spark's Delta would: what :func:`_delta_table` reads, at writer protocol 2 or below (append-only,
    column invariants and CHECK constraints, which delta-rs enforces as Delta does) and with no table
    feature (generated or identity columns, row tracking, ...).

    Raises:
        NeedsSpark: what :func:`_delta_table` refuses, or a writer protocol above 2 or with features.
    """
    dt = _delta_table(table)
    protocol = dt.protocol()
    if protocol.min_writer_version > 2 or protocol.writer_features:
        raise NeedsSpark(f"{table}: writer protocol {protocol}")
    return dt.schema().to_json()


def table_configuration(table: str) -> dict[str, str]:
    """The table properties (``metaData.configuration``) of the local Delta table at ``table``: what
    ``DESCRIBE DETAIL`` reports as ``properties``, as delta-rs reads its log (:func:`_delta_table`).

    Raises:
        NeedsSpark: what :func:`_delta_table` refuses.
    """
    return dict(_delta_table(table).metadata().configuration or {})


def file_labels(table: str) -> dict[str, str | None]:
    """Each live data file of the local Delta table at ``table`` -> the label of the ``WRITE`` commit that
    added it: its ``replaceWhere`` predicate, else its ``userMetadata``; None for a file another
    operation (DELETE, MERGE, ...) added.

    Raises:
        NeedsSpark: what :func:`_log` refuses.
    """
    live: dict[str, str | None] = {}
    for info, actions in _log(table):
        label = (info.get("operationParameters") or {}).get("predicate") or info.get("userMetadata")
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = label if info.get("operation") == "WRITE" else None
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def input_files(globs: list[str]) -> list[tuple[str, int, int]]:
    """:func:`pipelines.ingest.stage.input_files` for local globs: sorted ``(path, size, mtime_ms)`` with the
    path written as Hadoop writes a local one (``file:/abs/path``) and hidden names (``_``, ``.``) skipped,
    so the digest equals the one Spark computes."""
    entries: set[tuple[str, int, int]] = set()
    for pattern in globs:
        for match in globlib.glob(pattern):
            found = [os.path.join(match, n) for n in os.listdir(match)] if os.path.isdir(match) else [match]
            for f in found:
                name = os.path.basename(f)
                if os.path.isdir(f) or name.startswith(("_", ".")):
                    continue
                st = os.stat(f)
                entries.add((f"file:{os.path.abspath(f)}", int(st.st_size), int(st.st_mtime_ns // 1_000_000)))
    return sorted(entries)


def can_read(cfg: WinnowConfig) -> bool:
    """The run's tables and shard root are local folders (no ``run.catalog``, no scheme): what
    :func:`rows_where` can read without Spark."""
    return not cfg.run.catalog and is_local(cfg.run.root) and is_local(cfg.shard_root)


def rows_where(table: str, column: str, value: str) -> list[dict[str, Any]] | None:
    """The rows of the local Delta table at ``table`` whose ``column`` equals ``value``, read with delta-rs
    (the ``deltalake`` package) into Arrow: no JVM, milliseconds on a small table.

    Only the Parquet row groups whose statistics may hold ``value`` are read (Arrow's dataset filter), the
    key column first and the other columns only of a row group that holds the value.

    Args:
        table: a local folder holding a Delta table (``<run.root>/tables/<name>``).
        column: a string column, e.g. ``doc_id``.
        value: the value to match exactly.

    Returns:
        Rows as dicts (maps as dicts, structs as dicts, lists as lists) at the table's latest version;
        None when there is no Delta table at ``table``.

    Raises:
        NeedsSpark: delta-rs cannot read the table (a reader feature it does not implement); the caller
            reads it with Spark instead.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, DeltaProtocolError, TableNotFoundError

    if not (Path(table) / "_delta_log").is_dir():
        return None
    try:
        dataset = DeltaTable(table).to_pyarrow_dataset()
    except TableNotFoundError:
        return None
    except (DeltaProtocolError, DeltaError) as e:
        raise NeedsSpark(f"{table}: delta-rs cannot read it ({e})") from None
    match = ds.field(column) == value
    # Row group by row group, the key column first: a table of a million documents is neither loaded nor
    # scanned whole (a whole-table scan with every column held GBs, and left Arrow's reader threads
    # running at exit, which aborted the process).
    parts = [rg.to_table(filter=match) for frag in dataset.get_fragments(filter=match)
             for rg in frag.split_by_row_group(filter=match)
             if rg.to_table(columns=[column], filter=match).num_rows]
    t = pa.concat_tables(parts) if parts else dataset.schema.empty_table()
    maps = {f.name for f in t.schema if pa.types.is_map(f.type)}
    return [{k: dict(v) if k in maps and v is not None else v for k, v in r.items()} for r in t.to_pylist()]
