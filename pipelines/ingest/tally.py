"""Ingest's accounting in as few Spark jobs as possible: one aggregation over the parsed records, one
for duplicated source ids (the row counts of the written tables come from their Delta commits,
:func:`pipelines.core.tables.written_rows`).

Why: on one 1 GB JSONL file (bench/notes.md, "Ingest alone") the separate jobs of the first design (the
split summaries, a sum of characters, counts per file and reason, a shuffle join of every document with
the duplicated ids, and two reads of the written tables) cost about as much CPU as parsing the file.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

DUP_BROADCAST_MAX = 100_000
"""Source ids seen more than once within their source that the driver collects and broadcasts to the
document rows; more than this and the documents are joined with them through a shuffle instead (the
driver then holds none)."""


@dataclass
class Tally:
    """What one pass over the parsed records says, collected on the driver.

    Attributes:
        summaries: the ``kind = "file"`` rows (``input_file``, ``key_path``, ``split_start``,
            ``record``, ``meta``), one per split, as dicts.
        counts: ``(input_file, reason, rows)`` of documents (``reason`` ``None``) and quarantined records.
        chars, n_bytes, replaced: sums of ``n_chars``, ``n_bytes``, ``n_replaced`` over the documents.
        with_src_id: documents with a non-empty source id (0: no id can be duplicated).
        by_source: documents per ``source`` (``""`` for none), for the chain's ``shard.mix`` check.
    """

    summaries: list[dict[str, Any]] = field(default_factory=list)
    counts: list[tuple[str, str | None, int]] = field(default_factory=list)
    chars: int = 0
    n_bytes: int = 0
    replaced: int = 0
    with_src_id: int = 0
    by_source: Counter = field(default_factory=Counter)


def has_src_id() -> Any:
    """True where a row carries a non-empty source id (the candidate ``doc_id`` ``source/src_id``)."""
    return F.col("src_id").isNotNull() & (F.col("src_id") != "")


def tally(records: DataFrame) -> Tally:
    """One aggregation over the parser's rows (:data:`pipelines.ingest.stage.RECORD_DDL`): per split, kind and
    reason the rows, their sums, and the split's summary rows.

    Returns:
        The :class:`Tally` (record numbers play no part, so this may run before they are fixed).
    """
    is_doc = F.col("kind") == "doc"
    summary = F.when(F.col("kind") == "file", F.struct("key_path", "record", "meta"))
    rows = (
        records.groupBy("input_file", "split_start", "kind", "reason",
                        F.coalesce(F.col("source"), F.lit("")).alias("src"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(is_doc, F.col("n_chars"))).alias("chars"),
            F.sum(F.when(is_doc, F.col("n_bytes"))).alias("bytes"),
            F.sum(F.when(is_doc, F.col("n_replaced"))).alias("replaced"),
            F.sum(F.when(is_doc & has_src_id(), 1)).alias("with_src_id"),
            F.collect_list(summary).alias("files"),  # nulls (other kinds) are left out
        )
        .collect()
    )
    t = Tally()
    per: Counter = Counter()
    for r in rows:
        if r["kind"] == "file":
            at = {"input_file": r["input_file"], "split_start": r["split_start"]}
            t.summaries += [{**at, "key_path": f["key_path"], "record": f["record"], "meta": f["meta"]}
                            for f in r["files"]]
            continue
        per[(r["input_file"], r["reason"] if r["kind"] != "doc" else None)] += int(r["n"])
        t.chars += int(r["chars"] or 0)
        t.n_bytes += int(r["bytes"] or 0)
        t.replaced += int(r["replaced"] or 0)
        t.with_src_id += int(r["with_src_id"] or 0)
        if r["kind"] == "doc":
            t.by_source[r["src"]] += int(r["n"])
    t.summaries.sort(key=lambda s: (s["input_file"], s["split_start"]))
    t.counts = sorted(((f, reason, n) for (f, reason), n in per.items()), key=lambda x: (x[0], x[1] or ""))
    return t


def duplicated_ids(spark: SparkSession, docs: DataFrame, candidate: Any, t: Tally) -> DataFrame | None:
    """The candidate ids (``_cand``) that more than one document holds, as a frame to join on ``_cand``
    (column ``_dup`` true); ``None`` when there is none (no join needed).

    At most :data:`DUP_BROADCAST_MAX` of them come back as a small local frame marked for broadcast (one
    Spark job, no shuffle of the documents; none at all when no document has a source id); more stay
    a distributed aggregate.
    """
    if not t.with_src_id:
        return None
    dups = (
        docs.where(has_src_id()).groupBy(candidate.alias("_cand")).count().where(F.col("count") > 1)
        .select("_cand", F.lit(True).alias("_dup"))
    )
    few = dups.limit(DUP_BROADCAST_MAX + 1).collect()
    if not few:
        return None
    if len(few) > DUP_BROADCAST_MAX:
        return dups
    return F.broadcast(spark.createDataFrame([(r["_cand"], True) for r in few], "_cand string, _dup boolean"))
