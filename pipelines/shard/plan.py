"""Shard stage, steps 1-3 (see :mod:`pipelines.shard.stage`): the shuffle key, the range buckets and the
plan of token-balanced shards, found from slim columns only."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.shard.writer import KEY_HEX, keys_as_bytes
from udfs.shard_balance import balanced_boundaries


class EmptyInput(ValueError):
    """The shard stage's input holds no documents: there is nothing to write (the run is empty)."""

_BUCKET_SCHEMA = T.StructType([T.StructField("_bucket", T.IntegerType()), T.StructField("n_docs", T.LongType()),
                               T.StructField("lengths", T.BinaryType()), T.StructField("duplicate", T.StringType()),
                               T.StructField("bad_counts", T.LongType())])
_BOUNDARY_SCHEMA = T.StructType([T.StructField("shard_id", T.IntegerType()), T.StructField("_key", T.StringType())])


def shuffle_key(seed: int):
    """Spark column equal to :func:`udfs.shuffle_quality.shuffle_key` of ``doc_id``."""
    return F.sha2(F.concat(F.lit(f"{seed}:"), F.col("doc_id")), 256)


def key_bucket(buckets: int):
    """Spark column: range bucket ``floor(int(key[:8], 16) * buckets / 2^32)`` of the ``_key`` column."""
    prefix = F.conv(F.substring("_key", 1, 8), 16, 10).cast("long")
    return F.shiftright(prefix * F.lit(buckets).cast("long"), 32).cast("int")


def _sorted_by_key(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, [("_key", "ascending"), ("doc_id", "ascending")]))


def _summarise_bucket(table: pa.Table) -> pa.Table:
    """One bucket (slim rows) -> its token counts in stream order, a duplicated doc_id and bad counts (if any).

    Problems are returned, not raised, so the driver raises one clear ``ValueError`` (not a worker trace).
    """
    table = _sorted_by_key(table)
    keys = keys_as_bytes(table.column("_key"))
    dup = np.flatnonzero(keys[1:] == keys[:-1])
    n = table.column("n_tokens")
    bad = n.null_count + (pc.sum(pc.less(n, 1)).as_py() or 0)
    lengths = pc.fill_null(n, 0).to_numpy().astype("<i4")
    return pa.table({"_bucket": pa.array([table.column("_bucket")[0].as_py()], pa.int32()),
                     "n_docs": pa.array([len(lengths)], pa.int64()), "lengths": pa.array([lengths.tobytes()], pa.binary()),
                     "duplicate": pa.array([table.column("doc_id")[int(dup[0])].as_py() if dup.size else None], pa.string()),
                     "bad_counts": pa.array([bad], pa.int64())})


@dataclass(frozen=True)
class ShardPlan:
    """Where the stream is cut.

    Attributes:
        docs: documents in the stream (N).
        tokens: tokens in the stream (T).
        max_doc_tokens: the longest document (L).
        starts: int64 [S + 1], stream index of each shard's first document, then N.
        shard_tokens: int64 [S], tokens per shard.
        boundary_keys: the shuffle key of the first document of shards 1..S-1, as ``S64`` bytes (sorted).
        requested: shards asked for (``shard.num_shards`` or derived); more than S when the stream holds
            fewer documents than that (every shard gets at least one document).
    """

    docs: int
    tokens: int
    max_doc_tokens: int
    starts: np.ndarray
    shard_tokens: np.ndarray
    boundary_keys: np.ndarray
    requested: int = 0

    @property
    def shards(self) -> int:
        """Number of shards planned."""
        return len(self.shard_tokens)


