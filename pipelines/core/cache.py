"""The cache of a stage's small input tables: persisted while the stage runs, released when it ends.

:func:`pipelines.core.tables.read_table` and :func:`~pipelines.core.tables.read_if_exists` cache a table
under their ``cache_under_bytes`` (:data:`SMALL_TABLE_BYTES` for the stages that query their input more
than once); :func:`pipelines.core.runner.run_stage` calls :func:`release_cached` when the stage ends.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core.files import table_bytes

TEXT_CACHE = StorageLevel.DISK_ONLY
"""Storage level of every cached frame that holds document text (ingest's parsed records, dedup's
documents and annotations, each stage's checked rows before its two writes).

Why not ``MEMORY_AND_DISK``: on the heap, the cached text of 480,000 documents (1.7 GB) took the driver
of a local run with a 3 GB heap to ``OutOfMemoryError`` in dedup (Spark's columnar cache builds each
10,000-row batch on the heap beside the blocks it already holds); on local disk the same dedup ran with
3 GB in 153 s, against 159 s with a 6 GB heap and the memory cache (bench/notes.md, measured 2026-12-01). The
operating system's page cache keeps recently written blocks in memory anyway, outside the JVM heap.
"""


SMALL_TABLE_BYTES = 256 << 20
"""Default ``cache_under_bytes`` of the stages that re-read a table: files of at most 256 MB (a run of a
few hundred thousand documents); larger tables are scanned per query, as before."""

_PINNED: dict[int, list[DataFrame]] = {}


SMALL_BULK_TABLE_BYTES = 32 << 20
"""Largest table holding text or token bytes (:func:`holds_bulk`) that ``cache_under_bytes`` caches,
whatever larger limit it is given. The cache holds every column, where each query of an uncached
table reads only the columns it needs from Parquet: the report of the scaling run took 81 s at
120,000 documents with its text tables (150-250 MB each) cached on disk and 51 s at 480,000, where
they were over the limit and not cached (bench/notes.md, measured 2026-12-02)."""


def _cache_if_small(spark: SparkSession, df: DataFrame, path: str, version: int, limit: int) -> None:
    if holds_bulk(df):
        limit = min(limit, SMALL_BULK_TABLE_BYTES)
    size = table_bytes(spark, path, version)
    if size is not None and size <= limit:
        _persist(spark, df)


def _persist(spark: SparkSession, df: DataFrame) -> None:
    # Decoded, text takes several times its compressed size: cached on the heap, the report of 120,000
    # documents (five text tables of 150-250 MB) died with OutOfMemoryError in a 3 GB driver. Frames
    # with text or token bytes go to local disk (TEXT_CACHE).
    df.persist(TEXT_CACHE if holds_bulk(df) else StorageLevel.MEMORY_AND_DISK)
    _PINNED.setdefault(id(spark), []).append(df)


def holds_bulk(df: DataFrame) -> bool:
    """True when ``df`` carries document text or token bytes (a ``text`` column or any binary column):
    the frames :data:`TEXT_CACHE` is for."""
    return "text" in df.columns or any(isinstance(f.dataType, T.BinaryType) for f in df.schema.fields)


def release_cached(spark: SparkSession) -> None:
    """Unpersist every table :func:`read_table` / :func:`read_if_exists` cached for ``spark``."""
    for df in _PINNED.pop(id(spark), []):
        df.unpersist()


def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's hash of an ``int`` value (``Murmur3Hash``, ``Murmur3_x86_32.hashInt``; Austin Appleby's
    MurmurHash3 x86_32 of the value's 4 bytes, seed 42 as in Spark's ``HashPartitioning``), as a signed
    32-bit int."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k = rotl((value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(seed ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_values(n: int) -> list[int]:
    """For each partition ``t`` of ``n``, the smallest non-negative ``int`` that Spark's hash partitioning
    into ``n`` partitions (``pmod(hash(v), n)``) sends to ``t``: a column of these values given to
    ``repartition(n, ...)`` puts each row in the partition it names.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"partition_values: {n} partitions; need at least 1")
    found: dict[int, int] = {}
    v = 0
    while len(found) < n:
        found.setdefault(_murmur3_int(v) % n, v)
        v += 1
    return [found[t] for t in range(n)]


