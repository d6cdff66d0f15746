"""Distributed connected components: the large-star / small-star algorithm of Kiveris et al. 2014.

Kiveris, Lattanzi, Mirrokni, Rastogi, Vassilvitskii, "Connected Components in MapReduce and Beyond"
(SoCC 2014), §3: alternate

* **large-star**: every node ``u`` links each strictly larger neighbour ``v`` to ``m(u)``, the smallest
  of ``u`` and its neighbours;
* **small-star**: every node ``u`` links itself and each smaller neighbour to ``m'(u)``, the smallest
  of ``u`` and its smaller neighbours;

until the edge set stops changing. The graph is then a forest of stars whose centres are the smallest
node of each component, i.e. every edge is ``(node, component_id)``. O(log² n) rounds in theory, a
handful in practice. Everything is DataFrame joins and aggregations: no collect to the driver, no
single-task union-find, except for an edge set small enough to collect (``local_max_edges``), which a
union-find on the driver joins in one pass. Each round's edges are checkpointed (``checkpoint`` into a
reliable folder, or ``localCheckpoint``) so the lineage, and so the query plan, stays one round deep.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core.cache import release
from pipelines.core.chain import require_columns
from pipelines.core.tables import local_frame

EDGE_COLUMNS = ("src", "dst")
OUTPUT_COLUMNS = ("node", "component")


class ComponentsDidNotConverge(RuntimeError):
    """Connected components still changing after ``max_iterations`` rounds."""


def checkpoint(df: DataFrame, checkpoint_dir: str | None) -> DataFrame:
    """``df`` computed once and cut from its lineage: ``checkpoint`` into ``checkpoint_dir`` (a reliable
    folder, set as the context's checkpoint folder if it has none), or ``localCheckpoint`` (executor
    storage) when None. Eager: runs one Spark job."""
    if checkpoint_dir is None:
        return df.localCheckpoint(eager=True)
    sc = df.sparkSession.sparkContext
    if sc.getCheckpointDir() is None:
        sc.setCheckpointDir(checkpoint_dir)
    return df.checkpoint(eager=True)


def _fingerprint(edges: DataFrame) -> tuple[int, int]:
    # Edge sets are distinct, so (count, xor of edge hashes) identifies a set up to a 2^-64 accident.
    row = edges.agg(F.count(F.lit(1)).alias("n"), F.bit_xor(F.xxhash64("a", "b")).alias("x")).collect()[0]
    return int(row["n"]), int(row["x"] or 0)


def _large_star(directed: DataFrame) -> DataFrame:
    """directed: (a, b) with a > b, each undirected edge once. Returns (a, b) with a > b."""
    both = directed.select("a", "b").union(directed.select(F.col("b").alias("a"), F.col("a").alias("b")))
    m = both.groupBy("a").agg(F.least(F.min("b"), F.col("a")).alias("m"))
    out = both.join(m, "a").where(F.col("b") > F.col("a")).select(F.col("b").alias("a"), F.col("m").alias("b"))
    return out.where(F.col("a") != F.col("b")).distinct()


def _small_star(directed: DataFrame) -> DataFrame:
    """directed: (a, b) with a > b: b is a smaller neighbour of a. Returns (a, b) with a > b."""
    m = directed.groupBy("a").agg(F.min("b").alias("m"))
    linked = directed.join(m, "a").select(F.col("b").alias("x"), F.col("m").alias("y"))
    own = m.select(F.col("a").alias("x"), F.col("m").alias("y"))
    out = linked.union(own).where(F.col("x") != F.col("y"))
    return out.select(F.greatest("x", "y").alias("a"), F.least("x", "y").alias("b")).distinct()


def _local_components(pairs: list[tuple], dtype: T.DataType, spark: SparkSession) -> DataFrame:
    """Union-find over a few edges on the driver; same output as the distributed rounds."""
    parent: dict = {}

    def find(x):
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:  # the smaller root wins, so every root ends as its component's smallest node
            parent[max(ra, rb)] = min(ra, rb)
    rows = sorted((node, find(node)) for node in parent)
    schema = T.StructType([T.StructField("node", dtype), T.StructField("component", dtype)])
    return local_frame(spark, rows, schema)


def connected_components(
    edges: DataFrame, *, max_iterations: int = 40, checkpoint_dir: str | None = None, local_max_edges: int = 0,
    checkpoints: list[DataFrame] | None = None,
) -> DataFrame:
    """Connected components of an undirected graph given as an edge list.

    Args:
        edges: columns ``src``, ``dst`` (same orderable type, e.g. string ``doc_id``); direction,
            duplicates and self-loops are ignored. Nodes without edges are not in the output.
        max_iterations: rounds (one large-star + one small-star each) before giving up.
        checkpoint_dir: reliable checkpoint folder; None = ``localCheckpoint`` (executor storage).
        local_max_edges: when the distinct edges number at most this many, they are collected and
            joined with a union-find on the driver (one Spark job instead of two per round, and no
            checkpoints); 0 = always distributed.
        checkpoints: receives the last round's checkpoint, which the output reads (the caller frees it
            with :func:`pipelines.core.cache.release` once done); each earlier round's is freed here.

    Returns:
        DataFrame ``node``, ``component``: one row per node that has an edge, ``component`` = the
        smallest node of its component (so a component's centre maps to itself).

    Raises:
        ValueError: ``src``/``dst`` missing.
        ComponentsDidNotConverge: still changing after ``max_iterations`` rounds.

    Source: Kiveris et al. 2014, Algorithms 1-3 (large-star, small-star, alternating loop).
    """
    require_columns(edges, EDGE_COLUMNS, "connected_components")
    cur = (
        edges.where(F.col("src").isNotNull() & F.col("dst").isNotNull() & (F.col("src") != F.col("dst")))
        .select(F.greatest("src", "dst").alias("a"), F.least("src", "dst").alias("b"))
        .distinct()
    )
    if local_max_edges > 0:
        few = cur.limit(local_max_edges + 1).collect()
        if len(few) <= local_max_edges:
            return _local_components([(r["a"], r["b"]) for r in few], cur.schema["a"].dataType, edges.sparkSession)
    cur = checkpoint(cur, checkpoint_dir)
    prev = _fingerprint(cur)
    for _ in range(max_iterations):
        nxt = checkpoint(_small_star(_large_star(cur)), checkpoint_dir)
        fp = _fingerprint(nxt)
        release(cur)
        cur = nxt
        if fp == prev:
            break
        prev = fp
    else:
        raise ComponentsDidNotConverge(
            f"connected components not converged after dedup.max_cc_iterations={max_iterations} rounds"
        )
    if checkpoints is not None:
        checkpoints.append(cur)
    centres = cur.select(F.col("b").alias("node")).distinct().withColumn("component", F.col("node"))
    return cur.select(F.col("a").alias("node"), F.col("b").alias("component")).union(centres)
