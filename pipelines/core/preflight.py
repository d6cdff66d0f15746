"""Checks that need no Spark and fail a run before it starts, naming the config key to fix.

The config model (:mod:`pipelines.core.config`) checks values in isolation; these check them against the
machine, for the stages about to run: ``run.root`` / ``shard.output`` can be written, local input
globs match files, the LID and quality models exist and know the configured labels, local evaluation
sets of the decontam stage can be read and hold items, the tokenizer loads, and ``shard.mix`` names
sources the input files can have (when their names decide, :mod:`pipelines.shard.mix_check`). Without them the first symptom is a Java stack trace from Delta half-way through the chain, or
a tokenizer error after ingest, dedup and filter have already run.
"""

from __future__ import annotations

import glob as globlib
import os
import tempfile
from collections.abc import Sequence
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


def check_tokenizer(cfg: WinnowConfig) -> None:
    """Load the tokenizer, resolve EOS/BOS and ``tokenize.engine`` as the tokenize stage will (cached per process).

    Raises:
        PreflightError: the message of :class:`udfs.tokenize.TokenizerError`, which names the key.
    """
    from pipelines.tokenize.stage import resolve_engine, special_ids
    from udfs.tokenize import TokenizerError

    try:
        special_ids(cfg.tokenize)
        resolve_engine(cfg.tokenize)
    except TokenizerError as e:
        raise PreflightError(str(e)) from None


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
            what = "no file that ingest reads (names starting with '_' or '.' are skipped, as Spark does)" \
                if matches else "no file"
            raise PreflightError(
                f"ingest.inputs: {pattern!r} matches {what}; fix the glob or the path (--set 'ingest.inputs=[...]')"
            )


def _holds_files(path: str) -> bool:
    """A file ingest reads (its name not ``_*`` / ``.*``), or a folder with one directly in it."""
    if not os.path.isdir(path):
        return os.path.isfile(path) and not os.path.basename(path).startswith(("_", "."))
    with os.scandir(path) as entries:
        return any(e.is_file() and not e.name.startswith(("_", ".")) for e in entries)


def check_filter_models(cfg: WinnowConfig) -> None:
    """The LID and quality models exist, ``filter.langid.allowed`` names languages the LID model knows
    and ``filter.quality_model.positive_label`` is one of the classifier's labels.

    An unknown code in ``allowed`` (``xx``, ``eng``, ``english``) would silently drop every document.

    Raises:
        PreflightError: names the key and shows what the model knows.
    """
    from udfs import langid

    f = cfg.filter
    if not f.enabled:
        return
    lid = f.langid
    if lid.enabled:
        path = lid.model or langid.default_model_path()
        if not os.path.isfile(path):
            raise PreflightError(f"filter.langid.model={path!r}: no such file")
        if lid.allowed:
            labels = langid.load_model(path).get_labels()
            known = {langid.canonical_code(lab, lid.label_prefix, lid.aliases) for lab in labels}
            unknown = sorted(set(lid.allowed) - known)
            if unknown:
                raise PreflightError(
                    f"filter.langid.allowed: {unknown} not among the {len(known)} languages of the LID model "
                    f"{os.path.basename(path)!r} (codes as the filter writes them, e.g. {sorted(known)[:12]}...)"
                )
    qm = f.quality_model
    if qm.model:
        if not os.path.isfile(qm.model):
            raise PreflightError(f"filter.quality_model.model={qm.model!r}: no such file")
        labels = langid.load_model(qm.model).get_labels()
        if qm.positive_label not in labels:
            raise PreflightError(
                f"filter.quality_model.positive_label={qm.positive_label!r} is not a label of {qm.model!r}; its labels: {labels}"
            )


def check_eval_sets(cfg: WinnowConfig) -> None:
    """Every local evaluation set of ``decontam.eval_sets`` exists, is UTF-8 (JSONL) or Parquet, has
    each field in some row and at least one item with text (:func:`pipelines.core.eval_sets.check_local`).

    Raises:
        PreflightError: names the key (``decontam.eval_sets[i].paths`` / ``.fields``).
    """
    from pipelines.core.eval_sets import check_local

    check_local(cfg.decontam)


def check(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """Run every check that applies to a run of ``stages``.

    Raises:
        PreflightError: the first failed check.
    """
    check_writable_root(cfg.run.root)
    if "ingest" in stages:
        check_local_inputs(cfg.ingest.inputs)
        if "shard" in cfg.pipeline.stages:
            from pipelines.shard.mix_check import MixSourceError, check_file_sources

            try:
                check_file_sources(cfg)
            except MixSourceError as e:
                raise PreflightError(str(e)) from None
    if "filter" in stages:
        check_filter_models(cfg)
    if "shard" in stages and cfg.shard.output:
        check_writable_root(cfg.shard.output, "shard.output")
    if "decontam" in stages:
        check_eval_sets(cfg)
    if "tokenize" in stages:
        # With tokenize.allow_download the driver downloads the tokenizer here, once, as the stage
        # would; better now than after ingest, dedup and filter have run.
        check_tokenizer(cfg)
