"""The filter stage's part of the report: removals per source and per profile (language apart from quality
rules), each profile's thresholds on the signal histograms, constant signals as one-line notes, and
documents holding replacement characters.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.core.config import WinnowConfig
from pipelines.core.tables import read_if_exists
from pipelines.filter.config import FilterConfig
from pipelines.filter.rules import AUTO, thresholds


def replacement_char(docs: DataFrame) -> Column | None:
    """True for a ``documents`` row holding U+FFFD; None when the table has no ``text``.

    U+FFFD in the text: what ingest put there for invalid bytes (``n_replaced``) and what arrived so (a
    JSON string or a page already holding it), which ``n_replaced`` does not count.
    """
    if "text" not in docs.columns:
        return None
    has = F.instr(F.col("text"), "\ufffd") > 0
    if "n_replaced" in docs.columns:
        has = has | (F.col("n_replaced") > 0)
    return has


_QUERY = object()
"""Default of ``filter_breakdown(replacement_char_documents=...)``: count them here."""


def filter_groups(spark: SparkSession, cfg: WinnowConfig) -> dict[str, Any] | None:
    """Documents of ``filtered`` and of the filter's ``removed`` rows by headline reason (the language
    reason first, else the first failing rule), source, profile and language, in one Spark query: what
    :func:`filter_breakdown` and :func:`pipelines.report.stage.language_mix` show.

    Returns:
        ``{"rows": [{part, first, source, profile, lang, count}], "lang": {part: bool}}`` (``part``
        ``kept`` or ``removed``; ``first`` None for kept rows; ``lang`` says which part has a ``lang``
        column), or None before a filter run.
    """
    from pipelines.filter.stage import _headline_reason

    kept = read_if_exists(spark, cfg, "filtered")
    if kept is None:
        return None
    null = F.lit(None).cast("string")

    def part(df: DataFrame, name: str, reasons: Column) -> DataFrame:
        src = F.col("source") if "source" in df.columns else null
        prof = F.col("filter_profile") if "filter_profile" in df.columns else null
        lang = F.col("lang").cast("string") if "lang" in df.columns else null
        return df.select(F.lit(name).alias("part"), src.alias("source"), prof.alias("profile"),
                         reasons.alias("first"), lang.alias("lang"))

    frames = [part(kept, "kept", null)]
    has_lang = {"kept": "lang" in kept.columns}
    removed = read_if_exists(spark, cfg, "removed")
    if removed is not None:
        mine = removed.where(F.col("stage") == "filter")
        frames.append(part(mine, "removed", _headline_reason(F.col("reason"))))
        has_lang["removed"] = "lang" in removed.columns
    both = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    rows = both.groupBy("part", "first", "source", "profile", "lang").count().collect()
    return {"rows": [r.asDict() for r in rows], "lang": has_lang}


_QUERY = object()
"""Default of ``filter_breakdown(replacement_char_documents=...)``: count them here."""


def filter_breakdown(spark: SparkSession, cfg: WinnowConfig, replacement_char_documents: Any = _QUERY,
                     groups: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Documents in, kept and removed (by headline reason: the language reason first, else the first
    failing rule) per source and per profile, from ``filtered`` and the filter's ``removed`` rows.

    Args:
        replacement_char_documents: the number of ``documents`` rows holding U+FFFD
            (:func:`replacement_char`) when the caller counted them with other figures of the table
            (:func:`pipelines.report.stage.table_totals`; None: the table has no text), else counted here.
        groups: :func:`filter_groups` of this run, when the caller has them (else queried here).

    Returns:
        ``{"by_source": {source: {in, kept, removed: {reason: documents}}}, "by_profile": {...},
        "removed_language", "removed_quality", "replacement_char_documents", "source_warnings": [{source,
        in, removed, share, top_reason, top_reason_documents, line}]}`` (sources that lost more than
        ``filter.warn_source_removed`` of their documents) or None before a filter run.
    """
    from pipelines.filter.stage import _breakdown

    groups = filter_groups(spark, cfg) if groups is None else groups
    if groups is None:
        return None
    from pipelines.filter.stage import source_warnings, warning_line

    out = _breakdown(groups["rows"])  # sums over the language too: the same as grouping without it
    limit = cfg.filter.warn_source_removed
    out["source_warnings"] = [{**w, "line": warning_line(w, limit)}
                              for w in source_warnings(out["by_source"], limit)]
    if replacement_char_documents is _QUERY:
        docs = read_if_exists(spark, cfg, "documents")
        has = replacement_char(docs) if docs is not None else None
        replacement_char_documents = None if has is None else docs.where(has).count()
    out["replacement_char_documents"] = replacement_char_documents
    return out


def profile_thresholds(cfg: FilterConfig, column: str) -> list[dict[str, Any]]:
    """Thresholds of signal ``column`` under the default profile (``web`` when it is ``auto``), then under
    every other profile in use whose value differs (its ``key`` suffixed with `` (<profile>)``)."""
    first, *others = cfg.profiles_in_use() if cfg.default_profile != AUTO else ["web", *cfg.profiles_in_use()]
    base = thresholds(cfg.profile_config(first).model_dump(mode="json"), column)
    out = list(base)
    seen = {(t["key"], t["value"]) for t in base}
    for name in dict.fromkeys(others):
        for t in thresholds(cfg.profile_config(name).model_dump(mode="json"), column):
            if (t["key"], t["value"]) not in seen:
                seen.add((t["key"], t["value"]))
                out.append({**t, "key": f"{t['key']} ({name})"})
    return out


def constant_signals(values: dict[str, list[float]]) -> dict[str, float]:
    """Signals whose sampled values are all equal (a histogram of them says nothing): signal -> value."""
    return {c: v[0] for c, v in values.items() if v and min(v) == max(v)}


def breakdown_rows(b: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Table rows ``{name, in, kept, removed, reasons}`` of ``b[key]`` (``by_source`` or ``by_profile``)."""
    return [{"name": name, "in": v["in"], "kept": v["kept"], "removed": v["in"] - v["kept"],
             "reasons": ", ".join(f"{r}={n}" for r, n in v["removed"].items())} for name, v in b[key].items()]