def shuffled_apart(df: DataFrame, group: Column, groups: int, key: Column) -> list[DataFrame]:
    """``df``'s rows in one shuffle, split into ``groups`` frames that each read only their own partitions.

    A frame read by several queries runs its plan once per query (a Python kernel included) unless it
    is persisted, and a persisted or checkpointed copy of a large frame costs a write of every row and
    a read per query. A shuffle's map output is already such a copy: these frames are built on the
    exchange's own RDD (the query is planned and its shuffle written now), so Spark's scheduler finds
    that shuffle's map outputs registered and skips its map stage in every later job, as it does for
    the stages of one RDD lineage. Unlike a local checkpoint it survives a lost executor (the map stage
    is run again from its lineage). The shuffle files go when :func:`release` drops them. Where the rows
    of one query are of several kinds read by different queries (the passages kernel's units and n-gram
    blocks), each kind goes to partitions of its own, so a query of one kind never fetches, decompresses
    and filters the other's rows. Each group has ``spark.sql.shuffle.partitions`` partitions; a row goes
    to the partition of its group chosen by ``key``'s hash, so rows with one ``key`` share a partition.
    Where the session is not Spark's classic one, the shuffled rows are persisted on local disk and each
    frame filters them (:func:`release` of a frame then leaves those rows persisted until the session
    ends).

    Args:
        df: the frame to shuffle.
        group: an int expression over ``df``'s columns, each row's group, in ``[0, groups)`` (any other
            value, or null, fails the query that writes the shuffle, naming the bound).
        groups: the number of groups.
        key: the expression spreading a group's rows over its partitions.

    Returns:
        One frame per group, ``df``'s columns (release each with :func:`release`).
    """
    from py4j.protocol import Py4JError

    spark = df.sparkSession
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    values = F.array(*(F.lit(v) for v in partition_values(parts * groups)))
    # A group outside [0, groups) (or null) would land in another group's partitions without a word.
    checked = F.when(group.cast("int").between(0, groups - 1), group.cast("int")).otherwise(
        F.raise_error(F.lit(f"shuffled_apart: a row's group is null or outside [0, {groups})")))
    target = checked * parts + F.pmod(F.xxhash64(key), F.lit(parts)).cast("int")
    shuffled = df.repartition(parts * groups, F.element_at(values, target + 1))
    try:
        jvm = spark._jvm
        create = spark._jsparkSession.internalCreateDataFrame
        rows = shuffled._jdf.queryExecution().toRdd()
        out = []
        for g in range(groups):
            keep = jvm.java.util.HashSet()
            for p in range(g * parts, (g + 1) * parts):
                keep.add(p)
            # A Scala Set is an Int => Boolean: the partitions a PartitionPruningRDD keeps.
            pruned = jvm.org.apache.spark.rdd.PartitionPruningRDD.create(
                rows, jvm.scala.jdk.javaapi.CollectionConverters.asScala(keep))
            out.append(DataFrame(create(pruned, shuffled._jdf.schema(), False), spark))
        return out
    except Py4JError:  # not a classic session: a cache of the shuffled rows instead
        kept = shuffled.persist(TEXT_CACHE)
        return [kept.where(group.cast("int") == g) for g in range(groups)]


def _drop_shuffles(rdd) -> None:
    # The shuffles an RDD reads (through its narrow dependencies), dropped now rather than when the
    # driver's garbage collection lets the context cleaner find them. Blocking: an asynchronous removal
    # still in flight when the session stopped printed a RejectedExecutionException's stack trace (seen
    # with a 1 GB driver at scale, where the collector ran often).
    cleaner = rdd.context().cleaner()
    todo = [rdd]
    while todo and not cleaner.isEmpty():
        deps = todo.pop().dependencies()
        for i in range(deps.size()):
            dep = deps.apply(i)
            if dep.getClass().getSimpleName() == "ShuffleDependency":
                cleaner.get().doCleanupShuffle(dep.shuffleId(), True)
            else:
                todo.append(dep.rdd())


def release(df: DataFrame) -> None:
    """Drop the blocks of ``df``: its cache (``persist``) and, where ``df`` is a local checkpoint or a
    frame of :func:`shuffled_apart` (its plan a ``LogicalRDD``), the checkpoint's blocks or the shuffle's
    files, which ``unpersist`` leaves to the context cleaner (a JVM garbage collection away, so held for
    the rest of a chain run). Use only once nothing will read ``df`` again: a local checkpoint cannot be
    recomputed."""
    df.unpersist(False)
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
        _drop_shuffles(plan.rdd())
