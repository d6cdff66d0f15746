"""Shard stage: one unmixed shard set per source (``shard.per_source_sets``), for blending at load time.

The train shards hold the mix already (:mod:`pipelines.shard.mix`). A user who prefers to blend in the
loader (Megatron-LM ``--data-path w1 p1 w2 p2 ...``, llm-foundry ``streams``) needs each source on its own:
``sources/<folder>/megatron/`` and ``sources/<folder>/mds/`` hold every train document of that source
once (after the validation split, before the mix), ordered by the same seeded key as ``train/``
(``sha256("<seed>:<doc_id>")``) and cut into token-balanced shards as ``train/`` is
(``shard.num_shards`` / ``shard.tokens_per_shard`` per source). ``blend/mix.json`` then names their
prefixes and folders (:func:`pipelines.shard.blend.mix_file`).

Source names come from the data (the ingest ``source`` column), so they are mapped to safe folder names
(:func:`source_folders`), and the manifest's ``sources`` block records the folder of each source.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.core import storage
from pipelines.core.config import StorageConfig

SOURCES = "sources"
"""Folder under the shard root holding one shard set per source."""
_SAFE = re.compile(r"[A-Za-z0-9_.-]+")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_.-]")


def source_folder(source: str) -> str:
    """A folder name for ``source`` that is safe as one part of a path on any file system or object store.

    A name of ``[A-Za-z0-9_.-]`` characters not starting with a dot is kept as it is. Any other name
    (empty, ``.``/``..``, a slash, spaces, non-ASCII, ...) has each unsafe character replaced by ``_``
    and gets ``-`` plus the first 8 hex digits of ``sha256(name)`` appended, so two names that differ
    only in unsafe characters get two folders.

    >>> source_folder("web-2024.v1"), source_folder("a/b"), source_folder("")
    ('web-2024.v1', 'a_b-c14cddc0', '_-e3b0c442')
    """
    if _SAFE.fullmatch(source) and not source.startswith("."):
        return source
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:8]
    return f"{_UNSAFE_CHAR.sub('_', source).lstrip('.') or '_'}-{digest}"


def source_folders(sources: Iterable[str]) -> dict[str, str]:
    """``{source: folder}`` (:func:`source_folder`), sorted by source.

    Raises:
        ValueError: two sources map to one folder (a safe name equal to another's mapped name).
    """
    out = {s: source_folder(s) for s in sorted(sources)}
    seen: dict[str, str] = {}
    for s, d in out.items():
        if d in seen:
            raise ValueError(f"shard.per_source_sets: sources {seen[d]!r} and {s!r} both map to folder "
                             f"{d!r}; rename one of them at ingest")
        seen[d] = s
    return out


SetWriter = Callable[[DataFrame, str], tuple[dict[str, Any], list[dict[str, Any]], bytes | None]]
"""``(documents, set name) -> (manifest section, data files, mds/index.json bytes or None)``."""


def write_source_sets(train: DataFrame, sources: Iterable[str], write: SetWriter
                      ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, bytes]]:
    """Write one shard set per source of ``train`` (the train documents, each once) with ``write``.

    Args:
        train: the train documents before the mix (``source`` null counts as ``""``, as in the mix).
        sources: the sources of ``train``.
        write: ``(documents, set name) -> (manifest section, data files, mds/index.json bytes or None)``,
            the stage's own split writer bound to the run (same shuffle key, balance and formats).

    Returns:
        (the manifest's ``sources`` block ``{source: {"path": "sources/<folder>", **section}}``, the data
        files, ``{relative path of each mds/index.json: bytes}``).
    """
    block: dict[str, dict[str, Any]] = {}
    files: list[dict[str, Any]] = []
    indexes: dict[str, bytes] = {}
    for source, folder in source_folders(sources).items():
        name = f"{SOURCES}/{folder}"
        section, written, blob = write(train.filter(F.coalesce(F.col("source"), F.lit("")) == source), name)
        block[source] = {"path": name, **section}
        files += written
        if blob is not None:
            indexes[f"{name}/mds/index.json"] = blob
    return block, files, indexes


def retract_remote_indexes(root: str, scfg: StorageConfig) -> None:
    """Delete every ``sources/*/mds/index.json`` under an ``s3://`` root (the sources of a previous run
    may differ from this run's, so they are listed, not named).

    Raises:
        StorageError: listing or deleting failed.
    """
    bucket, prefix = storage.split_s3(root)
    base = f"{prefix}/{SOURCES}/" if prefix else f"{SOURCES}/"
    try:
        pages = storage.client(scfg).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base)
        keys = [o["Key"] for page in pages for o in page.get("Contents", [])
                if o["Key"].endswith("/mds/index.json")]
    except Exception as e:
        raise storage.StorageError(f"cannot list {SOURCES}/ under {root!r}: {e}") from e
    for key in keys:
        storage.delete(root, key[len(prefix) + 1:] if prefix else key, scfg)
