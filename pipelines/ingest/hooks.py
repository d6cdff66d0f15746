"""What the ingest stage adds to the framework (:mod:`pipelines.core.hooks`): the raw files it reads
and the preflight check of ``ingest.inputs``."""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Sequence
from typing import Any

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import PreflightError, local_path
from pipelines.ingest.listing import INPUT_GLOB_ERRORS

LATE_CONFIG_ERRORS = INPUT_GLOB_ERRORS
"""Errors of ``ingest.inputs`` found only once Spark lists the files (remote and Hadoop-only globs): the
jobs exit 2 on them, as on any configuration error."""

RUN_FOLDERS = ("tables", "shards", "report", "config", "audit", "gate")
"""Folders a run writes directly under ``run.root``: tables, shards, report, recorded configs, audit, gate."""

EMPTY_HINT = ("check ingest.inputs and ingest.fields, or ingest.max_doc_bytes where the reason is too_large "
              "(jobs/inspect.py --stage ingest shows the quarantine)")


def input_files(spark: Any, cfg: WinnowConfig) -> list[tuple[str, int, int]]:
    """``(path, size, mtime)`` of every file ingest would read (:func:`pipelines.ingest.stage.input_files`);
    ``spark=None``: local globs listed without Spark (:func:`pipelines.core.local_state.input_files`)."""
    from pipelines.core.local_state import input_files as local_input_files

    if spark is None:
        return local_input_files(cfg.ingest.inputs)
    from pipelines.ingest.stage import input_files as listed

    return listed(spark, cfg.ingest.inputs)


def preflight(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """A run with ingest: every local glob of ``ingest.inputs`` matches a file (:func:`check_local_inputs`)
    and none matches the run's own outputs (:func:`check_inputs_outside_root`)."""
    if "ingest" in stages:
        check_local_inputs(cfg.ingest.inputs)
        check_inputs_outside_root(cfg.ingest.inputs, cfg.run.root)


def check_inputs_outside_root(inputs: Sequence[str], root: str) -> None:
    """Raise when a local glob of ``ingest.inputs`` matches ``run.root``, a file directly in it, or a path in
    one of the folders a run writes there (:data:`RUN_FOLDERS`): ingest would read the run's own lock,
    tables or report as input (quarantined as unsupported formats), and every rerun would find its
    inputs changed. A folder of the user's own inside the root (``run.root/in``) is fine.

    Raises:
        PreflightError: names the glob and ``run.root``.
    """
    root_path = local_path(root)
    if root_path is None:
        return
    real_root = os.path.realpath(root_path)
    for pattern in inputs:
        path = local_path(pattern)
        if path is None or "{" in path or "\\" in path:
            continue
        for m in globlib.glob(path):
            rel = os.path.relpath(os.path.realpath(m), real_root)
            first = rel.split(os.sep, 1)[0]
            # the root itself, a file directly in it (the lock), or a path in a folder the run writes;
            # a folder of the user's own inside the root (root/in) is fine
            own = os.sep not in rel and os.path.isfile(m) or first in RUN_FOLDERS
            if rel == "." or (first != ".." and own):
                raise PreflightError(
                    f"ingest.inputs: {pattern!r} matches {m!r}, inside run.root {root!r}: ingest would read "
                    "this run's own outputs; narrow the glob, or put run.root elsewhere (--set run.root=...)")


def check_local_inputs(inputs: Sequence[str]) -> None:
    """Raise when a local glob of ``ingest.inputs`` matches no file ingest reads: nothing, only names
    starting with ``_`` or ``.`` (skipped, as Spark's file sources do), or only folders without such a
    file directly in them (a folder stands for those files, as in ingest; remote globs: ingest checks them).

    Hadoop globs also know ``{a,b}`` and backslash escapes (``b\\[1\\].jsonl``), which Python's
    :mod:`glob` does not: such patterns are left to ingest, as are URIs with a scheme.

    Raises:
        PreflightError: names the glob.
    """
    for pattern in inputs:
        path = local_path(pattern)
        if path is None or "{" in path or "\\" in path:  # Hadoop-only syntax: braces, backslash escapes
            continue
        matches = globlib.glob(path) or ([path] if os.path.isdir(path) else [])
        if not any(_holds_files(m) for m in matches):
            what = ("no file that ingest reads (names starting with '_' or '.' are skipped, as Spark does; "
                    "a folder stands for the files directly in it)") if matches else "no file"
            raise PreflightError(
                f"ingest.inputs: {pattern!r} matches {what}; fix the glob or the path "
                "(--set 'ingest.inputs=[...]')"
            )


def _holds_files(path: str) -> bool:
    """A file ingest reads (its name not ``_*`` / ``.*``), or a folder with one directly in it."""
    if not os.path.isdir(path):
        return os.path.isfile(path) and not os.path.basename(path).startswith(("_", "."))
    with os.scandir(path) as entries:
        return any(e.is_file() and not e.name.startswith(("_", ".")) for e in entries)
