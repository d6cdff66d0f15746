"""Shard stage: the blend files that point the trainers' loaders at a run's shard sets.

* ``blend/megatron.json``: Megatron-LM's ``--per-split-data-args-path`` file, ``{"train": [weight, prefix,
  ...], "valid": [...], "test": []}``, one ``weight prefix`` pair per shard, weights = the shard's tokens
  (so the blend draws every shard in proportion to its size, as one concatenated data set would).
* ``blend/streams.json``: llm-foundry's ``train_loader.dataset.streams`` / ``eval_loader.dataset.streams``
  mapping per split, ``{"train": {"<name>": {"local"|"remote": <mds folder>, "proportion": 1.0}}, ...}``.

* ``blend/mix.json`` (only with ``shard.mix``): the train shards already hold the mix (copies written, order
  spread), so the two files above reproduce it as they stand. This file gives the mix per source for a
  user who blends at load time instead, beside the realised figures. With ``shard.per_source_sets`` it
  points at the run's ``sources/<folder>/`` sets (:mod:`pipelines.shard.sources`, every train document of
  a source once): ``megatron_data_path`` is Megatron-LM's ``--data-path`` list, ``weight prefix`` per
  shard, a source's asked token share split over its shards by their tokens (so the weights of a source
  sum to its share and Megatron's ``BlendedDataset`` draws the source's shards in proportion to their
  size); ``streams`` is llm-foundry's ``streams`` mapping with ``proportion`` = the asked share and
  ``streams_repeat`` the same with ``repeat`` = the asked epochs (streaming takes one of the two per
  stream and the same kind for all streams); a source whose set holds no MDS sample cannot be a stream
  and is named in ``streams_missing`` with the share the streams lack. Without the sets,
  ``megatron_data_path`` holds a ``<source>`` placeholder for the prefix of a set the user writes (a run
  per source) and ``streams`` holds ``proportion`` and ``repeat`` without a folder.

Source: Megatron-LM ``megatron/training/arguments.py`` (``--per-split-data-args-path``) and
``megatron/training/utils.py`` (``get_blend_and_blend_per_split``); streaming ``Stream`` arguments.
"""

from __future__ import annotations

import json
from typing import Any

MIX = "blend/mix.json"
MEGATRON = "blend/megatron.json"
STREAMS = "blend/streams.json"
_MEGATRON_SPLIT = {"train": "train", "validation": "valid"}


def under(root: str, rel: str) -> str:
    """``rel`` under ``root``: ``root/rel``, or ``rel`` itself when ``root`` is empty (a local shard root:
    paths relative to the shard root, the manifest's folder, so the folder can be moved or copied).

    >>> under("", "train/mds"), under("s3://b/run/", "train/mds")
    ('train/mds', 's3://b/run/train/mds')
    """
    return f"{root.rstrip('/')}/{rel}" if root else rel


def blend_files(root: str, files: list[dict[str, Any]], remote: bool) -> dict[str, str]:
    """The blend files' text for the data files of one run.

    Args:
        root: the shard root the prefixes and folders are under: an ``s3://`` URI, or ``""`` for a local
            root (paths relative to the shard root, which holds ``manifest.json``: a loader joins them
            with where the folder lies, or runs from there).
        files: the manifest's data file records (``path`` relative to ``root``, ``kind``, ``tokens``).
        remote: ``root`` is an object store (streams get ``remote`` instead of ``local``).

    Returns:
        ``{relative path: text}`` for :data:`MEGATRON` and :data:`STREAMS` (the one of a missing format
        is left out).
    """
    out: dict[str, str] = {}
    meg: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for f in sorted((f for f in files if f["kind"] == "bin"), key=lambda f: f["path"]):
        split = f["path"].split("/", 1)[0]
        meg[_MEGATRON_SPLIT[split]] += [str(f["tokens"]), under(root, f["path"][: -len(".bin")])]
    if meg["train"]:
        out[MEGATRON] = json.dumps(meg, indent=1) + "\n"
    splits = sorted({f["path"].split("/", 1)[0] for f in files if f["kind"] == "mds"})
    if splits:
        where = "remote" if remote else "local"
        streams = {s: {s: {where: under(root, f"{s}/mds"), "proportion": 1.0}} for s in splits}
        out[STREAMS] = json.dumps(streams, indent=1, sort_keys=True) + "\n"
    return out


def mix_file(mix: dict[str, dict[str, Any]], sources: dict[str, dict[str, Any]] | None = None,
             files: list[dict[str, Any]] | None = None, root: str = "", remote: bool = False) -> str:
    """The text of :data:`MIX`.

    Args:
        mix: the manifest's ``mix`` block (:func:`pipelines.shard.mix.mix_section`).
        sources: the manifest's ``sources`` block (``{source: {"path": "sources/<folder>", ...}}``), or
            None when no per-source set was written (placeholders instead of prefixes).
        files: the manifest's data file records (``path`` relative to ``root``, ``kind``, ``tokens``).
        root: the shard root the prefixes and folders are under (``""``: relative, see :func:`blend_files`).
        remote: ``root`` is an object store (streams get ``remote`` instead of ``local``).
    """
    items = sorted(mix.items())
    data: dict[str, Any] = {
        "applied_in": "train/ (the shards hold the mix: megatron.json and streams.json reproduce it)",
        "realised": {s: {"share": m["share_realised"], "epochs": m["epochs_realised"]} for s, m in items},
    }
    if sources is None:
        data["megatron_data_path"] = [x for s, m in items for x in (f"{m['share_asked']:.12g}", f"<{s}>")]
        data["streams"] = {s: {"proportion": m["share_asked"], "repeat": m["epochs_asked"]} for s, m in items}
        return json.dumps(data, indent=1, sort_keys=True) + "\n"
    where = "remote" if remote else "local"
    data["megatron_data_path"], data["streams"], data["streams_repeat"] = [], {}, {}
    for s, m in items:
        folder = sources[s]["path"]
        bins = sorted((f for f in files or [] if f["kind"] == "bin" and f["path"].startswith(f"{folder}/")),
                      key=lambda f: f["path"])
        tokens = sum(f["tokens"] for f in bins)
        for f in bins:
            data["megatron_data_path"] += [f"{m['share_asked'] * f['tokens'] / tokens:.12g}",
                                           under(root, f["path"][: -len(".bin")])]
        if any(f["kind"] == "mds" and f["path"].startswith(f"{folder}/") for f in files or []):
            data["streams"][s] = {where: under(root, f"{folder}/mds"), "proportion": m["share_asked"]}
            data["streams_repeat"][s] = {where: under(root, f"{folder}/mds"), "repeat": m["epochs_asked"]}
        else:
            # No MDS sample (every shard of the source under seq_len tokens): leaving it out of the
            # streams without a word gave streaming users another mix than the one asked.
            data.setdefault("streams_missing", {})[s] = (
                f"no MDS sample in {folder}/mds (its train tokens per shard are under shard.seq_len): the "
                f"streams leave out its share {m['share_asked']:.6g}; lower shard.num_shards or use "
                "megatron_data_path")
    data["sources"] = {s: sources[s]["path"] for s, _ in items}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
