"""PII stage: the previous document table (``refs_checked``) -> ``pii_redacted`` (+ ``removed`` rows).

Signals first, decision second: :func:`redact_pii` runs :func:`udfs.pii.pii_batch` through a scalar
Arrow UDF over ``text`` only (only that column travels to Python; only the findings and the redacted
text come back), then decides ``pii_action`` per document from config:

* ``none``: nothing found; the document is unchanged.
* ``redact``: findings of replaceable kinds were replaced by their tokens in ``text``.
* ``flag``: findings reported, text unchanged (action ``flag``, or only ``report_only`` kinds found).
* ``drop``: action ``drop`` and more than ``max_per_1k_chars`` findings per 1000 characters (and at
  least ``drop_min_findings``): removed with reason ``pii.<most frequent kind>``. The row written to
  ``removed`` holds the *redacted* text, so the personal data is not stored once more.
* ``skipped``: ``pii.enabled`` is false.

``pii_spans`` offsets refer to the input text (code points, end exclusive) and hold a salted sha256
of each value, never the value: the original text stays only in the earlier tables.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.pii.config import PiiConfig
from udfs.pii import PiiOptions, pii_batch

STAGE = "pii"
OUTPUT_TABLE = chain.stage(STAGE).main_table
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
OUTPUT_COLUMNS: tuple[str, ...] = ("pii_counts", "pii_spans", "pii_action")
"""Columns :func:`redact_pii` adds (``text`` is rewritten under ``redact`` and ``drop``)."""
ACTIONS: tuple[str, ...] = ("none", "redact", "flag", "drop", "skipped")
REASON_PREFIX = "pii."
_TOP = "_pii_top"
BATCH_MAX_ROWS = 10_000
"""Row cap of an Arrow batch under :func:`arrow_batch_settings` (Spark's default ``maxRecordsPerBatch``):
``batch_mb`` decides for documents over ~800 bytes. Not -1 (no cap): Spark 4.2's columnar Arrow UDF
path, taken over Parquet input, sizes its column vectors by it and fails on -1."""

_SPAN = T.StructType([
    T.StructField("kind", T.StringType()), T.StructField("start", T.IntegerType()),
    T.StructField("end", T.IntegerType()), T.StructField("value_hash", T.StringType()),
])
SIGNAL_TYPES: dict[str, T.DataType] = {
    "pii_counts": T.MapType(T.StringType(), T.IntegerType()),
    "pii_spans": T.ArrayType(_SPAN),
}
_RESULT = T.StructType([
    T.StructField("redacted_text", T.StringType()), *[T.StructField(c, t) for c, t in SIGNAL_TYPES.items()],
    T.StructField("pii_n", T.IntegerType()), T.StructField("pii_top", T.StringType()),
])


def pii_options(cfg: PiiConfig) -> PiiOptions:
    """The :class:`udfs.pii.PiiOptions` of a ``pii`` config section."""
    return PiiOptions(
        kinds=tuple(cfg.kinds),
        replacements={k: cfg.replacements[k] for k in cfg.kinds if k not in cfg.report_only},
        email_obfuscated=cfg.email_obfuscated,
        email_example_domains=cfg.email_example_domains,
        phone_regions=tuple(cfg.phone_regions),
        hash_salt=cfg.hash_salt,
    )


def arrow_batch_settings(cfg: PiiConfig) -> dict[str, str]:
    """Spark session settings that cut the Arrow batches going to the detector by size.

    Args:
        cfg: the ``pii`` config section (``batch_mb``: MB of text per batch).

    Returns:
        ``spark.sql.execution.arrow.maxBytesPerBatch`` = ``batch_mb`` MB (10^6 bytes) and
        ``maxRecordsPerBatch`` = :data:`BATCH_MAX_ROWS`; apply them with
        :func:`pipelines.core.tables.session_conf` around the actions that run the stage's DataFrame
        (Spark reads them when a query runs).
    """
    return {"spark.sql.execution.arrow.maxBytesPerBatch": str(cfg.batch_mb * 1_000_000),
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(BATCH_MAX_ROWS)}


def redact_pii(df: DataFrame, cfg: PiiConfig, with_top_kind: bool = False) -> DataFrame:
    """Find PII in ``text``, add the findings and ``pii_action``, and redact ``text`` unless flagging.

    Args:
        df: documents with at least :data:`INPUT_COLUMNS` (string).
        cfg: the ``pii`` config section.
        with_top_kind: also return ``_pii_top`` (string), the most frequent replaceable kind, which
            names the drop reason.

    Returns:
        ``df``'s columns (``text`` redacted where ``pii_action`` is ``redact`` or ``drop``) plus
        ``pii_counts`` map<string,int> (kind -> findings; empty map without findings), ``pii_spans``
        array<struct<kind string, start int, end int, value_hash string>> (offsets into the input
        text) and ``pii_action`` string (:data:`ACTIONS`). Deterministic per row.

    Raises:
        ValueError: a required input column is missing (named), or an output column already exists.
    """
    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    clash = [c for c in OUTPUT_COLUMNS if c in df.columns]
    if clash:
        raise ValueError(f"{STAGE}: input already has output columns {clash}; was the {STAGE} stage run "
                         "twice?")
    if not cfg.enabled:
        return df.select("*", F.create_map().cast(SIGNAL_TYPES["pii_counts"]).alias("pii_counts"),
                         F.array().cast(SIGNAL_TYPES["pii_spans"]).alias("pii_spans"),
                         F.lit("skipped").alias("pii_action"),
                         *([F.lit(None).cast("string").alias(_TOP)] if with_top_kind else []))

    opts, redact = pii_options(cfg), cfg.action != "flag"

    def detect(text: pa.Array) -> pa.Array:
        out = pii_batch(text, opts, redact=redact)
        return pa.StructArray.from_arrays(out.columns, names=out.schema.names)

    findings = df.withColumn("_pii", F.arrow_udf(detect, _RESULT)(F.col("text")))
    n, changed = F.col("_pii.pii_n"), F.col("_pii.redacted_text").isNotNull()
    rules = []
    if cfg.action == "drop" and cfg.max_per_1k_chars is not None:
        # n / chars * 1000 > max, multiplied out: no division by an empty text's zero length.
        dense = n * 1000.0 > F.length("text") * cfg.max_per_1k_chars
        rules.append(((n >= cfg.drop_min_findings) & dense, "drop"))
    rules += [(F.size("_pii.pii_spans") == 0, "none"), (changed, "redact")]
    action = F.when(rules[0][0], F.lit(rules[0][1]))
    for cond, value in rules[1:]:
        action = action.when(cond, F.lit(value))
    return findings.select(
        *[F.coalesce(F.col("_pii.redacted_text"), F.col("text")).alias("text") if c == "text" else F.col(c)
          for c in df.columns],
        *[F.col(f"_pii.{c}").alias(c) for c in SIGNAL_TYPES],
        action.otherwise(F.lit("flag")).alias("pii_action"),
        *([F.col("_pii.pii_top").alias(_TOP)] if with_top_kind else []),
    )


def can_drop(cfg: PiiConfig) -> bool:
    """Whether ``cfg`` may give a document ``pii_action = 'drop'`` (see :func:`redact_pii`): only the
    ``drop`` action with a ``max_per_1k_chars`` bound; ``redact``, ``flag`` and a disabled stage keep
    every document."""
    return cfg.enabled and cfg.action == "drop" and cfg.max_per_1k_chars is not None


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read the input table, find and redact PII, write ``pii_redacted`` and this stage's ``removed`` rows.

    The input is ``pii.input_table``, else the document table of the last stage before pii in
    ``pipeline.stages`` (:func:`pipelines.core.tables.previous_document_table`).

    Returns:
        The :class:`StageReport`; ``removed`` counts documents by reason ``pii.<kind>``; ``extra``
        holds documents by ``pii_action``, findings and affected documents by kind.
    """
    name = tables.stage_input_table(cfg, STAGE, spark)
    src = tables.read_table(spark, cfg, name)
    # The Arrow batch settings are read when a query runs: every action on checked runs in the block.
    props = {"action": cfg.pii.action if cfg.pii.enabled else "skipped", "input_table": name}
    with tables.session_conf(spark, arrow_batch_settings(cfg.pii)):
        if not can_drop(cfg.pii):
            # Every row is kept: one pass writes them and the counts come from the written table's
            # signal columns (the top kind only names drop reasons). Caching the checked rows for a
            # second reader cost more than the write itself at scale (Spark's columnar cache clones and
            # hashes every text to weigh a dictionary encoding), see bench/notes.md "Refs and decontam at
            # scale".
            checked = redact_pii(src, cfg.pii)
            none = checked.limit(0).withColumn(
                "reason", F.array(F.concat(F.lit(REASON_PREFIX), F.lit(None).cast("string"))))
            outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: checked}, removed=none,
                                     properties=props)
            written = tables.read_table(spark, cfg, OUTPUT_TABLE)
            stats = _stats(written.withColumn(_TOP, F.lit(None).cast("string")))
        else:
            checked = redact_pii(src, cfg.pii, with_top_kind=True).persist(tables.TEXT_CACHE)
            try:
                stats = _stats(checked)
                kept = checked.where(F.col("pii_action") != "drop").drop(_TOP)
                dropped = (checked.where(F.col("pii_action") == "drop")
                           .withColumn("reason", F.array(F.concat(F.lit(REASON_PREFIX), F.col(_TOP))))
                           .drop(_TOP))
                outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=dropped,
                                         properties=props)
            finally:
                checked.unpersist()
    removed = stats.pop("removed")
    return StageReport(
        stage=STAGE,
        rows_in=stats["rows"],
        rows_out=stats["rows"] - sum(removed.values()),
        removed=removed,
        outputs=outputs,
        extra={k: v for k, v in stats.items() if k != "rows"},
        notes={"redacted": stats["actions"].get("redact", 0), "flagged": stats["actions"].get("flag", 0),
               "findings": sum(stats["findings_by_kind"].values())},
    )


def _stats(checked: DataFrame) -> dict:
    """Documents by action and by drop reason; findings and affected documents by kind."""
    by_action = checked.groupBy("pii_action", _TOP).agg(F.count("*").alias("n")).collect()
    kinds = (
        checked.select(F.explode("pii_counts").alias("kind", "n"))
        .groupBy("kind").agg(F.sum("n").alias("n"), F.count("*").alias("docs"))
        .collect()
    )
    actions: dict[str, int] = {}
    removed: dict[str, int] = {}
    for r in by_action:
        actions[r["pii_action"]] = actions.get(r["pii_action"], 0) + r["n"]
        if r["pii_action"] == "drop":
            removed[REASON_PREFIX + r[_TOP]] = r["n"]
    return {
        "rows": sum(actions.values()),
        "actions": dict(sorted(actions.items())),
        "removed": dict(sorted(removed.items())),
        "findings_by_kind": {r["kind"]: int(r["n"]) for r in sorted(kinds, key=lambda r: r["kind"])},
        "documents_by_kind": {r["kind"]: int(r["docs"]) for r in sorted(kinds, key=lambda r: r["kind"])},
    }
