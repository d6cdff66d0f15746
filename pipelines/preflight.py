"""Checks that need no Spark and fail a run before it starts, naming the config key to fix.

The config model (:mod:`pipelines.config`) checks values in isolation; these check them against the
machine: that ``run.root`` can be written and that the tokenizer named by ``tokenize.tokenizer`` loads.
Without them the first symptom is a Java stack trace from Delta half-way through the chain, or a
tokenizer error after ingest, dedup and filter have already run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from urllib.parse import urlparse

from pipelines.config import WinnowConfig


class PreflightError(ValueError):
    """The config names something this machine cannot use; the message names the key."""


def local_path(uri: str) -> str | None:
    """The local filesystem path of ``uri`` (a plain path or ``file:`` URI), None for other schemes.

    ``s3://``, ``dbfs:/``, ``hdfs://`` and the like are checked by the job that writes them, on the
    cluster; a two-letter-or-longer scheme is what separates them from a plain path.
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return parsed.path
    if len(parsed.scheme) >= 2:
        return None
    return uri


def check_writable_root(root: str) -> None:
    """Raise unless ``root`` (a local folder) exists and is writable, or can be created.

    Raises:
        PreflightError: ``root`` is a file, or the folder (or its nearest existing parent) is not
            writable by this user.
    """
    path = local_path(root)
    if path is None:
        return
    path = os.path.abspath(path)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise PreflightError(f"run.root={root!r}: {probe!r} exists and is not a folder")
    try:
        # A real write, not os.access: root passes os.access on any folder, yet a read-only mount
        # (EROFS) or a full disk still refuses it.
        with tempfile.TemporaryFile(dir=probe, prefix=".winnow-preflight-"):
            pass
    except OSError as e:
        what = "is not writable" if probe == path else f"cannot be created: {probe!r} is not writable"
        raise PreflightError(
            f"run.root={root!r} {what} ({e.strerror}); choose another folder (--set run.root=...)"
        ) from None


def check_tokenizer(cfg: WinnowConfig) -> None:
    """Load the tokenizer and resolve EOS/BOS as the tokenize stage will (cached per process).

    Raises:
        PreflightError: the message of :class:`udfs.tokenize.TokenizerError`, which names the key.
    """
    from pipelines.tokenize import special_ids
    from udfs.tokenize import TokenizerError

    try:
        special_ids(cfg.tokenize)
    except TokenizerError as e:
        raise PreflightError(str(e)) from None


def check(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """Run every check that applies to a run of ``stages``.

    Raises:
        PreflightError: the first failed check.
    """
    check_writable_root(cfg.run.root)
    if "tokenize" in stages and not cfg.tokenize.allow_download:
        check_tokenizer(cfg)
