"""Checks that need no Spark and fail a run before it starts, naming the config key to fix.

The config model (:mod:`pipelines.core.config`) checks values in isolation; these check them against the
machine, for the stages about to run: here ``run.root`` can be written, and each stage's ``preflight``
hook checks its own settings (:mod:`pipelines.core.hooks`: local input globs match files, models and
evaluation sets can be read, the tokenizer loads, ``shard.mix`` names sources the inputs can have).
Without them the first symptom is a Java stack trace from Delta half-way through the chain, or a
tokenizer error after ingest, dedup and filter have already run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from urllib.parse import urlparse

from pipelines.core.config import WinnowConfig
from udfs.errors import UserError


class PreflightError(UserError, ValueError):
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


def check_writable_root(root: str, key: str = "run.root") -> None:
    """Raise unless ``root`` (a local folder) exists and is writable, or can be created.

    Args:
        root: the folder or URI; non-local URIs are not checked.
        key: the config key that named it, for the message.

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
        raise PreflightError(f"{key}={root!r}: {probe!r} exists and is not a folder")
    try:
        # A real write, not os.access: root passes os.access on any folder, yet a read-only mount
        # (EROFS) or a full disk still refuses it.
        with tempfile.TemporaryFile(dir=probe, prefix=".winnow-preflight-"):
            pass
    except OSError as e:
        where = "" if probe == path else f" inside {probe!r}"
        raise PreflightError(
            f"{key}={root!r} cannot be written: creating a file{where} failed ({e.strerror}); "
            f"choose another folder (--set {key}=...)"
        ) from None


def when_running(stage: str, check: Callable[[WinnowConfig], None]) -> Callable[[WinnowConfig, Sequence[str]], None]:
    """A stage's ``preflight`` hook (:mod:`pipelines.core.hooks`) that runs ``check(cfg)`` when ``stage``
    is among the stages about to run."""

    def preflight(cfg: WinnowConfig, stages: Sequence[str]) -> None:
        if stage in stages:
            check(cfg)

    preflight.__doc__ = f"A run with {stage}: :func:`{check.__module__}.{check.__name__}`."
    return preflight


def check(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """Run every check that applies to a run of ``stages``: ``run.root`` can be written, then each
    stage's ``preflight`` hook (:mod:`pipelines.core.hooks`), in chain order.

    Raises:
        PreflightError: the first failed check.
    """
    from pipelines.core import hooks

    check_writable_root(cfg.run.root)
    check_tracking(cfg)
    for _, preflight in hooks.each("preflight"):
        preflight(cfg, stages)


def check_tracking(cfg: WinnowConfig) -> None:
    """``tracking.mlflow: true`` needs the mlflow package where the job runs.

    A tracking server that is down costs one warning line and the run goes on
    (:mod:`pipelines.core.tracking`): it may come back for the next run. A package that is not installed
    never comes back, and a long run without the tracking asked for is found out only at its end.

    Raises:
        PreflightError: tracking is on and mlflow cannot be imported.
    """
    import importlib.util

    if cfg.tracking.mlflow and importlib.util.find_spec("mlflow") is None:
        # "winnow" on PyPI is another project: the extra is installed from the checkout
        raise PreflightError("tracking.mlflow=true needs the mlflow package, which is not installed: "
                             ".venv/bin/pip install -e '.[mlflow]' in the Winnow checkout, or set tracking.mlflow: false")
