"""The filter's signals: every quality, language and classifier column computed from text in one Arrow
UDF, each row under its rule profile (the decision on them is :func:`pipelines.filter.stage.decide`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain
from pipelines.core.config import ConfigError
from pipelines.filter.config import FilterConfig
from pipelines.filter.rules import AUTO

STAGE = "filter"

INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
"""Columns the transform needs; every other input column passes through unchanged."""

FAMILY_COLUMNS: tuple[str, ...] = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
LANG_COLUMNS: tuple[str, ...] = ("lang", "lang_score", "lang_topk")
PROFILE_COLUMNS: tuple[str, ...] = ("filter_profile", "line_cleaning")
"""The rule profile that judged the document and, when it cleans lines (``c4.clean_lines``), what C4's
line cleaning removed from ``text`` (struct ``lines_removed``, ``chars_removed``; null otherwise)."""
SIGNAL_COLUMNS: tuple[str, ...] = (*FAMILY_COLUMNS, *LANG_COLUMNS, "quality_score", *PROFILE_COLUMNS)


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


RENDERED_WIKI_KEY = "templates_rendered"
"""The ``meta`` key the MediaWiki reader sets on every page it renders (dump pages, and wikitext read
from a record's field with ``record_format: mediawiki``): ``auto`` gives such a document ``wiki``."""


def profile_column(df: DataFrame, cfg: FilterConfig) -> Column:
    """The rule profile of each row: the first ``profile_by_source`` glob matching ``source`` wins,
    else ``default_profile`` (also without a ``source`` column). ``auto`` is resolved per document
    inside :func:`compute_signals`, except for pages the MediaWiki reader rendered (``meta`` holds
    :data:`RENDERED_WIKI_KEY`): their markup is gone, so their text no longer shows that they are
    Wikipedia, and they get ``wiki``."""
    col = F.lit(cfg.default_profile)
    if "source" in df.columns:
        for glob, name in reversed(list(cfg.profile_by_source.items())):
            col = F.when(F.col("source").rlike(_glob_regex(glob)), F.lit(name)).otherwise(col)
    if cfg.uses_auto() and "meta" in df.columns:
        rendered = F.col("meta").getItem(RENDERED_WIKI_KEY).isNotNull()
        col = F.when((col == F.lit(AUTO)) & rendered, F.lit("wiki")).otherwise(col)
    return col


def resolve_auto(text: pa.Array, names: Any) -> Any:
    """``names`` (numpy array of profile names, one per text) with each ``auto`` replaced by the profile
    :func:`udfs.quality.profile.auto_profile` picks from its text (a new object array; ``names`` itself
    when no row is ``auto``)."""
    auto = names == AUTO
    if not auto.any():
        return names
    from udfs.quality.profile import auto_profile

    names = names.astype(object)
    names[auto] = auto_profile(text.filter(pa.array(auto))).to_numpy(zero_copy_only=False)
    return names


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
    lid_keys = ("enabled", "model", "label_prefix", "max_chars", "sample_windows", "topk_max_chars", "confident_score",
                "top_k")
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


def _language(text: pa.Array, locate: Any, lid_args: tuple[Any, ...],
              clean: pa.Array | None = None) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``lang``, ``lang_score`` and ``lang_topk`` of each text (nulls when ``locate`` is None: LID off);
    ``clean`` is the texts' prose when already computed."""
    from udfs import langid

    n = len(text)
    if locate is None:
        return pa.nulls(n, pa.string()), pa.nulls(n, pa.float64()), pa.nulls(n, _TOPK_TYPE)
    max_chars, k, prefix, aliases, windows, topk_chars, confident = lid_args
    model = langid.load_predictor(locate(), text.nbytes)
    return langid.identify(model, text, max_chars, windows, topk_chars, k, prefix, aliases, clean=clean,
                           confident=confident)


def _quality_score(text: pa.Array, locate: Any, positive: str) -> pa.Array:
    """The classifier's probability of ``positive`` for each text (nulls when ``locate`` is None)."""
    from udfs import langid, quality_model

    if locate is None:
        return pa.nulls(len(text), pa.float64())
    qmodel = langid.load_model(locate())
    return pa.array(quality_model.score(qmodel, quality_model.prepare(text), positive), pa.float64())


def batch_function(cfg: FilterConfig, lid_locate: Callable[[], str] | None,
                   qm_locate: Callable[[], str] | None) -> Callable[[pa.Array, pa.Array], pa.StructArray]:
    """The stage's per-batch work: texts and their profile names -> every signal, as one struct.

    Args:
        cfg: the ``filter`` config section.
        lid_locate / qm_locate: how a worker finds the LID / classifier model (:func:`_model_locator`);
            None: that model is off (its columns are null).

    Returns:
        A function of (``text`` string[n], ``profile`` string[n], a :data:`AUTO` entry resolved per
        document) returning StructArray[n] of :func:`_signals_arrow_type` plus ``__clean_text`` (the
        line-cleaned text, null when the profile does not clean lines). It runs inside the Arrow UDF
        of :func:`compute_signals`, and alone in benchmarks.
    """
    lid = cfg.langid
    arrow_type = pa.struct([*_signals_arrow_type(), ("__clean_text", pa.string())])
    lid_args = (lid.max_chars, lid.top_k, lid.label_prefix, dict(lid.aliases), lid.sample_windows,
                lid.topk_max_chars, lid.confident_score)
    positive = cfg.quality_model.positive_label
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
        clean_prose = langid_prose.prose(text) if from_prose or lid_locate is not None else None
        heur = quality.quality_signals(clean_prose if from_prose else text,
                                       alpha_words_reading=reading, c4_options=opts)
        fields = [heur.field(i) for i in range(heur.type.num_fields)]
        if c4_page is not None:
            fields[heur.type.get_field_index("c4")] = c4_page
        lang, score, topk = _language(text, lid_locate, lid_args, clean_prose)
        qscore = _quality_score(text, qm_locate, positive)
        return [*fields, lang, score, topk, qscore, pa.array([name] * n, pa.string()),
                cleaning if cleaning is not None else pa.nulls(n, _CLEANING_TYPE),
                cleaned.cast(pa.string()) if cleaned is not None else pa.nulls(n, pa.string())]

    def signals(text: pa.Array, profile: pa.Array) -> pa.Array:
        import numpy as np

        from udfs.worker_memory import keep_freed_memory

        keep_freed_memory()  # the batches' large arrays reuse freed memory (no page faults per batch)
        names = resolve_auto(text, profile.to_numpy(zero_copy_only=False))
        groups = [(name, np.flatnonzero(names == name)) for name in dict.fromkeys(names.tolist())]
        if len(groups) == 1:
            cols = one_profile(text, groups[0][0])
        else:  # profiles judged apart, then put back in row order
            parts = [one_profile(text.take(pa.array(idx)), name) for name, idx in groups]
            back = pa.array(np.argsort(np.concatenate([idx for _, idx in groups]), kind="stable"))
            cols = [pa.concat_arrays([p[i] for p in parts]).take(back) for i in range(len(parts[0]))]
        return pa.StructArray.from_arrays(cols, fields=list(arrow_type))

    return signals


def lid_locator(spark: SparkSession | None, cfg: FilterConfig) -> Callable[[], str] | None:
    """How a worker finds the LID model (:func:`_model_locator`; ``spark=None``: this machine's file),
    or None when LID is off."""
    from udfs.langid import default_model_path

    if not cfg.langid.enabled:
        return None
    path = cfg.langid.model or default_model_path()
    if spark is None:
        if not os.path.isfile(path):
            raise ValueError(f"model file not found: {path!r}")
        return lambda: path
    return _model_locator(spark, path)


def compute_signals(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Add every signal column (:data:`SIGNAL_COLUMNS`) computed from ``text`` in one Arrow UDF.

    Each row is judged under its rule profile (:func:`profile_column`; a row whose profile is ``auto``
    gets the one :func:`udfs.quality.profile.auto_profile` picks from its text); a profile with
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
        ``filter_profile`` is the profile that judged the row (never ``auto``).

    Raises:
        ValueError: a required column is missing, or a configured model file does not exist.
    """
    from pyspark.sql.functions import arrow_udf

    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    spark = df.sparkSession
    qm = cfg.quality_model
    signals = batch_function(cfg, lid_locator(spark, cfg), _model_locator(spark, qm.model) if qm.model else None)
    arrow_type = pa.struct([*_signals_arrow_type(), ("__clean_text", pa.string())])
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
