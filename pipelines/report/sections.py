"""The report's parts drawn from one stage's table or file each: signal histograms, language mix,
duplicate clusters, broken references, PII counts, token lengths, sampled removals, shard balance.

Each reads what exists under ``run.root`` and returns JSON-ready data for ``stats.json``
(:func:`pipelines.report.stage.collect_stats`) and ``report.html`` (:mod:`pipelines.report.html`).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain
from pipelines.core.chain import STAGES, marker_files
from pipelines.core.config import WinnowConfig
from pipelines.core.runs import latest_records
from pipelines.core.samples import row_signals, seeded_order, truncate
from pipelines.core.tables import read_bytes, read_if_exists
from pipelines.filter.report import filter_groups, profile_thresholds
from pipelines.filter.rules import thresholds  # noqa: F401  (re-exported: callers look it up here)

DOCUMENT_COLUMNS = frozenset(
    {"doc_id", "text", "source", "url", "meta", "input_file", "n_chars", "n_bytes", "n_replaced"}
)
"""Columns of ``documents``; numeric columns added by later stages are treated as signals."""

NOT_SIGNALS = frozenset({"cluster_size", "stage", "n_tokens", "duplicate_of"})


def ascending(*values: Any) -> tuple[Any, ...]:
    """Sort key of a collected row's ``values`` in Spark's ascending order, nulls first (``orderBy``'s
    default): ``sorted(rows, key=lambda r: ascending(r["a"], r["b"]))`` orders as ``.orderBy("a", "b")``.

    Strings compare as Spark compares them (UTF-8 bytes, which order as Unicode code points, as Python's
    ``str`` does); numbers as numbers. Why: a few grouped rows sorted on the driver instead of by Spark
    skip the sort's range partitioning, a Spark job of its own that samples the input.
    """
    # A null's placeholder is only ever compared with another null's: the flag before it differs otherwise.
    return tuple(k for v in values for k in (v is not None, "" if v is None else v))


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


def signal_sample(spark: SparkSession, cfg: WinnowConfig) -> tuple[dict[str, dict[str, list[float]]],
                                                                    dict[str, list[dict[str, Any]]]]:
    """A seeded sample of the filter's signals, over kept and filter-removed documents together.

    Returns:
        ``(values, thresholds)``: signal -> ``{"kept": [...], "removed": [...]}`` sampled values (nulls
        dropped; the sample is drawn over both, so their sizes keep the run's proportion), signal -> its
        thresholds.
    """
    kept = read_if_exists(spark, cfg, "filtered")
    if kept is None:
        return {}, {}
    cols = signal_columns(kept)
    sel = [F.col(c).alias(c) for c in cols]
    frames = [kept.select("doc_id", F.lit(False).alias("_removed"), *sel)]
    removed = read_if_exists(spark, cfg, "removed")
    if removed is not None and set(signal_columns(removed)) >= set(cols):
        frames.append(removed.where(F.col("stage") == "filter").select("doc_id", F.lit(True).alias("_removed"), *sel))
    both = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    pdf = (both.orderBy(seeded_order(cfg.run.seed)).limit(cfg.report.hist_sample_rows)
           .select("_removed", *[f"`{c}`" for c in cols]).toPandas())
    gone = pdf["_removed"].astype(bool)
    values = {c: {"kept": [float(x) for x in pdf[c][~gone].dropna().tolist()],
                  "removed": [float(x) for x in pdf[c][gone].dropna().tolist()]} for c in cols}
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
    rows = per.groupBy("kind", "size").agg(F.count(F.lit(1)).alias("clusters")).collect()
    rows = sorted(rows, key=lambda r: ascending(r["kind"], r["size"]))
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
        .collect()
    )
    return [{"kind": r["kind"], "dangling_mentions": int(r["n"])} for r in sorted(rows, key=lambda r: ascending(r["kind"]))]


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
    none = F.lit(None).cast("long")
    # The three groupings in one union of aggregations: one collect, one Spark job planned, not three.
    parts = [
        docs.select(F.explode("pii_counts").alias("key", "n")).groupBy("key")
        .agg(F.lit("kind").alias("part"), F.sum("n").alias("findings"), F.count(F.lit(1)).alias("documents")),
        docs.groupBy(F.col("pii_action").alias("key"))
        .agg(F.lit("action").alias("part"), none.alias("findings"), F.count(F.lit(1)).alias("documents")),
        docs.where(F.col("pii_action") == "drop").select(F.explode("reason").alias("key")).groupBy("key")
        .agg(F.lit("drop").alias("part"), none.alias("findings"), F.count(F.lit(1)).alias("documents")),
    ]
    rows = parts[0].unionByName(parts[1]).unionByName(parts[2]).collect()
    of = {name: sorted((r for r in rows if r["part"] == name), key=lambda r: ascending(r["key"]))
          for name in ("kind", "action", "drop")}
    return {
        "by_kind": [{"kind": r["key"], "findings": int(r["findings"]), "documents": int(r["documents"])} for r in of["kind"]],
        "documents": {r["key"]: int(r["documents"]) for r in sorted(of["action"], key=lambda r: r["key"])},
        "dropped": [{"reason": r["key"], "documents": int(r["documents"])} for r in of["drop"]],
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
        .collect()
    )
    out = []
    for row in sorted(picked, key=lambda r: ascending(r["stage"], r["r"], r["_rank"])):
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
