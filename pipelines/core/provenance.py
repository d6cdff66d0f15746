"""What a run root was made from: its recorded config, the keys a new command changes, and the versions.

Each stage writes its effective config to ``<run.root>/config/<stage>.json`` when it publishes
(:func:`pipelines.core.tables.write_effective_config`) and then its completion record (``_runs``,
:mod:`pipelines.core.runs`), which holds the stage fingerprint. The file whose ``stage_fingerprint``
equals the record's is the config the stage's tables were made with: :func:`recorded_config` reads it,
:func:`config_changes` compares it key by key with a new command's config, and :func:`run_config`
assembles what every artefact describing the run (dataset card, manifest) reports: each stage's section
as that stage recorded it, never the command's.

:func:`recorded_versions` reads the versions each stage wrote beside its config
(:mod:`pipelines.core.versions`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig
from pipelines.core.tables import read_bytes
from pipelines.core.versions import flatten

MAX_SHOWN = 6
"""Changed keys listed in one message; the rest are counted."""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _read_json(spark: Any, cfg: WinnowConfig, path: str) -> dict[str, Any] | None:
    try:
        data = read_bytes(spark, path, cfg)
    except Exception:  # a Hadoop URI without a session: treated as unknown, never as a change
        return None
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


Records = dict[str, dict[str, Any]]
"""Stage -> its latest completion record (:func:`pipelines.core.runs.latest_records`)."""


def recorded_config(spark: Any, cfg: WinnowConfig, stage: str,
                    record: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The effective-config document ``stage`` recorded in this run root (``config/<stage>.json``).

    Args:
        record: the stage's completion record; when given, the document counts only if its
            ``stage_fingerprint`` is the record's (a run that wrote the file and failed before its
            record leaves a file that is not the tables' config).

    Returns:
        ``{"stage", "fingerprint", "stage_fingerprint", "config", "versions"?}`` or None.
    """
    doc = _read_json(spark, cfg, f"{cfg.config_path}/{stage}.json")
    if doc is None:
        return None
    if record is not None and doc.get("stage_fingerprint") != record.get("stage_fingerprint"):
        return None
    return doc


def _stage_view(config: dict[str, Any], stage: str) -> dict[str, Any]:
    # What the stage fingerprint covers (WinnowConfig.stage_fingerprint): its section, run.seed and the
    # settings of other sections its fingerprint_keys hook names.
    from pipelines.core.hooks import fingerprint_keys

    return {"run.seed": config.get("run", {}).get("seed"), **flatten(config.get(stage, {}), f"{stage}."),
            **flatten(fingerprint_keys(stage, config))}


