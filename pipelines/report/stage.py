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
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.chain import STAGES, marker_files
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.core.runs import latest_records
from pipelines.core.samples import row_signals, seeded_order, truncate
from pipelines.core.tables import read_bytes, read_if_exists
from pipelines.filter.report import filter_breakdown, filter_groups, profile_thresholds
from pipelines.filter.rules import thresholds  # noqa: F401  (re-exported: callers look it up here)

DOCUMENT_COLUMNS = frozenset(
    {"doc_id", "text", "source", "url", "meta", "input_file", "n_chars", "n_bytes", "n_replaced"}
)
"""Columns of ``documents``; numeric columns added by later stages are treated as signals."""

NOT_SIGNALS = frozenset({"cluster_size", "stage", "n_tokens", "duplicate_of"})

REREAD_TABLES = ("filtered", "refs_checked", "pii_redacted", "tokenized", "removed")
"""Tables the report's parts query more than once (``removed`` by six, ``filtered`` by three, the others
twice): cached while they read them when small (:data:`pipelines.core.tables.SMALL_TABLE_BYTES`). The tables read once
(``documents``, ``quarantine``, ``decontaminated`` in :func:`table_totals`) are not: persisting costs a
Spark job planning the Delta scan, the same as the one query."""

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
    for name in ("quarantine", *(t for _, t in chain.main_tables())):
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
    for stage, name in chain.main_tables():
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


_NUMERIC = (T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.ShortType)


def signal_columns(df: DataFrame) -> list[str]:
    """Numeric signals a stage added to the documents columns, sorted: top-level numeric columns and the
    numeric fields of struct columns (one struct per signal family), the latter as ``family.field``."""
    out = []
    for f in df.schema.fields:
        if f.name in DOCUMENT_COLUMNS or f.name in NOT_SIGNALS:
            continue
        if isinstance(f.dataType, _NUMERIC):
            out.append(f.name)
        elif isinstance(f.dataType, T.StructType):
            out += [f"{f.name}.{g.name}" for g in f.dataType.fields if isinstance(g.dataType, _NUMERIC)]
    return sorted(out)


def signal_sample(spark: SparkSession, cfg: WinnowConfig) -> tuple[dict[str, list[float]], dict[str, list[dict[str, Any]]]]:
    """A seeded sample of the filter's signals, over kept and filter-removed documents together.

    Returns:
        ``(values, thresholds)``: signal -> sampled values (nulls dropped), signal -> its thresholds.
    """
    kept = read_if_exists(spark, cfg, "filtered")
    if kept is None:
        return {}, {}
    cols = signal_columns(kept)
    sel = [F.col(c).alias(c) for c in cols]
    frames = [kept.select("doc_id", *sel)]
    removed = read_if_exists(spark, cfg, "removed")
    if removed is not None and set(signal_columns(removed)) >= set(cols):
        frames.append(removed.where(F.col("stage") == "filter").select("doc_id", *sel))
    both = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    pdf = both.orderBy(seeded_order(cfg.run.seed)).limit(cfg.report.hist_sample_rows).select(*[f"`{c}`" for c in cols]).toPandas()
    values = {c: [float(x) for x in pdf[c].dropna().tolist()] for c in cols}
    return values, {c: profile_thresholds(cfg.filter, c) for c in cols}


def language_mix(spark: SparkSession, cfg: WinnowConfig, groups: dict[str, Any] | None = None,
                 limit: int = 30) -> dict[str, list[dict[str, Any]]]:
    """Documents per language among kept and filter-removed documents (column ``lang``): the ``limit``
    most frequent values of each, ``[{value, documents}]``, ties by value (None first, as Spark's
    ascending order).

    Args:
        groups: :func:`pipelines.filter.report.filter_groups` of this run, when the caller has them
            (else queried here).
    """
    groups = filter_groups(spark, cfg) if groups is None else groups
    out: dict[str, list[dict[str, Any]]] = {"kept": [], "removed": []}
    for name in out:
        if groups is None or not groups["lang"].get(name):
            continue
        n: dict[str | None, int] = {}
        for r in groups["rows"]:
            if r["part"] == name:
                n[r["lang"]] = n.get(r["lang"], 0) + int(r["count"])
        top = sorted(n.items(), key=lambda kv: (-kv[1], kv[0] is not None, kv[0] or ""))[:limit]
        out[name] = [{"value": v, "documents": c} for v, c in top]
    return out


