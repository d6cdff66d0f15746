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

import json
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.config import ConfigError, WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.filter import rules as filter_rules
from pipelines.filter.config import FilterConfig, RuleFamily
from pipelines.filter.rules import RULES, Rule

STAGE = "filter"
INPUT_TABLE = chain.stage(STAGE).input
OUTPUT_TABLE = chain.stage(STAGE).main_table
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
"""Columns the transform needs; every other input column passes through unchanged."""

FAMILY_COLUMNS: tuple[str, ...] = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
LANG_COLUMNS: tuple[str, ...] = ("lang", "lang_score", "lang_topk")
PROFILE_COLUMNS: tuple[str, ...] = ("filter_profile", "line_cleaning")
"""The rule profile that judged the document and, when it cleans lines (``c4.clean_lines``), what C4's
line cleaning removed from ``text`` (struct ``lines_removed``, ``chars_removed``; null otherwise)."""
SIGNAL_COLUMNS: tuple[str, ...] = (*FAMILY_COLUMNS, *LANG_COLUMNS, "quality_score", *PROFILE_COLUMNS)
DECISION_COLUMNS: tuple[str, ...] = ("filter_reasons", "filter_flags")
OUTPUT_COLUMNS: tuple[str, ...] = (*SIGNAL_COLUMNS, "filter_flags")
"""Columns ``filtered`` adds to the input columns."""

_TOPK_TYPE = pa.list_(pa.struct([("lang", pa.string()), ("score", pa.float64())]))
_CLEANING_TYPE = pa.struct([("lines_removed", pa.int64()), ("chars_removed", pa.int64())])


def _signals_arrow_type() -> pa.StructType:
    from udfs.quality import SIGNALS_TYPE

    return pa.struct([*SIGNALS_TYPE, ("lang", pa.string()), ("lang_score", pa.float64()),
                      ("lang_topk", _TOPK_TYPE), ("quality_score", pa.float64()),
                      ("filter_profile", pa.string()), ("line_cleaning", _CLEANING_TYPE)])


def _glob_regex(glob: str) -> str:
    """A shell glob (``*``, ``?``, ``[...]``) as an anchored Java regex for ``rlike``."""
    out = []
    for ch in glob:
        out.append(".*" if ch == "*" else "." if ch == "?" else ch if ch in "[]" else
                   ch if ch.isalnum() else "\\" + ch)
    return "^" + "".join(out) + "$"


def profile_column(df: DataFrame, cfg: FilterConfig) -> Column:
    """The rule profile of each row: the first ``profile_by_source`` glob matching ``source`` wins,
    else ``default_profile`` (also without a ``source`` column)."""
    col = F.lit(cfg.default_profile)
    if "source" not in df.columns:
        return col
    for glob, name in reversed(list(cfg.profile_by_source.items())):
        col = F.when(F.col("source").rlike(_glob_regex(glob)), F.lit(name)).otherwise(col)
    return col


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


def _profile_params(cfg: FilterConfig) -> dict[str, tuple[str, Any, bool, bool]]:
    """Per profile: (Gopher word reading, C4 line-rule options, clean lines?, signals from prose?)."""
    from udfs.quality import C4Options

    out = {}
    for name in cfg.profile_names():
        pc_ = cfg.profile_config(name)
        c = pc_.c4
        opts = C4Options(c.min_words_per_line, c.end_marks, c.page_checks, c.sentences_in)
        out[name] = (pc_.gopher_quality.alpha_words_reading, opts, c.clean_lines, pc_.signals_from == "prose")
    return out


def signal_settings(cfg: FilterConfig) -> dict[str, Any]:
    """The settings the stored signals depend on, flat (``profiles.<name>.c4.clean_lines``,
    ``langid.max_chars``, ``profile_by_source``...): what ``--decide-only`` cannot change, since it
    re-decides stored signals.

    The per-profile keys are those :func:`_profile_params` gives :func:`compute_signals`; LID, the
    classifier and the profile of each source are read once for every profile.
    """
    out: dict[str, Any] = {}
    for name, (reading, opts, clean, prose) in _profile_params(cfg).items():
        p = f"profiles.{name}."
        out |= {p + "gopher_quality.alpha_words_reading": reading,
                p + "c4.min_words_per_line": opts.min_words_per_line, p + "c4.end_marks": opts.end_marks,
                p + "c4.page_checks": opts.page_checks, p + "c4.sentences_in": opts.sentences_in,
                p + "c4.clean_lines": clean, p + "signals_from": "prose" if prose else "text"}
    lid, qm = cfg.langid, cfg.quality_model
    lid_keys = ("enabled", "model", "label_prefix", "max_chars", "sample_windows", "topk_max_chars", "top_k")
    out |= {f"langid.{k}": getattr(lid, k) for k in lid_keys}
    out |= {"langid.aliases": dict(sorted(lid.aliases.items())), "quality_model.model": qm.model,
            "quality_model.positive_label": qm.positive_label,
            "profile_by_source": dict(cfg.profile_by_source), "default_profile": cfg.default_profile}
    return out


