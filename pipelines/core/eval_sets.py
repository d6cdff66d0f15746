"""Evaluation sets for the decontam stage: read items from JSONL / Parquet files or a Delta table.

Evaluation sets are small (a benchmark is thousands of items, rarely millions), so the driver reads
them whole: local files with Python, object-store files through Spark's ``binaryFile`` reader, Delta
tables through Spark. The same parsing runs before Spark starts (:func:`check_local`, called by
:mod:`pipelines.core.preflight`), so a missing file, a non-UTF-8 file, a field no row has or a set without
a single item stops the run with a message naming the config key, not half-way through the chain.

An item's text is its ``fields`` joined by newlines, in config order (as datatrove's
``NGramsDecontIndexer`` indexes a query with its gold answer): n-grams may span from a question into
its answer. A list value (multiple-choice options) is joined by newlines too; numbers and booleans
count as text. Rows that give no text are skipped and counted by reason, never silently.
"""

from __future__ import annotations

import glob as globlib
import gzip
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.config import EvalSetConfig
from pipelines.core.preflight import PreflightError, local_path
from udfs.errors import UserError

SKIP_REASONS = ("malformed_json", "not_an_object", "no_text", "not_text")
"""Why a row of an evaluation file gives no item (counts in the stage report)."""


class EvalSetError(UserError, ValueError):
    """An evaluation set cannot be used; the message names the config key."""


@dataclass
class EvalItems:
    """The items of one evaluation set.

    Attributes:
        name: the set's name.
        ids: item id per item (``id_field``, else ``<file name>:<line or row>``).
        texts: item text per item (fields joined by newlines).
        rows: rows read (items + skipped).
        skipped: rows that gave no item, by reason (:data:`SKIP_REASONS`).
        missing_fields: rows lacking each field (the item uses the fields it has).
        digest: sha256 over the raw bytes of every file read (or the Delta table path and version).
    """

    name: str
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    rows: int = 0
    skipped: Counter = field(default_factory=Counter)
    missing_fields: Counter = field(default_factory=Counter)
    digest: str = ""


def _key(i: int, what: str) -> str:
    return f"decontam.eval_sets[{i}].{what}"


def file_format(path: str, es: EvalSetConfig) -> str:
    """The format of one evaluation file: ``es.format``, or with ``auto`` the one its name tells.

    Args:
        path: the file's path or URI (a ``.gz`` suffix is ignored).
        es: the set's config (its ``format``).

    Returns:
        ``"jsonl"`` or ``"parquet"``.

    Raises:
        EvalSetError: ``format: auto`` and the name ends in none of the known suffixes.
    """
    if es.format != "auto":
        return es.format
    name = path.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    raise EvalSetError(
        f"{path!r}: cannot tell the format from the name (.jsonl[.gz], .json, .ndjson, .parquet); "
        "set format: jsonl or parquet on the eval set"
    )


def file_records(path: str, data: bytes, fmt: str) -> list[Any]:
    """Parsed rows of one evaluation file.

    Args:
        path: the file's path or URI (named in errors).
        data: its raw bytes (gzip is detected by its magic bytes).
        fmt: ``"jsonl"`` or ``"parquet"`` (:func:`file_format`).

    Returns:
        One Python value per row (a dict for a well-formed row); a JSONL line that is not JSON becomes
        the marker :data:`MALFORMED`, blank lines are skipped.

    Raises:
        EvalSetError: a JSONL file that is not UTF-8 (names the file and byte offset).
    """
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(data)).to_pylist()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        from udfs.formats.records import wide_encoding

        wide = wide_encoding(data[:64])
        seen = (f"{wide} text; re-encode it, e.g. iconv -f {wide.split()[0]} -t UTF-8" if wide
                else f"byte {e.start}: {data[e.start : e.start + 4]!r}")
        raise EvalSetError(f"{path!r} is not UTF-8 text ({seen})") from None
    rows: list[Any] = []
    for line in text.removeprefix("\ufeff").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            rows.append(MALFORMED)
    return rows


MALFORMED = object()
"""The row :func:`file_records` gives for a JSONL line that is not JSON."""


def _as_text(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, bool | int | float):
        return str(v)
    if isinstance(v, list) and all(isinstance(x, str | int | float) for x in v):
        return "\n".join(str(x) for x in v)
    return None


def _add_rows(items: EvalItems, es: EvalSetConfig, source: str, rows: list[Any]) -> None:
    for n, row in enumerate(rows, start=1):
        items.rows += 1
        if row is MALFORMED:
            items.skipped["malformed_json"] += 1
            continue
        if not isinstance(row, dict):
            items.skipped["not_an_object"] += 1
            continue
        parts, bad = [], False
        for f in es.fields:
            if row.get(f) is None:
                items.missing_fields[f] += 1
                continue
            t = _as_text(row[f])
            if t is None:
                bad = True
            elif t.strip():
                parts.append(t)
        if not parts:
            items.skipped["not_text" if bad else "no_text"] += 1
            continue
        rid = row.get(es.id_field) if es.id_field else None
        items.ids.append(str(rid) if rid is not None else f"{source}:{n}")
        items.texts.append("\n".join(parts))