def plan_shards(df: DataFrame, seed: int, num_shards: int | None, tokens_per_shard: int | None, buckets: int,
                key=None) -> ShardPlan:
    """Cut the shuffled stream into token-balanced contiguous shards (two slim Spark jobs, no token moved).

    Args:
        df: documents with ``doc_id`` (string, unique) and ``n_tokens`` (int >= 1, EOS included).
        seed: ``run.seed``.
        num_shards: shard count, or None to derive it from ``tokens_per_shard``.
        tokens_per_shard: target tokens per shard (``ceil(T / this)`` shards), when ``num_shards`` is None.
        buckets: range buckets of the key (parallelism of the slim sort; no effect on the result).
        key: the shuffle key column (64 hex digits, unique), default :func:`shuffle_key` of ``doc_id``
            (``shard.mix`` gives each copy of a document its own: :func:`pipelines.shard.mix.apply_mix`).

    Returns:
        The :class:`ShardPlan`.

    Raises:
        EmptyInput: no documents.
        ValueError: a duplicated ``doc_id`` or ``n_tokens < 1``.

    More shards requested than documents: one shard per document (``requested`` keeps the request).
    """
    key = shuffle_key(seed) if key is None else key
    slim = df.select("doc_id", F.col("n_tokens").cast("long").alias("n_tokens"), key.alias("_key"))
    slim = slim.withColumn("_bucket", key_bucket(buckets))
    rows = slim.groupBy("_bucket").applyInArrow(_summarise_bucket, _BUCKET_SCHEMA).collect()
    rows.sort(key=lambda r: r["_bucket"])
    dups = [r["duplicate"] for r in rows if r["duplicate"] is not None]
    if dups:
        raise ValueError(f"shard: doc_id {dups[0]!r} occurs more than once in 'tokenized'; doc ids must be unique")
    if any(r["bad_counts"] for r in rows):
        bad = sum(int(r["bad_counts"]) for r in rows)
        raise ValueError(f"shard: {bad} documents have a null n_tokens or n_tokens < 1 (EOS included, so >= 1 expected)")
    lengths = np.concatenate([np.frombuffer(r["lengths"], dtype="<i4") for r in rows]) if rows else np.zeros(0, np.int32)
    docs = int(lengths.size)
    if docs == 0:
        raise EmptyInput("shard: the input table 'tokenized' holds no documents; refusing to write empty shards")
    total = int(lengths.sum(dtype=np.int64))
    requested = num_shards if num_shards is not None else max(1, math.ceil(total / int(tokens_per_shard or 1)))
    shards = min(requested, docs)  # an empty shard is useless to a loader and breaks Megatron's .idx
    starts = balanced_boundaries(lengths, shards)
    prefix = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)])

    # The key of each shard's first document: (bucket, index inside the bucket) -> one slim job.
    bucket_ids = np.array([int(r["_bucket"]) for r in rows], dtype=np.int64)
    bucket_first = np.concatenate([np.zeros(1, np.int64), np.cumsum([int(r["n_docs"]) for r in rows])])
    wanted: dict[int, list[tuple[int, int]]] = {}
    for k in range(1, shards):
        b = int(np.searchsorted(bucket_first, starts[k], side="right")) - 1
        wanted.setdefault(int(bucket_ids[b]), []).append((int(starts[k] - bucket_first[b]), k))

    def pick(table: pa.Table) -> pa.Table:
        todo = wanted.get(int(table.column("_bucket")[0].as_py()), [])
        if not todo:
            return pa.table({"shard_id": pa.array([], pa.int32()), "_key": pa.array([], pa.string())})
        keys = _sorted_by_key(table.select(["_key", "doc_id"])).column("_key")
        return pa.table({"shard_id": pa.array([k for _, k in todo], pa.int32()),
                         "_key": keys.take(pa.array([i for i, _ in todo]))})

    boundary_keys = np.zeros(0, dtype=f"S{KEY_HEX}")
    if shards > 1:
        got = slim.filter(F.col("_bucket").isin(list(wanted))).groupBy("_bucket").applyInArrow(pick, _BOUNDARY_SCHEMA).collect()
        by_shard = {int(r["shard_id"]): r["_key"] for r in got}
        boundary_keys = np.array([by_shard[k].encode("ascii") for k in range(1, shards)], dtype=f"S{KEY_HEX}")
    return ShardPlan(docs=docs, tokens=total, max_doc_tokens=int(lengths.max()), starts=starts,
                     shard_tokens=np.diff(prefix[starts]), boundary_keys=boundary_keys, requested=int(requested))


def shard_id_column(boundary_keys: np.ndarray):
    """Spark column: number of boundary keys <= ``_key``, as a balanced tree of comparisons (depth log2 S).

    Evaluated in the JVM, so the token column never crosses into Python before the shuffle.
    """
    keys = [k.decode("ascii") for k in boundary_keys.tolist()]

    def node(lo: int, hi: int):
        if lo == hi:
            return F.lit(lo)
        mid = (lo + hi + 1) // 2  # shard ``mid`` starts at keys[mid - 1]
        return F.when(F.col("_key") < F.lit(keys[mid - 1]), node(lo, mid - 1)).otherwise(node(mid, hi))

    return node(0, len(keys)).cast("int")
