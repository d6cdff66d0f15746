"""Shard stage: the blend files that point the trainers' loaders at a run's shard sets.

* ``blend/megatron.json``: Megatron-LM's ``--per-split-data-args-path`` file, ``{"train": [weight, prefix,
  ...], "valid": [...], "test": []}``, one ``weight prefix`` pair per shard, weights = the shard's tokens
  (so the blend draws every shard in proportion to its size, as one concatenated data set would).
* ``blend/streams.json``: llm-foundry's ``train_loader.dataset.streams`` / ``eval_loader.dataset.streams``
  mapping per split, ``{"train": {"<name>": {"local"|"remote": <mds folder>, "proportion": 1.0}}, ...}``.

* ``blend/mix.json`` (only with ``shard.mix``): the train shards already hold the mix (copies written, order
  spread), so the two files above reproduce it as they stand. This file gives the mix per source for a
  user who keeps one shard set per source (a run per source) and blends at load time instead:
  ``megatron_data_path`` (Megatron-LM ``--data-path`` weights: the asked token share, a ``<source>``
  placeholder for that source's prefix) and ``streams`` (``proportion`` = the asked share, ``repeat`` =
  the epoch count; streaming takes one of the two per stream), beside the realised figures.

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


def blend_files(root: str, files: list[dict[str, Any]], remote: bool) -> dict[str, str]:
    """The blend files' text for the data files of one run.

    Args:
        root: the shard root (local path or ``s3://`` URI) the prefixes and folders are under.
        files: the manifest's data file records (``path`` relative to ``root``, ``kind``, ``tokens``).
        remote: ``root`` is an object store (streams get ``remote`` instead of ``local``).

    Returns:
        ``{relative path: text}`` for :data:`MEGATRON` and :data:`STREAMS` (the one of a missing format
        is left out).
    """
    out: dict[str, str] = {}
    base = root.rstrip("/")
    meg: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for f in sorted((f for f in files if f["kind"] == "bin"), key=lambda f: f["path"]):
        split = f["path"].split("/", 1)[0]
        meg[_MEGATRON_SPLIT[split]] += [str(f["tokens"]), f"{base}/{f['path'][: -len('.bin')]}"]
    if meg["train"]:
        out[MEGATRON] = json.dumps(meg, indent=1) + "\n"
    splits = sorted({f["path"].split("/", 1)[0] for f in files if f["kind"] == "mds"})
    if splits:
        where = "remote" if remote else "local"
        streams = {s: {s: {where: f"{base}/{s}/mds", "proportion": 1.0}} for s in splits}
        out[STREAMS] = json.dumps(streams, indent=1, sort_keys=True) + "\n"
    return out


def mix_file(mix: dict[str, dict[str, Any]]) -> str:
    """The text of :data:`MIX` from the manifest's ``mix`` block (:func:`pipelines.shard_mix.mix_section`)."""
    items = sorted(mix.items())
    data = {
        "applied_in": "train/ (the shards hold the mix: megatron.json and streams.json reproduce it)",
        "megatron_data_path": [x for s, m in items for x in (f"{m['share_asked']:.12g}", f"<{s}>")],
        "streams": {s: {"proportion": m["share_asked"], "repeat": m["epochs_asked"]} for s, m in items},
        "realised": {s: {"share": m["share_realised"], "epochs": m["epochs_realised"]} for s, m in items},
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
