"""The gate's compact vocabulary: the most frequent ids of the drawn training tokens, plus one OOV id.

With GPT-2's 50,257 ids the output layer would dominate a small CPU model's cost. The gate trains over
the ``gate.vocab_size - 1`` ids seen most often in the union of every variant's drawn tokens (ties
broken by id, so the choice is deterministic), identical for every variant and seed of one gate; every
other id maps to one out-of-vocabulary (OOV) id. Likelihoods stay honest: an id outside the compact set
gets the OOV probability divided by the number of ids it stands for (uniform over them), so bits per
byte are of the full vocabulary's text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CompactVocab:
    """A mapping from full-vocabulary ids to compact ids.

    Attributes:
        table: int32 [full vocab], the compact id of every full id (``oov`` for ids left out).
        kept: int32 [size - 1], the full ids kept, in compact-id order.
        full_size: size of the tokenizer's vocabulary.
    """

    table: np.ndarray
    kept: np.ndarray
    full_size: int

    @property
    def size(self) -> int:
        """Compact ids including the OOV id."""
        return int(self.kept.size) + 1

    @property
    def oov(self) -> int:
        """The OOV id (the last compact id)."""
        return int(self.kept.size)

    @property
    def oov_nats(self) -> float:
        """Extra nats charged to a token mapped to OOV: ``ln(number of full ids it stands for)``."""
        return math.log(max(1, self.full_size - self.kept.size))

    def map(self, ids: np.ndarray) -> np.ndarray:
        """Compact ids of full ids (any shape), int32."""
        return self.table[np.asarray(ids, dtype=np.int64)]

    def describe(self, drawn: np.ndarray) -> dict:
        """Figures for ``gate.json``: sizes and the share of ``drawn`` tokens mapped to OOV."""
        share = float(np.mean(self.map(drawn) == self.oov)) if drawn.size else 0.0
        return {
            "compact_size": self.size,
            "full_size": self.full_size,
            "oov_id": self.oov,
            "oov_token_share": share,
            "oov_ids_represented": self.full_size - int(self.kept.size),
            "rule": "most frequent ids of the union of drawn training tokens (ties by id) + one OOV id; "
            "an OOV token's probability is spread uniformly over the ids it stands for",
        }


def build(token_arrays: list[np.ndarray], full_size: int, size: int | None) -> CompactVocab:
    """Choose the compact vocabulary.

    Args:
        token_arrays: the drawn training tokens of every variant (full ids, any shape).
        full_size: the tokenizer's vocabulary size.
        size: compact ids including OOV (``gate.vocab_size``); None keeps the full vocabulary.

    Returns:
        The :class:`CompactVocab`.

    >>> v = build([np.array([5, 5, 3, 9, 9, 9])], full_size=10, size=3)
    >>> v.kept.tolist(), v.map(np.array([9, 5, 3])).tolist()
    ([9, 5], [0, 1, 2])
    """
    if size is None or size > full_size:
        kept = np.arange(full_size, dtype=np.int32)
    else:
        counts = np.zeros(full_size, dtype=np.int64)
        for a in token_arrays:
            counts += np.bincount(np.asarray(a, dtype=np.int64).ravel(), minlength=full_size)
        order = np.lexsort((np.arange(full_size), -counts))  # by count descending, then id
        kept = order[: size - 1].astype(np.int32)
    table = np.full(full_size, kept.size, dtype=np.int32)
    table[kept] = np.arange(kept.size, dtype=np.int32)
    return CompactVocab(table, kept, full_size)
