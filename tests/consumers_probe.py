"""Read Winnow shards with the loaders users train with; run by tests/test_consumers.py in the consumers venv.

``python tests/consumers_probe.py SPEC.json OUT.npz``: ``SPEC`` names what to read (``kind`` = ``indexed``,
``megatron``, ``blend``, ``streaming`` or ``resume``); the arrays the loaders returned go to ``OUT``, and the test compares them
with the manifest and the ``tokenized`` table. This file imports only numpy and the loaders (the
consumers venv has neither pyspark nor the dev extra), and asserts nothing: the test does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def gpt_config(spec: dict, prefixes: list[str], weights: list[float] | None, cache: str, dp: int = 1):
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
    from megatron.core.tokenizers.text.libraries.null_tokenizer import NullTokenizer

    # NullTokenizer(n): eod = n and vocab_size = n + 1 (GPT-2: eod 50256, 50257 ids).
    return GPTDatasetConfig(random_seed=spec["seed"], sequence_length=spec["seq_len"], blend=(prefixes, weights),
                            split="100,0,0", reset_position_ids=False, reset_attention_mask=False,
                            eod_mask_loss=False, tokenizer=NullTokenizer(spec["eos_id"]), path_to_cache=cache,
                            data_parallel_size=dp)


def build(config, num_samples: int | None):
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset

    # With a weighted blend Megatron wants a size for every split: 0 for the unused valid/test ones.
    sizes = [num_samples, None, None] if num_samples is None else [num_samples, 0, 0]
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
    return train


def indexed(spec: dict) -> dict[str, np.ndarray]:
    """Every ``.bin/.idx`` pair of ``prefixes`` opened with Megatron's ``IndexedDataset``."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    out: dict[str, np.ndarray] = {}
    for i, prefix in enumerate(spec["prefixes"]):
        ds = IndexedDataset(prefix)
        out[f"idx{i}_lengths"] = np.array(ds.sequence_lengths)
        out[f"idx{i}_doc_indices"] = np.array(ds.document_indices)
        # Copies: the loaders hand out views of memory maps that close with the dataset.
        docs = [np.array(ds[j]) for j in range(len(ds))]
        out[f"idx{i}_dtype"] = np.array(str(docs[0].dtype))
        out[f"idx{i}_tokens"] = np.concatenate(docs)
    return out


