"""Refs stage: ``filtered`` -> ``refs_checked`` (+ ``removed`` rows with stage 'refs').

Signals first, decision second: :func:`check_refs` adds the per-document reference signals of
:func:`udfs.refs.refs_signals` (computed per Arrow batch by a scalar Arrow UDF over ``text`` and
``lang``) and one decision column, ``refs_action``; :func:`run` writes the documents that stay to
``refs_checked`` and those the ``drop`` policy removes to ``removed``.

``refs_action`` (string):

* ``none``: no dangling mention; the document is unchanged.
* ``flag``: dangling mentions found and kept (policy ``flag``, or ``drop`` within ``max_dangling``).
* ``repair``: the sentences holding dangling mentions were removed from ``text``; ``refs_repairs``
  holds ``(start, end, text)`` of every removed span in the offsets of the input text, so
  :func:`udfs.refs.undo_repair` restores it. ``ref_mentions`` offsets also refer to the input text.
* ``drop``: removed (reason ``refs.dangling``); a repair that leaves only whitespace is removed too
  (reason ``refs.repair_emptied``).
* ``skipped``: ``refs.enabled`` is false; documents pass through unchanged, signal columns null.

**Targets dropped at ingest**: the JATS and MediaWiki readers can drop tables, figures and the reference
list by config and record which in ``meta.dropped_structures`` (``table``, ``figure``, ``reference``).
``dangling_dropped_at_ingest`` (map<string,int>) counts, per kind, the dangling mentions of a kind whose
structure ingest dropped in that document (``reference`` stands for the ``citation`` kind), so "see
Table 1" whose table ``ingest.jats.tables: drop`` removed is told from a table that never was there. They
still count as dangling (the text points at what the training data does not hold); the stage's figures
give them per kind as ``dangling_dropped_at_ingest``. Computed with Spark SQL over the map the Arrow UDF
returns: no second pass over the text. The dropped kinds also reach the detector: a document whose
reference list ingest dropped held one, so its "(Smith et al., 2019)" is dangling even where the text
alone would not show that it could have held a bibliography (see :func:`udfs.refs.find_mentions`).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.refs.config import RefsConfig
from udfs.refs import refs_signals

STAGE = "refs"
INPUT_TABLE = chain.stage(STAGE).input
OUTPUT_TABLE = chain.stage(STAGE).main_table
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text")
"""Required input columns; ``lang`` (from filter) is used when present to pick the vocabulary."""
SIGNAL_COLUMNS: tuple[str, ...] = (
    "ref_mentions", "n_mentions", "n_dangling", "dangling_ratio", "mentions_by_kind", "dangling_by_kind",
    "refs_repairs",
)
DROPPED_COLUMN = "dangling_dropped_at_ingest"
"""Per kind, dangling mentions whose kind of target ingest dropped (map<string,int>; see the module doc)."""
OUTPUT_COLUMNS: tuple[str, ...] = (*SIGNAL_COLUMNS, DROPPED_COLUMN, "refs_action")
"""Columns :func:`check_refs` adds (``text`` is rewritten under the ``repair`` policy)."""
ACTIONS: tuple[str, ...] = ("none", "flag", "repair", "drop", "skipped")
REASON_DANGLING = "refs.dangling"
REASON_EMPTIED = "refs.repair_emptied"

_MENTION = T.StructType([
    T.StructField("kind", T.StringType()), T.StructField("label", T.StringType()),
    T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType()),
    T.StructField("dangling", T.BooleanType()),
])
_REPAIR = T.StructType([
    T.StructField("start", T.IntegerType()), T.StructField("end", T.IntegerType()),
    T.StructField("text", T.StringType()),
])
STRUCTURE_KINDS: dict[str, str] = {"table": "table", "figure": "figure", "reference": "citation"}
"""``meta.dropped_structures`` entry (udfs/formats/jats.py, mediawiki.py) -> the mention kind it is the
target of (:data:`udfs.refs.vocab.KINDS`)."""

SIGNAL_TYPES: dict[str, T.DataType] = {
    "ref_mentions": T.ArrayType(_MENTION),
    "n_mentions": T.IntegerType(),
    "n_dangling": T.IntegerType(),
    "dangling_ratio": T.DoubleType(),
    "mentions_by_kind": T.MapType(T.StringType(), T.IntegerType()),
    "dangling_by_kind": T.MapType(T.StringType(), T.IntegerType()),
    "refs_repairs": T.ArrayType(_REPAIR),
}


def check_refs(df: DataFrame, cfg: RefsConfig) -> DataFrame:
    """Add reference signals and ``refs_action`` to documents; under ``repair`` rewrite ``text``.

    Args:
        df: documents with at least :data:`INPUT_COLUMNS` (string); ``lang`` (string) is optional.
        cfg: the ``refs`` config section.

    Returns:
        ``df``'s columns (``text`` repaired where ``refs_action = 'repair'``) plus :data:`OUTPUT_COLUMNS`:
        ``ref_mentions`` array<struct<kind string, label string, start int, end int, dangling boolean>>,
        ``n_mentions`` int, ``n_dangling`` int, ``dangling_ratio`` double (n_dangling / n_mentions, 0.0
        without mentions), ``mentions_by_kind`` / ``dangling_by_kind`` map<string,int>, ``refs_repairs``
        array<struct<start int, end int, text string>> (null unless repaired), ``refs_action`` string.
        Deterministic per row: the result does not depend on partitioning.

    Raises:
        ValueError: a required input column is missing (named), or an output column already exists.
    """
    missing = [c for c in INPUT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"refs: input is missing columns {missing}; required: {list(INPUT_COLUMNS)}, got {df.columns}")
    clash = [c for c in OUTPUT_COLUMNS if c in df.columns]
    if clash:
        raise ValueError(f"refs: input already has output columns {clash}; was the refs stage run twice?")
    if not cfg.enabled:
        return df.select(
            "*", *[F.lit(None).cast(t).alias(c) for c, t in SIGNAL_TYPES.items()],
            F.lit(None).cast(SIGNAL_TYPES["dangling_by_kind"]).alias(DROPPED_COLUMN), F.lit("skipped").alias("refs_action")
        )

    vocabs = {lang: v.model_dump() for lang, v in cfg.vocab.items()}
    default_lang, policy = cfg.default_language, cfg.policy
    max_dangling = cfg.max_dangling
    result_type = T.StructType(
        [T.StructField(c, t) for c, t in SIGNAL_TYPES.items()]
        + [T.StructField("repaired_text", T.StringType()), T.StructField("refs_action", T.StringType(), False)]
    )

    # A scalar Arrow UDF over (text, lang, dropped kinds) rather than mapInArrow over whole rows: only the input
    # columns travel to Python and only the signals come back, not every column of `filtered` (its
    # signal structs included) twice.
    def signals(text: pa.Array, lang: pa.Array, held: pa.Array) -> pa.Array:
        sig = refs_signals(text, lang, vocabs, default_lang, repair_sentences=policy == "repair", held=held)
        arrays = [sig.column(n) for n in result_type.fieldNames()[:-1]] + [_action(sig, policy, max_dangling)]
        return pa.StructArray.from_arrays(arrays, names=result_type.fieldNames())

    signals_per_batch = F.arrow_udf(signals, result_type)  # scalar Arrow UDF: one call per Arrow batch
    lang = F.col("lang") if "lang" in df.columns else F.lit(None).cast("string")
    dropped = dropped_kinds(df)
    checked = df.withColumn("_refs", signals_per_batch(F.col("text"), lang, dropped))
    text = F.coalesce(F.col("_refs.repaired_text"), F.col("text")) if policy == "repair" else F.col("text")
    return checked.select(
        *[text.alias("text") if c == "text" else F.col(c) for c in df.columns],
        *[F.col(f"_refs.{c}").alias(c) for c in SIGNAL_TYPES],
        F.map_filter("_refs.dangling_by_kind", lambda kind, n: F.array_contains(dropped, kind)).alias(DROPPED_COLUMN),
        F.col("_refs.refs_action").alias("refs_action"),
    )


def dropped_kinds(df: DataFrame) -> Column:
    """The mention kinds whose targets ingest dropped from each document (array<string>; empty without
    ``meta`` or ``meta.dropped_structures``), from :data:`STRUCTURE_KINDS`."""
    if "meta" not in df.columns:
        return F.array().cast("array<string>")
    listed = F.split(F.coalesce(F.col("meta").getItem("dropped_structures"), F.lit("")), ",")
    mapping = F.create_map(*[F.lit(x) for kv in STRUCTURE_KINDS.items() for x in kv])
    return F.filter(F.transform(listed, lambda s: mapping[s]), lambda k: k.isNotNull())


def can_drop(cfg: RefsConfig) -> bool:
    """Whether ``cfg`` may give a document ``refs_action = 'drop'`` (see :func:`_action`): the ``drop``
    policy with a ``max_dangling`` bound, or ``repair`` (a repair that leaves only whitespace). False
    for ``flag``, ``drop`` with ``max_dangling: null`` and a disabled stage, which keep every document."""
    if not cfg.enabled:
        return False
    return cfg.policy == "repair" or (cfg.policy == "drop" and cfg.max_dangling is not None)


def _action(sig: pa.RecordBatch, policy: str, max_dangling: int | None) -> pa.Array:
    """``refs_action`` of every row of a :func:`udfs.refs.refs_signals` batch (see the module doc)."""
    import pyarrow.compute as pc

    n_dangling = sig.column("n_dangling")
    has_dangling = pc.greater(n_dangling, 0)
    if policy == "drop" and max_dangling is not None:
        return pc.if_else(pc.greater(n_dangling, max_dangling), "drop", pc.if_else(has_dangling, "flag", "none"))
    if policy == "repair":
        emptied = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(sig.column("repaired_text")), ""), False)
        return pc.if_else(emptied, "drop", pc.if_else(has_dangling, "repair", "none"))
    return pc.if_else(has_dangling, "flag", "none")


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read ``filtered``, check references, write ``refs_checked`` and this stage's ``removed`` rows.

    Returns:
        The :class:`StageReport`; ``removed`` counts documents by reason; ``extra`` holds documents by
        ``refs_action``, mentions and dangling mentions by kind.
    """
    src = tables.read_table(spark, cfg, INPUT_TABLE)
    reason = REASON_EMPTIED if cfg.refs.policy == "repair" else REASON_DANGLING
    props = {"policy": cfg.refs.policy if cfg.refs.enabled else "skipped"}
    if not can_drop(cfg.refs):
        # Every row is kept: one pass writes them and the counts come from the written table's signal
        # columns. Caching the checked rows for a second reader cost more than the write itself at scale
        # (Spark's columnar cache clones and hashes every text to weigh a dictionary encoding), see
        # bench/notes.md "Refs and decontam at scale".
        checked = check_refs(src, cfg.refs)
        none = checked.limit(0).withColumn("reason", F.array(F.lit(reason)))
        outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: checked}, removed=none, properties=props)
        stats = _stats(tables.read_table(spark, cfg, OUTPUT_TABLE))
    else:
        checked = check_refs(src, cfg.refs).persist(tables.TEXT_CACHE)
        try:
            stats = _stats(checked)
            kept = checked.where(F.col("refs_action") != "drop")
            dropped = checked.where(F.col("refs_action") == "drop").withColumn("reason", F.array(F.lit(reason)))
            outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=dropped, properties=props)
        finally:
            checked.unpersist()
    n_drop = stats["actions"].get("drop", 0)
    return StageReport(
        stage=STAGE,
        rows_in=stats["rows"],
        rows_out=stats["rows"] - n_drop,
        removed={reason: n_drop} if n_drop else {},
        outputs=outputs,
        extra={k: v for k, v in stats.items() if k != "rows"},
        notes={"flagged": stats["actions"].get("flag", 0), "repaired": stats["actions"].get("repair", 0),
               "dangling_mentions": sum(stats["dangling_by_kind"].values())},
    )


