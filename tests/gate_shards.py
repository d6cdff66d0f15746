"""Test helper: write a variant's Megatron shards and manifest with the shard stage's own writer, no Spark.

:func:`pipelines.shard.writer.make_shard_writer` is the function the shard stage runs in its Python
workers over one shard's Arrow batches; here it is called directly on batches built in memory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipelines.shard.writer import make_shard_writer
from udfs.tokenize import pack_token_ids

EOS = 50256
VOCAB = 50257


def _key(i: int) -> str:
    return hashlib.sha256(f"doc-{i}".encode()).hexdigest()


def write_split(out: Path, docs: list[list[int]], sources: list[str], shard_docs: int) -> tuple[list, list]:
    """Write ``docs`` (each ending with EOS) as shards of ``shard_docs`` documents.

    Returns:
        (the file entries, the documents in the order the shards hold them).
    """
    files = []
    for k, lo in enumerate(range(0, len(docs), shard_docs)):
        part = list(range(lo, min(lo + shard_docs, len(docs))))
        keys = sorted(_key(i) for i in part)
        order = sorted(part, key=_key)  # the writer needs the rows in key order
        plan = {k: {"docs": len(part), "tokens": sum(len(docs[i]) for i in part), "first_doc": lo,
                    "mds_first_file": 0}}
        writer = make_shard_writer(str(out), plan, prefix="winnow", formats=["megatron"], dtype="uint16",
                                   vocab_size=VOCAB, seq_len=16, size_limit=1 << 20, window=4)
        batch = pa.RecordBatch.from_pydict({
            "shard_id": pa.array([k] * len(part), pa.int32()), "_key": pa.array(keys, pa.string()),
            "tokens": pa.array([pack_token_ids(docs[i]) for i in order], pa.binary()),
            "source": pa.array([sources[i] for i in order], pa.string())})
        (row,) = list(writer(iter([batch])))
        files += json.loads(row.column("files")[0].as_py())
    return files, [docs[i] for lo in range(0, len(docs), shard_docs)
                   for i in sorted(range(lo, min(lo + shard_docs, len(docs))), key=_key)]


def make_variant(root: Path, docs: list[list[int]], sources: list[str] | None = None, validation: int = 0,
                 shard_docs: int = 50, fingerprint: str = "fp-gpt2") -> list[list[int]]:
    """A run root ``root`` with ``shards/train`` (and ``shards/validation`` from the last ``validation``
    documents) and ``shards/manifest.json``; returns the train documents in the order the shards hold them."""
    sources = sources or ["web"] * len(docs)
    shards = root / "shards"
    cut = len(docs) - validation
    train_files, train_order = write_split(shards / "train", docs[:cut], sources[:cut], shard_docs)
    files = [dict(f, path=f"train/{f['path']}") for f in train_files]
    if validation:
        val_files, _ = write_split(shards / "validation", docs[cut:], sources[cut:], shard_docs)
        files += [dict(f, path=f"validation/{f['path']}") for f in val_files]
    manifest = {"manifest_version": 2, "dtype": "uint16", "seq_len": 16, "formats": ["megatron"],
                "tokenizer": {"spec": "builtin:gpt2", "fingerprint": fingerprint, "vocab_size": VOCAB,
                              "eos_id": EOS, "bos_id": None},
                "files": files, "config_fingerprint": "test"}
    (shards / "manifest.json").write_text(json.dumps(manifest))
    return train_order


def random_docs(n: int, seed: int, low: int = 200, high: int = 460, length: tuple[int, int] = (20, 80)) -> list[list[int]]:
    """``n`` documents of random ids in ``[low, high)`` (GPT-2 ids of common words), each ending with EOS."""
    rng = np.random.default_rng(seed)
    return [[*rng.integers(low, high, rng.integers(*length)).tolist(), EOS] for _ in range(n)]
