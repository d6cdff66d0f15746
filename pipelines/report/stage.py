"""The run report: ``<run.root>/report/stats.json`` (machine-readable) and ``report.html`` (one static page).

Every part is drawn only from what exists under ``run.root``: a run of ingest alone gets a funnel of
one step and its quarantine counts; each later stage's table adds its part (removals by reason,
quality-signal histograms with the configured thresholds, language mix, duplicate-cluster sizes,
broken references by kind, token lengths, shard balance and shuffle quality from ``manifest.json``,
per-stage figures from the completion records, sampled removed documents per reason).

All figures come from Spark aggregations; only histogram inputs (a seeded sample of at most
``report.hist_sample_rows`` rows) and the sampled documents reach the driver.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.core import chain, hooks, tables
from pipelines.core.chain import STAGES, marker_files
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.core.tables import read_if_exists
from pipelines.filter.report import filter_breakdown, filter_groups
from pipelines.filter.rules import thresholds  # noqa: F401  (re-exported: callers look it up here)
from pipelines.report.sections import (  # noqa: F401  (re-exported: callers look them up here)
    DOCUMENT_COLUMNS,
    MIX_COLUMNS,
    NOT_SIGNALS,
    _shard_part,
    broken_refs,
    cluster_sizes,
    find_key,
    language_mix,
    pii_summary,
    read_manifest,
    samples,
    signal_columns,
    signal_sample,
    stage_records,
    token_lengths,
)

REREAD_TABLES = ("filtered", "refs_checked", "pii_redacted", "tokenized", "removed")
"""Tables the report's parts query more than once (``removed`` by six, ``filtered`` by three, the others
twice): cached while they read them when small (:data:`pipelines.core.tables.SMALL_TABLE_BYTES`). The tables read once
(``documents``, ``quarantine``, ``decontaminated`` in :func:`table_totals`) are not: persisting costs a
Spark job planning the Delta scan, the same as the one query."""

SIGNAL_TABLES = ("filtered", "removed")
"""The tables :func:`pipelines.report.sections.signal_sample` reads."""


def _bytes_col(df: DataFrame) -> Column | None:
    if "n_bytes" in df.columns:
        return F.col("n_bytes")
    if "text" in df.columns:
        return F.octet_length("text")
    return None


# --------------------------------------------------------------------------------------------- parts
TOTALS_KEY = {"quarantine": "reason", "decontaminated": "decontam_action"}
"""Column :func:`table_totals` groups a table by: the quarantine reasons of :func:`removals`, the
documents per action of :func:`pipelines.decontam.report.contamination`."""


def table_sum(rows: list[dict[str, Any]]) -> dict[str, int | None]:
    """``documents``, ``bytes``, ``tokens`` of :func:`table_totals` rows of one table added up; a
    sum that is None in every row (or of no rows: an empty grouped table) stays None, as Spark's
    ``sum`` of nulls; ``documents`` of no rows is 0."""
    out: dict[str, int | None] = {"documents": sum(int(r["documents"]) for r in rows)}
    for c in ("bytes", "tokens"):
        vals = [int(r[c]) for r in rows if r[c] is not None]
        out[c] = sum(vals) if vals else None
    return out


def table_totals(spark: SparkSession, cfg: WinnowConfig) -> dict[str, list[dict[str, Any]]]:
    """Documents, bytes (UTF-8) and tokens of every main table of the chain (:func:`chain.main_tables`),
    quarantined records by reason and documents holding U+FFFD, in one Spark query.

    Each table is read once here, all of them in one union of aggregations (one collect; one Spark job
    where adaptive execution is off, as for a small local run: :func:`pipelines.core.runner.small_input_settings`):
    the funnel, the quarantine reasons of :func:`removals`, decontam's actions and
    ``replacement_char_documents`` of :func:`pipelines.filter.report.filter_breakdown` were thirteen queries.

    Returns:
        Table name -> rows ``{key, documents, bytes, tokens, flagged}``: one row per value of the
        table's :data:`TOTALS_KEY` column (its ``key``; one row with ``key`` None for the other main
        tables); tables that do not exist are absent. ``flagged`` is the number of ``documents`` rows
        holding U+FFFD (None elsewhere or without ``text``). :func:`table_sum` adds up a table's rows.
    """
    from functools import reduce

    from pipelines.filter.report import replacement_char

    none = F.lit(None).cast("long")
    parts: list[DataFrame] = []
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("quarantine", *(t for _, t in chain.main_tables(cfg))):
        df = read_if_exists(spark, cfg, name)
        if df is None:
            continue
        b = _bytes_col(df) if name != "quarantine" else None
        has = replacement_char(df) if name == "documents" else None
        aggs = [F.count(F.lit(1)).alias("documents"), (F.sum(b) if b is not None else none).alias("bytes"),
                (F.sum("n_tokens") if "n_tokens" in df.columns else none).alias("tokens"),
                (F.count(F.when(has, 1)) if has is not None else none).alias("flagged")]
        key = TOTALS_KEY.get(name)
        if key in df.columns:
            per = df.groupBy(F.col(key).cast("string").alias("key")).agg(*aggs)
        else:  # a global aggregation: one reduce task, where a grouping by a constant has shuffle_partitions
            per = df.agg(F.lit(None).cast("string").alias("key"), *aggs)
        parts.append(per.select(F.lit(name).alias("table"), "*"))
        out[name] = []  # a grouped table without rows has no row in the union
    if parts:
        for r in reduce(DataFrame.unionByName, parts).collect():
            out[r["table"]].append({k: r[k] for k in ("key", "documents", "bytes", "tokens", "flagged")})
    return out


def funnel(spark: SparkSession, cfg: WinnowConfig, manifest: dict[str, Any] | None,
           totals: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """Documents, bytes (UTF-8) and tokens after each stage whose table exists, in chain order.

    Args:
        totals: :func:`table_totals` of this run, when the caller has them (else queried here).

    Returns:
        Rows ``{step, table, documents, bytes, tokens}``; ``bytes``/``tokens`` are None where the table
        does not carry them. The first row, ``read``, counts ingest's records (documents + quarantined).
    """
    totals = table_totals(spark, cfg) if totals is None else totals
    rows: list[dict[str, Any]] = []
    if "documents" in totals:
        n_q = sum(int(r["documents"]) for r in totals.get("quarantine", []))
        rows.append({"step": "read", "table": "input records", "documents": None, "records": None, "quarantined": n_q})
    for stage, name in chain.main_tables(cfg):
        if name not in totals:
            continue
        r = table_sum(totals[name])
        rows.append({"step": stage, "table": name, "documents": int(r["documents"]),
                     "bytes": _int(r["bytes"]), "tokens": _int(r["tokens"])})
    if rows and rows[0]["step"] == "read":
        first = rows[1]["documents"] if len(rows) > 1 else 0
        rows[0]["records"] = first + rows[0]["quarantined"]
        rows[0]["documents"] = rows[0]["records"]
    if manifest is not None:
        totals = manifest.get("totals", manifest)
        # Shard bytes are on-disk bytes of token files, not text bytes: kept apart from the text column.
        rows.append({"step": "shard", "table": "shards", "documents": _int(totals.get("documents")),
                     "bytes": None, "tokens": _int(totals.get("tokens")), "shard_bytes": _int(totals.get("bytes"))})
    return rows


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def removed_totals(spark: SparkSession, cfg: WinnowConfig) -> list[dict[str, Any]] | None:
    """Rows of ``removed`` by stage and reason (a document with several reasons counts under each), in
    one Spark query; None when the table does not exist.

    Returns:
        Rows ``{stage, reason, documents, bytes, rows}``: ``rows`` counts each removed document once,
        under its first reason, so its sum over a stage is the documents the stage removed.
    """
    removed = read_if_exists(spark, cfg, "removed")
    if removed is None:
        return None
    b = _bytes_col(removed)
    g = (
        removed.select("stage", F.posexplode_outer("reason").alias("pos", "reason"),
                       (b if b is not None else F.lit(None)).alias("b"))
        .groupBy("stage", "reason")
        # posexplode_outer gives a document's first reason (or its null one) position 0 or null.
        .agg(F.count(F.lit(1)).alias("n"), F.sum("b").alias("bytes"),
             F.count(F.when(F.coalesce(F.col("pos"), F.lit(0)) == 0, 1)).alias("rows"))
        .collect()
    )
    return [{"stage": r["stage"], "reason": r["reason"], "documents": int(r["n"]), "bytes": _int(r["bytes"]),
             "rows": int(r["rows"])} for r in g]


def _rows_by_stage(removed: list[dict[str, Any]]) -> dict[str, int]:
    """Documents removed per stage from :func:`removed_totals` rows."""
    out: dict[str, int] = {}
    for r in removed:
        out[r["stage"]] = out.get(r["stage"], 0) + r["rows"]
    return out


def removals(spark: SparkSession, cfg: WinnowConfig, totals: dict[str, list[dict[str, Any]]] | None = None,
             removed: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Removed documents by stage and reason (a document with several reasons counts under each).

    Args:
        totals, removed: :func:`table_totals` and :func:`removed_totals` of this run, when the caller
            has them (else queried here).

    Returns:
        Rows ``{stage, reason, documents, bytes}`` sorted by stage order then reason; quarantined
        ingest records appear with stage ``ingest``.
    """
    totals = table_totals(spark, cfg) if totals is None else totals
    removed = removed_totals(spark, cfg) if removed is None else removed
    out: list[dict[str, Any]] = [{"stage": "ingest", "reason": f"quarantine.{r['key']}", "documents": int(r["documents"]),
                                  "bytes": None} for r in totals.get("quarantine", [])]
    out += [{"stage": r["stage"], "reason": r["reason"] or "(none)", "documents": r["documents"], "bytes": r["bytes"]}
            for r in removed or []]
    return sorted(out, key=lambda r: (STAGES.index(r["stage"]) if r["stage"] in STAGES else 99, r["reason"]))


