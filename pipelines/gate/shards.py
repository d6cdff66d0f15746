"""Read a variant's shards as the trainer reads them: ``manifest.json`` and memory-mapped Megatron files.

A variant is a run root (``<root>/shards/manifest.json``) or a shard root (``<root>/manifest.json``)
that the shard stage wrote. Its ``train/`` (and ``validation/``) Megatron ``.bin`` files are
memory-mapped, never re-tokenized; documents are read in manifest order (shard 0 first, documents in
file order), which is the order a Megatron ``GPTDataset`` without its own shuffle sees them in.

Packing follows Megatron's ``GPTDataset``: documents are concatenated (each ends with its EOS) and cut
into samples of ``seq_len + 1`` tokens, consecutive samples sharing one token (inputs ``s[:-1]``,
targets ``s[1:]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from udfs import megatron
from udfs.errors import UserError


class GateInputError(UserError, ValueError):
    """A variant or an evaluation input cannot be used; the message names the path or key."""


class GateUsageError(GateInputError):
    """The variants given do not make a gate (fewer than two, or one shard set given twice): a usage
    error, exit status 2 like a bad config."""


@dataclass
class Variant:
    """One variant of a gate: a shard set and what its manifest says.

    Attributes:
        name: the label shown in outputs (the folder name, made unique).
        path: the path given (run root or shard root).
        root: the shard root (the folder holding ``manifest.json``).
        manifest: the parsed manifest.
        files: split name -> list of ``(bin path, idx path, documents, tokens)`` in manifest order.
    """

    name: str
    path: str
    root: Path
    manifest: dict[str, Any]
    files: dict[str, list[tuple[Path, Path, int, int]]] = field(default_factory=dict)

    @property
    def tokenizer(self) -> dict[str, Any]:
        """The manifest's ``tokenizer`` block (``spec``, ``fingerprint``, ``vocab_size``, ``eos_id``)."""
        return self.manifest["tokenizer"]

    def tokens(self, split: str) -> int:
        """Tokens in a split's Megatron files (0 when the split has none)."""
        return sum(f[3] for f in self.files.get(split, []))


def open_variant(path: str, name: str | None = None) -> Variant:
    """Find and check a variant's manifest and Megatron files.

    Args:
        path: a run root or a shard root.
        name: label of the variant; default the folder name.

    Returns:
        The :class:`Variant`.

    Raises:
        GateInputError: no manifest, a manifest that is not Winnow's, no Megatron ``train/`` files, or a
            listed file missing on disk; the message names the path.
    """
    p = Path(path)
    root = next((r for r in (p, p / "shards") if (r / "manifest.json").is_file()), None)
    if root is None:
        raise GateInputError(
            f"variant {path!r}: no manifest.json in {p} or {p / 'shards'}; "
            "give a run root or shard folder that the shard stage wrote"
        )
    try:
        manifest = json.loads((root / "manifest.json").read_text("utf-8"))
        tk = manifest["tokenizer"]
        int(tk["vocab_size"]), int(tk["eos_id"])
        listed = manifest["files"]
    except (ValueError, KeyError, TypeError) as e:
        why = f"key {e} missing" if isinstance(e, KeyError) else str(e)
        raise GateInputError(
            f"variant {path!r}: {root / 'manifest.json'} is not a Winnow manifest ({why}); "
            "re-run the shard stage, or give the folder it wrote"
        ) from None
    label = p.resolve().name if p.resolve().name != "shards" else p.resolve().parent.name
    v = Variant(name or label, path, root, manifest)
    for f in listed:
        if f.get("format") != "megatron" or f.get("kind") != "bin":
            continue
        split = f["path"].split("/", 1)[0]
        if split not in ("train", "validation"):
            continue  # per-source sets are not what the trainer reads
        bin_path = root / f["path"]
        idx_path = bin_path.with_suffix(".idx")
        for q in (bin_path, idx_path):
            if not q.is_file():
                raise GateInputError(f"variant {path!r}: {q} is listed in the manifest but missing")
        v.files.setdefault(split, []).append((bin_path, idx_path, int(f["documents"]), int(f["tokens"])))
    if not v.tokens("train"):
        raise GateInputError(
            f"variant {path!r}: {root / 'manifest.json'} lists no Megatron train/ shard "
            "with tokens (shard.formats must include megatron)"
        )
    return v


def check_same_tokenizer(variants: list[Variant]) -> None:
    """Every variant must share the first one's tokenizer and vocabulary.

    Raises:
        GateInputError: naming both variants and what differs.
    """
    base = variants[0]
    for v in variants[1:]:
        for key in ("fingerprint", "vocab_size", "eos_id"):
            if base.tokenizer.get(key) != v.tokenizer.get(key):
                raise GateInputError(
                    f"variants {base.path!r} and {v.path!r} have different tokenizers: tokenizer.{key} "
                    f"{base.tokenizer.get(key)!r} != {v.tokenizer.get(key)!r}; a gate compares shards of one "
                    "tokenizer and vocabulary"
                )


