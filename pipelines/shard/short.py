"""Small corpora, honestly: a shard set whose format holds fewer tokens than one sample, or drops more than
a stated share of its tokens, is named with its figures.

MDS packs each shard's documents into samples of exactly ``shard.seq_len`` tokens (llm-foundry's
concatenation) and drops each shard's tokens past its last whole sample; a shard with fewer tokens than
``seq_len`` holds no sample at all, and an evaluation loader over such a split gets zero samples.
Megatron keeps every document, but its ``GPTDataset`` builds samples of ``seq_len + 1`` tokens, so a set
with fewer tokens than that yields none (Megatron-LM ``megatron/core/datasets/gpt_dataset.py``,
``_get_num_tokens_per_epoch`` / ``_build_document_sample_shuffle_indices``).

The shard stage logs each finding, writes them to ``manifest.json`` (``short``), and with ``shard.strict``
fails before the manifest is written; ``jobs/verify.py`` recomputes them from the manifest and reports them.
"""

from __future__ import annotations

from typing import Any

from udfs.errors import UserError


class ShortShardsError(UserError):
    """``shard.strict`` and a shard set holds fewer tokens than one sample or drops too many."""


def short_sets(manifest: dict[str, Any], max_dropped_share: float) -> list[str]:
    """One line per split and format that gives a loader nothing, or drops more than ``max_dropped_share``.

    Args:
        manifest: the shard manifest (``formats``, ``seq_len``, ``splits`` with ``tokens``, ``shards``,
            ``mds_samples``, ``mds_dropped_tokens``).
        max_dropped_share: the share (0-1) of a split's tokens that MDS may drop without a warning.

    Returns:
        Lines such as ``validation/mds: 0 samples from 300 tokens in 1 shard (seq_len 512): ...``; empty
        when every set holds samples and drops no more than the share.
    """
    seq_len, formats = int(manifest["seq_len"]), manifest.get("formats", [])
    out = []
    for split, sec in sorted(manifest.get("splits", {}).items()):
        tokens, shards = int(sec["tokens"]), int(sec["shards"])
        if "mds" in formats and tokens > 0:
            dropped = int(sec.get("mds_dropped_tokens", 0))
            plural = "s" if shards != 1 else ""
            if int(sec.get("mds_samples", 0)) == 0:
                out.append(f"{split}/mds: 0 samples from {tokens:,} tokens in {shards} shard{plural} "
                           f"(seq_len {seq_len}): a loader of this set gets nothing; lower shard.seq_len or "
                           "shard.num_shards, or give more input")
            elif dropped / tokens > max_dropped_share:
                out.append(f"{split}/mds: {dropped:,} of {tokens:,} tokens dropped ({dropped / tokens:.1%}, "
                           f"more than shard.max_dropped_share {max_dropped_share:.0%}): each shard's tokens "
                           f"past its last whole sample of {seq_len}; lower shard.seq_len or num_shards")
        if "megatron" in formats and 0 < tokens < seq_len + 1:
            out.append(f"{split}/megatron: {tokens:,} tokens, fewer than one sample of seq_len {seq_len} "
                       "+ 1: Megatron's GPTDataset builds no sample from it; lower shard.seq_len or give "
                       "more input")
    return out


def check(manifest: dict[str, Any], max_dropped_share: float, strict: bool) -> list[str]:
    """:func:`short_sets`, raising with ``strict``.

    Raises:
        ShortShardsError: ``strict`` and at least one set is short (the message lists them).
    """
    lines = short_sets(manifest, max_dropped_share)
    if lines and strict:
        raise ShortShardsError("shard.strict: " + "; ".join(lines) + ". No manifest was written.")
    return lines
