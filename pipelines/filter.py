"""Filter stage: quality signals, language ID and quality score as columns; keep/drop decided from config.

``deduped`` -> ``filtered`` (kept documents with every signal column and ``filter_flags``) + ``removed``
rows with ``stage='filter'`` and every failing ``drop`` rule in ``reason``.

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

import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import chain, filter_rules, tables
from pipelines.config import FilterConfig, RuleFamily, WinnowConfig
from pipelines.filter_rules import RULES, Rule
from pipelines.stage import StageReport

STAGE = "filter"
INPUT_TABLE = chain.stage(STAGE).input
OUTPUT_TABLE = chain.stage(STAGE).main_table
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
"""Columns the transform needs; every other input column passes through unchanged."""

FAMILY_COLUMNS: tuple[str, ...] = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
LANG_COLUMNS: tuple[str, ...] = ("lang", "lang_score", "lang_topk")
SIGNAL_COLUMNS: tuple[str, ...] = (*FAMILY_COLUMNS, *LANG_COLUMNS, "quality_score")
DECISION_COLUMNS: tuple[str, ...] = ("filter_reasons", "filter_flags")
OUTPUT_COLUMNS: tuple[str, ...] = (*SIGNAL_COLUMNS, "filter_flags")
"""Columns ``filtered`` adds to the input columns."""

_TOPK_TYPE = pa.list_(pa.struct([("lang", pa.string()), ("score", pa.float64())]))


def _signals_arrow_type() -> pa.StructType:
    from udfs.quality import SIGNALS_TYPE

    return pa.struct([*SIGNALS_TYPE, ("lang", pa.string()), ("lang_score", pa.float64()),
                      ("lang_topk", _TOPK_TYPE), ("quality_score", pa.float64())])


def _spark_type(t: pa.DataType) -> T.DataType:
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t)


def _model_locator(spark: SparkSession, path: str | None) -> Callable[[], str] | None:
    """Ship a model file to executors when the master is not local; return how a worker finds it."""
    if path is None:
        return None
    if not os.path.isfile(path):
        raise ValueError(f"model file not found: {path!r}")
    if spark.sparkContext.master.startswith("local"):
        return lambda: path
    spark.sparkContext.addFile(path)
    name = os.path.basename(path)

    def locate() -> str:
        from pyspark import SparkFiles

        return SparkFiles.get(name)

    return locate


def compute_signals(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add every signal column (:data:`SIGNAL_COLUMNS`) computed from ``text`` in one Arrow UDF.

    Args:
        df: a DataFrame with at least :data:`INPUT_COLUMNS`.
        cfg: the ``filter`` config section (LID model, classifier model).

    Returns:
        ``df`` plus struct columns ``gopher_quality``, ``gopher_repetition``, ``c4``, ``fineweb`` (fields
        as in :mod:`udfs.quality`), ``lang`` string, ``lang_score`` double, ``lang_topk``
        array<struct<lang,score>>, ``quality_score`` double (null without a classifier).

    Raises:
        ValueError: a required column is missing, or a configured model file does not exist.
    """
    from pyspark.sql.functions import arrow_udf

    from udfs.langid import default_model_path

    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    spark = df.sparkSession
    lid = cfg.langid
    lid_locate = _model_locator(spark, (lid.model or default_model_path())) if lid.enabled else None
    qm = cfg.quality_model
    qm_locate = _model_locator(spark, qm.model) if qm.model else None
    arrow_type = _signals_arrow_type()
    lid_args = (lid.max_chars, lid.top_k, lid.label_prefix, dict(lid.aliases))
    positive = qm.positive_label

    def signals(text: pa.Array) -> pa.Array:
        from udfs import langid, quality, quality_model

        n = len(text)
        heur = quality.quality_signals(text)
        fields = [heur.field(i) for i in range(heur.type.num_fields)]
        if lid_locate is not None:
            max_chars, k, prefix, aliases = lid_args
            model = langid.load_model(lid_locate())
            lang, score, topk = langid.predict(model, langid.preprocess(text, max_chars), k, prefix, aliases)
        else:
            lang, score, topk = pa.nulls(n, pa.string()), pa.nulls(n, pa.float64()), pa.nulls(n, _TOPK_TYPE)
        if qm_locate is not None:
            qmodel = langid.load_model(qm_locate())
            qscore = pa.array(quality_model.score(qmodel, quality_model.prepare(text), positive), pa.float64())
        else:
            qscore = pa.nulls(n, pa.float64())
        return pa.StructArray.from_arrays([*fields, lang, score, topk, qscore], fields=list(arrow_type))

    signals_arrow_udf = arrow_udf(signals, _spark_type(arrow_type)).asNondeterministic()
    # Non-deterministic only to stop the optimiser from evaluating the UDF once per extracted field;
    # the function itself is deterministic.
    tmp = "__filter_signals"
    out = df.withColumn(tmp, signals_arrow_udf(F.col("text")))
    return out.select(*[F.col(c) for c in df.columns], *[F.col(f"{tmp}.{c}").alias(c) for c in SIGNAL_COLUMNS])


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