def check_budget(variants: list[Variant], tokens: int, seq_len: int) -> None:
    """Every variant must hold the budget: ``tokens`` rounded down to whole samples, plus the one token the
    last sample's target needs.

    Args:
        variants: the variants of the gate.
        tokens: ``gate.tokens``.
        seq_len: ``gate.seq_len``.

    Raises:
        GateInputError: one line naming every variant that holds too few train tokens, and the largest
            budget all of them hold.
    """
    need = tokens // seq_len * seq_len + 1
    short = [v for v in variants if v.tokens("train") < need]
    if short:
        held = ", ".join(f"variant {v.path!r} holds {v.tokens('train')} train tokens" for v in short)
        least = min(v.tokens("train") for v in short)
        raise GateInputError(
            f"gate.tokens={tokens}: {held}, fewer than the {need} the budget needs; lower gate.tokens to "
            f"at most {least - 1}"
        )


def check_not_in_progress(v: Variant) -> None:
    """Refuse a variant whose run is in progress: a live run lock (:mod:`pipelines.core.lock`) in the path
    given or in the run root above its shard folder means its shards may still be written.

    The gate only reads a variant, so it never takes the variant's lock; a stale lock (its owner is gone)
    does not stop it.

    Raises:
        pipelines.core.lock.RunLockedError: one line naming the lock's owner.
    """
    from pipelines.core import lock

    for path in dict.fromkeys([Path(v.path) / lock.LOCK_NAME, v.root.parent / lock.LOCK_NAME]):
        try:
            info = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # no lock, or one being written or removed: nothing to wait for
        if isinstance(info, dict) and lock.stale_reason(info) is None:
            raise lock.RunLockedError(
                f"variant {v.path!r}: its run is in progress ({lock.describe(info)}; lock {path}); wait "
                "for it to end before gating its shards"
            )


def documents(v: Variant, split: str) -> list[np.ndarray]:
    """The documents of a split, in manifest order, as read-only memory-mapped arrays (EOS included).

    Raises:
        GateInputError: an ``.idx`` that does not decode or does not match its ``.bin``.
    """
    out: list[np.ndarray] = []
    for bin_path, idx_path, _, _ in v.files.get(split, []):
        try:
            idx = megatron.decode_index(idx_path.read_bytes())
            flat = np.memmap(bin_path, dtype=idx.dtype.newbyteorder("<"), mode="r")
            need = int(idx.lengths.astype(np.int64).sum())
            if flat.size != need:
                raise ValueError(f".bin holds {flat.size} tokens, the index needs {need}")
        except ValueError as e:
            raise GateInputError(f"variant {v.path!r}: {idx_path}: {e}") from None
        starts = (idx.pointers // idx.dtype.itemsize).astype(np.int64)
        out += [flat[s : s + n] for s, n in zip(starts, idx.lengths.astype(np.int64), strict=True)]
    return out


def stream(v: Variant, split: str) -> np.ndarray:
    """A split's documents concatenated in manifest order: int32 [tokens]."""
    docs = documents(v, split)
    return np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, np.int32)


def draw(v: Variant, tokens: int, seq_len: int, seed: int, doc_order_seed: int | None = None) -> np.ndarray:
    """Draw a token budget from the train split as packed samples, in shard order.

    The stream is rotated to start at a seeded document (so each seed sees a different window when the
    variant holds more than the budget), then cut into Megatron samples. With ``doc_order_seed`` the
    documents of that same window are put in a uniformly random order before packing (the wavy check's
    control: the same documents, the shard set's order taken away).

    Args:
        v: the variant.
        tokens: training tokens wanted (rounded down to whole samples of ``seq_len``).
        seq_len: tokens per sample (inputs); each sample holds ``seq_len + 1`` ids.
        seed: chooses the starting document.
        doc_order_seed: shuffle the window's documents with this seed; None keeps shard order.

    Returns:
        int32 [tokens // seq_len, seq_len + 1] samples, in stream order.

    Raises:
        GateInputError: the variant holds fewer train tokens than the budget needs (names the key).
    """
    check_budget([v], tokens, seq_len)
    n = tokens // seq_len
    need = n * seq_len + 1
    docs = documents(v, "train")
    first = int(np.random.default_rng(seed).integers(len(docs)))
    parts, have = [], 0
    for i in list(range(first, len(docs))) + list(range(first)):
        parts.append(docs[i])
        have += len(docs[i])
        if have >= need:
            break
    if doc_order_seed is not None:
        parts = [parts[i] for i in np.random.default_rng(doc_order_seed).permutation(len(parts))]
    flat = np.concatenate(parts)[:need].astype(np.int32)
    idx = np.arange(n)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    return flat[idx]
