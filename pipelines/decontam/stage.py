"""Decontam stage: ``refs_checked`` -> ``decontaminated`` (+ ``removed`` rows with stage 'decontam').

Evaluation items (``decontam.eval_sets``) must not be in the training data. Both sides are normalised
and cut into word n-grams hashed to 64 bits by :mod:`udfs.decontam`:

1. :func:`build_eval_ngrams` reads the evaluation sets on the driver (:mod:`pipelines.core.eval_sets`),
   hashes their n-grams and writes the Delta table ``eval_ngrams`` (``set_name``, ``item_id``,
   ``hash``, ``item_ngrams``, ``item_words``), tagged with a fingerprint of the sets' bytes and the
   settings; a later run with the same fingerprint reuses it. An item with fewer than ``ngram_size``
   words is keyed by the hash of all its words (a document matches it when it holds those words in a
   row); one with fewer than ``min_item_words`` is skipped (``too_short``, counted).
2. :func:`find_matches` joins the documents' n-grams with it. With at most
   ``broadcast_max_ngrams`` evaluation n-grams the sorted hashes travel with the Arrow UDF to every
   worker (a broadcast hash join done by binary search inside each batch: only matching hashes leave
   Python); with more, every distinct document n-gram is exploded and joined with ``eval_ngrams`` by a
   Spark shuffle join. Short-item keys are few (one per item) and always looked up in the batch.
3. A document matches an item when it holds ``>= min_matches`` of the item's distinct keys, or
   ``>= min_item_fraction`` of them. :func:`decontaminate` adds the columns below and applies
   ``action``.

Added columns: ``contaminated_by`` array<string> (sets matched, sorted; empty when clean),
``decontam_items`` array<struct<set_name string, item_id string, n_ngrams int>> (matched items and
the distinct keys of each found), ``decontam_matched_ngrams`` int (distinct matched keys),
``decontam_cuts`` array<struct<start int, end int>> (code-point offsets into the *input* text of the
spans removed under ``cut``; null otherwise), ``decontam_action`` string: ``none`` | ``flag`` |
``cut`` | ``drop``. Dropped documents go to ``removed`` with reasons ``decontam.<set name>``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import tables
from pipelines.core.chain import require_columns
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.decontam.config import DecontamConfig
from pipelines.decontam.ngrams import (  # noqa: F401  (re-exported: callers use the stage module)
    EVAL_SCHEMA,
    EVAL_TABLE,
    STAGE,
    EvalIndex,
    build_eval_ngrams,
)
from udfs import decontam as kernels

INPUT_TABLE = "refs_checked"
OUTPUT_TABLE = "decontaminated"
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
ACTIONS: tuple[str, ...] = ("none", "flag", "cut", "drop")
REASON_PREFIX = "decontam."
TOP_ITEMS = 5

_ITEM = T.StructType(
    [
        T.StructField("set_name", T.StringType()),
        T.StructField("item_id", T.StringType()),
        T.StructField("n_ngrams", T.IntegerType()),
    ]
)
_SPAN = T.StructType([T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType())])
OUTPUT_TYPES: dict[str, T.DataType] = {
    "contaminated_by": T.ArrayType(T.StringType()),
    "decontam_items": T.ArrayType(_ITEM),
    "decontam_matched_ngrams": T.IntegerType(),
    "decontam_cuts": T.ArrayType(_SPAN),
    "decontam_action": T.StringType(),
}
OUTPUT_COLUMNS: tuple[str, ...] = tuple(OUTPUT_TYPES)

log = logging.getLogger(__name__)


def join_path(index: EvalIndex, cfg: DecontamConfig) -> str:
    """``broadcast`` when the evaluation n-grams fit ``broadcast_max_ngrams``, else ``shuffle``."""
    return "broadcast" if index.ngram_keys.size <= cfg.broadcast_max_ngrams else "shuffle"


def find_matches(
    docs: DataFrame, index: EvalIndex, cfg: DecontamConfig, path: str | None = None
) -> DataFrame:
    """Documents' matched items.

    Args:
        docs: documents with ``doc_id`` and ``text`` (string).
        index: the evaluation index from :func:`build_eval_ngrams`.
        path: ``broadcast`` or ``shuffle``; None = :func:`join_path`.

    Returns:
        One row per document that matches at least one item: ``doc_id``, ``contaminated_by``,
        ``decontam_items``, ``decontam_matched_ngrams`` and ``matched_hashes`` array<bigint> (the
        keys of the matched items found in the document, sorted). Deterministic.
    """
    path = path or join_path(index, cfg)
    n, short_lengths, short_keys = cfg.ngram_size, index.short_lengths, index.short_keys
    ngram_keys = index.ngram_keys if path == "broadcast" else None

    def hashes(text: pa.Array) -> pa.Array:
        return kernels.doc_hashes(text, n, ngram_keys, short_lengths, short_keys)

    per_batch = F.arrow_udf(hashes, T.ArrayType(T.LongType()))  # one call per Arrow batch
    grams = docs.select("doc_id", F.explode(per_batch(F.col("text"))).alias("hash"))
    eval_df = index.df if path == "broadcast" else index.df.hint("shuffle_hash")
    pairs = grams.join(eval_df, "hash")
    per_item = pairs.groupBy("doc_id", "set_name", "item_id").agg(
        F.count("*").cast("int").alias("n_ngrams"),
        F.first("item_ngrams").alias("item_ngrams"),
        F.collect_list("hash").alias("hashes"),
    )
    hit = F.col("n_ngrams") >= cfg.min_matches
    if cfg.min_item_fraction is not None:
        hit = hit | (F.col("n_ngrams") >= F.col("item_ngrams") * F.lit(cfg.min_item_fraction))
    return (
        per_item.where(hit)
        .groupBy("doc_id")
        .agg(
            F.array_sort(F.collect_set("set_name")).alias("contaminated_by"),
            F.array_sort(F.collect_list(F.struct("set_name", "item_id", "n_ngrams"))).alias("decontam_items"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("hashes")))).alias("matched_hashes"),
        )
        .withColumn("decontam_matched_ngrams", F.size("matched_hashes").cast("int"))
    )


def decontaminate(
    docs: DataFrame, matches: DataFrame, cfg: DecontamConfig, short_lengths: list[int]
) -> DataFrame:
    """Add the decontam columns to ``docs`` and apply ``cfg.action`` (``cut`` rewrites ``text``).

    Args:
        docs: documents (``doc_id`` unique, ``text``).
        matches: :func:`find_matches` output.
        short_lengths: word counts of the short items (:attr:`EvalIndex.short_lengths`).

    Returns:
        ``docs``' columns (``text`` cut where ``decontam_action = 'cut'``) plus :data:`OUTPUT_COLUMNS`;
        rows with ``decontam_action = 'drop'`` are still present (the caller routes them to ``removed``).
    """
    require_columns(docs, INPUT_COLUMNS, STAGE)
    clash = [c for c in OUTPUT_COLUMNS if c in docs.columns]
    if clash:
        raise ValueError(
            f"decontam: input already has output columns {clash}; was the decontam stage run twice?"
        )
    joined = docs.join(F.broadcast(matches), "doc_id", "left")
    matched = F.col("matched_hashes").isNotNull()
    n, margin, min_chars = cfg.ngram_size, cfg.cut_margin_chars, cfg.min_chars_after_cut
    if cfg.action == "cut":

        def cut(text: pa.Array, keys: pa.Array) -> pa.Array:
            texts, spans_out = [], []
            for t, k in zip(text.to_pylist(), keys.to_pylist(), strict=True):
                if k is None:
                    texts.append(None)
                    spans_out.append(None)
                    continue
                spans = kernels.cut_spans(t, np.asarray(k, dtype=np.int64), n, short_lengths, margin)
                texts.append(kernels.apply_cuts(t, spans))
                spans_out.append([{"start": s, "end": e} for s, e in spans])
            return pa.StructArray.from_arrays(
                [
                    pa.array(texts, pa.string()),
                    pa.array(spans_out, pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32())]))),
                ],
                names=["text", "cuts"],
            )

        cut_type = T.StructType(
            [T.StructField("text", T.StringType()), T.StructField("cuts", T.ArrayType(_SPAN))]
        )
        # Only matched rows go through the UDF: Spark would evaluate a Python UDF under F.when for
        # every row, sending all text to Python a second time.
        hits = joined.where(matched).withColumn(
            "_cut", F.arrow_udf(cut, cut_type)(F.col("text"), F.col("matched_hashes"))
        )
        rest = joined.where(~matched).withColumn("_cut", F.lit(None).cast(cut_type))
        joined = hits.unionByName(rest)
        action = (
            F.when(F.col("_cut").isNull(), "none")
            .when(F.length("_cut.text") < min_chars, "drop")
            .otherwise("cut")
        )
        text = F.when(action == "cut", F.col("_cut.text")).otherwise(F.col("text"))
        cuts = F.col("_cut.cuts")
    else:
        action = F.when(matched, cfg.action).otherwise("none")
        text, cuts = F.col("text"), F.lit(None).cast(OUTPUT_TYPES["decontam_cuts"])
    return joined.select(
        *[text.alias("text") if c == "text" else F.col(c) for c in docs.columns],
        F.coalesce("contaminated_by", F.array().cast(OUTPUT_TYPES["contaminated_by"])).alias(
            "contaminated_by"
        ),
        F.coalesce("decontam_items", F.array().cast(OUTPUT_TYPES["decontam_items"])).alias("decontam_items"),
        F.coalesce("decontam_matched_ngrams", F.lit(0)).alias("decontam_matched_ngrams"),
        cuts.alias("decontam_cuts"),
        action.alias("decontam_action"),
    )


def set_summary(matches: DataFrame, index: EvalIndex) -> dict[str, Any]:
    """Per set: items, items found, documents matched, n-grams matched, the :data:`TOP_ITEMS` most matched.

    "n-grams matched" counts (document, key) pairs: a key found in two documents counts twice.
    """
    items = matches.select("doc_id", F.explode("decontam_items").alias("m")).select("doc_id", "m.*")
    # Both groupings in one union of aggregations: one collect, one Spark job planned, not two.
    by_item = items.groupBy("set_name", "item_id").agg(
        F.lit(False).alias("_set"), F.count("*").alias("docs"), F.sum("n_ngrams").alias("ngrams"))
    by_set = items.groupBy("set_name").agg(
        F.lit(None).cast("string").alias("item_id"), F.lit(True).alias("_set"),
        F.countDistinct("doc_id").alias("docs"), F.lit(None).cast("long").alias("ngrams"))
    both = by_item.unionByName(by_set).collect()
    per_item = [r for r in both if not r["_set"]]
    per_set = {r["set_name"]: r["docs"] for r in both if r["_set"]}
    out: dict[str, Any] = {}
    for name, s in index.summary.items():
        rows = sorted(
            (r for r in per_item if r["set_name"] == name),
            key=lambda r: (-r["docs"], -r["ngrams"], r["item_id"]),
        )
        out[name] = {
            "items": s["items"],
            "indexed": s["indexed"],
            "skipped": s["skipped"],
            "missing_fields": s["missing_fields"],
            "items_found": len(rows),
            "docs_matched": int(per_set.get(name, 0)),
            "ngrams_matched": int(sum(r["ngrams"] for r in rows)),
            "top_items": [
                {"item_id": r["item_id"], "docs": int(r["docs"]), "ngrams": int(r["ngrams"])}
                for r in rows[:TOP_ITEMS]
            ],
        }
    return out


def run(spark: SparkSession, cfg: WinnowConfig, join: str | None = None) -> StageReport:
    """Read ``refs_checked``, find evaluation overlap, write ``decontaminated`` and ``removed`` rows.

    Args:
        join: force the ``broadcast`` or ``shuffle`` join path (default: by ``broadcast_max_ngrams``).

    Returns:
        The :class:`StageReport`; ``removed`` counts documents under their first reason; ``extra``
        holds documents by action, the join path, whether ``eval_ngrams`` was reused, and the per-set
        summary (:func:`set_summary`).
    """
    dc = cfg.decontam
    # Read by the n-gram match, the cut and the stage's counts: cached for the stage while small.
    src = tables.read_table(spark, cfg, INPUT_TABLE, cache_under_bytes=tables.SMALL_TABLE_BYTES)
    if not dc.eval_sets:
        out = src.select(
            "*",
            F.array().cast(OUTPUT_TYPES["contaminated_by"]).alias("contaminated_by"),
            F.array().cast(OUTPUT_TYPES["decontam_items"]).alias("decontam_items"),
            F.lit(0).alias("decontam_matched_ngrams"),
            F.lit(None).cast(OUTPUT_TYPES["decontam_cuts"]).alias("decontam_cuts"),
            F.lit("none").alias("decontam_action"),
        )
        rows = src.count()
        none = out.limit(0).withColumn("reason", F.array().cast("array<string>"))
        outputs = tables.publish(
            spark,
            cfg,
            STAGE,
            {OUTPUT_TABLE: out},
            removed=none,
            properties={"action": dc.action, "eval_sets": "none"},
        )
        return StageReport(
            stage=STAGE,
            rows_in=rows,
            rows_out=rows,
            outputs=outputs,
            extra={"actions": {"none": rows}, "sets": {}},
        )
    index = build_eval_ngrams(spark, cfg)
    path = join or join_path(index, dc)
    log.info(
        "decontam: %d evaluation n-grams + %d short items (%s), %s join",
        index.ngram_keys.size,
        index.short_keys.size,
        "eval_ngrams reused" if index.reused else "eval_ngrams built",
        path,
    )
    matches = find_matches(src, index, dc, path).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        checked = decontaminate(src, matches, dc, index.short_lengths)
        # Only matched documents can take an action other than 'none': those few are checked again and
        # cached for the counts and the removed rows, and the output table is written in one pass over
        # the input. Caching every checked row (text included) cost more than the write itself at scale,
        # see bench/notes.md "Refs and decontam at scale".
        hits = src.join(F.broadcast(matches.select("doc_id")), "doc_id", "left_semi")
        matched = decontaminate(hits, matches, dc, index.short_lengths).persist(tables.TEXT_CACHE)
        try:
            reasons = F.transform("contaminated_by", lambda s: F.concat(F.lit(REASON_PREFIX), s))
            dropped = matched.where(F.col("decontam_action") == "drop").withColumn("reason", reasons)
            # Documents per action and dropped ones per first reason in one union of aggregations (one
            # Spark job, not two); the input's rows from its Delta log (a local run's), not a count job.
            n = F.count(F.lit(1)).alias("n")
            per_action = (matched.groupBy(F.col("decontam_action").alias("key"))
                          .agg(F.lit("action").alias("p"), n))
            per_first = (dropped.groupBy(F.element_at("reason", 1).alias("key"))
                         .agg(F.lit("first").alias("p"), n))
            tallies = per_action.unionByName(per_first).collect()
            by_action = {r["key"]: r["n"] for r in tallies if r["p"] == "action"}
            first = {r["key"]: r["n"] for r in tallies if r["p"] == "first"}
            unmatched = tables.table_rows(spark, cfg.table_path(INPUT_TABLE), src) - sum(by_action.values())
            if unmatched:
                by_action["none"] = by_action.get("none", 0) + unmatched
            summary = set_summary(matches, index)
            outputs = tables.publish(
                spark,
                cfg,
                STAGE,
                {OUTPUT_TABLE: checked.where(F.col("decontam_action") != "drop")},
                removed=dropped,
                properties={
                    "action": dc.action,
                    "eval_fingerprint": index.fingerprint,
                    "join": path,
                    "summary": summary,
                },
            )
        finally:
            matched.unpersist()
    finally:
        matches.unpersist()
    rows = sum(by_action.values())
    n_drop = by_action.get("drop", 0)
    return StageReport(
        stage=STAGE,
        rows_in=rows,
        rows_out=rows - n_drop,
        removed=dict(sorted(first.items())),
        outputs={**outputs, EVAL_TABLE: cfg.table_path(EVAL_TABLE)},
        extra={
            "actions": dict(sorted(by_action.items())),
            "join": path,
            "eval_ngrams_reused": index.reused,
            "eval_ngrams": int(index.ngram_keys.size),
            "short_items": int(index.short_keys.size),
            "sets": summary,
        },
        notes={"flagged": by_action.get("flag", 0), "cut": by_action.get("cut", 0)},
    )