def cluster_sizes(spark: SparkSession, cfg: WinnowConfig) -> list[dict[str, Any]]:
    """Duplicate clusters per size: ``[{kind, size, clusters}]`` from ``dup_clusters``."""
    df = read_if_exists(spark, cfg, "dup_clusters")
    if df is None or "cluster_id" not in df.columns:
        return []
    # A cluster is "near" when any member was removed as a near duplicate, else "exact" (the
    # representative's own kind says nothing about the cluster).
    if "kind" in df.columns:
        rank = F.max(F.when(F.col("kind") == "near", 2).when(F.col("kind") == "exact", 1).otherwise(0))
        kind = F.element_at(F.array(F.lit("other"), F.lit("exact"), F.lit("near")), rank + 1)
    else:
        kind = F.lit("all")
    per = df.groupBy("cluster_id").agg(F.count(F.lit(1)).alias("size"), kind.alias("kind"))
    rows = per.groupBy("kind", "size").agg(F.count(F.lit(1)).alias("clusters")).orderBy("kind", "size").collect()
    return [{"kind": r["kind"], "size": int(r["size"]), "clusters": int(r["clusters"])} for r in rows]


def broken_refs(spark: SparkSession, cfg: WinnowConfig) -> list[dict[str, Any]]:
    """Dangling reference mentions by kind, over kept and refs-removed documents (``ref_mentions``)."""
    frames = []
    kept = read_if_exists(spark, cfg, "refs_checked")
    removed = read_if_exists(spark, cfg, "removed")
    for df in (kept, removed.where(F.col("stage") == "refs") if removed is not None else None):
        if df is not None and "ref_mentions" in df.columns:
            frames.append(df.select(F.explode("ref_mentions").alias("m")))
    if not frames:
        return []
    m = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    rows = (
        m.where(F.col("m.dangling"))
        .groupBy(F.col("m.kind").alias("kind"))
        .agg(F.count(F.lit(1)).alias("n"))
        .orderBy("kind")
        .collect()
    )
    return [{"kind": r["kind"], "dangling_mentions": int(r["n"])} for r in rows]


def pii_summary(spark: SparkSession, cfg: WinnowConfig) -> dict[str, Any] | None:
    """Findings and documents by kind, documents by action, dropped documents by reason (pii stage).

    Returns:
        ``{"by_kind": [{kind, findings, documents}], "documents": {action: n}, "dropped": [{reason,
        documents}]}`` over ``pii_redacted`` and the pii rows of ``removed``; None before pii ran.
    """
    kept = read_if_exists(spark, cfg, "pii_redacted")
    if kept is None or "pii_counts" not in kept.columns:
        return None
    removed = read_if_exists(spark, cfg, "removed")
    docs = kept.select("pii_counts", "pii_action", F.lit(None).cast("array<string>").alias("reason"))
    if removed is not None and "pii_counts" in removed.columns:
        docs = docs.unionByName(removed.where(F.col("stage") == "pii").select("pii_counts", "pii_action", "reason"))
    kinds = (docs.select(F.explode("pii_counts").alias("kind", "n")).groupBy("kind")
             .agg(F.sum("n").alias("findings"), F.count(F.lit(1)).alias("documents")).orderBy("kind").collect())
    actions = docs.groupBy("pii_action").agg(F.count(F.lit(1)).alias("n")).collect()
    dropped = (docs.where(F.col("pii_action") == "drop").select(F.explode("reason").alias("reason"))
               .groupBy("reason").agg(F.count(F.lit(1)).alias("n")).orderBy("reason").collect())
    return {
        "by_kind": [{"kind": r["kind"], "findings": int(r["findings"]), "documents": int(r["documents"])} for r in kinds],
        "documents": {r["pii_action"]: int(r["n"]) for r in sorted(actions, key=lambda r: r["pii_action"])},
        "dropped": [{"reason": r["reason"], "documents": int(r["n"])} for r in dropped],
    }


