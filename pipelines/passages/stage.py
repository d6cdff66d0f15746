"""Passages stage: the previous document table -> ``passage_deduped`` (+ ``removed`` rows).

A paragraph (:func:`udfs.passages.paragraphs`) of at least ``passages.min_chars`` characters that
already occurs earlier in the corpus is cut from the document; "earlier" is the order of
``(doc_id, offset)``, so the occurrence kept does not depend on partitioning. Every cut is recorded in
``passage_cuts`` (offsets into the input text, end exclusive, and the document holding the occurrence
kept); a document left with fewer than ``passages.min_chars_after_cut`` characters is removed with
reason ``passages.all_repeated``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.passages.config import PassagesConfig
from udfs import passages as kernels

STAGE = "passages"
OUTPUT_TABLE = chain.stage(STAGE).main_table
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
CUT_TYPE = T.ArrayType(T.StructType([
    T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType()),
    T.StructField("first_seen_in", T.StringType())]))
OUTPUT_COLUMNS: tuple[str, ...] = ("passage_cuts",)
"""Columns :func:`remove_repeats` adds (``text`` is rewritten where a paragraph was cut)."""
REMOVED_REASON = "passages.all_repeated"

_SPANS = T.ArrayType(T.StructType([
    T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType()),
    T.StructField("hash", T.LongType())]))


def find_repeats(docs: DataFrame, cfg: PassagesConfig) -> DataFrame:
    """Every paragraph occurrence after the first of its key.

    Args:
        docs: documents with ``doc_id`` (unique) and ``text``.
        cfg: the ``passages`` section.

    Returns:
        ``doc_id``, ``start``, ``end`` (int, code points, end exclusive, blank lines after the paragraph
        included) and ``first_seen_in`` (string: the ``doc_id`` of the occurrence kept), one row per cut.
    """
    chain.require_columns(docs, INPUT_COLUMNS, STAGE)
    min_chars = cfg.min_chars

    def spans(text: pa.Array) -> pa.Array:
        return kernels.paragraph_spans(text, min_chars)

    found = docs.select("doc_id", F.explode(F.arrow_udf(spans, _SPANS)(F.col("text"))).alias("p"))
    found = found.select("doc_id", "p.start", "p.end", "p.hash")
    order = Window.partitionBy("hash").orderBy("doc_id", "start")
    ranked = found.select("*", F.row_number().over(order).alias("_n"),
                          F.first("doc_id").over(order).alias("first_seen_in"))
    return ranked.where(F.col("_n") > 1).select("doc_id", "start", "end", "first_seen_in")


def remove_repeats(docs: DataFrame, cfg: PassagesConfig) -> DataFrame:
    """``docs`` with the repeated paragraphs (:func:`find_repeats`) cut from ``text``.

    Returns:
        ``docs``' columns (``text`` cut) plus ``passage_cuts`` (:data:`CUT_TYPE`, sorted by ``start``;
        empty when nothing was cut). With ``passages.enabled`` false, ``docs`` with empty cuts.
    """
    chain.require_columns(docs, INPUT_COLUMNS, STAGE)
    if not cfg.enabled:
        return docs.withColumn("passage_cuts", F.array().cast(CUT_TYPE))
    cut_list = F.sort_array(F.collect_list(F.struct("start", "end", "first_seen_in")))
    cuts = find_repeats(docs, cfg).groupBy("doc_id").agg(cut_list.alias("passage_cuts"))

    def apply(text: pa.Array, cut_lists: pa.Array) -> pa.Array:
        return pa.array([kernels.cut(t, [(c["start"], c["end"]) for c in cs]) for t, cs in
                         zip(text.to_pylist(), cut_lists.to_pylist(), strict=True)], pa.string())

    joined = docs.join(cuts, "doc_id", "left")
    hit = F.col("passage_cuts").isNotNull()
    # Only documents with cuts go through the UDF: the others keep their text without a trip to Python.
    cut_text = F.arrow_udf(apply, T.StringType())(F.col("text"), F.col("passage_cuts"))
    hits = joined.where(hit).withColumn("text", cut_text)
    rest = joined.where(~hit).withColumn("passage_cuts", F.array().cast(CUT_TYPE))
    return hits.unionByName(rest).select(*docs.columns, "passage_cuts")


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read the previous document table, cut repeated paragraphs, write ``passage_deduped`` and this
    stage's ``removed`` rows.

    Returns:
        The :class:`StageReport`; ``removed`` counts documents left too short; ``extra`` holds the
        documents cut, the paragraphs cut and the characters cut.
    """
    pcfg = cfg.passages
    name = tables.stage_input_table(cfg, STAGE, spark)
    src = tables.read_table(spark, cfg, name)
    out = remove_repeats(src, pcfg).persist(tables.TEXT_CACHE)
    try:
        short = F.length("text") < pcfg.min_chars_after_cut
        stats = _stats(out, short)
        kept = out.where(~short)
        dropped = out.where(short).withColumn("reason", F.array(F.lit(REMOVED_REASON)))
        outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=dropped,
                                 properties={"input_table": name, "min_chars": pcfg.min_chars})
    finally:
        out.unpersist()
    removed = {REMOVED_REASON: stats.pop("removed")} if stats["removed"] else {}
    stats.pop("removed", None)
    rows = stats.pop("rows")
    return StageReport(stage=STAGE, rows_in=rows, rows_out=rows - sum(removed.values()), removed=removed,
                       outputs=outputs, extra=stats, notes={"cut": stats["documents_cut"]})


def _stats(out: DataFrame, short: Any) -> dict[str, int]:
    """Documents, documents cut, paragraphs cut, characters cut and documents removed, in one job."""
    n_cuts = F.size("passage_cuts")
    chars = F.aggregate("passage_cuts", F.lit(0), lambda acc, c: acc + c["end"] - c["start"])
    r = out.agg(F.count("*").alias("rows"), F.sum(F.when(n_cuts > 0, 1).otherwise(0)).alias("documents_cut"),
                F.sum(n_cuts).alias("paragraphs_cut"), F.sum(chars).alias("chars_cut"),
                F.sum(F.when(short, 1).otherwise(0)).alias("removed")).collect()[0]
    return {k: int(r[k] or 0) for k in ("rows", "documents_cut", "paragraphs_cut", "chars_cut", "removed")}
