"""Look at the data: seeded samples of removed or kept documents with their signals, one document's path.

Used by ``jobs/inspect.py``. Samples are ordered by a keyed hash of ``(seed, doc_id)``, so the same
command shows the same documents whatever the partitioning; text is cut to head and tail with the cut
marked (:func:`pipelines.core.samples.truncate`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.core import chain, tables
from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig
from pipelines.core.samples import printable, reason_matches, row_signals, seeded_order, truncate
from pipelines.pii.inspect import (  # noqa: F401  (re-exported: callers use pipelines.tools.inspect)
    mark_pii,
    sample_pii,
)
from pipelines.tools.doc_path import doc_path  # noqa: F401  (re-exported: callers use pipelines.tools.inspect)
from pipelines.tools.doc_path import shard_place as _shard_place  # noqa: F401  (re-exported, as above)


def sample(
    spark: SparkSession,
    cfg: WinnowConfig,
    stage: str,
    *,
    reason: str | None = None,
    kept: bool = False,
    n: int = 5,
    text_chars: int = 600,
) -> list[dict[str, Any]]:
    """``n`` documents removed by ``stage`` (for ``reason`` if given) or kept by it, seeded by ``run.seed``.

    Args:
        stage: a stage of the chain; for ``ingest`` "removed" means the ``quarantine`` table (bad
            records, identified by ``input_file:record``, with their excerpt and detail).
        reason: a reason id or family prefix; None = any.
        kept: sample the stage's output table instead of its removals.
        n: documents to return.
        text_chars: characters of text shown per document.

    Returns:
        Rows ``{doc_id, reason, duplicate_of, signals: {column: value}, text, n_chars}``.

    Raises:
        ValueError: unknown stage, or ``reason`` given with ``kept``.
        tables.MissingTableError: the table to sample does not exist in this run, or the stage has not
            run (its output table does not exist).
    """
    if stage == "ingest" and not kept:
        return _sample_quarantine(spark, cfg, reason, n, text_chars)
    df = _selected(spark, cfg, stage, reason, kept)
    rows = df.orderBy(seeded_order(cfg.run.seed), "doc_id").limit(n).collect()
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        text = d.get("text") or ""
        out.append({
            "doc_id": d["doc_id"], "reason": d.get("reason") or [], "duplicate_of": d.get("duplicate_of"),
            "signals": row_signals(d, None if kept else ([reason] if reason else d.get("reason") or [])),
            "text": truncate(text, text_chars), "n_chars": len(text),
        })
    return out


def reason_counts(spark: SparkSession, cfg: WinnowConfig, stage: str) -> dict[str, int]:
    """Documents per reason ``stage`` removed in this run, most first (ingest: the quarantine's reasons,
    named ``quarantine.<reason>`` as in the report): what to offer when a ``--reason`` matched nothing.

    Raises:
        tables.MissingTableError: the stage's removals table does not exist in this run.
    """
    if stage == "ingest":
        df = tables.read_table(spark, cfg, "quarantine").select(F.concat(F.lit("quarantine."), "reason").alias("r"))
    else:
        df = (tables.read_table(spark, cfg, "removed", written_by=stage).where(F.col("stage") == stage)
              .select(F.explode("reason").alias("r")))
    rows = df.groupBy("r").count().collect()
    return dict(sorted(((r["r"], int(r["count"])) for r in rows), key=lambda kv: (-kv[1], kv[0])))


def count(spark: SparkSession, cfg: WinnowConfig, stage: str, *, reason: str | None = None,
          kept: bool = False) -> int:
    """How many documents :func:`sample` draws from (the total its header gives beside the sample size).

    Raises:
        ValueError, tables.MissingTableError: as :func:`sample`.
    """
    return _selected(spark, cfg, stage, reason, kept).count()


def _selected(spark: SparkSession, cfg: WinnowConfig, stage: str, reason: str | None, kept: bool) -> Any:
    """The rows :func:`sample` draws from: the stage's removals (ingest: ``quarantine``, with ``doc_id`` =
    ``input_file:record``), of ``reason``'s family when given, or its output table with ``kept``."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; allowed: {list(STAGES)}")
    if kept and reason:
        raise ValueError("--reason selects removed documents; it cannot be combined with --kept")
    if stage == "ingest" and not kept:
        df = tables.read_table(spark, cfg, "quarantine")
        df = df.withColumn("doc_id", F.concat_ws(":", "input_file", F.col("record").cast("string")))
        if reason:
            # The report names these reasons "quarantine.<reason>"; the table stores the bare reason.
            df = df.where(F.col("reason") == reason.removeprefix("quarantine."))
        return df
    if kept:
        table = chain.stage(stage).main_table
        if table is None:
            raise ValueError(f"stage {stage!r} writes no document table; allowed: {[s for s, _ in chain.main_tables()]}")
        return tables.read_table(spark, cfg, table, written_by=stage)
    main = chain.stage(stage).main_table
    if main is not None and not tables.table_exists(spark, cfg.table_path(main)):
        # a stage that never ran removed nothing: "0 documents removed by filter" said it ran and kept all
        raise tables.MissingTableError(f"{stage} has not run in {cfg.run.root} (no {main!r} table); run it first"
                                       f" (winnow run, or jobs/{stage}.py)")
    df = tables.read_table(spark, cfg, "removed", written_by=stage).where(F.col("stage") == stage)
    return df.where(reason_matches(reason)) if reason else df