def token_lengths(spark: SparkSession, cfg: WinnowConfig) -> list[int]:
    """``n_tokens`` of a seeded sample of at most ``report.hist_sample_rows`` tokenized documents."""
    df = read_if_exists(spark, cfg, "tokenized")
    if df is None or "n_tokens" not in df.columns:
        return []
    rows = df.orderBy(seeded_order(cfg.run.seed)).limit(cfg.report.hist_sample_rows).select("n_tokens").collect()
    return [int(r[0]) for r in rows]


def samples(spark: SparkSession, cfg: WinnowConfig) -> list[dict[str, Any]]:
    """For each (stage, reason) of ``removed``, ``report.samples_per_reason`` documents chosen by a
    keyed hash of ``(run.seed, doc_id)``, with their scalar signal columns and truncated text.

    Returns:
        Rows ``{stage, reason, doc_id, duplicate_of, signals: {column: value}, text, n_chars}``.
    """
    from pyspark.sql.window import Window

    removed = read_if_exists(spark, cfg, "removed")
    k = cfg.report.samples_per_reason
    if removed is None or k == 0:
        return []
    w = Window.partitionBy("stage", "r").orderBy(seeded_order(cfg.run.seed), F.col("doc_id"))
    picked = (
        removed.select("*", F.explode_outer("reason").alias("r"))
        .withColumn("_rank", F.row_number().over(w))
        .where(F.col("_rank") <= k)
        .orderBy("stage", "r", "_rank")
        .collect()
    )
    out = []
    for row in picked:
        d = row.asDict(recursive=True)
        out.append({
            "stage": d["stage"], "reason": d["r"] or "(none)", "doc_id": d["doc_id"],
            "duplicate_of": d.get("duplicate_of"), "source": d.get("source"), "url": d.get("url"),
            "signals": row_signals(d, [d["r"]] if d["r"] else []),
            "text": truncate(d.get("text") or "", cfg.report.text_chars),
            "n_chars": len(d.get("text") or ""),
        })
    return out


def read_manifest(spark: SparkSession, cfg: WinnowConfig) -> dict[str, Any] | None:
    """``<run.root>/shards/manifest.json`` parsed, or None when the shard stage has not completed."""
    data = read_bytes(spark, marker_files(cfg, "shard")[chain.MANIFEST], cfg)
    return None if data is None else json.loads(data)


def stage_records(spark: SparkSession, cfg: WinnowConfig) -> list[dict[str, Any]]:
    """The latest completion record of each stage (counts, elapsed, stage-specific ``extra`` figures)."""
    out = []
    for stage, r in latest_records(spark, cfg).items():
        out.append({
            "stage": stage, "rows_in": r["rows_in"], "rows_out": r["rows_out"], "removed": r["removed"],
            "quarantined": r["quarantined"], "elapsed_s": round(r["elapsed_s"], 3),
            "finished_at": r["finished_at"].isoformat() + "Z", "extra": json.loads(r["extra"] or "{}"),
        })
    return sorted(out, key=lambda r: STAGES.index(r["stage"]))


def find_key(obj: Any, fragment: str) -> dict[str, Any]:
    """Every entry of a nested JSON object whose key contains ``fragment``, by dotted path."""
    found: dict[str, Any] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                p = f"{path}.{k}" if path else str(k)
                if fragment in str(k):
                    found[p] = v
                else:
                    walk(v, p)

    walk(obj, "")
    return found