def _stats(checked: DataFrame) -> dict:
    """One aggregation: documents by action, mentions and dangling mentions by kind."""
    by_action = {r["refs_action"]: r["n"] for r in checked.groupBy("refs_action").agg(F.count("*").alias("n")).collect()}
    kinds = (
        checked.select(F.explode_outer("ref_mentions").alias("m"), F.col(DROPPED_COLUMN).alias("x"))
        .where(F.col("m").isNotNull())
        .groupBy("m.kind")
        .agg(F.count("*").alias("n"), F.sum(F.col("m.dangling").cast("int")).alias("d"),
             # a dangling mention of a kind the document's map lists: its target was dropped at ingest
             F.sum((F.col("m.dangling") & F.coalesce(F.map_contains_key("x", F.col("m.kind")), F.lit(False)))
                   .cast("int")).alias("i"))
        .collect()
    )
    kinds = sorted(kinds, key=lambda r: r["kind"])
    return {
        "rows": sum(by_action.values()),
        "actions": dict(sorted(by_action.items())),
        "mentions_by_kind": {r["kind"]: r["n"] for r in kinds},
        "dangling_by_kind": {r["kind"]: int(r["d"]) for r in kinds},
        DROPPED_COLUMN: {r["kind"]: int(r["i"]) for r in kinds if r["i"]},
    }
