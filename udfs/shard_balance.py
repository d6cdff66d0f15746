"""Token-balanced contiguous shard boundaries: ``max(shard) - min(shard) <= L`` (L = longest document).

Problem: cut a stream of documents with token counts ``n_1..n_N`` (each ``1 <= n_i <= L``) into ``S``
contiguous, non-empty shards without splitting documents, so that shard token counts differ by at most
``L``. Rounding every boundary to the document end nearest the ideal ``k T / S`` only bounds each shard
to ``T/S +- L`` (two shards may then differ by up to ``2L``); this module meets ``<= L`` exactly.

Method (a reachability argument over the prefix sums ``P = [0, n_1, n_1 + n_2, ..., T]``):

* For a lower size ``m``, call a cut chain *feasible* when every shard holds ``[m, m + L]`` tokens.
  Because consecutive prefix sums are at most ``L`` apart, the boundaries reachable after ``k`` shards
  are exactly ``P`` within ``[a_k, b_k]``, where ``a_k`` (``b_k``) is the greedy chain that takes the
  shortest (longest) allowed shard every time. The stream is splittable with lower size ``m`` iff
  ``a_S <= T <= b_S``.
* ``a_S`` grows with ``m``. Take ``m*`` = the largest ``m`` with ``a_S(m) <= T`` (binary search;
  ``m = 1`` works whenever ``S <= N``). Then also ``T <= b_S(m*)``: step by step the longest chain for
  ``m`` never falls behind the shortest chain for ``m + 1`` (every window ``(x + m, x + m + L]`` holds a
  prefix sum), so ``b_S(m*) >= a_S(m* + 1) > T``.
* Walking back from ``B_S = T``, each boundary ``B_k`` is the reachable prefix sum in
  ``[B_{k+1} - m* - L, B_{k+1} - m*]`` closest to the ideal ``k T / S`` (ties: the smaller), which keeps
  shards contiguous, in ``[m*, m* + L]``, and near the ideal.

Cost: ``O(S log N log(T/S))`` binary searches over ``P`` (numpy ``searchsorted``), no per-document loop.
"""

from __future__ import annotations

import numpy as np


def _greedy(prefix: np.ndarray, shards: int, step_lo: int, step_hi: int | None) -> np.ndarray | None:
    """Boundary chain from 0 taking the shortest (``step_hi`` None) or longest allowed shard each time.

    Shortest: the first prefix sum ``>= x + step_lo``; longest: the last prefix sum ``<= x + step_hi``.
    Returns the ``shards + 1`` boundaries (token offsets), or None when the shortest chain runs past ``T``.
    """
    out = np.zeros(shards + 1, dtype=np.int64)
    x = 0
    last = len(prefix) - 1
    for k in range(1, shards + 1):
        if step_hi is None:
            i = int(np.searchsorted(prefix, x + step_lo, side="left"))
            if i > last:
                return None
        else:
            i = int(np.searchsorted(prefix, x + step_hi, side="right")) - 1
        x = int(prefix[i])
        out[k] = x
    return out


def balanced_boundaries(lengths: np.ndarray, shards: int) -> np.ndarray:
    """Document indices where each shard starts, with shard token counts differing by at most ``max(lengths)``.

    Args:
        lengths: int array [N], tokens per document in stream order (EOS included), every value >= 1.
        shards: S, the number of shards, ``1 <= S <= N``.

    Returns:
        int64 array [S + 1]: shard ``k`` holds documents ``starts[k]:starts[k + 1]`` (``starts[0] = 0``,
        ``starts[S] = N``). Every shard holds at least one document, and
        ``max(tokens) - min(tokens) <= max(lengths)``.

    Raises:
        ValueError: an empty stream, a length < 1, or ``S`` outside ``[1, N]``.
    """
    n = np.asarray(lengths, dtype=np.int64)
    if n.size == 0:
        raise ValueError("balanced_boundaries: no documents")
    if int(n.min()) < 1:
        raise ValueError(f"balanced_boundaries: every document needs >= 1 token; found {int(n.min())}")
    if not 1 <= shards <= n.size:
        raise ValueError(f"balanced_boundaries: {shards} shards for {n.size} documents; allowed 1..{n.size}")
    longest = int(n.max())
    prefix = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(n)])
    total = int(prefix[-1])

    lo, hi = 1, total // shards  # a_S(1) <= T as S <= N; m > T/S makes S shards exceed T
    while lo < hi:
        mid = (lo + hi + 1) // 2
        chain = _greedy(prefix, shards, mid, None)
        if chain is not None and chain[-1] <= total:
            lo = mid
        else:
            hi = mid - 1
    m = lo
    short = _greedy(prefix, shards, m, None)
    long_ = _greedy(prefix, shards, m, m + longest)
    if short is None or not short[-1] <= total <= long_[-1]:  # pragma: no cover - excluded by the argument above
        raise AssertionError(f"balanced_boundaries: no feasible chain for m={m}, L={longest}, S={shards}")

    bounds = np.zeros(shards + 1, dtype=np.int64)
    bounds[shards] = total
    for k in range(shards - 1, 0, -1):
        lo_t = max(int(short[k]), int(bounds[k + 1]) - m - longest)
        hi_t = min(int(long_[k]), int(bounds[k + 1]) - m)
        i0 = int(np.searchsorted(prefix, lo_t, side="left"))
        i1 = int(np.searchsorted(prefix, hi_t, side="right"))
        cand = prefix[i0:i1]
        if cand.size == 0:  # pragma: no cover - excluded by the argument above
            raise AssertionError(f"balanced_boundaries: empty candidate window at shard {k}")
        ideal = k * total / shards
        bounds[k] = int(cand[int(np.argmin(np.abs(cand - ideal)))])
    return np.searchsorted(prefix, bounds, side="left").astype(np.int64)