def config_changes(cfg: WinnowConfig, stage: str, recorded: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The keys of ``stage``'s section (and ``run.seed``) whose value in ``cfg`` differs from ``recorded``.

    Args:
        recorded: the stage's :func:`recorded_config` document.

    Returns:
        ``(key, recorded value, new value)`` sorted by key; a key that one side lacks has None there.
    """
    old = _stage_view(recorded.get("config", {}), stage)
    new = _stage_view(cfg.model_dump(mode="json"), stage)
    keys = sorted(set(old) | set(new))
    return [(k, old.get(k), new.get(k)) for k in keys if _json(old.get(k)) != _json(new.get(k))]


def describe_changes(changes: list[tuple[str, Any, Any]], limit: int = MAX_SHOWN) -> str:
    """``ingest.inputs: ["a/*.jsonl"] -> ["b/*.jsonl"]; ...`` (at most ``limit``, then ``+N more``)."""
    parts = [f"{k}: {_json(a)} -> {_json(b)}" for k, a, b in changes[:limit]]
    if len(changes) > limit:
        parts.append(f"+{len(changes) - limit} more")
    return "; ".join(parts)


def replaced_stages(spark: Any, cfg: WinnowConfig, stages: Iterable[str],
                    records: Records) -> dict[str, list[tuple[str, Any, Any]]]:
    """Of ``stages`` (those about to run), the ones whose recorded config differs from ``cfg``'s: running
    them would replace tables made with another config.

    Args:
        records: the latest completion record of every stage (:func:`pipelines.core.runs.latest_records`).

    Returns:
        ``stage -> config_changes`` for each such stage, in chain order; a stage with a record whose
        config file is gone or unreadable maps to ``[]`` (its fingerprint still differs).
    """
    out: dict[str, list[tuple[str, Any, Any]]] = {}
    for stage in stages:
        rec = records.get(stage)
        if rec is None or rec["stage_fingerprint"] == cfg.stage_fingerprint(stage):
            continue
        doc = recorded_config(spark, cfg, stage, rec)
        out[stage] = config_changes(cfg, stage, doc) if doc is not None else []
    return out


def replace_refusal(cfg: WinnowConfig, changed: dict[str, list[tuple[str, Any, Any]]]) -> str:
    """The message that refuses a run which would replace tables made with another config."""
    lines = [f"run.root {cfg.run.root} was made with another config; rerunning would replace the tables of "
             f"{', '.join(changed)} (and what follows them). Changed keys:"]
    for stage, changes in changed.items():
        what = describe_changes(changes) if changes else "(its recorded config file is gone)"
        lines.append(f"  {stage}: {what}")
    lines.append("  Keep that run and give the new config a new run.root (--set run.root=...), or rerun with "
                 "--replace to replace its tables.")
    return "\n".join(lines)


def run_config(spark: Any, cfg: WinnowConfig, records: Records) -> dict[str, Any]:
    """The config the run root's tables were made with: ``cfg``'s dump with each completed stage's section
    (and ``run.seed``) replaced by the one that stage recorded.

    Args:
        records: the latest completion record of every stage (:func:`pipelines.core.runs.latest_records`).

    Returns:
        The config as plain JSON data (the shape of ``WinnowConfig.model_dump(mode="json")``).
    """
    data = cfg.model_dump(mode="json")
    for stage in STAGES:
        doc = recorded_config(spark, cfg, stage, records.get(stage)) if stage in records else None
        if doc is not None:
            data[stage] = doc["config"].get(stage, data[stage])
            seed = doc["config"].get("run", {}).get("seed", data["run"]["seed"])
            data["run"] = {**data["run"], "seed": seed}
    return data


def fingerprint(config: dict[str, Any]) -> str:
    """sha256 hex of a config's plain data as :meth:`WinnowConfig.fingerprint` computes it (canonical JSON,
    less ``tracking.parent_key``): the fingerprint of :func:`run_config`'s result."""
    from pipelines.core.section import canonical_json

    data = {**config, "tracking": {k: v for k, v in config.get("tracking", {}).items() if k != "parent_key"}}
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def manifest_fields(spark: Any, cfg: WinnowConfig, stage: str, records: Records) -> dict[str, Any]:
    """What a manifest written by ``stage`` says about what the run was made from, read from the run
    root's records, not from this command's config: ``config_fingerprint`` of :func:`run_config` and
    ``versions`` per stage (the recorded ones; ``stage``'s own: this process's).

    Args:
        records: the latest completion record of every stage (:func:`pipelines.core.runs.latest_records`).
    """
    from pipelines.core.versions import versions

    return {"config_fingerprint": fingerprint(run_config(spark, cfg, records)),
            "versions": {**recorded_versions(spark, cfg, records), stage: versions(cfg)}}


def recorded_versions(spark: Any, cfg: WinnowConfig, records: Records) -> dict[str, Any]:
    """The versions each completed stage ran with, ``{stage: versions}`` (stages without a record left
    out)."""
    out = {}
    for stage in STAGES:
        doc = recorded_config(spark, cfg, stage, records.get(stage)) if stage in records else None
        if doc is not None and doc.get("versions"):
            out[stage] = doc["versions"]
    return out
