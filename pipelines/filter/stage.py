"""Filter stage: quality signals, language ID and quality score as columns; keep/drop decided from config.

``passages_deduped`` (or ``deduped`` without the passages stage) -> ``filtered`` (kept documents with every
signal column and ``filter_flags``) + ``removed`` rows with ``stage='filter'`` and every failing ``drop``
rule in ``reason``.

Two steps, kept apart so thresholds can be re-tuned without recomputing anything
(``jobs/filter.py --decide-only`` reruns only :func:`decide` on the stored signals):

* :func:`compute_signals` adds :data:`SIGNAL_COLUMNS` with one Arrow UDF over ``text`` (heuristics from
  :mod:`udfs.quality`, fastText LID from :mod:`udfs.langid`, classifier from :mod:`udfs.quality_model`);
* :func:`decide` adds :data:`DECISION_COLUMNS`: ``filter_reasons`` (failing ``drop`` rules) and
  ``filter_flags`` (failing ``flag`` rules), stable ids ``<family>.<rule>`` in config order.

A rule whose signal is null (e.g. LID off, no classifier) never fails. A rule restricted to languages
judges documents whose ``lang`` is in the list, or is null (LID off).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport, unless_set
from pipelines.filter import rules as filter_rules
from pipelines.filter.config import FilterConfig, RuleFamily
from pipelines.filter.rules import RULES, Rule
from pipelines.filter.signals import (  # noqa: F401  (re-exported: callers use the stage module)
    _CLEANING_TYPE,
    _TOPK_TYPE,
    FAMILY_COLUMNS,
    INPUT_COLUMNS,
    LANG_COLUMNS,
    PROFILE_COLUMNS,
    SIGNAL_COLUMNS,
    STAGE,
    _glob_regex,
    _language,
    _model_locator,
    _profile_params,
    _quality_score,
    _signals_arrow_type,
    _spark_type,
    check_decide_only,
    compute_signals,
    profile_column,
    signal_settings,
)

OUTPUT_TABLE = chain.stage(STAGE).main_table
DECISION_COLUMNS: tuple[str, ...] = ("filter_reasons", "filter_flags")
OUTPUT_COLUMNS: tuple[str, ...] = (*SIGNAL_COLUMNS, "filter_flags")
"""Columns ``filtered`` adds to the input columns."""


def _signal(rule: Rule) -> Column:
    struct, _, field = rule.signal.partition(".")
    return F.col(struct).getField(field) if field else F.col(struct)


def _fails(rule: Rule, value: Any) -> Column:
    """The condition under which ``rule`` fails for threshold ``value`` (null when the signal is null)."""
    signal = _signal(rule)
    if rule.compare == "min":
        return signal < F.lit(value)
    if rule.compare == "max":
        return signal > F.lit(value)
    if rule.compare == "in":
        return ~signal.isin(list(value))
    return signal  # "true": the boolean signal itself


def _active(cfg: FilterConfig) -> list[tuple[str, str, list[tuple[Rule, Any]], list[str] | None]]:
    """Every active rule as (reason id, action, [(rule row, threshold)], languages or None), in rule order.

    Rows of :data:`pipelines.filter.rules.RULES` sharing a reason id are grouped under it; a row whose
    threshold is null (or a ``drop_*`` key false) or whose ``requires`` key is unset is left out. Plain
    Python: no Spark column is built, so :func:`rule_ids` costs no JVM call.
    """
    section = cfg.model_dump()
    active: dict[str, tuple[str, list[tuple[Rule, Any]], list[str] | None]] = {}
    for rule in RULES:
        value = filter_rules.lookup(section, rule.key)
        if value is None or value is False or (rule.requires and not filter_rules.lookup(section, rule.requires)):
            continue
        sub = getattr(cfg, rule.section)
        if isinstance(sub, RuleFamily):
            action = sub.rule_actions.get(rule.name, sub.action)
            langs = sub.rule_languages[rule.name] if rule.name in sub.rule_languages else sub.languages
        else:
            action, langs = sub.action, None
        if action == "off":
            continue
        rows = active[rule.reason][1] if rule.reason in active else []
        active[rule.reason] = (action, [*rows, (rule, value)], langs)
    return [(rid, action, rows, langs) for rid, (action, rows, langs) in active.items()]


def _element(rid: str, rows: list[tuple[Rule, Any]], langs: list[str] | None, empty: Column) -> Column:
    """array<string>: ``[rid]`` when the rule fails (its rows' conditions OR-ed, for a document in
    ``langs`` or of no language when ``langs`` is set), else ``empty``; never null."""
    cond = _fails(*rows[0])
    for rule, value in rows[1:]:
        cond = cond | _fails(rule, value)
    if langs is not None:
        cond = cond & (F.col("lang").isNull() | F.col("lang").isin(list(langs)))
    return F.when(F.coalesce(cond, F.lit(False)), F.array(F.lit(rid))).otherwise(empty)


def rule_ids(cfg: FilterConfig) -> list[str]:
    """The reason ids of every active rule of any profile, in decision order (``default_profile`` first)."""
    names = [*cfg.profiles_in_use(), *cfg.profile_names()]
    return list(dict.fromkeys(rid for name in names for rid, *_ in _active(cfg.profile_config(name))))


def decide(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add ``filter_reasons`` and ``filter_flags`` (array<string>) from the signal columns and config.

    Each row is judged by the rule set of its ``filter_profile`` (:meth:`FilterConfig.profile_config`;
    a null profile, from a table written before profiles, reads as ``default_profile``, and as ``web``
    when that is ``auto``).

    Args:
        df: a DataFrame with :data:`SIGNAL_COLUMNS` (from :func:`compute_signals` or a stored table).
        cfg: the ``filter`` config section.

    Returns:
        ``df`` (without any earlier decision columns) plus ``filter_reasons`` (failing ``drop`` rules)
        and ``filter_flags`` (failing ``flag`` rules), reason ids in rule order, never null.

    Raises:
        ValueError: a signal column is missing.
        pyspark.errors.SparkRuntimeException (when an action runs): a row's ``filter_profile`` is not
            one of :meth:`FilterConfig.profiles_in_use` (``default_profile`` and the
            ``profile_by_source`` values).
    """
    chain.require_columns(df, SIGNAL_COLUMNS, STAGE)
    df = df.drop(*[c for c in DECISION_COLUMNS if c in df.columns])
    default = "web" if cfg.default_profile == filter_rules.AUTO else cfg.default_profile
    profile = F.coalesce(F.col("filter_profile"), F.lit(default))
    # Only the profiles rows can have, and each row evaluates only its own profile's rules (one CASE
    # branch per profile, each a concat of compiled one-element arrays). Every profile's rules in one
    # array filtered by a lambda would be interpreted row by row: with the six built-in profiles of
    # `auto`, 5x the JVM time of this form (bench/notes.md). A stored profile outside them (a table
    # decided with another profile_by_source) fails instead of passing.
    in_use = cfg.profiles_in_use()
    unknown = F.raise_error(F.concat(F.lit("filter: a row's filter_profile "), profile,
                                     F.lit(f" is not one of the profiles in use {in_use}")))
    empty = _empty()
    reasons, flags = unknown, empty
    # Profiles share most rules with the same thresholds: each distinct rule's column is built once
    # (every column built is a round of JVM calls from this driver; the expression is the same).
    built: dict[str, Column] = {}
    for name in reversed(in_use):
        by_action: dict[str, list[Column]] = {"drop": [], "flag": []}
        for rid, action, rows, langs in _active(cfg.profile_config(name)):
            key = repr((rid, [(rule.signal, rule.compare, value) for rule, value in rows], langs))
            if key not in built:
                built[key] = _element(rid, rows, langs, empty)
            by_action[action].append(built[key])
        in_profile = profile == F.lit(name)
        reasons = F.when(in_profile, _failing(by_action["drop"], empty)).otherwise(reasons)
        flags = F.when(in_profile, _failing(by_action["flag"], empty)).otherwise(flags)
    # coalesce: never null (the unknown-profile branch raises before it could be)
    return df.withColumn("filter_reasons", F.coalesce(reasons.cast(_REASONS_TYPE), empty)).withColumn(
        "filter_flags", flags.cast(_REASONS_TYPE))