def check_decide_only(stored: dict[str, Any] | None, cfg: FilterConfig) -> None:
    """Refuse a ``--decide-only`` whose config changes a setting the stored signals were computed with.

    Args:
        stored: :func:`signal_settings` of the full run that computed the signals (the ``filtered`` table
            property ``winnow.signal_settings``), or None for a table written before it was recorded.

    Raises:
        ConfigError: names each changed key, the stored and the asked value, and says to drop
            ``--decide-only`` (it used to re-decide the old signals and say nothing).
    """
    if stored is None:
        return
    now = json.loads(json.dumps(signal_settings(cfg)))  # the JSON form the property holds
    changed = [f"filter.{k}: signals computed with {stored.get(k)!r}, asked {now.get(k)!r}"
               for k in sorted(set(stored) | set(now)) if stored.get(k) != now.get(k)]
    if changed:
        raise ConfigError("--decide-only re-decides the stored signals, and these settings shape the "
                          "signals themselves; run the filter stage without --decide-only:\n  "
                          + "\n  ".join(changed))


def _language(text: pa.Array, locate: Any, lid_args: tuple[Any, ...]) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``lang``, ``lang_score`` and ``lang_topk`` of each text (nulls when ``locate`` is None: LID off)."""
    from udfs import langid

    n = len(text)
    if locate is None:
        return pa.nulls(n, pa.string()), pa.nulls(n, pa.float64()), pa.nulls(n, _TOPK_TYPE)
    max_chars, k, prefix, aliases, windows, topk_chars = lid_args
    model = langid.load_model(locate())
    return langid.identify(model, text, max_chars, windows, topk_chars, k, prefix, aliases)


def _quality_score(text: pa.Array, locate: Any, positive: str) -> pa.Array:
    """The classifier's probability of ``positive`` for each text (nulls when ``locate`` is None)."""
    from udfs import langid, quality_model

    if locate is None:
        return pa.nulls(len(text), pa.float64())
    qmodel = langid.load_model(locate())
    return pa.array(quality_model.score(qmodel, quality_model.prepare(text), positive), pa.float64())


