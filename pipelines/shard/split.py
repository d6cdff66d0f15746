"""Shard stage: the held-out validation set, chosen by a seeded hash of ``doc_id``.

A document's *split key* is ``sha256("<seed>:validation:<doc_id>")`` as hex, independent of the shuffle
key (so the held-out set is not the head of the training stream). The validation set is the shortest
prefix of the documents in split-key order that reaches the asked amount (``shard.split``): a number of
documents (``round(fraction * N)``, at least one) or of tokens. It is described by one *cut* key: a
document is held out when its split key sorts before the cut. The cut depends on the content and the
seed only, never on partitioning, and is found with two slim Spark jobs: a histogram of token and
document counts over the first four hex digits of the key (65,536 rows to the driver), then the keys
and token counts of the one bucket where the amount is reached.

Near duplicates are gone after dedup, so a held-out document has no near copy in train.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.shard.config import SplitConfig

SPLIT_KEY = "_split_key"
PREFIX_HEX = 4
"""Hex digits of the split key that name a histogram bucket (16^4 = 65,536 buckets)."""


def split_key(seed: int):
    """Spark column: ``sha256("<seed>:validation:<doc_id>")`` as 64 hex digits."""
    return F.sha2(F.concat(F.lit(f"{seed}:validation:"), F.col("doc_id")), 256)


@dataclass(frozen=True)
class SplitPlan:
    """Where the validation set ends.

    Attributes:
        cut: documents whose split key is < this go to validation; None when nothing is held out.
        docs: documents held out.
        tokens: tokens held out.
        target: the amount asked, in ``unit`` (documents or tokens).
        unit: ``documents`` or ``tokens``.
    """

    cut: str | None
    docs: int
    tokens: int
    target: float
    unit: str


def plan_split(df: DataFrame, seed: int, scfg: SplitConfig) -> SplitPlan:
    """Find the cut key of the validation set.

    Args:
        df: documents with ``doc_id`` (string, unique) and ``n_tokens`` (int >= 1).
        seed: ``run.seed``.
        scfg: ``shard.split``.

    Returns:
        The :class:`SplitPlan` (``cut`` None when ``validation`` is 0).

    Raises:
        ValueError: a ``token_count`` validation set would take every document (names the key and the
            value); a fraction holds out nothing instead when the run is too small to keep train non-empty.
    """
    unit = "documents" if scfg.unit == "documents" else "tokens"
    if scfg.validation == 0:
        return SplitPlan(None, 0, 0, 0.0, unit)
    keyed = df.select(split_key(seed).alias(SPLIT_KEY), F.col("n_tokens").cast("long").alias("n_tokens"))
    bucket = F.substring(SPLIT_KEY, 1, PREFIX_HEX)
    counts = keyed.groupBy(bucket.alias("b")).agg(F.count("*").alias("d"), F.sum("n_tokens").alias("t"))
    hist = sorted(counts.collect())
    names = [r["b"] for r in hist]
    docs = np.array([r["d"] for r in hist], dtype=np.int64)
    toks = np.array([r["t"] for r in hist], dtype=np.int64)
    n_docs, n_toks = int(docs.sum()), int(toks.sum())
    if scfg.unit == "documents":
        # At least one document when asked for any, never all of them: a fraction of a tiny run holds
        # out nothing rather than leave train empty (an explicit token_count that does is an error).
        target = float(min(max(1, round(scfg.validation * n_docs)), n_docs - 1))
        if target <= 0:
            return SplitPlan(None, 0, 0, 0.0, unit)
    elif scfg.unit == "tokens":
        target = scfg.validation * n_toks
    else:
        target = scfg.validation
    measure = docs if unit == "documents" else toks
    cum = np.cumsum(measure)
    b = int(np.searchsorted(cum, target, side="left"))
    if scfg.unit == "tokens" and n_docs <= 1:  # a fraction of one document's tokens is that document
        return SplitPlan(None, 0, 0, 0.0, unit)
    if b >= len(names):
        raise ValueError(f"shard.split.validation={scfg.validation} ({scfg.unit}) holds out every document "
                         f"({n_docs} documents, {n_toks} tokens); lower it so that train keeps some")
    need = target - (cum[b - 1] if b else 0)
    rows = sorted((r[SPLIT_KEY], int(r["n_tokens"])) for r in keyed.filter(bucket == names[b]).collect())
    inner = np.cumsum([1 if unit == "documents" else n for _, n in rows])
    m = int(np.searchsorted(inner, need, side="left"))  # rows[: m + 1] reach the target
    if m + 1 < len(rows):
        cut = rows[m + 1][0]
    elif b + 1 < len(names):
        cut = names[b + 1] + "0" * (64 - PREFIX_HEX)
    else:
        raise ValueError(f"shard.split.validation={scfg.validation} ({scfg.unit}) holds out every document "
                         f"({n_docs} documents, {n_toks} tokens); lower it so that train keeps some")
    held_docs = int(docs[:b].sum()) + m + 1
    held_toks = int(toks[:b].sum()) + sum(n for _, n in rows[: m + 1])
    return SplitPlan(cut, held_docs, held_toks, float(target), unit)