_REASONS_TYPE = "array<string>"


def _empty() -> Column:
    return F.array().cast(_REASONS_TYPE)


def _failing(elements: list[Column], empty: Column) -> Column:
    """array<string>: the reason ids of the failing rules, in order (``elements`` from :func:`_element`)."""
    if not elements:
        return empty
    return F.concat(*elements)


def filter_documents(df: DataFrame, cfg: WinnowConfig | FilterConfig) -> DataFrame:
    """The stage transform: :func:`compute_signals` then :func:`decide` (``df.transform(filter_documents, cfg)``).

    Returns:
        ``df`` plus :data:`SIGNAL_COLUMNS` and :data:`DECISION_COLUMNS`; rows with a non-empty
        ``filter_reasons`` are the ones to remove.
    """
    fcfg = cfg.filter if isinstance(cfg, WinnowConfig) else cfg
    return decide(compute_signals(df, fcfg), fcfg)


CACHE_SETTINGS = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
"""Spark settings while the decided rows are cached and read back (unless ``spark.conf`` or the session
sets them): no column compression in that cache. A compressed cache batch first gathers every scheme's
statistics over every value (dictionary and run-length encoding hash and copy each string: the whole
text of every document) and copies each column once more, while the text, most of the bytes, takes none
of the schemes (bench/notes.md, "The filter stage as a whole"; ingest and passages cache the same way)."""