def local_files(es: EvalSetConfig, i: int) -> list[str]:
    """The files of a set's local ``paths`` globs, sorted (URIs with a scheme are left to Spark).

    Raises:
        EvalSetError: a local glob matches no file (names the key).
    """
    files: list[str] = []
    for pattern in es.paths:
        path = local_path(pattern)
        if path is None:
            continue
        found = sorted(p for p in globlib.glob(path) if os.path.isfile(p))
        if not found:
            # ingest reads the files of a folder; an eval set takes files or globs: say which to give
            where = f"{_key(i, 'paths')}: {pattern!r} matches no file (eval set {es.name!r})"
            if os.path.isdir(path):
                where += f"; it is a folder: give its files, e.g. {os.path.join(pattern, '*.jsonl')!r}"
            raise EvalSetError(where)
        files += found
    return sorted(set(files))


def read_items(es: EvalSetConfig, i: int, spark: Any = None) -> EvalItems:
    """Read every item of evaluation set ``es`` (the ``i``-th of ``decontam.eval_sets``).

    Args:
        spark: needed for object-store paths and Delta tables; None reads local files only.

    Raises:
        EvalSetError: a file is missing or not UTF-8, a field is in no row, or the set has no item;
            the message names the key.
    """
    items = EvalItems(es.name)
    digest = hashlib.sha256()
    if es.table is not None:
        if spark is None:
            return items
        from pipelines.core import tables

        if not tables.table_exists(spark, es.table):
            raise EvalSetError(f"{_key(i, 'table')}: no Delta table at {es.table!r} (eval set {es.name!r})")
        df = tables.read_path(spark, es.table)
        missing = [f for f in es.fields if f not in df.columns]
        if missing:
            raise EvalSetError(
                f"{_key(i, 'fields')}: {missing} not columns of {es.table!r}; it has {df.columns}"
            )
        cols = [*es.fields, *([es.id_field] if es.id_field in df.columns else [])]
        digest.update(f"{es.table}@{tables.table_version(spark, es.table)}".encode())
        _add_rows(items, es, os.path.basename(es.table.rstrip("/")), df.select(*cols).toArrow().to_pylist())
    else:
        for path in local_files(es, i):
            with open(path, "rb") as fh:
                data = fh.read()
            _add_file(items, es, i, path, data, digest)
        remote = [p for p in es.paths if local_path(p) is None]
        if remote and spark is not None:
            for row in (
                spark.read.format("binaryFile")
                .load(remote)
                .select("path", "content")
                .orderBy("path")
                .collect()
            ):
                _add_file(items, es, i, row["path"], bytes(row["content"]), digest)
    items.digest = digest.hexdigest()
    _check_items(items, es, i)
    return items


def _add_file(items: EvalItems, es: EvalSetConfig, i: int, path: str, data: bytes, digest: Any) -> None:
    try:
        rows = file_records(path, data, file_format(path, es))
    except EvalSetError as e:
        raise EvalSetError(f"{_key(i, 'paths')}: {e}") from None
    except Exception as e:  # a corrupt Parquet / gzip file: name it instead of a stack trace mid-run
        raise EvalSetError(f"{_key(i, 'paths')}: {path!r} cannot be read: {e}") from None
    digest.update(hashlib.sha256(data).digest())
    _add_rows(items, es, os.path.basename(path), rows)


def _check_items(items: EvalItems, es: EvalSetConfig, i: int) -> None:
    objects = items.rows - items.skipped["malformed_json"] - items.skipped["not_an_object"]
    never = [f for f in es.fields if items.missing_fields[f] >= objects]
    if objects and never:
        raise EvalSetError(
            f"{_key(i, 'fields')}: {never} in no row of eval set {es.name!r} ({items.rows} rows); "
            "check the names"
        )
    if not items.texts:
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(items.skipped.items()) if v)
        raise EvalSetError(
            f"eval set {es.name!r} ({_key(i, 'paths' if es.paths else 'table')}) has no item with text: "
            f"{items.rows} rows" + (f", skipped {skipped}" if skipped else "")
            + "; point it at the files of the set's items, or remove the set"
        )


def check_local(eval_sets: Sequence[EvalSetConfig]) -> None:
    """Read every local evaluation set as the stage will (preflight, before Spark starts).

    Raises:
        PreflightError: the first set that cannot be used, with the key to fix.
    """
    for i, es in enumerate(eval_sets):
        if es.table is not None or not any(local_path(p) is not None for p in es.paths):
            continue
        try:
            read_items(es, i)
        except EvalSetError as e:
            raise PreflightError(str(e)) from None
