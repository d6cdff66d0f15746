"""One document's path through the chain (``jobs/inspect.py --doc-id``), with every stage's annotations.

For each stage of the chain: was the document kept (in the stage's output table), removed (in ``removed``
with the stage's name, its reasons) or absent; and what the stage noted about it, kept or removed: the
``inspect_annotations`` hook of the stage's ``hooks.py`` (:mod:`pipelines.core.hooks`) turns the row the
stage wrote (its output row, or its ``removed`` row) into lines, e.g. refs' mentions, decontam's cuts,
pii's findings (kind and value hash, never the value), passages' removed spans.

A local run root is read without Spark: delta-rs reads each table into Arrow, filtered by ``doc_id``
(:func:`pipelines.core.local_state.rows_where`), in milliseconds where starting a JVM takes tens of
seconds. A run root on an object store, a Hadoop filesystem or in a catalog is read with Spark (its
credentials, filesystems and catalog are configured there, not in delta-rs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pipelines.core import chain, hooks
from pipelines.core.config import WinnowConfig

Rows = Callable[[str], "list[dict[str, Any]] | None"]
"""``table name -> rows of that table holding the document`` (None: no such table in this run)."""


def arrow_rows(cfg: WinnowConfig, doc_id: str) -> Rows:
    """A :data:`Rows` reader of a local run root with delta-rs (no Spark).

    Raises (when called):
        pipelines.core.local_state.NeedsSpark: a table delta-rs cannot read.
    """
    from pipelines.core import local_state

    return lambda name: local_state.rows_where(cfg.table_path(name), "doc_id", doc_id)


def spark_rows(spark: Any, cfg: WinnowConfig, doc_id: str) -> Rows:
    """A :data:`Rows` reader through Spark (any run root Spark can read)."""
    from pyspark.sql import functions as F

    from pipelines.core.tables import read_if_exists

    def rows(name: str) -> list[dict[str, Any]] | None:
        df = read_if_exists(spark, cfg, name)
        if df is None:
            return None
        return [r.asDict(recursive=True) for r in df.where(F.col("doc_id") == doc_id).collect()]

    return rows


def doc_path(spark: Any, cfg: WinnowConfig, doc_id: str) -> list[dict[str, Any]]:
    """Where document ``doc_id`` went at each stage whose table exists, and what each stage noted.

    Args:
        spark: a session to read the tables with, or None to read a local run root with delta-rs
            (:func:`arrow_rows`).
        cfg: the run's config (``run.root``, ``shard.output``).
        doc_id: the document's id.

    Returns:
        One row per stage in chain order: ``{stage, status, detail, notes}`` with status ``kept`` (in the
        stage's output table), ``removed`` (reasons and ``duplicate_of`` in detail), ``absent`` (in
        neither: removed earlier, or not in this run) or ``not run`` (no table); ``notes`` are the
        stage's ``inspect_annotations`` lines of the row it wrote (``[]`` when it noted nothing). A
        document kept to the end gets a last row for its shard set (:func:`shard_place`).

    Raises:
        pipelines.core.local_state.NeedsSpark: ``spark`` is None and a table cannot be read without it.
    """
    rows = arrow_rows(cfg, doc_id) if spark is None else spark_rows(spark, cfg, doc_id)
    removals = {r["stage"]: r for r in rows("removed") or []}
    out: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    for stage, table in chain.main_tables():
        found = rows(table)
        if stage in removals:
            r = removals[stage]
            detail = ", ".join(r["reason"] or [])
            if r.get("duplicate_of"):
                detail += f"; duplicate of {r['duplicate_of']}"
            out.append({"stage": stage, "status": "removed", "detail": detail,
                        "notes": annotations(stage, r)})
        elif found is None:
            out.append({"stage": stage, "status": "not run", "detail": f"no {table} table", "notes": []})
        elif found:
            last = found[0]
            out.append({"stage": stage, "status": "kept", "detail": table, "notes": annotations(stage, last)})
        else:
            out.append({"stage": stage, "status": "absent", "detail": f"not in {table}", "notes": []})
    if out and out[-1]["status"] == "kept":
        out.append({**shard_place(cfg, doc_id, (last or {}).get("source")), "notes": []})
    return out


def annotations(stage: str, row: dict[str, Any]) -> list[str]:
    """The ``inspect_annotations`` lines of ``stage`` for the row it wrote, or ``[]`` without the hook."""
    hook = hooks.hook(stage, "inspect_annotations")
    return list(hook(row)) if hook is not None else []


def shard_place(cfg: WinnowConfig, doc_id: str, source: str | None = None) -> dict[str, Any]:
    """The shard set a tokenized document went to, from the manifest's split cut and its ``mix`` block.

    Returns:
        ``{stage: "shard", status, detail}``; status ``validation``; ``train`` (one copy); ``repeated``
        (n copies in train, n in detail); ``not selected`` (downsampled away by ``shard.mix``); ``not
        run`` (no manifest).
    """
    from pipelines.core import storage

    try:
        manifest = json.loads(storage.get_bytes(cfg.shard_root, chain.MANIFEST, cfg.shard.storage))
    except Exception as e:
        if storage.is_not_found(e):
            return {"stage": "shard", "status": "not run",
                    "detail": f"no {chain.MANIFEST} under {cfg.shard_root}"}
        raise
    cut = (manifest.get("split") or {}).get("cut")
    key = hashlib.sha256(f"{manifest['seed']}:validation:{doc_id}".encode()).hexdigest()
    held = cut is not None and key < cut
    mix = (manifest.get("mix") or {}).get(source or "")
    if mix is not None and not held:
        from pipelines.shard.mix import copies

        n = copies(int(manifest["seed"]), doc_id, int(mix["full_passes"]), int(mix["pick_cut"]))
        status = "not selected" if n == 0 else "repeated" if n > 1 else "train"
        return {"stage": "shard", "status": status, "detail": f"train/ shard set: {n} copies"
                f" (source {source!r}, epochs {mix['epochs_asked']:.6g})"}
    name = "validation" if held else "train"
    return {"stage": "shard", "status": name,
            "detail": f"{name}/ shard set (split key {key[:12]}..., cut {str(cut)[:12]}...)"}
