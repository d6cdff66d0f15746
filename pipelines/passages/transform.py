"""The passages transform: repeated paragraphs and reused passages found with Spark aggregations and joins.

Order: every unit (paragraph, line or sentence, :mod:`udfs.paragraphs`) has the position
``(doc_id, idx)``; "earlier" and "first" mean smaller in that order, so results do not depend on
partitioning. Every step is an aggregation by a hash key (partial aggregation on the map side: a banner
repeated ten million times becomes one count and one minimum per task, never a list) followed by a join
of the occurrences against one row per key (the buffered side of the join holds one row).

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from pipelines.core import chain
from udfs import paragraphs as kernels

if TYPE_CHECKING:  # pragma: no cover
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
REASON_DUPLICATE = "passages.duplicate_text"
REASON_TOO_SHORT = "passages.too_short_after"
KINDS = ("exact", "near", "span")
_POS = ("doc_id", "idx")


def _position(prefix: str = "") -> Column:
    return F.struct(*(F.col(f"{prefix}{c}").alias(c) for c in _POS))


def paragraphs(docs: DataFrame, c: PassagesConfig) -> DataFrame:
    """One row per unit of ``min_words`` words or more (:data:`udfs.paragraphs.PARAGRAPH_SCHEMA`)."""
    unit, min_words, n, key, grams = c.unit, c.min_words, c.ngram_size, c.exact_key, c.near

    def per_batch(batches):
        for b in batches:
            yield kernels.paragraph_batch(b.column("doc_id").to_pylist(), b.column("text").to_pylist(),
                                          unit, min_words, n, key, grams)

    return docs.select(*INPUT_COLUMNS).mapInArrow(per_batch, from_arrow_schema(kernels.PARAGRAPH_SCHEMA))


def key_counts(paras: DataFrame) -> DataFrame:
    """``key, n`` (occurrences), ``first`` struct<doc_id, idx> of every exact key held twice or more."""
    return (paras.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.min(_position()).alias("first"))
            .where(F.col("n") > 1))


def exact_repeats(paras: DataFrame, counts: DataFrame) -> DataFrame:
    """``doc_id, idx, kind='exact', first_seen_in`` of every occurrence of a key after its first."""
    return (paras.select(*_POS, "key").join(counts, "key").where(_position() != F.col("first"))
            .select(*_POS, F.lit("exact").alias("kind"), F.col("first.doc_id").alias("first_seen_in")))


def near_repeats(paras: DataFrame, overlap: float) -> DataFrame:
    """``doc_id, idx, kind='near', first_seen_in`` of units with at least ``overlap`` of their distinct
    n-grams held by an earlier unit; ``first_seen_in`` is the smallest ``doc_id`` that held one first."""
    grams = paras.where(F.size("grams") > 0).select(*_POS, F.explode("grams").alias("gram"))
    first = (grams.groupBy("gram").agg(F.count(F.lit(1)).alias("n"), F.min(_position()).alias("first"))
             .where(F.col("n") > 1))
    seen = (grams.join(first, "gram").where(_position() > F.col("first"))
            .groupBy(*_POS)
            .agg(F.count(F.lit(1)).alias("seen"), F.min("first.doc_id").alias("first_seen_in")))
    sizes = paras.select(*_POS, F.size("grams").alias("n_grams"))
    return (seen.join(sizes, list(_POS)).where(F.col("seen") / F.col("n_grams") >= F.lit(overlap))
            .select(*_POS, F.lit("near").alias("kind"), "first_seen_in"))


def unit_cuts(paras: DataFrame, repeats: list[DataFrame]) -> DataFrame:
    """``doc_id, _units`` array<struct<start, end, kind, first_seen_in>>: the removed units of each
    document (a unit found by several methods counts under the first of ``repeats``), sorted by start."""
    tagged = [r.withColumn("_rank", F.lit(i)) for i, r in enumerate(repeats)]
    union = tagged[0]
    for t in tagged[1:]:
        union = union.unionByName(t)
    best = union.groupBy(*_POS).agg(F.min(F.struct("_rank", "kind", "first_seen_in")).alias("b"))
    cuts = best.join(paras.select(*_POS, "start", "cut_end"), list(_POS))
    span = F.struct(F.col("start"), F.col("cut_end").alias("end"), F.col("b.kind").alias("kind"),
                    F.col("b.first_seen_in").alias("first_seen_in"))
    return cuts.groupBy("doc_id").agg(F.array_sort(F.collect_list(span)).alias("_units"))


def reused_windows(docs: DataFrame, n: int) -> DataFrame:
    """``doc_id, _windows`` array<struct<pos, first>>: windows of ``n`` words a smaller ``doc_id`` also holds.

    A window held by two or more documents is kept in the smallest ``doc_id`` only; ``pos`` is the index
    of its first word, ``first`` that smallest ``doc_id``.
    """
    def per_batch(batches):
        for b in batches:
            yield kernels.window_batch(b.column("doc_id").to_pylist(), b.column("text").to_pylist(), n)

    wins = docs.select(*INPUT_COLUMNS).mapInArrow(per_batch, "doc_id string, gram bigint, pos int")
    owners = (wins.groupBy("gram").agg(F.min("doc_id").alias("first"), F.max("doc_id").alias("last"))
              .where(F.col("first") != F.col("last")))
    marked = wins.join(owners, "gram").where(F.col("doc_id") != F.col("first"))
    windows = F.array_sort(F.collect_set(F.struct("pos", "first")))
    return marked.groupBy("doc_id").agg(windows.alias("_windows"))


_SPAN_FIELDS = ("start", "end", "kind", "first_seen_in")
_CUT_TYPE = T.StructType([T.StructField("text", T.StringType()), T.StructField("spans", SPAN_TYPE),
                          T.StructField("removed_chars", T.IntegerType())])


def _cut_udf(n: int):
    def cut(texts: pa.Array, units: pa.Array, windows: pa.Array) -> pa.Array:
        out_text, out_spans, out_chars = [], [], []
        for text, u, w in zip(texts.to_pylist(), units.to_pylist(), windows.to_pylist(), strict=True):
            text = text or ""
            unit_spans = [(s["start"], s["end"], s["kind"], s["first_seen_in"]) for s in u or []]
            new, spans = kernels.removals(text, unit_spans, [(x["pos"], x["first"]) for x in w or []], n)
            out_text.append(new)
            out_spans.append([dict(zip(_SPAN_FIELDS, s, strict=True)) for s in spans])
            out_chars.append(sum(s[1] - s[0] for s in spans))
        span_type = pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32()), ("kind", pa.string()),
                                        ("first_seen_in", pa.string())]))
        return pa.StructArray.from_arrays(
            [pa.array(out_text, pa.string()), pa.array(out_spans, span_type),
             pa.array(out_chars, pa.int32())],
            names=["text", "spans", "removed_chars"])

    return F.arrow_udf(cut, _CUT_TYPE)


def annotate(docs: DataFrame, c: PassagesConfig, cached: list[DataFrame] | None = None,
             parts: dict[str, DataFrame] | None = None) -> DataFrame:
    """Cut repeated units and reused passages from every document and decide what stays.

    Args:
        docs: documents; needs ``doc_id`` (unique) and ``text``.
        c: the ``passages`` config section.
        cached: receives every DataFrame persisted here (the caller unpersists them when done).
        parts: receives ``paragraphs`` (:func:`paragraphs`, persisted) and ``key_counts``
            (:func:`key_counts`), for the report's most repeated units.

    Returns:
        ``docs``' columns, ``text`` cut (``n_chars``/``n_bytes`` recomputed when present), plus
        :data:`SPANS_COLUMN`, :data:`ACTION_COLUMN` (string) and ``_input_text`` (the text as read,
        for the ``removed`` rows).

    Raises:
        ValueError: ``docs`` lacks ``doc_id`` or ``text``.
    """
    chain.require_columns(docs, INPUT_COLUMNS, STAGE)
    cached = cached if cached is not None else []
    paras = paragraphs(docs, c).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(paras)
    counts = key_counts(paras)
    if parts is not None:
        parts.update(paragraphs=paras, key_counts=counts)
    repeats = [exact_repeats(paras, counts)] if c.exact else []
    repeats += [near_repeats(paras, c.overlap)] if c.near else []
    joined = docs
    units = unit_cuts(paras, repeats) if repeats else None
    if units is not None:
        joined = joined.join(units, "doc_id", "left")
    else:
        joined = joined.withColumn("_units", F.lit(None))
    if c.spans:
        joined = joined.join(reused_windows(docs, c.min_span_words), "doc_id", "left")
    else:
        joined = joined.withColumn("_windows", F.lit(None))
    touched = F.col("_units").isNotNull() | F.col("_windows").isNotNull()
    # Only touched documents go through the Python UDF (Spark would run it for every row under F.when).
    hits = joined.where(touched).withColumn("_cut", _cut_udf(c.min_span_words)(
        F.col("text"), F.col("_units").cast(SPAN_TYPE),
        F.col("_windows").cast("array<struct<pos:int,first:string>>")))
    rest = joined.where(~touched).withColumn("_cut", F.lit(None).cast(_CUT_TYPE))
    return _decide(hits.unionByName(rest), docs.columns, c)


def _decide(df: DataFrame, columns: list[str], c: PassagesConfig) -> DataFrame:
    cut = F.col("_cut")
    share = cut["removed_chars"] / F.greatest(F.length("text"), F.lit(1))
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
    if "n_chars" in cols:
        cols["n_chars"] = F.length(new_text).cast("int")
    if "n_bytes" in cols:
        cols["n_bytes"] = F.octet_length(new_text).cast("int")
    spans = F.when(cut["removed_chars"] > 0, cut["spans"]).otherwise(F.lit(None).cast(SPAN_TYPE))
    return df.select(*(v.alias(k) for k, v in cols.items()), spans.alias(SPANS_COLUMN),
                     action.alias(ACTION_COLUMN),
                     F.col("text").alias("_input_text"))


def passages(df: DataFrame, c: PassagesConfig) -> DataFrame:
    """``df.transform(lambda d: passages(d, cfg.passages))``: the kept documents, text cut, plus
    :data:`SPANS_COLUMN`."""
    out = annotate(df, c)
    return out.where(~F.col(ACTION_COLUMN).startswith(f"{STAGE}.")).drop(ACTION_COLUMN, "_input_text")
