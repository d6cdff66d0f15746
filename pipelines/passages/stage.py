"""``run(spark, cfg)`` of the passages stage: read ``deduped``, cut, write, count."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.core import chain, tables
from pipelines.core.cache import release
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport, unless_set
from pipelines.passages.transform import (
    ACTION_COLUMN,
    CHARS_IN_COLUMN,
    RANK_COLUMN,
    SPANS_COLUMN,
    STAGE,
    annotate_all,
    annotate_touched,
    kept_rows,
    removed_units,
)
from udfs.paragraphs import IDX_BITS, split

OUTPUT_TABLE = chain.stage(STAGE).main_table
EXCERPT_CHARS = 200
"""Characters of each most-repeated unit shown in the report."""

_UNITS = f"size(filter({SPANS_COLUMN}, s -> s.kind != 'span'))"
_SPANS = f"size(filter({SPANS_COLUMN}, s -> s.kind = 'span'))"
_CHARS = f"aggregate({SPANS_COLUMN}, 0L, (acc, s) -> acc + s.end - s.start)"


CACHE_SETTINGS = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
"""Spark settings while the stage runs (unless ``spark.conf`` or the session sets them): the frames it
persists (the ranked documents, the units, the near rule's reduce output, the annotations) are built without
Spark's column compression. A compressed cache batch gathers every scheme's statistics over every
value (dictionary encoding hashes each string: the whole text of every document) and copies each column
once more, while the text and the n-gram lists, most of the bytes, take none of the schemes. The Winnow
child of ``bench.passages`` spent ~4 % less CPU without it (JVM 23.4 -> 22.3 CPU-s, three runs each in
the same minutes), the same outputs (bench/notes.md, "Passages: the report's units in two jobs")."""

_COUNTS = ("documents", "units_removed", "passages_removed", "chars_removed", "chars_in")


def _source(df: DataFrame) -> Any:
    return F.coalesce(F.col("source"), F.lit("")) if "source" in df.columns else F.lit("")


def _counts(ann: DataFrame, more: list[dict[str, Any]] | None = None
            ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One aggregation by source and action: per source documents read, cut, removed whole, units,
    passages and characters cut, characters read; and documents per action. ``more``: rows of the same
    shape counted beside ``ann``'s (:func:`_untouched_counts`)."""
    rows = ann.groupBy(_source(ann).alias("source"), F.col(ACTION_COLUMN).alias("action")).agg(
        F.count(F.lit(1)).alias("documents"),
        F.sum(F.coalesce(F.expr(_UNITS), F.lit(0))).alias("units_removed"),
        F.sum(F.coalesce(F.expr(_SPANS), F.lit(0))).alias("passages_removed"),
        F.sum(F.coalesce(F.expr(_CHARS), F.lit(0))).alias("chars_removed"),
        F.sum(CHARS_IN_COLUMN).alias("chars_in"),
    ).collect() + (more or [])
    by_source: dict[str, dict[str, Any]] = {}
    actions: dict[str, int] = {}
    for r in rows:
        zero = {"source": r["source"], **dict.fromkeys(("documents_cut", "documents_removed", *_COUNTS), 0)}
        s = by_source.setdefault(r["source"], zero)
        for k in _COUNTS:
            s[k] += int(r[k] or 0)
        if r["action"] == "cut":
            s["documents_cut"] += int(r["documents"])
        elif r["action"].startswith(f"{STAGE}."):
            s["documents_removed"] += int(r["documents"])
        actions[r["action"]] = actions.get(r["action"], 0) + int(r["documents"])
    return [by_source[k] for k in sorted(by_source)], actions


def _top_units(counts: DataFrame, docs: DataFrame, k: int, unit: str) -> list[dict[str, Any]]:
    """The ``k`` most repeated units: occurrences, where first seen, an excerpt (count desc, then the
    first occurrence's position: ties do not depend on the exact key's hash).

    Two Spark jobs: the top ``k`` keys with their first unit id, then the text of the (at most ``k``)
    documents holding those first units, found by rank (:func:`pipelines.passages.transform.first_doc`).
    The unit's span is that document's unit number ``idx`` (the id's low bits) as
    :func:`udfs.paragraphs.split` cuts it, as :func:`udfs.paragraphs.paragraph_batch` numbered it; a
    join of the keys with the units and the documents instead took four jobs (three broadcasts).

    Args:
        counts: :func:`pipelines.passages.transform.key_counts` (``key``, ``n``, ``first``).
        docs: the documents with :data:`pipelines.passages.transform.RANK_COLUMN` (``doc_id``, ``text``).
        k: units to list (0: none, no job).
        unit: ``passages.unit``, the split the unit ids were numbered in.
    """
    if k == 0:
        return []
    top = counts.orderBy(F.col("n").desc(), "first").limit(k).select("n", "first").collect()
    if not top:
        return []
    ranks = sorted({r["first"] >> IDX_BITS for r in top})
    texts = {r[RANK_COLUMN]: (r["doc_id"], r["text"] or "") for r in
             docs.where(F.col(RANK_COLUMN).isin(ranks)).select("doc_id", RANK_COLUMN, "text").collect()}
    out = []
    for r in top:
        doc_id, text = texts[r["first"] >> IDX_BITS]
        start, end = split(text, unit)[r["first"] & ((1 << IDX_BITS) - 1)]
        out.append({"occurrences": int(r["n"]), "first_seen_in": doc_id,
                    "excerpt": text[start:start + min(end - start, EXCERPT_CHARS)]})
    return out


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read ``deduped``, cut repeated units and passages, write ``passages_deduped`` and ``removed``.

    With ``passages.enabled=false`` nothing is written but the stage's rows of ``removed`` cleared: the
    stage is switched off in the chain (:attr:`pipelines.core.chain.Stage.switch`), so the stages after it
    read ``deduped`` itself (no copy).

    Returns:
        StageReport with documents removed by reason, ``notes`` ``{"cut": documents cut and kept}``, and
        in ``extra``: ``by_source`` (documents, documents_cut, documents_removed, units_removed,
        passages_removed, chars_removed, chars_in per source) and ``top_units`` (occurrences,
        first_seen_in, excerpt of the most repeated units).
    """
    c = cfg.passages
    docs = tables.read_table(spark, cfg, chain.stage(STAGE).input)
    report = StageReport(STAGE)
    if not c.enabled:
        # Switched off (chain.Stage.switch): no table is written; later stages read the input directly.
        report.rows_in = report.rows_out = docs.count()
        empty = docs.limit(0).withColumn("reason", F.array().cast("array<string>")).withColumn(
            "duplicate_of", F.lit(None).cast("string"))
        report.outputs = {"removed": tables.clear_removed(spark, cfg, STAGE, empty)}
        return report

    # Not cached here: the unit rules read the text once for the paragraph kernel and once where it is
    # cut and written (span mode: once into the ranked documents' cache, with_ranks); a disk cache of
    # every text cost more to build and read back than reading the Delta files again.
    cached: list[DataFrame] = []
    with tables.session_conf(spark, _cache_settings(spark, cfg)):
        _annotate_and_publish(spark, cfg, docs, report, cached)
    for df in cached:
        release(df)
    return report


def _cache_settings(spark: SparkSession, cfg: WinnowConfig) -> dict[str, str]:
    """:data:`CACHE_SETTINGS` less those ``spark.conf`` names or the session already has."""
    return unless_set(spark, cfg, CACHE_SETTINGS)


def _annotate_and_publish(spark: SparkSession, cfg: WinnowConfig, docs: DataFrame, report: StageReport,
                          cached: list[DataFrame]) -> None:
    """The enabled stage's work on ``docs``: annotate, count, write both tables, fill ``report``;
    every frame persisted is appended to ``cached`` (the caller unpersists them).

    Where only the unit rules run and the documents that lost a unit are few enough to broadcast
    (:data:`pipelines.passages.transform.BROADCAST_ROWS`), only those documents are cut, persisted and
    counted (:func:`pipelines.passages.transform.annotate_touched`); the kept table is written in one
    pass over ``docs`` (:func:`pipelines.passages.transform.kept_rows`) and the other documents are
    counted from it (:func:`_untouched_counts`). Otherwise every document's annotated row, text
    included, is persisted for the counts and both writes."""
    c = cfg.passages
    parts: dict[str, DataFrame] = {}
    ranked, ranks, units, fits = removed_units(docs, c, cached, parts)
    few = units is not None and fits and not c.spans
    if few:
        ann = annotate_touched(docs, units, c).persist(tables.TEXT_CACHE)
        kept = kept_rows(docs, ann)
    else:
        ann = annotate_all(docs, ranked, ranks, units, c, cached, fits).persist(tables.TEXT_CACHE)
        kept = ann.where(F.col(ACTION_COLUMN).isin("keep", "cut")).select(*docs.columns, SPANS_COLUMN)
    cached.append(ann)

    original = {name: F.col(name) for name in docs.columns}
    original["text"] = F.col("_input_text")
    if "n_chars" in original:
        original["n_chars"] = F.length("_input_text").cast("int")
    if "n_bytes" in original:
        original["n_bytes"] = F.octet_length("_input_text").cast("int")
    removed = ann.where(F.col(ACTION_COLUMN).startswith(f"{STAGE}.")).select(
        *(v.alias(k) for k, v in original.items()), SPANS_COLUMN, F.array(ACTION_COLUMN).alias("reason"),
        F.col(SPANS_COLUMN)[0]["first_seen_in"].alias("duplicate_of"))
    props = {"unit": c.unit, "exact": c.exact, "near": c.near, "spans": c.spans, "ngram_size": c.ngram_size,
             "overlap": c.overlap, "doc_overlap": c.doc_overlap, "min_chars_after": c.min_chars_after}
    report.outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=removed,
                                    properties=props)
    # counted after the write: the untouched documents are counted from the kept table it wrote
    by_source, actions = _counts(ann, _untouched_counts(spark, cfg, ann, docs.columns) if few else None)
    report.rows_in = sum(actions.values())
    report.rows_out = actions.get("keep", 0) + actions.get("cut", 0)
    report.removed = {k: v for k, v in sorted(actions.items()) if k.startswith(f"{STAGE}.")}
    report.notes = {"cut": actions.get("cut", 0)}
    report.extra = {"by_source": by_source,
                    "top_units": _top_units(parts["key_counts"], parts["documents"], c.top_paragraphs,
                                            c.unit)}


def _untouched_counts(spark: SparkSession, cfg: WinnowConfig, touched: DataFrame,
                      columns: list[str]) -> list[dict[str, Any]]:
    """:func:`_counts`' rows (action ``keep``, nothing cut) of the documents not in ``touched``, by source,
    from the kept table just written: each is there as read, so its ``n_chars`` (when the table has the
    column; else the length of its ``text``) is the code points it was read with. Only ``doc_id``,
    ``source`` and ``n_chars`` are read where ``n_chars`` exists, not the text."""
    written = tables.read_table(spark, cfg, OUTPUT_TABLE, written_by=STAGE)
    chars = F.col("n_chars") if "n_chars" in columns else F.length("text")
    rows = (written.join(F.broadcast(touched.select("doc_id")), "doc_id", "left_anti")
            .groupBy(_source(written).alias("source"))
            .agg(F.count(F.lit(1)).alias("documents"), F.sum(chars).alias("chars_in")).collect())
    return [{"source": r["source"], "action": "keep", "documents": r["documents"], "units_removed": 0,
             "passages_removed": 0, "chars_removed": 0, "chars_in": r["chars_in"]} for r in rows]
