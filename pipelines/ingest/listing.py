"""Listing ingest's input files on the driver through each glob's Hadoop filesystem (any scheme), and the
errors of globs that match nothing or cannot be parsed."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from pyspark.sql import SparkSession

from pipelines.ingest.config import IngestConfig
from udfs.errors import UserError


class NoInputFilesError(UserError, FileNotFoundError):
    """A glob of ``ingest.inputs`` matches no file (a typo, or the data is not where the config says)."""


class BadInputGlobError(UserError):
    """A glob of ``ingest.inputs`` that Hadoop cannot parse (e.g. an unclosed ``[``)."""


class ShadowedInputGlobError(UserError):
    """A glob of ``ingest.fields_by_input`` whose every file an earlier glob of ``ingest.inputs`` also
    matches: the earlier glob's fields apply to them, so the entry would apply to no file."""


INPUT_GLOB_ERRORS = (NoInputFilesError, BadInputGlobError, ShadowedInputGlobError)
"""Configuration errors of ``ingest.inputs`` found only once Spark lists the files (remote and Hadoop-only
globs; local ones are checked before Spark starts, :mod:`pipelines.ingest.hooks`): the jobs exit 2 on them."""


_GLOB_CHARS = re.compile(r"[*?\[{]")


# ------------------------------------------------------------------------------------------ inputs
def _key_path(path: str, base: str) -> str:
    if path == base:
        return path.rsplit("/", 1)[-1]
    if path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")) + 1 :]
    return path


def list_files(
    spark: SparkSession, cfg: IngestConfig, skipped: list[str] | None = None, globs: dict[str, str] | None = None,
    subfolders: list[str] | None = None,
) -> list[tuple[str, str, int]]:
    """Expand ``ingest.inputs`` with the Hadoop filesystem of each glob (any scheme), on the driver.

    A glob may match files or folders (a folder stands for the files directly in it); names starting
    with ``_`` or ``.`` are skipped, as Spark's file sources do. Listing here, not through a Spark
    scan, keeps 0-byte files, which Spark's scans drop silently.

    Args:
        skipped: when given, receives the paths of the ``_*`` / ``.*`` files the globs matched (sorted,
            each once).
        globs: when given, receives ``path -> glob``: the first glob of ``ingest.inputs`` that matched
            the file (whose ``ingest.fields_by_input`` entry applies to it).
        subfolders: when given, receives the folders inside a matched folder (not read: a folder stands
            for the files directly in it), names starting with ``_`` or ``.`` left out (sorted, each once).

    Returns:
        Sorted ``(path, key_path, size_bytes)``: ``path`` fully qualified (e.g. ``file:/data/a.jsonl``),
        ``key_path`` the path relative to the fixed prefix of the first glob that matched it (the
        full path where two files would share one). A file matched by several globs appears once.

    Raises:
        NoInputFilesError: a glob matches no file (names the glob).
        ShadowedInputGlobError: a glob of ``ingest.fields_by_input`` matches only files that an earlier
            glob of ``ingest.inputs`` matches too (names both).
    """
    found: dict[str, tuple[str, int]] = {}
    hidden: set[str] = set()
    inner: set[str] = set()
    first: dict[str, str] = {}
    for glob, base, entries in _matches(spark, cfg.inputs, hidden, inner):
        if not entries:
            raise NoInputFilesError(f"ingest.inputs: {glob!r} matches no file; fix the glob or the path (--set 'ingest.inputs=[...]')")
        for path, size, _ in entries:
            first.setdefault(path, glob)
            found.setdefault(path, (_key_path(path, base), size))
        if glob in cfg.fields_by_input and all(first[p] != glob for p, _, _ in entries):
            raise ShadowedInputGlobError(
                f"ingest.fields_by_input: {glob!r} applies to no file: each file it matches is matched first "
                f"by {first[entries[0][0]]!r}, listed before it in ingest.inputs (the first matching glob's "
                f"fields apply); list {glob!r} first, or narrow the earlier glob"
            )
    if globs is not None:
        globs.update(first)
    if skipped is not None:
        skipped += sorted(hidden)
    if subfolders is not None:
        subfolders += sorted(inner)
    shared = {k for k, n in Counter(k for k, _ in found.values()).items() if n > 1}
    return sorted((p, p if k in shared else k, size) for p, (k, size) in found.items())


def input_files(spark: SparkSession, globs: list[str]) -> list[tuple[str, int, int]]:
    """Every file :func:`list_files` would read, as sorted ``(path, size_bytes, mtime_ms)``; no error
    when a glob matches nothing (the completion records use this to notice changed inputs)."""
    return sorted({e for _, _, entries in _matches(spark, globs) for e in entries})


def _matches(
    spark: SparkSession, globs: list[str], hidden: set[str] | None = None, inner: set[str] | None = None
) -> Iterator[tuple[str, str, list[tuple[str, int, int]]]]:
    """Per glob: the glob, its fixed prefix qualified, and its files ``(path, size, mtime_ms)``; the
    files left out for a name starting with ``_`` or ``.`` are added to ``hidden``, and the folders
    inside a matched folder (names not starting so) to ``inner``, when given."""
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
        try:
            matched = fs.globStatus(gpath) or []
        except Exception as e:  # Py4JJavaError: java.io.IOException "Illegal file pattern: ..."
            if "Illegal file pattern" not in str(e):
                raise
            why = str(e).split("Illegal file pattern:", 1)[1].strip().splitlines()[0]
            raise BadInputGlobError(
                f"ingest.inputs: {glob!r} is not a valid Hadoop glob ({why}); in a file name, write "
                "a literal [ ] { } * ? or \\ with a backslash before it, e.g. 'b\\[1\\].jsonl'"
            ) from None
        for st in matched:
            children = fs.listStatus(st.getPath()) if st.isDirectory() else [st]
            for f in children:
                if f.isDirectory():
                    if inner is not None and st.isDirectory() and not f.getPath().getName().startswith(("_", ".")):
                        inner.add(str(f.getPath().toString()))
                    continue
                if f.getPath().getName().startswith(("_", ".")):
                    if hidden is not None:
                        hidden.add(str(f.getPath().toString()))
                    continue
                entries.append((str(f.getPath().toString()), int(f.getLen()), int(f.getModificationTime())))
        yield glob, base, entries
