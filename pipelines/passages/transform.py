"""The passages transform: repeated paragraphs and reused passages found with Spark aggregations and joins.

Order: every unit (paragraph, line or sentence, :mod:`udfs.paragraphs`) has the position
``(doc_id, idx)``, held as one 64-bit unit id (:func:`with_ranks`, :func:`udfs.paragraphs.unit_ids`);
"earlier" and "first" mean smaller in that order, so results do not depend on partitioning. Every step
is an aggregation by a hash key (partial aggregation on the map side: a banner repeated ten million
times becomes one count and one minimum per task, never a list) with the occurrences joined back to one
row per key; the near rule aggregates packed n-gram blocks (:func:`near_repeats`).

1. **Exact repeats** (``exact``): units grouped by exact key; every occurrence after the first is removed.
2. **Near repeats** (``near``, BFF semantics, DCLM's ``bff``): each distinct word n-gram of a unit gets
   the first unit holding it; a unit whose share of n-grams held by an earlier unit is at least
   ``overlap`` is removed. Every unit counts as "earlier" for later ones, removed or not, as in BFF,
   which inserts each paragraph's n-grams into its filter whatever it decides.
3. **Reused passages** (``spans``, ExactSubstr-style): every window of ``min_span_words`` words held by
   two or more documents is marked in every document but the smallest ``doc_id``; marked windows are
   merged into spans (the part already removed with a unit is not counted twice).
4. Per document, the spans are cut from the text (:func:`udfs.paragraphs.apply_removals`); a document
   goes whole when at least ``doc_overlap`` of its characters were cut, or fewer than ``min_chars_after``
   non-blank (non-whitespace) characters are left.

The paragraph kernel's output (units, and the near rule's packed blocks) is read from the shuffle of
the blocks' exchange with the near rule on (:func:`pipelines.core.cache.shuffled_apart`: the units
and the blocks each in partitions of their own), else from a local checkpoint. Every frame persisted
here that holds text or n-grams (the ranked documents, in span mode only; the units without the near
rule; the near rule's reduce output) is kept on local disk (:data:`pipelines.core.cache.TEXT_CACHE`):
each is as large as the text or larger, and on the heap the sorted documents of a million short
documents took a 1 GB driver to ``OutOfMemoryError`` (bench/notes.md, "Passages at a million
documents"). Only the sorted ``doc_id`` of :func:`with_ranks` is cached in memory (and on disk when it
does not fit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.core import cache, chain
from pipelines.core.cache import TEXT_CACHE
from udfs import paragraphs as kernels
from udfs.errors import UserError
from udfs.worker_memory import keep_freed_memory

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterator

    from pipelines.passages.config import PassagesConfig

STAGE = "passages"
INPUT_COLUMNS = ("doc_id", "text")
"""Columns the transform needs; every other column passes through (``n_chars``/``n_bytes`` are updated)."""
SPANS_COLUMN = "passages_removed"
"""The column listing what was cut from a document's text (null when nothing was)."""
SPAN_TYPE = T.ArrayType(T.StructType([
    T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType()),
    T.StructField("kind", T.StringType()), T.StructField("first_seen_in", T.StringType()),
]))
"""``array<struct<start int, end int, kind string, first_seen_in string>>``: code-point offsets into the
stage's *input* text (end exclusive; length = end - start), ``kind`` ``exact`` | ``near`` | ``span``,
``first_seen_in`` the ``doc_id`` holding the first occurrence."""
ACTION_COLUMN = "passages_action"
"""``keep`` (nothing cut), ``cut`` (spans cut, kept) or a removal reason."""
CHARS_IN_COLUMN = "_chars_in"
"""Code points of the text as read (int), in :func:`annotate`'s rows."""
REASON_DUPLICATE = "passages.duplicate_text"
REASON_TOO_SHORT = "passages.too_short_after"
KINDS = ("exact", "near", "span")
RANK_COLUMN = "_rank"
"""The document's dense 0-based rank in ``doc_id`` order (:func:`with_ranks`)."""
BROADCAST_ROWS = 500_000
"""Rows under which the small side of the two joins that meet bulk data (the near rule's seen counts
with every unit's n-gram list, the removed units with every document's text) is broadcast
(:func:`join_small`): half a million rows of two longs are ~8 MB, under Spark's own broadcast limit
(``spark.sql.autoBroadcastJoinThreshold``, 10 MB). Spark cannot choose this itself: adaptive execution
starts both sides' shuffles together, so the n-gram lists (719 MB) and the texts (421 MB) of the scale
corpus were written to shuffle files even where the other side was empty (bench/notes.md, "Passages'
default mode at scale")."""