def collect_stats(spark: SparkSession, cfg: WinnowConfig, signals: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Everything the report shows, as one JSON-serialisable dict (the content of ``stats.json``).

    Args:
        signals: :func:`signal_sample` of this run when the caller has it (else queried here).
    """
    from pipelines.decontam.report import contamination  # imports pyspark-heavy stage code; only here

    manifest = read_manifest(spark, cfg)
    totals, removed, groups = table_totals(spark, cfg), removed_totals(spark, cfg), filter_groups(spark, cfg)
    documents = (totals.get("documents") or [{}])[0]
    values, thr = signals if signals is not None else signal_sample(spark, cfg)
    records = stage_records(spark, cfg)
    tokenized = read_if_exists(spark, cfg, "tokenized")
    tok_props = tables.table_properties(spark, cfg.table_path("tokenized")) if tokenized is not None else {}
    stats = {
        "run": {"root": cfg.run.root, "seed": cfg.run.seed, "config_fingerprint": cfg.fingerprint()},
        "stages": records,
        "funnel": funnel(spark, cfg, manifest, totals),
        "removals": removals(spark, cfg, totals, removed),
        "filter_breakdown": filter_breakdown(spark, cfg, documents.get("flagged"), groups),
        **signal_part(values, thr),
        "language_mix": language_mix(spark, cfg, groups),
        "cluster_sizes": cluster_sizes(spark, cfg),
        "broken_refs": broken_refs(spark, cfg),
        "contamination": contamination(
            spark, cfg, {r["key"]: int(r["documents"]) for r in totals.get("decontaminated", [])},
            removed_by_stage=None if removed is None else _rows_by_stage(removed)),
        "pii": pii_summary(spark, cfg),
        "token_lengths": token_lengths(spark, cfg),
        "shards": _shard_part(manifest),
        "tokenizer_round_trip": {
            **find_key(tok_props, "roundtrip"),
            **{f"{r['stage']}.{k}": v for r in records for k, v in find_key(r["extra"], "roundtrip").items()},
        },
        "samples": samples(spark, cfg),
    }
    parts = package_parts(spark, cfg)
    taken = sorted(set(parts) & set(stats))
    if taken:
        raise ValueError(f"report_part hooks of {taken} would replace the report's own parts of the same names")
    return {**stats, **parts}


def signal_part(values: dict[str, Any], thr: dict[str, Any]) -> dict[str, Any]:
    """The ``signals`` and ``signal_values`` parts of ``stats.json`` from :func:`signal_sample`."""
    return {"signals": {c: {"n": len(v["kept"]) + len(v["removed"]), "thresholds": thr[c]} for c, v in values.items()},
            "signal_values": values}


def package_parts(spark: SparkSession, cfg: WinnowConfig) -> dict[str, Any]:
    """The parts of ``stats.json`` that packages add through their ``report_part`` hook
    (:mod:`pipelines.core.hooks`), each under the package's name; a package with nothing to show adds none.

    Returns:
        ``{package name: its part}``, in :data:`pipelines.core.chain.PACKAGES` order.
    """
    parts = {name: part(spark, cfg) for name, part in hooks.each("report_part", chain.PACKAGES)}
    return {name: part for name, part in parts.items() if part is not None}


DRAWING_SWITCH_INTERVAL_S = 0.0002
"""CPython's thread switch interval (:func:`sys.setswitchinterval`) while the report draws on its thread."""


@contextmanager
def short_gil_turns(interval_s: float = DRAWING_SWITCH_INTERVAL_S) -> Iterator[None]:
    """Run the block with threads taking turns at the GIL every ``interval_s`` seconds, then restore
    the interpreter's interval.

    The drawing thread holds the GIL for seconds of matplotlib. The main thread plans the report's
    queries in hundreds of short Py4J calls, and at CPython's default interval (5 ms) it waits up to
    that long for the GIL after each answer from the JVM: 1.0-1.5 s of the stage on ``make run``'s
    sample (its queries 4.7 s beside the drawing at 5 ms, 3.4-3.9 s at 0.2 ms, 3.2 s with no drawing).
    """
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Write ``stats.json`` and ``report.html`` under ``<run.root>/report/`` from whatever tables exist.

    Returns:
        A report with ``rows_in == rows_out`` = documents in the last table of the funnel (the report
        removes nothing) and the two files as outputs.

    Raises:
        tables.MissingTableError: no ``documents`` table under ``run.root`` (ingest never ran there,
            or the root is mistyped): an empty report would look like a run that kept nothing.
    """
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.report.html import render_html, signals_section

    if not tables.table_exists(spark, cfg.table_path("documents")):
        raise tables.MissingTableError(
            f"report: no 'documents' table under run.root={cfg.run.root!r}; run the 'ingest' stage first "
            "(or check run.root)"
        )
    # The signal histograms (most of the page's drawing: ~50 ms of matplotlib each, dozens of them) are
    # drawn on a thread while the driver waits on the other parts' Spark queries. They are the stage's
    # longest path on a busy machine, so they start as soon as their sample is in: the other tables are
    # set up for caching after it.
    first = [t for t in REREAD_TABLES if t in SIGNAL_TABLES]
    with ThreadPoolExecutor(1, thread_name_prefix="winnow-report-draw") as pool, short_gil_turns():
        try:
            for name in first:
                read_if_exists(spark, cfg, name, cache_under_bytes=tables.SMALL_TABLE_BYTES)
            signals = signal_sample(spark, cfg)
            fmt, bins = cfg.report.plot_format, cfg.report.hist_bins
            drawing = pool.submit(signals_section, signal_part(*signals), fmt, bins)
            for name in (t for t in REREAD_TABLES if t not in first):
                read_if_exists(spark, cfg, name, cache_under_bytes=tables.SMALL_TABLE_BYTES)
            stats = collect_stats(spark, cfg, signals)
        finally:
            tables.release_cached(spark)
        html = render_html(stats, cfg, {"signals_section": drawing.result()})
    stats_path = marker_files(cfg, "report")[f"report/{chain.STATS}"]
    html_path = f"{cfg.report_path}/report.html"
    tables.write_text(spark, html_path, html)
    # stats.json last: its digest is the report's completion marker (pipelines/core/runs.py).
    tables.write_text(spark, stats_path, json.dumps(stats, indent=1, sort_keys=True, default=str) + "\n")
    tables.publish(spark, cfg, "report", {})
    last = next((r["documents"] for r in reversed(stats["funnel"]) if r["documents"] is not None), 0)
    return StageReport(stage="report", rows_in=last, rows_out=last, outputs={"stats": stats_path, "html": html_path})
