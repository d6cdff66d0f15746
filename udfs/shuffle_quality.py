"""Shuffle order and shuffle-quality figures over a stream of documents labelled by source.

* :func:`shuffle_key`: the keyed hash that orders documents, ``sha256(f"{seed}:{doc_id}")`` as hex;
  Spark computes the same value with ``sha2(concat(...), 256)``. A cryptographic hash keyed by the seed
  makes the order independent of input order and partitioning, and unrelated between seeds.
* :func:`window_counts` / :func:`window_deviation`: over windows of ``w`` consecutive documents, the
  largest deviation of a source's share from its global share, also in units of the binomial standard
  deviation ``sqrt(p (1 - p) / w)`` (what an ideal uniform shuffle would show).
* :func:`runs` / :func:`longest_run`: the longest run of same-source documents, computed per shard
  and combined across shard boundaries.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict

import numpy as np


def shuffle_key(seed: int, doc_id: str) -> str:
    """Hex sha256 of ``"<seed>:<doc_id>"`` (UTF-8); documents are ordered by (key, doc_id)."""
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def window_counts(positions: np.ndarray, sources: list[str], window: int) -> dict[int, dict[str, int]]:
    """Documents per (window index, source), window index = global position // ``window``."""
    out: dict[int, dict[str, int]] = defaultdict(dict)
    win = np.asarray(positions, dtype=np.int64) // window
    src = np.asarray(sources, dtype=object)
    for s in sorted(set(sources)):
        idx, cnt = np.unique(win[src == s], return_counts=True)
        for i, c in zip(idx.tolist(), cnt.tolist(), strict=True):
            out[i][s] = c
    return dict(out)


def window_deviation(counts: dict[int, dict[str, int]], total_docs: int, window: int) -> dict[str, float | int | None]:
    """Largest deviation of any source's share in a full window from its global share.

    Args:
        counts: merged :func:`window_counts` of the whole stream.
        total_docs: documents in the stream.
        window: window size in documents.

    Returns:
        ``{"window_docs", "full_windows", "max_share_deviation", "max_deviation_sigmas"}``; the
        deviations are None when the stream holds no full window or a single source.
    """
    totals: dict[str, int] = defaultdict(int)
    for c in counts.values():
        for s, n in c.items():
            totals[s] += n
    full = total_docs // window
    shares = {s: n / total_docs for s, n in totals.items()} if total_docs else {}
    max_dev = max_sig = None
    if full and len(shares) > 1:
        max_dev = max_sig = 0.0
        for w in range(full):
            c = counts.get(w, {})
            for s, p in shares.items():
                dev = abs(c.get(s, 0) / window - p)
                sigma = math.sqrt(p * (1 - p) / window)
                max_dev = max(max_dev, dev)
                max_sig = max(max_sig, dev / sigma if sigma else 0.0)
    return {"window_docs": window, "full_windows": full, "max_share_deviation": max_dev, "max_deviation_sigmas": max_sig}


def runs(sources: list[str]) -> dict[str, object]:
    """Run summary of one shard's source sequence: first/last source, prefix/suffix/longest run, length."""
    if not sources:
        return {"first": None, "prefix": 0, "last": None, "suffix": 0, "longest": 0, "n": 0}
    arr = np.asarray(sources, dtype=object)
    change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
    bounds = np.concatenate([[0], change, [len(arr)]])
    lens = np.diff(bounds)
    return {"first": sources[0], "prefix": int(lens[0]), "last": sources[-1], "suffix": int(lens[-1]),
            "longest": int(lens.max()), "n": len(sources)}


def longest_run(parts: list[dict[str, object]]) -> int:
    """Longest same-source run over shards in order, joining runs that cross shard boundaries."""
    best = 0
    cur_src, cur_len = None, 0
    for p in parts:
        if not p["n"]:
            continue
        best = max(best, int(p["longest"]))  # type: ignore[arg-type]
        head = int(p["prefix"]) + (cur_len if p["first"] == cur_src else 0)  # type: ignore[arg-type]
        best = max(best, head)
        if int(p["prefix"]) == int(p["n"]):  # type: ignore[arg-type]
            cur_src, cur_len = p["first"], head
        else:
            cur_src, cur_len = p["last"], int(p["suffix"])  # type: ignore[arg-type]
    return best
