"""The fast proxy tier: an interpolated bigram model over the same compact token ids (seconds).

``p(b | a) = lam * c(a, b) / c(a) + (1 - lam) * p_uni(b)`` when ``a`` was seen, else ``p_uni(b)``, with
``p_uni`` add-one smoothed over the compact vocabulary and ``lam = c(a) / (c(a) + k * u(a))`` the
Witten-Bell weight (``u(a)``: distinct followers of ``a``, ``k = 1``; Witten & Bell 1991, as in Chen &
Goodman 1999, section 2.3). It screens variants before the transformer tier; the gate reports how often
the two tiers agree.
"""

from __future__ import annotations

import numpy as np


class Bigram:
    """A Witten-Bell interpolated bigram model.

    Args:
        samples: int32 [n, T] compact ids (training samples; pairs are read within each sample).
        vocab: compact vocabulary size.
    """

    def __init__(self, samples: np.ndarray, vocab: int):
        a, b = samples[:, :-1].ravel().astype(np.int64), samples[:, 1:].ravel().astype(np.int64)
        self.vocab = vocab
        uni = np.bincount(b, minlength=vocab).astype(np.float64) + 1.0
        self.p_uni = uni / uni.sum()
        keys, counts = np.unique(a * vocab + b, return_counts=True)
        self.keys, self.counts = keys, counts.astype(np.float64)
        self.c_a = np.bincount(a, minlength=vocab).astype(np.float64)
        self.u_a = np.bincount(keys // vocab, minlength=vocab).astype(np.float64)

    def nll(self, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """Negative log-likelihood (nats) of each ``nxt`` after ``prev`` (int arrays of one shape)."""
        prev, nxt = prev.astype(np.int64), nxt.astype(np.int64)
        key = prev * self.vocab + nxt
        pos = np.clip(np.searchsorted(self.keys, key), 0, max(0, self.keys.size - 1))
        c_ab = (
            np.where(self.keys[pos] == key, self.counts[pos], 0.0) if self.keys.size else np.zeros(key.shape)
        )
        c_a, u_a = self.c_a[prev], self.u_a[prev]
        lam = np.where(c_a > 0, c_a / np.maximum(c_a + u_a, 1.0), 0.0)
        p = lam * c_ab / np.maximum(c_a, 1.0) + (1.0 - lam) * self.p_uni[nxt]
        return -np.log(p)