def megatron(spec: dict) -> dict[str, np.ndarray]:
    import os

    import torch.distributed as dist

    # BlendedDataset asks torch.distributed for its rank, as in training: a one-process gloo group
    # (rendezvous through a file, no port).
    os.makedirs(spec["cache"], exist_ok=True)
    dist.init_process_group("gloo", init_method=f"file://{spec['cache']}/rendezvous", rank=0, world_size=1)

    out = indexed(spec)
    for dp in (1, 4):
        ds = build(gpt_config(spec, spec["prefixes"][:1], None, f"{spec['cache']}/dp{dp}", dp), None)
        for name in ("document_index", "sample_index", "shuffle_index"):
            out[f"gpt_dp{dp}_{name}"] = np.array(getattr(ds, name))
        if dp == 1:
            out["gpt_len"] = np.array(len(ds))
            picked = sorted({0, 1, len(ds) // 2, len(ds) - 1})
            out["gpt_picked"] = np.array(picked)
            out["gpt_tokens"] = np.stack([ds[i]["tokens"].numpy() for i in picked])
            out["gpt_labels"] = np.stack([ds[i]["labels"].numpy() for i in picked])
    blended = build(gpt_config(spec, spec["prefixes"][:2], [0.5, 0.5], f"{spec['cache']}/blend"), spec["blend_samples"])
    out["blend_type"] = np.array(type(blended).__name__)
    out["blend_dataset_index"] = np.array(blended.dataset_index)
    out["blend_tokens"] = np.stack([blended[i]["tokens"].numpy() for i in range(len(blended))])
    return out


def blend(spec: dict) -> dict[str, np.ndarray]:
    """``blend/mix.json`` of a mixed run with per-source sets, as a user who blends at load time reads it:
    Megatron's ``BlendedDataset`` over ``megatron_data_path`` and a ``StreamingDataset`` over ``streams``."""
    import os

    import torch.distributed as dist
    from streaming import Stream, StreamingDataset

    os.makedirs(spec["cache"], exist_ok=True)
    dist.init_process_group("gloo", init_method=f"file://{spec['cache']}/rendezvous", rank=0, world_size=1)
    mix = json.loads(open(spec["mix_json"]).read())
    # Paths in the blend files are relative to the shard root, the folder above blend/: joined with
    # where the folder lies now, as a training job on another machine does.
    root = os.path.dirname(os.path.dirname(os.path.abspath(spec["mix_json"])))
    path = mix["megatron_data_path"]
    prefixes = [os.path.join(root, p) for p in path[1::2]]
    ds = build(gpt_config(spec, prefixes, [float(w) for w in path[0::2]], spec["cache"]), spec["blend_samples"])
    streams = [Stream(local=os.path.join(root, v["local"]), proportion=v["proportion"])
               for _, v in sorted(mix["streams"].items())]
    streamed = StreamingDataset(streams=streams, batch_size=1, shuffle=False, epoch_size=spec["blend_samples"])
    return {"blend_type": np.array(type(ds).__name__), "dataset_index": np.array(ds.dataset_index),
            "tokens": np.stack([ds[i]["tokens"].numpy() for i in range(len(ds))]),
            "streamed": np.stack([s["tokens"] for s in streamed])}


def streaming(spec: dict) -> dict[str, np.ndarray]:
    from streaming import LocalDataset, StreamingDataset

    local = LocalDataset(local=spec["mds"])
    streamed = StreamingDataset(local=spec["mds"], shuffle=False, batch_size=1)
    return {"local": np.stack([local[i]["tokens"] for i in range(len(local))]),
            "streamed": np.stack([s["tokens"] for s in streamed])}


def all_ranks_took_their_state(folder: Path, world: int, timeout_s: float = 300.0) -> None:
    """Wait until every rank of the job has marked ``folder`` (its state taken) before this one exits.

    Why: streaming keeps the loaded resume state in shared memory that the rank which created it frees
    when its process ends; a rank still reading then finds none and counts its samples from offset 0
    (seen under load: rank 0's ``sample_in_epoch`` 8 where it was 14). A trainer's ranks stay alive
    together; the probe's processes must too.
    """
    (folder / f"took-state-{os.environ.get('RANK', '0')}").touch()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all((folder / f"took-state-{r}").exists() for r in range(world)):
        time.sleep(0.05)


def resume(spec: dict) -> dict[str, np.ndarray]:
    """One rank (``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` set by the caller) reads
    ``batches`` batches (all when null) after loading ``state`` (when given); returns the first token of
    each sample it saw (a sample's identity: the test checks they are distinct) and the state after it."""
    from streaming import StreamingDataset

    ds = StreamingDataset(local=spec["mds"], **spec["reader"])
    if spec.get("state"):
        ds.load_state_dict(spec["state"])
    seen = []
    for s in ds:
        seen.append(s["tokens"])
        if spec["batches"] is not None and len(seen) == spec["batches"] * spec["reader"]["batch_size"]:
            break
    world = int(spec["world_size"])
    state = ds.state_dict(num_samples=len(seen) * world, from_beginning=False)
    if spec.get("sync"):
        all_ranks_took_their_state(Path(spec["sync"]), world)
    return {"seen": np.stack(seen) if seen else np.zeros((0, 0)), "state": np.array(json.dumps(state))}


if __name__ == "__main__":
    spec = json.loads(open(sys.argv[1]).read())
    np.savez(sys.argv[2], **{"indexed": indexed, "megatron": megatron, "blend": blend,
                                "streaming": streaming, "resume": resume}[spec["kind"]](spec))