def _rules(cfg: FilterConfig) -> list[tuple[str, str, Column, list[str] | None]]:
    """Every active rule as (reason id, action, failure condition, languages or None), in rule order.

    Rows of :data:`pipelines.filter_rules.RULES` sharing a reason id are OR-ed into one condition; a row
    whose threshold is null (or a ``drop_*`` key false) or whose ``requires`` key is unset is left out.
    """
    section = cfg.model_dump()
    active: dict[str, tuple[str, Column, list[str] | None]] = {}
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
        cond = _fails(rule, value)
        if rule.reason in active:
            cond = active[rule.reason][1] | cond
        active[rule.reason] = (action, cond, langs)
    return [(rid, action, cond, langs) for rid, (action, cond, langs) in active.items()]


def rule_ids(cfg: FilterConfig) -> list[str]:
    """The reason ids of every active rule, in decision order."""
    return [rid for rid, *_ in _rules(cfg)]


def decide(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add ``filter_reasons`` and ``filter_flags`` (array<string>) from the signal columns and config.

    Args:
        df: a DataFrame with :data:`SIGNAL_COLUMNS` (from :func:`compute_signals` or a stored table).
        cfg: the ``filter`` config section.

    Returns:
        ``df`` (without any earlier decision columns) plus ``filter_reasons`` (failing ``drop`` rules)
        and ``filter_flags`` (failing ``flag`` rules), reason ids in rule order, never null.

    Raises:
        ValueError: a signal column is missing.
    """
    chain.require_columns(df, SIGNAL_COLUMNS, STAGE)
    df = df.drop(*[c for c in DECISION_COLUMNS if c in df.columns])
    by_action: dict[str, list[Column]] = {"drop": [], "flag": []}
    for rid, action, cond, langs in _rules(cfg):
        if langs is not None:
            cond = cond & (F.col("lang").isNull() | F.col("lang").isin(list(langs)))
        by_action[action].append(F.when(F.coalesce(cond, F.lit(False)), F.lit(rid)))

    def reasons(items: list[Column]) -> Column:
        if not items:
            return F.array().cast("array<string>")
        return F.filter(F.array(*items), lambda x: x.isNotNull())

    return df.withColumn("filter_reasons", reasons(by_action["drop"])).withColumn("filter_flags", reasons(by_action["flag"]))


def filter_documents(df: DataFrame, cfg: WinnowConfig | FilterConfig) -> DataFrame:
    """The stage transform: :func:`compute_signals` then :func:`decide` (``df.transform(filter_documents, cfg)``).

    Returns:
        ``df`` plus :data:`SIGNAL_COLUMNS` and :data:`DECISION_COLUMNS`; rows with a non-empty
        ``filter_reasons`` are the ones to remove.
    """
    fcfg = cfg.filter if isinstance(cfg, WinnowConfig) else cfg
    return decide(compute_signals(df, fcfg), fcfg)


def _write(spark: SparkSession, cfg: WinnowConfig, decided: DataFrame, rows_in_cols: list[str], mode: str) -> StageReport:
    decided = decided.persist()
    try:
        first = F.try_element_at(F.col("filter_reasons"), F.lit(1))
        counts = decided.groupBy(first.alias("first")).count().collect()
        per_rule = (
            decided.select(F.explode(F.concat(F.col("filter_reasons"), F.col("filter_flags"))).alias("r"))
            .groupBy("r").count().collect()
        )
        removed = {row["first"]: int(row["count"]) for row in counts if row["first"] is not None}
        kept_n = sum(int(row["count"]) for row in counts if row["first"] is None)
        kept = decided.filter(F.size("filter_reasons") == 0).select(*rows_in_cols, *OUTPUT_COLUMNS)
        gone = decided.filter(F.size("filter_reasons") > 0).select(
            *rows_in_cols, *OUTPUT_COLUMNS, F.col("filter_reasons").alias("reason")
        )
        props = {"mode": mode, "rules": rule_ids(cfg.filter)}
        outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=gone, properties=props)
    finally:
        decided.unpersist()
    return StageReport(
        stage=STAGE,
        rows_in=kept_n + sum(removed.values()),
        rows_out=kept_n,
        removed=removed,
        outputs=outputs,
        extra={"mode": mode, "failing_by_rule": {row["r"]: int(row["count"]) for row in per_rule}},
        first_reason_only=True,
    )


def run(spark: SparkSession, cfg: WinnowConfig, decide_only: bool = False) -> StageReport:
    """Read ``deduped``, compute signals, decide, write ``filtered`` and this stage's ``removed`` rows.

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

    df = tables.read_table(spark, cfg, INPUT_TABLE)
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