# ---------------------------------------------------------------------------------------- assemble
def collect_stats(spark: SparkSession, cfg: WinnowConfig) -> dict[str, Any]:
    """Everything the report shows, as one JSON-serialisable dict (the content of ``stats.json``)."""
    from pipelines.decontam.report import contamination  # imports pyspark-heavy stage code; only here

    manifest = read_manifest(spark, cfg)
    totals, removed, groups = table_totals(spark, cfg), removed_totals(spark, cfg), filter_groups(spark, cfg)
    documents = (totals.get("documents") or [{}])[0]
    values, thr = signal_sample(spark, cfg)
    records = stage_records(spark, cfg)
    tokenized = read_if_exists(spark, cfg, "tokenized")
    tok_props = tables.table_properties(spark, cfg.table_path("tokenized")) if tokenized is not None else {}
    return {
        "run": {"root": cfg.run.root, "seed": cfg.run.seed, "config_fingerprint": cfg.fingerprint()},
        "stages": records,
        "funnel": funnel(spark, cfg, manifest, totals),
        "removals": removals(spark, cfg, totals, removed),
        "filter_breakdown": filter_breakdown(spark, cfg, documents.get("flagged"), groups),
        "signals": {c: {"n": len(v), "thresholds": thr[c]} for c, v in values.items()},
        "signal_values": values,
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


MIX_COLUMNS = ("source", "share_asked", "share_realised", "epochs_asked", "epochs_realised", "documents_in",
               "documents_selected", "documents_repeated", "documents_out", "tokens_out", "repeat_distance_bound")
"""Columns of the report's data-mix table (the manifest's ``mix`` block per source)."""


def _shard_part(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """Shard balance and shuffle quality from the manifest (tokens per shard from its file list)."""
    if manifest is None:
        return None
    files = manifest.get("files") or []
    fmt = "megatron" if any(f.get("format") == "megatron" for f in files) else "mds"
    per_shard: dict[int, int] = {}
    for f in files:  # the train split's shards (the validation set is reported under "splits")
        if str(f.get("path", "")).startswith("validation/"):
            continue
        if f.get("format") == fmt and f.get("kind") in ("bin", "mds") and "shard" in f:
            per_shard[int(f["shard"])] = per_shard.get(int(f["shard"]), 0) + int(f.get("tokens", 0))
    tokens = [per_shard[k] for k in sorted(per_shard)]
    mean = sum(tokens) / len(tokens) if tokens else 0.0
    return {
        "n_shards": len(tokens),
        "tokens_per_shard": tokens,
        "max_over_mean": (max(tokens) / mean) if mean else None,
        "balance": manifest.get("balance"),
        "shuffle_quality": manifest.get("shuffle_quality"),
        "token_share_by_source": manifest.get("token_share_by_source"),
        "dtype": manifest.get("dtype"),
        "formats": sorted({str(f) for f in manifest.get("formats", [])}),
        "split": manifest.get("split"),
        "splits": {k: {c: v.get(c) for c in ("shards", "documents", "tokens", "mds_samples")}
                   for k, v in (manifest.get("splits") or {}).items()},
        # shard.mix (pipelines/shard/mix.py): one row per source, asked vs realised; absent without a mix
        **({"mix": [{"source": s, **{c: m.get(c) for c in MIX_COLUMNS[1:]}} for s, m in sorted(manifest["mix"].items())]}
           if manifest.get("mix") else {}),
    }


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Write ``stats.json`` and ``report.html`` under ``<run.root>/report/`` from whatever tables exist.

    Returns:
        A report with ``rows_in == rows_out`` = documents in the last table of the funnel (the report
        removes nothing) and the two files as outputs.

    Raises:
        tables.MissingTableError: no ``documents`` table under ``run.root`` (ingest never ran there,
            or the root is mistyped): an empty report would look like a run that kept nothing.
    """
    from pipelines.report.html import render_html

    if not tables.table_exists(spark, cfg.table_path("documents")):
        raise tables.MissingTableError(
            f"report: no 'documents' table under run.root={cfg.run.root!r}; run the 'ingest' stage first "
            "(or check run.root)"
        )
    for name in REREAD_TABLES:
        read_if_exists(spark, cfg, name, cache_under_bytes=tables.SMALL_TABLE_BYTES)
    try:
        stats = collect_stats(spark, cfg)
    finally:
        tables.release_cached(spark)
    html = render_html(stats, cfg)
    stats_path = marker_files(cfg, "report")[f"report/{chain.STATS}"]
    html_path = f"{cfg.report_path}/report.html"
    tables.write_text(spark, html_path, html)
    # stats.json last: its digest is the report's completion marker (pipelines/core/runs.py).
    tables.write_text(spark, stats_path, json.dumps(stats, indent=1, sort_keys=True, default=str) + "\n")
    tables.publish(spark, cfg, "report", {})
    last = next((r["documents"] for r in reversed(stats["funnel"]) if r["documents"] is not None), 0)
    return StageReport(stage="report", rows_in=last, rows_out=last, outputs={"stats": stats_path, "html": html_path})