def with_ranks(docs: DataFrame, cached: list[DataFrame] | None = None,
               persist: bool = True) -> tuple[DataFrame, DataFrame]:
    """``docs`` with :data:`RANK_COLUMN` (long), joined to their ranks by ``doc_id`` and, with ``persist``,
    persisted on local disk (:data:`pipelines.core.cache.TEXT_CACHE`: the rows hold the text); and
    ``doc_id, _rank``.

    The rank is the document's position in ``doc_id`` order over the whole corpus (dense, from 0): a
    range-partitioned sort of the ``doc_id`` alone, ``monotonically_increasing_id`` (partition index in
    its upper bits, row in partition below) and each partition's offset from one count per partition.
    It depends on the set of ``doc_id`` only, never on partitioning, so unit ids built on it
    (:func:`udfs.paragraphs.unit_ids`) order units as ``(doc_id, idx)`` does. The ranks are then joined
    to the documents by ``doc_id``: where Spark plans that join as a shuffle, persisted documents keep its
    hash partitioning, which the later joins by ``doc_id`` (span mode's cuts, the most repeated units) use
    as it is instead of shuffling and sorting the text again; nothing downstream depends on the rows' order.

    Args:
        docs: documents with ``doc_id`` (unique).
        cached: receives the sorted ``doc_id`` frame persisted here (the caller unpersists it).
        persist: persist the ranked documents (the caller unpersists them); without it every reader of
            them reads ``docs`` again and joins the ranks again.

    Returns:
        (the ranked documents; ``doc_id, _rank``).

    Raises:
        UserError: more documents than a unit id can rank (:data:`udfs.paragraphs.MAX_RANK`); a document
            without a ``doc_id`` or with one another document holds.
    """
    ordered = docs.select("doc_id").orderBy("doc_id").withColumn("_m", F.monotonically_increasing_id())
    ordered = ordered.persist(StorageLevel.MEMORY_AND_DISK)
    if cached is not None:
        cached.append(ordered)
    part = F.shiftright("_m", 33)
    counted = ordered.mapInArrow(_sorted_id_counts, "p long, n long, named long, copies long").collect()
    sizes = {r["p"]: r["n"] for r in counted}
    offsets, total = {}, 0
    for p in sorted(sizes):
        offsets[p], total = total, total + sizes[p]
    nulls = total - sum(r["named"] for r in counted)
    copies = sum(r["copies"] for r in counted)
    if nulls or copies:
        _raise_bad_ids(docs, nulls, copies)
    if total - 1 > kernels.MAX_RANK:
        raise UserError(f"passages: {total} documents, more than the {kernels.MAX_RANK + 1} a unit id "
                        "can rank; "
                        "split the input into runs")
    # One literal array indexed by partition (a lookup per row, whatever the number of partitions).
    table = F.array(*(F.lit(offsets.get(p, 0)).cast("long") for p in range(max(offsets, default=0) + 1)))
    offset = F.element_at(table, (part + F.lit(1)).cast("int"))
    rank = (offset + F.col("_m").bitwiseAND(F.lit((1 << 33) - 1))).alias(RANK_COLUMN)
    ranks = ordered.select("doc_id", rank)
    ranked = docs.join(ranks, "doc_id", "left").select(*docs.columns, RANK_COLUMN)
    return (ranked.persist(TEXT_CACHE) if persist else ranked), ranks