def compute_signals(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add every signal column (:data:`SIGNAL_COLUMNS`) computed from ``text`` in one Arrow UDF.

    Each row is judged under its rule profile (:func:`profile_column`); a profile with
    ``c4.clean_lines`` first removes the lines C4's line rules reject (``text`` becomes the cleaned
    text, ``n_chars``/``n_bytes`` follow it) and every signal reads the cleaned text, as TFDS does.

    Args:
        df: a DataFrame with at least :data:`INPUT_COLUMNS`.
        cfg: the ``filter`` config section (profiles, LID model, classifier model).

    Returns:
        ``df`` plus struct columns ``gopher_quality``, ``gopher_repetition``, ``c4``, ``fineweb`` (fields
        as in :mod:`udfs.quality`), ``lang`` string, ``lang_score`` double in [0, 1], ``lang_topk``
        array<struct<lang,score>> (from the whole document), ``quality_score`` double (null without a
        classifier), ``filter_profile`` string, ``line_cleaning`` struct<lines_removed, chars_removed>
        (int64; null when the profile does not clean lines).

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
    arrow_type = pa.struct([*_signals_arrow_type(), ("__clean_text", pa.string())])
    lid_args = (lid.max_chars, lid.top_k, lid.label_prefix, dict(lid.aliases), lid.sample_windows,
                lid.topk_max_chars)
    positive = qm.positive_label
    params = _profile_params(cfg)

    def one_profile(text: pa.Array, name: str) -> list[pa.Array]:
        from udfs import langid_prose, quality

        n = len(text)
        reading, opts, clean, from_prose = params[name]
        cleaned = cleaning = c4_page = None
        if clean:
            page = quality.parse(text)
            cleaned, lines_removed, chars_removed = quality.c4_clean(page, opts)
            cleaning = pa.StructArray.from_arrays([pa.array(lines_removed), pa.array(chars_removed)],
                                                  fields=list(_CLEANING_TYPE))
            # C4's own page rules read the page as TFDS does (lorem ipsum in a line later dropped for
            # "javascript" still drops the page); every other family reads the cleaned text
            c4_page = quality.c4(page, opts)
            text = cleaned
        heur = quality.quality_signals(langid_prose.prose(text) if from_prose else text,
                                       alpha_words_reading=reading, c4_options=opts)
        fields = [heur.field(i) for i in range(heur.type.num_fields)]
        if c4_page is not None:
            fields[heur.type.get_field_index("c4")] = c4_page
        lang, score, topk = _language(text, lid_locate, lid_args)
        qscore = _quality_score(text, qm_locate, positive)
        return [*fields, lang, score, topk, qscore, pa.array([name] * n, pa.string()),
                cleaning if cleaning is not None else pa.nulls(n, _CLEANING_TYPE),
                cleaned.cast(pa.string()) if cleaned is not None else pa.nulls(n, pa.string())]

    def signals(text: pa.Array, profile: pa.Array) -> pa.Array:
        import numpy as np

        names = profile.to_numpy(zero_copy_only=False)
        groups = [(name, np.flatnonzero(names == name)) for name in dict.fromkeys(names.tolist())]
        if len(groups) == 1:
            cols = one_profile(text, groups[0][0])
        else:  # profiles judged apart, then put back in row order
            parts = [one_profile(text.take(pa.array(idx)), name) for name, idx in groups]
            back = pa.array(np.argsort(np.concatenate([idx for _, idx in groups]), kind="stable"))
            cols = [pa.concat_arrays([p[i] for p in parts]).take(back) for i in range(len(parts[0]))]
        return pa.StructArray.from_arrays(cols, fields=list(arrow_type))

    signals_arrow_udf = arrow_udf(signals, _spark_type(arrow_type)).asNondeterministic()
    # Non-deterministic only to stop the optimiser from evaluating the UDF once per extracted field;
    # the function itself is deterministic.
    tmp = "__filter_signals"
    out = df.withColumn(tmp, signals_arrow_udf(F.col("text"), profile_column(df, cfg)))
    clean = F.col(f"{tmp}.__clean_text")
    replaced = {"text": F.coalesce(clean, F.col("text")),
                "n_chars": F.when(clean.isNotNull(), F.char_length(clean)).otherwise(F.col("n_chars")),
                "n_bytes": F.when(clean.isNotNull(), F.octet_length(clean)).otherwise(F.col("n_bytes"))}
    base = [replaced[c].cast(df.schema[c].dataType).alias(c) if c in replaced else F.col(c) for c in df.columns]
    return out.select(*base, *[F.col(f"{tmp}.{c}").alias(c) for c in SIGNAL_COLUMNS])


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

    Rows of :data:`pipelines.filter.rules.RULES` sharing a reason id are OR-ed into one condition; a row
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
    """The reason ids of every active rule of any profile, in decision order (``default_profile`` first)."""
    names = [cfg.default_profile, *cfg.profile_names()]
    return list(dict.fromkeys(rid for name in names for rid, *_ in _rules(cfg.profile_config(name))))


def decide(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add ``filter_reasons`` and ``filter_flags`` (array<string>) from the signal columns and config.

    Each row is judged by the rule set of its ``filter_profile`` (:meth:`FilterConfig.profile_config`;
    a null profile, from a table written before profiles, reads as ``default_profile``).

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
    profile = F.coalesce(F.col("filter_profile"), F.lit(cfg.default_profile))
    by_action: dict[str, list[Column]] = {"drop": [], "flag": []}
    # Only the profiles rows can have: every profile's rules are one CASE each in the plan, and the six
    # built-in ones made Spark's analysis of the stage ~1.2 s slower on make run's 330 rows. A stored
    # profile outside them (a table decided with another profile_by_source) fails instead of passing.
    in_use = cfg.profiles_in_use()
    by_action["drop"].append(F.when(~profile.isin(in_use), F.raise_error(F.concat(
        F.lit("filter: a row's filter_profile "), profile, F.lit(f" is not one of the profiles in use {in_use}")))))
    for name in in_use:
        in_profile = profile == F.lit(name)
        for rid, action, cond, langs in _rules(cfg.profile_config(name)):
            if langs is not None:
                cond = cond & (F.col("lang").isNull() | F.col("lang").isin(list(langs)))
            by_action[action].append(F.when(in_profile & F.coalesce(cond, F.lit(False)), F.lit(rid)))

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
    decided = decided.persist(tables.TEXT_CACHE)
    try:
        first = _headline_reason(F.col("filter_reasons"))
        source = F.col("source") if "source" in decided.columns else F.lit(None).cast("string")
        grouped = decided.groupBy(first.alias("first"), source.alias("source"),
                                  F.col("filter_profile").alias("profile")).count().collect()
        per_rule = (
            decided.select(F.explode(F.concat(F.col("filter_reasons"), F.col("filter_flags"))).alias("r"))
            .groupBy("r").count().collect()
        )
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
        extra={"mode": mode, "failing_by_rule": {row["r"]: int(row["count"]) for row in per_rule},
               **extra_split},
        first_reason_only=True,
        notes={k: extra_split[k] for k in ("removed_language", "removed_quality")},
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