def _sample_quarantine(spark: SparkSession, cfg: WinnowConfig, reason: str | None, n: int, text_chars: int) -> list[dict[str, Any]]:
    """Seeded sample of ``quarantine`` rows in :func:`sample`'s shape (``doc_id`` = ``input_file:record``)."""
    df = _selected(spark, cfg, "ingest", reason, False)
    rows = df.orderBy(seeded_order(cfg.run.seed), "doc_id").limit(n).collect()
    return [{
        "doc_id": r["doc_id"], "reason": [f"quarantine.{r['reason']}"], "duplicate_of": None,
        "signals": {"detail": r["detail"]} if r["detail"] else {},
        "text": truncate(r["excerpt"] or "", text_chars), "n_chars": len(r["excerpt"] or ""),
    } for r in rows]


def format_sample(rows: list[dict[str, Any]], header: str) -> str:
    """Plain-text rendering of :func:`sample` for a terminal, control characters escaped
    (:func:`pipelines.core.samples.printable`): the rows come from the input, quarantined bytes included."""
    lines = [header, ""]
    for i, r in enumerate(rows, 1):
        reasons = ", ".join(r["reason"]) if r["reason"] else "-"
        dup = f"  duplicate_of={r['duplicate_of']}" if r["duplicate_of"] else ""
        lines.append(printable(f"--- {i}. {r['doc_id']}  reason: {reasons}{dup}  ({r['n_chars']} chars)"))
        if r["signals"]:  # a quarantined record without a detail has none: no blank line in its place
            lines.append("    " + "  ".join(f"{k}={_fmt(v, DETAIL_CHARS if k == 'detail' else 60)}"
                                            for k, v in sorted(r["signals"].items())))
        lines.extend("    | " + ln for ln in printable(r["text"]).splitlines() or [""])
        lines.append("")
    if not rows:
        lines.append("(no documents match)")
    return "\n".join(lines)


DETAIL_CHARS = 300
"""Characters of a quarantine ``detail`` shown: it is one sentence whose end names the limit broken
(``... > max_replacement_fraction 0.25 (wrong or undeclared charset)``), so it is not cut like a signal."""


def _fmt(v: Any, limit: int = 60) -> str:
    """One signal value for the terminal: floats to 4 significant digits, text escaped and cut to ``limit``."""
    if isinstance(v, float):
        return f"{v:.4g}"
    s = printable(str(v))
    return s if len(s) <= limit else s[:limit - 3] + "..."