def _write(spark: SparkSession, cfg: WinnowConfig, decided: DataFrame, rows_in_cols: list[str], mode: str) -> StageReport:
    with tables.session_conf(spark, unless_set(spark, cfg, CACHE_SETTINGS)):
        return _write_cached(spark, cfg, decided, rows_in_cols, mode)


def _counts(decided: DataFrame) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Documents per (headline reason, source, profile), and the documents failing each rule (drop and
    flag), from one scan of ``decided``: the first as ``[{first, source, profile, count}]``, the
    second summed from the groups' reason lists (``{reason id: documents}``, in order of first appearance).
    One job where a count of each would scan the cached rows twice."""
    first = _headline_reason(F.col("filter_reasons"))
    source = F.col("source") if "source" in decided.columns else F.lit(None).cast("string")
    rows = decided.groupBy(first.alias("first"), source.alias("source"), F.col("filter_profile").alias("profile"),
                           F.concat(F.col("filter_reasons"), F.col("filter_flags")).alias("rules")).count().collect()
    grouped: dict[tuple[Any, Any, Any], int] = {}
    per_rule: dict[str, int] = {}
    for row in rows:
        key = (row["first"], row["source"], row["profile"])
        grouped[key] = grouped.get(key, 0) + int(row["count"])
        for r in row["rules"] or ():
            per_rule[r] = per_rule.get(r, 0) + int(row["count"])
    return [{"first": k[0], "source": k[1], "profile": k[2], "count": n} for k, n in grouped.items()], per_rule


def _write_cached(spark: SparkSession, cfg: WinnowConfig, decided: DataFrame, rows_in_cols: list[str],
                  mode: str) -> StageReport:
    decided = decided.persist(tables.TEXT_CACHE)
    try:
        grouped, failing_by_rule = _counts(decided)
        removed: dict[str, int] = {}
        for row in grouped:
            if row["first"] is not None:
                removed[row["first"]] = removed.get(row["first"], 0) + int(row["count"])
        kept_n = sum(int(row["count"]) for row in grouped if row["first"] is None)
        kept = decided.filter(F.size("filter_reasons") == 0).select(*rows_in_cols, *OUTPUT_COLUMNS)
        gone = decided.filter(F.size("filter_reasons") > 0).select(
            *rows_in_cols, *OUTPUT_COLUMNS, F.col("filter_reasons").alias("reason")
        )
        extra_split = _breakdown(grouped)
        limit = cfg.filter.warn_source_removed
        warnings = source_warnings(extra_split["by_source"], limit)
        props = {"mode": mode, "rules": rule_ids(cfg.filter),
                 "signal_settings": signal_settings(cfg.filter)}
        outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=gone, properties=props)
    finally:
        decided.unpersist()
    return StageReport(
        stage=STAGE,
        rows_in=kept_n + sum(removed.values()),
        rows_out=kept_n,
        removed=removed,
        outputs=outputs,
        extra={"mode": mode, "failing_by_rule": failing_by_rule,
               **extra_split, "source_warnings": warnings},
        first_reason_only=True,
        notes={**{k: extra_split[k] for k in ("removed_language", "removed_quality")},
               **({f"profile.{k}": v["in"] for k, v in extra_split["by_profile"].items()}
                  if cfg.filter.uses_auto() else {})},
        warnings=[warning_line(w, limit) for w in warnings],
    )


def _headline_reason(reasons: Column) -> Column:
    """The reason a removed document is counted under in the stage line: its language reason if it
    has one (the language decision is reported apart from the quality rules), else its first reason."""
    lang = F.filter(reasons, lambda r: r.startswith("lang."))
    return F.coalesce(F.try_element_at(lang, F.lit(1)), F.try_element_at(reasons, F.lit(1)))


def _breakdown(grouped: list[Any]) -> dict[str, Any]:
    """Documents in, kept and removed (by headline reason) per source and per profile; language
    removals apart from quality removals."""
    out: dict[str, Any] = {"by_source": {}, "by_profile": {}, "removed_language": 0, "removed_quality": 0}
    for row in grouped:
        n, reason = int(row["count"]), row["first"]
        for key, name in (("by_source", row["source"]), ("by_profile", row["profile"])):
            entry = out[key].setdefault(str(name), {"in": 0, "kept": 0, "removed": {}})
            entry["in"] += n
            if reason is None:
                entry["kept"] += n
            else:
                entry["removed"][reason] = entry["removed"].get(reason, 0) + n
        if reason is not None:
            out["removed_language" if reason.startswith("lang.") else "removed_quality"] += n
    for key in ("by_source", "by_profile"):
        out[key] = {k: {**v, "removed": dict(sorted(v["removed"].items()))} for k, v in sorted(out[key].items())}
    return out


def source_warnings(by_source: dict[str, Any], max_share: float | None) -> list[dict[str, Any]]:
    """The sources that lost more than ``max_share`` of their documents (``filter.warn_source_removed``).

    Args:
        by_source: ``_breakdown(...)["by_source"]``: source -> ``{in, kept, removed: {reason: documents}}``.
        max_share: the share of a source's documents (0..1) it may lose without a warning; None: never warn.

    Returns:
        ``[{source, in, removed, share, top_reason, top_reason_documents}]`` in source order (``share`` the
        removed fraction, rounded to 4 places; ``top_reason`` the headline reason that removed the most).

    >>> source_warnings({"arxiv": {"in": 4, "kept": 1, "removed": {"c4.curly_bracket": 3}}}, 0.5)
    [{'source': 'arxiv', 'in': 4, 'removed': 3, 'share': 0.75, 'top_reason': 'c4.curly_bracket', 'top_reason_documents': 3}]
    """
    out: list[dict[str, Any]] = []
    if max_share is None:
        return out
    for source, v in by_source.items():
        removed = v["in"] - v["kept"]
        if v["in"] and removed / v["in"] > max_share:
            reason, n = min(v["removed"].items(), key=lambda kv: (-kv[1], kv[0]))
            out.append({"source": source, "in": v["in"], "removed": removed, "share": round(removed / v["in"], 4),
                        "top_reason": reason, "top_reason_documents": n})
    return out


def warning_line(w: dict[str, Any], max_share: float) -> str:
    """One :func:`source_warnings` entry as a sentence for the stage line and the report.

    >>> warning_line({"source": "arxiv", "in": 4, "removed": 3, "share": 0.75, "top_reason": "c4.curly_bracket",
    ...               "top_reason_documents": 3}, 0.5)
    "source 'arxiv' lost 3 of 4 documents (75%; filter.warn_source_removed=0.5), most to c4.curly_bracket (3)"
    """
    return (f"source {w['source']!r} lost {w['removed']} of {w['in']} documents ({w['share']:.0%}; "
            f"filter.warn_source_removed={max_share:g}), most to {w['top_reason']} ({w['top_reason_documents']})")


def run(spark: SparkSession, cfg: WinnowConfig, decide_only: bool = False) -> StageReport:
    """Read the last document table before it (``passages_deduped`` or ``deduped``), compute signals,
    decide, write ``filtered`` and this stage's ``removed`` rows.

    Args:
        decide_only: re-decide from the signals stored by an earlier full run (``filtered`` plus this
            stage's ``removed`` rows, read at pinned Delta versions) without recomputing them.

    Returns:
        The stage report; ``removed`` counts each document under its first failing rule, ``extra``
        holds every failing rule's count (drop and flag).

    Raises:
        MissingTableError: the input table (or, with ``decide_only``, ``filtered``) does not exist.
    """
    if decide_only:
        stored = tables.table_properties(spark, cfg.table_path(OUTPUT_TABLE)).get("signal_settings")
        check_decide_only(json.loads(stored) if stored else None, cfg.filter)
        filtered = tables.read_table(spark, cfg, OUTPUT_TABLE)
        base_cols = [c for c in filtered.columns if c not in OUTPUT_COLUMNS and c not in DECISION_COLUMNS]
        cols = [*base_cols, *SIGNAL_COLUMNS]
        f_ver = tables.table_version(spark, cfg.table_path(OUTPUT_TABLE))
        parts = [tables.read_table(spark, cfg, OUTPUT_TABLE, version=f_ver).select(*cols)]
        r_ver = tables.delta_version(spark, cfg.table_path("removed"))
        if r_ver is not None:
            old = tables.read_table(spark, cfg, "removed", version=r_ver)
            parts.append(old.filter(F.col("stage") == STAGE).select(*cols))
        signals = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        return _write(spark, cfg, decide(signals, cfg.filter), base_cols, "decide_only")

    df = tables.read_table(spark, cfg, tables.stage_input_table(cfg, STAGE, spark))
    base_cols = list(df.columns)
    if not cfg.filter.enabled:
        # Pass through unchanged: signal columns stay null, no rule runs.
        passthrough = df
        for name, typ in zip(SIGNAL_COLUMNS, _signal_spark_types(), strict=True):
            passthrough = passthrough.withColumn(name, F.lit(None).cast(typ))
        decided = passthrough.withColumn("filter_reasons", F.array().cast("array<string>")).withColumn(
            "filter_flags", F.array().cast("array<string>")
        )
        return _write(spark, cfg, decided, base_cols, "disabled")
    return _write(spark, cfg, filter_documents(df, cfg), base_cols, "full")


def _signal_spark_types() -> list[T.DataType]:
    t = _signals_arrow_type()
    return [_spark_type(t.field(c).type) for c in SIGNAL_COLUMNS]