def _sorted_id_counts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One partition of :func:`with_ranks`' sorted ``doc_id, _m``: its index (``_m``'s upper bits), rows,
    rows with a ``doc_id``, and ``doc_id`` values equal to the one before (the range partitioning keeps
    every copy of an id in one partition, and the sort puts them side by side: no aggregation or
    shuffle of the ids to count them)."""
    n = named = copies = 0
    part, last = None, None
    for b in batches:
        if not b.num_rows:
            continue
        ids = b.column("doc_id")
        part = b.column("_m")[0].as_py() >> 33 if part is None else part
        n += b.num_rows
        named += b.num_rows - ids.null_count
        copies += pc.sum(pc.equal(ids[1:], ids[:-1])).as_py() or 0
        copies += int(last is not None and ids[0].as_py() == last)
        last = ids[-1].as_py()
    if part is not None:
        yield pa.record_batch([pa.array([v], pa.int64()) for v in (part, n, named, copies)],
                              names=["p", "n", "named", "copies"])


def _raise_bad_ids(docs: DataFrame, nulls: int, copies: int) -> None:
    """Raise :class:`UserError` for ``nulls`` documents without a ``doc_id`` and ``copies`` more copies of
    ids already held (one repeated id named): unit ids, and with them every rule's "earlier", need one
    rank per document."""
    parts = []
    if nulls:
        parts.append(f"{nulls} documents without a doc_id")
    if copies:
        example = (docs.where(F.col("doc_id").isNotNull()).groupBy("doc_id").count()
                   .where(F.col("count") > 1).orderBy("doc_id").select("doc_id").first())
        shown = example and (example[0] if len(example[0]) <= 80 else example[0][:80] + "...")  # one line
        parts.append(f"{copies} more copies of a doc_id another document holds (e.g. {shown!r})"
                     if example else f"{copies} repeated doc_ids")
    raise UserError(f"passages: the input holds {' and '.join(parts)}; every document needs a doc_id of its "
                    "own, as ingest writes them (run ingest on the data, or make doc_id unique)")


def join_small(small: DataFrame, big: DataFrame, on: str, how: str, cached: list[DataFrame],
               limit: int | None = None) -> DataFrame:
    """``big.join(small, on, how)`` with ``small`` persisted and counted first, then broadcast when it has
    at most ``limit`` rows; otherwise the join Spark plans (both sides shuffled).

    The rows are those of the plain join: only where the rows of ``big`` are sent changes, and the
    ``big`` side (text, n-gram lists) is not written to shuffle files when ``small`` is small.

    Args:
        small: the side expected to be small (persisted here, in memory and on disk).
        big: the bulk side.
        on: the join column.
        how: ``inner`` or ``left`` (``big``'s rows kept); both let Spark build on the right side.
        cached: receives ``small`` once persisted (the caller unpersists it).
        limit: most rows broadcast (None: :data:`BROADCAST_ROWS`).
    """
    small, fits = persist_small(small, cached, limit)
    return big.join(F.broadcast(small) if fits else small, on, how)


def persist_small(small: DataFrame, cached: list[DataFrame],
                  limit: int | None = None) -> tuple[DataFrame, bool]:
    """``small`` persisted (memory and disk; appended to ``cached``) and whether it has at most ``limit``
    rows (None: :data:`BROADCAST_ROWS`), counted in one job that stops past the limit."""
    limit = BROADCAST_ROWS if limit is None else limit
    small = small.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(small)
    return small, small.limit(limit + 1).count() <= limit


def _kept_on_disk(df: DataFrame) -> DataFrame:
    """``df`` kept on local disk (:data:`pipelines.core.cache.TEXT_CACHE`) for its several readers: on a
    local master a local checkpoint (its rows as written; one Spark job now), elsewhere ``persist``.

    Spark's columnar cache gathers statistics over every value of every column as it builds its
    batches (each binary block copied out once more to size it): a third of the paragraph kernel's task
    CPU at scale, more than its readers' column pruning saved (bench/notes.md, "Passages at scale: the
    near rule's reduce vectorised"). A local checkpoint cannot be recomputed, though: on a cluster a lost
    executor would fail the stage, where a lost cache block is computed again, so only a local master
    (whose one JVM is driver and executor) gets it. The caller releases either with
    :func:`pipelines.core.cache.release`."""
    master = df.sparkSession.sparkContext.master
    if master == "local" or master.startswith("local["):
        return df.localCheckpoint(eager=True, storageLevel=TEXT_CACHE)
    return df.persist(TEXT_CACHE)


def first_doc(uid: str = "first") -> Column:
    """The rank of the document holding unit id column ``uid`` (:func:`udfs.paragraphs.unit_ids`)."""
    return F.shiftright(F.col(uid), kernels.IDX_BITS)


def paragraphs(docs: DataFrame, c: PassagesConfig, blocks: bool = False) -> DataFrame:
    """One row per unit of ``min_words`` words or more (:data:`udfs.paragraphs.PARAGRAPH_SCHEMA`);
    ``docs`` carries :data:`RANK_COLUMN` (:func:`with_ranks`).

    With ``blocks``, the units (:data:`udfs.paragraphs.UNIT_COLUMNS`: no n-gram lists, ``n_grams``
    their distinct n-grams; the kernel leaves the lists unsorted, with repeats, for the map step to
    drop) and, with ``near``, the near rule's map side on each batch's lists
    (:func:`udfs.paragraphs.units_and_blocks`): rows of :data:`udfs.paragraphs.UNIT_BLOCK_SCHEMA`, a
    unit where ``n_grams`` is set, a block or a ``(uid, seen)`` row of
    :func:`udfs.paragraphs.gram_blocks` where it is null. The lists then leave the kernel's process as
    packed blocks only: kept with the units, they were written to the stage's disk cache, read by every
    reader of the units and sent to a Python worker a second time for the
    blocks (bench/notes.md, "Passages: the near rule's blocks packed").
    """
    unit, min_words, n, key, grams = c.unit, c.min_words, c.ngram_size, c.exact_key, c.near
    math = c.exempt_math

    def per_batch(batches):
        keep_freed_memory()  # the slices' arrays reuse the memory the previous slice freed
        for b in batches:
            # Arrow arrays, not Python lists: the compiled kernel reads the texts' UTF-8 as it is.
            texts = b.column("text")
            ranks = b.column(RANK_COLUMN).to_numpy(zero_copy_only=False)
            kernels.count_input(texts)
            for start, end in kernels.text_slices(texts):
                # The blocks' map step drops a unit's repeated n-grams itself (no per-unit sort for them), and
                # their rows leave out ``doc_id`` (udfs.paragraphs.UNIT_DROPPED): not read at all.
                ids = None if blocks else b.column("doc_id")[start:end]
                units = kernels.paragraph_batch(ids, texts[start:end], unit, min_words, n, key, grams,
                                                ranks=ranks[start:end], exempt_math=math, distinct=not blocks)
                yield kernels.units_and_blocks(units, grams) if blocks else units

    schema = kernels.UNIT_BLOCK_SCHEMA if blocks else kernels.PARAGRAPH_SCHEMA
    read = ("text", RANK_COLUMN) if blocks else (*INPUT_COLUMNS, RANK_COLUMN)
    return docs.select(*read).mapInArrow(per_batch, from_arrow_schema(schema))


def key_counts(paras: DataFrame, near: DataFrame | None = None) -> DataFrame:
    """``key, n`` (occurrences), ``first`` (smallest unit id) of every exact key held twice or more.

    Args:
        paras: the units (``uid``, ``key``).
        near: the near repeats (``key``; :func:`near_units`), at most :data:`BROADCAST_ROWS` rows, or
            None. Every occurrence of a key after its first is a near repeat (the same text has the
            same words, so all its n-grams are held by the earlier unit: a share of 1), so the keys held
            twice or more are among theirs: the units are then matched against those keys, broadcast,
            and only the matches are aggregated, instead of every unit's key shuffled (1.53 M units,
            ~4.5 CPU-s of Spark tasks at scale, for a corpus with no exact repeat).
    """
    if near is not None:
        paras = paras.select("key", "uid").join(F.broadcast(near.select("key").distinct()), "key")
    return (paras.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.min("uid").alias("first"))
            .where(F.col("n") > 1))


def exact_repeats(paras: DataFrame, counts: DataFrame, fits: bool = False) -> DataFrame:
    """``uid, kind='exact', first`` (unit id of the first occurrence) of every occurrence of a key after
    its first.

    Args:
        paras: the units (``uid``, ``key``).
        counts: :func:`key_counts`' rows, persisted.
        fits: ``counts`` has at most :data:`BROADCAST_ROWS` rows (:func:`persist_small`): broadcast, so
            the units are read once and not shuffled.
    """
    return (paras.select("uid", "key").join(F.broadcast(counts) if fits else counts, "key")
            .where(F.col("uid") != F.col("first"))
            .select("uid", F.lit("exact").alias("kind"), "first"))


def spread_key() -> Column:
    """The near rule's exchange key of a row of :data:`udfs.paragraphs.UNIT_BLOCK_SCHEMA`: a block's
    bucket (all blocks of a bucket meet in one partition), else (a unit or a ``(uid, seen)`` row) its
    unit id."""
    return F.coalesce(F.col("bucket").cast("long"), F.col("uid"))


def is_block_row() -> Column:
    """1 for a block or ``(uid, seen)`` row of :data:`udfs.paragraphs.UNIT_BLOCK_SCHEMA` (``n_grams`` null),
    0 for a unit: the two groups of :func:`pipelines.core.cache.shuffled_apart`."""
    return F.col("n_grams").isNull().cast("int")


def near_units(paras: DataFrame, blocks: DataFrame, cached: list[DataFrame], c: PassagesConfig
               ) -> tuple[DataFrame, bool, DataFrame]:
    """The near repeats: ``uid, key`` of the units with at least ``c.overlap`` of their distinct n-grams
    held by an earlier unit.

    Map side (:func:`udfs.paragraphs.gram_blocks`, per batch of the paragraph kernel,
    :func:`paragraphs`): each n-gram's first holder in the batch, packed into one row per hash
    bucket, and the batch's later holders counted as seen. Reduce side
    (:func:`udfs.paragraphs.first_holder_batches`, one bucket at a time): the first holder over all
    batches, each batch's first holder that another batch precedes counted as seen, and the n-grams held
    twice or more. Spark moves a few packed rows per batch instead of one row per n-gram; a banner
    repeated in every document is one entry per batch. The map side's seen counts travel through the
    same exchange (:func:`udfs.paragraphs.first_holder_batches` passes them on).

    Args:
        paras: the units of :func:`paragraphs` (``uid``, ``n_grams``, ``key``), read from the kernel's
            shuffle.
        blocks: its block and ``(uid, seen)`` rows (:data:`udfs.paragraphs.BLOCK_SCHEMA`), partitioned
            by :func:`spread_key` (:func:`pipelines.core.cache.shuffled_apart`).
        cached: receives the DataFrames persisted here.
        c: the ``passages`` config section (``overlap``).

    Returns:
        (the near repeats, persisted; whether they are at most :data:`BROADCAST_ROWS` rows; the reduce
        step's rows, :data:`udfs.paragraphs.FIRST_SCHEMA`, persisted).
    """
    # The map side's ``(uid, seen)`` rows (``bucket`` null) went through the same exchange, spread by
    # unit id, and come out of the reduce step as they are.
    reduced = (blocks.sortWithinPartitions("bucket")
               .mapInArrow(kernels.first_holder_batches, from_arrow_schema(kernels.FIRST_SCHEMA))
               .persist(TEXT_CACHE))
    cached.append(reduced)
    seen = reduced.where(F.col("uid").isNotNull()).groupBy("uid").agg(F.sum("seen").alias("seen"))
    near = (join_small(seen, paras.select("uid", "n_grams", "key"), "uid", "inner", cached)
            .where(F.col("seen") / F.col("n_grams") >= F.lit(c.overlap)).select("uid", "key"))
    near, fits = persist_small(near, cached)
    return near, fits, reduced


def near_repeats(near: DataFrame, fits: bool, reduced: DataFrame, docs: DataFrame, ranks: DataFrame,
                 c: PassagesConfig, cached: list[DataFrame] | None = None) -> DataFrame:
    """``uid, kind='near', first`` of the near repeats (:func:`near_units`); ``first`` is the smallest
    unit id among the first holders of their n-grams held by an earlier unit (its document is the
    smallest ``doc_id`` that held one first).

    Only the near repeats look up where their n-grams were first seen: their documents go through the
    paragraph kernel again (the units' n-gram lists are not kept), a join of ``docs`` with those
    documents' ids (broadcast where few), found from the ranks in their unit ids.

    Args:
        near, fits, reduced: :func:`near_units`' values.
        docs: the documents (``doc_id``, ``text``) the units were cut from.
        ranks: ``doc_id, _rank`` of every document (:func:`with_ranks`).
        c: the ``passages`` config section (the kernel's settings).
        cached: receives the DataFrames persisted here.
    """
    cached = cached if cached is not None else []
    holders = near.select(first_doc("uid").alias(RANK_COLUMN)).distinct().join(ranks, RANK_COLUMN)
    again = paragraphs(join_small(holders, docs.select(*INPUT_COLUMNS), "doc_id", "inner", cached), c)
    picked = near.select("uid")
    # The reduce step's n-grams are masked to the bits the near rule compares (udfs.paragraphs.gram_mask).
    mask = F.lit(kernels.gram_mask()).cast("long")
    grams = (again.select("uid", "grams").join(F.broadcast(picked) if fits else picked, "uid")
             .select("uid", F.explode("grams").alias("gram"))
             .select("uid", F.col("gram").bitwiseAND(mask).alias("gram")))
    shared = reduced.where(F.col("gram").isNotNull()).select("gram", "first")
    return (grams.join(shared, "gram").where(F.col("uid") > F.col("first"))
            .groupBy("uid").agg(F.min("first").alias("first"))
            .select("uid", F.lit("near").alias("kind"), "first"))


def unit_cuts(paras: DataFrame, repeats: list[DataFrame], kinds: list[str], ranks: DataFrame,
              cached: list[DataFrame] | None = None) -> DataFrame:
    """``doc_id, _units`` array<struct<start, end, kind, first_seen_in>>: the removed units of each
    document (a unit found by several methods counts under the first of ``repeats``), sorted by start.

    The units are grouped by the rank in their unit ids, which is then joined to its ``doc_id`` (the
    units' rows carry no ``doc_id``: :data:`udfs.paragraphs.UNIT_DROPPED`).

    Args:
        paras: :func:`paragraphs` rows.
        repeats: ``uid, kind, first`` frames (:func:`exact_repeats`, :func:`near_repeats`), one row per
            unit each.
        kinds: the ``kind`` of each frame of ``repeats``, in the same order.
        ranks: ``doc_id, _rank`` (:func:`with_ranks`).
        cached: receives the removed units, persisted and counted first (:func:`join_small`): broadcast
            to the units where few, which are then read once and not shuffled. None: a plain join.
    """
    tagged = [r.select("uid", "first", F.lit(i).alias("_order")) for i, r in enumerate(repeats)]
    union = tagged[0]
    for t in tagged[1:]:
        union = union.unionByName(t)
    # A unit has one row per frame, so the smallest ``_order`` names one row. Its ``first`` by
    # ``min_by`` and its kind from the order keep the aggregation buffer to two fixed-width values,
    # which Spark aggregates in a hash map; a minimum of a struct holding the kind's string was planned
    # as a sort of every row (as the span mode's owners were, bench/notes.md, "Passages at scale").
    best = union.groupBy("uid").agg(F.min("_order").alias("_order"),
                                    F.min_by("first", "_order").alias("first"))
    kind = F.element_at(F.array(*(F.lit(k) for k in kinds)), F.col("_order") + 1)
    firsts = ranks.select(F.col("doc_id").alias("first_seen_in"), F.col(RANK_COLUMN).alias("_first_rank"))
    units = paras.select("uid", "start", "cut_end")
    cuts = join_small(best, units, "uid", "inner", cached) if cached is not None else best.join(units, "uid")
    cuts = cuts.withColumn("_first_rank", first_doc("first")).join(firsts, "_first_rank")
    span = F.struct(F.col("start"), F.col("cut_end").alias("end"), kind.alias("kind"), F.col("first_seen_in"))
    spans = F.array_sort(F.collect_list(span)).alias("_units")
    per_doc = cuts.groupBy(first_doc("uid").alias(RANK_COLUMN)).agg(spans)
    return per_doc.join(ranks, RANK_COLUMN).select("doc_id", "_units")


def reused_windows(docs: DataFrame, n: int, ranks: DataFrame) -> DataFrame:
    """``_rank, _windows`` array<struct<pos, first>>: windows of ``n`` words a smaller ``doc_id`` also holds.

    A window held by two or more documents is kept in the smallest ``doc_id`` only; ``pos`` is the index
    of its first word, ``first`` that smallest ``doc_id``. Documents are keyed by their rank
    (:func:`with_ranks`, the ``doc_id`` order), so the owners of every window (one row per word of the
    corpus) are a minimum and a maximum of longs, which Spark aggregates in a hash map on the map side;
    of the ``doc_id`` strings it sorted every window row and spilled them (bench/notes.md, "Passages at
    scale").

    Args:
        docs: documents with ``text`` and :data:`RANK_COLUMN`.
        n: words per window (``passages.min_span_words``).
        ranks: ``doc_id, _rank`` of every document (:func:`with_ranks`).
    """
    def per_batch(batches):
        for b in batches:
            yield kernels.window_batch(b.column(RANK_COLUMN).to_numpy(zero_copy_only=False),
                                       b.column("text").to_pylist(), n)

    wins = docs.select(RANK_COLUMN, "text").mapInArrow(per_batch, "rank bigint, gram bigint, pos int")
    # A window whose rank is above its gram's smallest is held by a smaller doc_id too.
    marked = (wins.select("rank", "pos", F.min("rank").over(Window.partitionBy("gram")).alias("first"))
              .where(F.col("rank") != F.col("first")))
    firsts = ranks.select(F.col(RANK_COLUMN).alias("first"), F.col("doc_id").alias("first_id"))
    windows = F.array_sort(F.collect_set(F.struct("pos", F.col("first_id").alias("first"))))
    return (marked.join(firsts, "first").groupBy(F.col("rank").alias(RANK_COLUMN))
            .agg(windows.alias("_windows")))


_SPAN_FIELDS = ("start", "end", "kind", "first_seen_in")
_CUT_TYPE = T.StructType([T.StructField("text", T.StringType()), T.StructField("spans", SPAN_TYPE),
                          T.StructField("removed_chars", T.IntegerType())])


def _cut_udf(n: int):
    """The Arrow UDF ``(text, _units, _windows) -> _cut`` (:data:`_CUT_TYPE`): a null ``_cut`` where a row
    has neither units nor windows (its text is not needed and comes as null)."""
    def cut(texts: pa.Array, units: pa.Array, windows: pa.Array) -> pa.Array:
        out_text, out_spans, out_chars = [], [], []
        for text, u, w in zip(texts.to_pylist(), units.to_pylist(), windows.to_pylist(), strict=True):
            if u is None and w is None:
                out_text.append(None)
                out_spans.append(None)
                out_chars.append(None)
                continue
            text = text or ""
            unit_spans = [(s["start"], s["end"], s["kind"], s["first_seen_in"]) for s in u or []]
            new, spans = kernels.removals(text, unit_spans, [(x["pos"], x["first"]) for x in w or []], n)
            out_text.append(new)
            out_spans.append([dict(zip(_SPAN_FIELDS, s, strict=True)) for s in spans])
            out_chars.append(sum(s[1] - s[0] for s in spans))
        span_type = pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32()), ("kind", pa.string()),
                                        ("first_seen_in", pa.string())]))
        untouched = pa.array([c is None for c in out_chars], pa.bool_())
        return pa.StructArray.from_arrays(
            [pa.array(out_text, pa.string()), pa.array(out_spans, span_type),
             pa.array(out_chars, pa.int32())],
            names=["text", "spans", "removed_chars"], mask=untouched)

    return F.arrow_udf(cut, _CUT_TYPE)


def annotate(docs: DataFrame, c: PassagesConfig, cached: list[DataFrame] | None = None,
             parts: dict[str, DataFrame] | None = None) -> DataFrame:
    """Cut repeated units and reused passages from every document and decide what stays.

    Args:
        docs: documents; needs ``doc_id`` (unique) and ``text``.
        c: the ``passages`` config section.
        cached: receives every DataFrame persisted or checkpointed here (the caller releases them when
            done: :func:`pipelines.core.cache.release`).
        parts: as :func:`removed_units` fills it.

    Returns:
        ``docs``' columns, ``text`` cut (``n_chars``/``n_bytes`` recomputed when present), plus
        :data:`SPANS_COLUMN`, :data:`ACTION_COLUMN` (string), ``_input_text`` (the text as read, for
        the ``removed`` rows; null in the rows kept) and :data:`CHARS_IN_COLUMN`.

    Raises:
        ValueError: ``docs`` lacks ``doc_id`` or ``text``.
    """
    cached = cached if cached is not None else []
    ranked, ranks, units, fits = removed_units(docs, c, cached, parts)
    return annotate_all(docs, ranked, ranks, units, c, cached, fits)


def removed_units(docs: DataFrame, c: PassagesConfig, cached: list[DataFrame],
                  parts: dict[str, DataFrame] | None = None
                  ) -> tuple[DataFrame, DataFrame, DataFrame | None, bool]:
    """The exact and near rules' removed units of every document, before any text is cut.

    The ranked documents are persisted only in span mode, whose windows read them a second time; with
    the unit rules alone the paragraph kernel is their one bulk reader (the text is read again from
    ``docs`` where it is cut), so no disk cache of every text is built.

    Args:
        docs: documents; needs ``doc_id`` (unique) and ``text``.
        c: the ``passages`` config section.
        cached: receives every DataFrame persisted or checkpointed here (the caller releases them when
            done: :func:`pipelines.core.cache.release`).
        parts: receives ``documents`` (``docs`` with :data:`RANK_COLUMN`), ``paragraphs``
            (:func:`paragraphs`' units, read from a shuffle or a checkpoint) and ``key_counts``
            (:func:`key_counts`, persisted), for the report's most repeated units.

    Returns:
        (``docs`` with :data:`RANK_COLUMN`; ``doc_id, _rank`` (:func:`with_ranks`); :func:`unit_cuts`'
        ``doc_id, _units`` persisted, or None where ``exact`` and ``near`` are both off; whether those
        rows are at most :data:`BROADCAST_ROWS`).

    Raises:
        ValueError: ``docs`` lacks ``doc_id`` or ``text``.
    """
    chain.require_columns(docs, INPUT_COLUMNS, STAGE)
    ranked, ranks = with_ranks(docs, cached, persist=c.spans)
    if c.spans:
        cached.append(ranked)
    rows = paragraphs(ranked, c, blocks=True)
    # With the near rule, the units and the blocks go through the blocks' exchange together and every
    # reader reads that one shuffle (the units spread by unit id): no disk cache of the kernel's output
    # written and read back before the blocks are shuffled (bench/notes.md, "Passages at scale: the
    # kernel's output read from its shuffle").
    # Units and blocks go to partitions of their own, so the units' readers fetch none of the blocks'
    # bytes (nine tenths of the shuffle) and the near rule's reduce none of the units' rows.
    if c.near:
        unit_rows, block_rows = cache.shuffled_apart(rows, is_block_row(), 2, spread_key())
        cached += [unit_rows, block_rows]
    else:
        unit_rows = _kept_on_disk(rows)
        cached.append(unit_rows)
    paras = unit_rows.where(F.col("n_grams").isNotNull()).select(*kernels.UNIT_COLUMNS)
    near = matched = None
    if c.near:
        blocks = block_rows.where(F.col("n_grams").isNull()).select(*kernels.BLOCK_SCHEMA.names)
        near, near_fits, reduced = near_units(paras, blocks, cached, c)
        matched = near if near_fits else None
    # Kept (one row per key held twice or more: small) for the report's most repeated units, which
    # otherwise aggregated every unit's key a second time.
    counts, few_keys = persist_small(key_counts(paras, matched), cached)
    if parts is not None:
        parts.update(documents=ranked, paragraphs=paras, key_counts=counts)
    repeats = [exact_repeats(paras, counts, few_keys)] if c.exact else []
    repeats += [near_repeats(near, near_fits, reduced, docs, ranks, c, cached)] if c.near else []
    if not repeats:
        return ranked, ranks, None, True
    kinds = ["exact"] * c.exact + ["near"] * c.near
    units, fits = persist_small(unit_cuts(paras, repeats, kinds, ranks, cached), cached)
    return ranked, ranks, units, fits


def annotate_all(docs: DataFrame, ranked: DataFrame, ranks: DataFrame, units: DataFrame | None,
                 c: PassagesConfig, cached: list[DataFrame], fits: bool = False) -> DataFrame:
    """:func:`annotate`'s rows, one per document of ``docs``, from :func:`removed_units`' frames.

    Args:
        docs: the documents as read.
        ranked: ``docs`` with :data:`RANK_COLUMN` (read only in span mode).
        ranks: ``doc_id, _rank``.
        units: ``doc_id, _units``, persisted, or None.
        c: the ``passages`` config section.
        cached: receives every DataFrame persisted here.
        fits: ``units`` has at most :data:`BROADCAST_ROWS` rows (:func:`removed_units` counted them):
            broadcast to the join.
    """
    # The unit rules key their cuts by doc_id: the documents as read carry all they need.
    joined = ranked if c.spans else docs
    if units is not None:  # persisted and counted by removed_units, as join_small would
        joined = joined.join(F.broadcast(units) if fits else units, "doc_id", "left")
    else:
        joined = joined.withColumn("_units", F.lit(None))
    if c.spans:
        joined = joined.join(reused_windows(ranked, c.min_span_words, ranks), RANK_COLUMN, "left")
    else:
        joined = joined.withColumn("_windows", F.lit(None))
    return _cut_and_decide(joined, docs.columns, c)


def annotate_touched(docs: DataFrame, units: DataFrame, c: PassagesConfig) -> DataFrame:
    """:func:`annotate`'s rows of the documents that lost a unit only (the unit rules; no span mode).

    ``units`` is broadcast (it is at most :data:`BROADCAST_ROWS` rows): only the touched documents'
    text goes to the Python cut, and none is shuffled. Every other document is kept as it is, its
    ``text`` unchanged, ``n_chars``/``n_bytes`` its length and bytes (:func:`kept_rows`).

    Args:
        docs: the documents as read.
        units: :func:`removed_units`' ``doc_id, _units`` (persisted).
        c: the ``passages`` config section, ``spans`` off.

    Raises:
        ValueError: ``c.spans`` is on (the windows can touch any document).
    """
    if c.spans:
        raise ValueError("annotate_touched: passages.spans is on; use annotate_all")
    joined = docs.join(F.broadcast(units), "doc_id", "inner").withColumn("_windows", F.lit(None))
    return _cut_and_decide(joined, docs.columns, c)


def kept_rows(docs: DataFrame, touched: DataFrame) -> DataFrame:
    """The kept documents (``docs``' columns and :data:`SPANS_COLUMN`) from the documents as read and
    :func:`annotate_touched`' rows (broadcast): a touched document as decided there, every other one
    as :func:`annotate` keeps a document with nothing cut: its row as read (``text``, ``n_chars``,
    ``n_bytes``), no spans.

    Args:
        docs: the documents as read.
        touched: :func:`annotate_touched`' rows, persisted (at most one per document of ``docs``).
    """
    columns = docs.columns
    changed = [k for k in ("text", "n_chars", "n_bytes") if k in columns]
    decided = touched.select("doc_id", *(F.col(k).alias(f"_t_{k}") for k in changed), SPANS_COLUMN,
                             ACTION_COLUMN)
    joined = docs.join(F.broadcast(decided), "doc_id", "left")
    untouched = F.col(ACTION_COLUMN).isNull()
    cols = {k: F.col(k) for k in columns}
    for k in changed:
        plain = F.col(k) if k == "text" else F.col(k).cast("int")
        cols[k] = F.when(untouched, plain).otherwise(F.col(f"_t_{k}"))
    return (joined.where(untouched | F.col(ACTION_COLUMN).isin("keep", "cut"))
            .select(*(v.alias(k) for k, v in cols.items()), SPANS_COLUMN))


def _cut_and_decide(joined: DataFrame, columns: list[str], c: PassagesConfig) -> DataFrame:
    touched = F.col("_units").isNotNull() | F.col("_windows").isNotNull()
    # Every row goes through the Python UDF once (Spark would evaluate it for every row under F.when
    # anyway), but only a touched document's text: the others send a null and get a null ``_cut``.
    # Splitting the rows into touched and untouched ones instead made Spark plan the join twice,
    # shuffling and sorting the text of every document twice.
    cut = _cut_udf(c.min_span_words)(F.when(touched, F.col("text")), F.col("_units").cast(SPAN_TYPE),
                                     F.col("_windows").cast("array<struct<pos:int,first:string>>"))
    return _decide(joined.withColumn("_cut", cut), columns, c)


def _decide(df: DataFrame, columns: list[str], c: PassagesConfig) -> DataFrame:
    # The input text's length (Spark's ``length``, a pass over every byte) is counted once, and only
    # where something was cut: a document with nothing cut keeps its row as read, ``n_chars`` and
    # ``n_bytes`` as the stage before wrote them (counting every text was a fifth of the JVM's task
    # samples at scale, bench/notes.md).
    cut = F.col("_cut")
    df = df.withColumn("_len_in", F.when(cut.isNotNull(), F.length("text")))
    share = cut["removed_chars"] / F.greatest(F.col("_len_in"), F.lit(1))
    left = F.length(F.regexp_replace(cut["text"], r"\s", ""))  # non-blank characters left
    action = F.when(cut.isNull() | (cut["removed_chars"] == 0), F.lit("keep"))
    if c.doc_overlap is not None:
        action = action.when(share >= F.lit(c.doc_overlap), F.lit(REASON_DUPLICATE))
    if c.min_chars_after is not None:
        action = action.when(left < F.lit(c.min_chars_after), F.lit(REASON_TOO_SHORT))
    action = action.otherwise(F.lit("cut"))
    cols = {name: F.col(name) for name in columns}
    new_text = F.when(cut.isNull(), F.col("text")).otherwise(cut["text"])
    cols["text"] = new_text
    for name, count in (("n_chars", F.length), ("n_bytes", F.octet_length)):
        if name in cols:
            cols[name] = F.when(cut.isNull(), F.col(name)).otherwise(count(cut["text"])).cast("int")
    chars_in = F.coalesce(F.col("_len_in"), F.col("n_chars") if "n_chars" in columns else F.length("text"))
    spans = F.when(cut["removed_chars"] > 0, cut["spans"]).otherwise(F.lit(None).cast(SPAN_TYPE))
    decided = df.select(*(v.alias(k) for k, v in cols.items()), spans.alias(SPANS_COLUMN),
                        action.alias(ACTION_COLUMN), F.col("text").alias("_text_in"),
                        chars_in.alias("_len_in"))
    # The text as read is kept only where the document goes (its ``removed`` row shows it): elsewhere
    # it was a second copy of every text in the stage's cache of these rows.
    gone = ~F.col(ACTION_COLUMN).isin("keep", "cut")
    return decided.select(*cols, SPANS_COLUMN, ACTION_COLUMN,
                          F.when(gone, F.col("_text_in")).alias("_input_text"),
                          F.col("_len_in").alias(CHARS_IN_COLUMN))


def passages(df: DataFrame, c: PassagesConfig) -> DataFrame:
    """``df.transform(lambda d: passages(d, cfg.passages))``: the kept documents, text cut, plus
    :data:`SPANS_COLUMN`."""
    out = annotate(df, c)
    return (out.where(~F.col(ACTION_COLUMN).startswith(f"{STAGE}."))
            .drop(ACTION_COLUMN, "_input_text", CHARS_IN_COLUMN))
