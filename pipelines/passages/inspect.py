"""``inspect --stage passages``: documents the stage cut, shown as read, the removed spans marked."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.samples import excerpt_around_marks, seeded_order
from pipelines.passages.transform import SPANS_COLUMN, STAGE


def mark_removed(text: str, spans: list[dict[str, Any]]) -> str:
    """The stage's *input* ``text`` with every removed span shown as ``⟦kind <- first_seen_in: text⟧``.

    Args:
        text: the document as the passages stage read it.
        spans: its ``passages_removed`` rows (``start``, ``end`` code points, ``kind``, ``first_seen_in``).

    >>> span = {"start": 6, "end": 18, "kind": "exact", "first_seen_in": "d1"}
    >>> mark_removed("Keep.\\nBanner here\\nKeep too.", [span])
    'Keep.\\n⟦exact <- d1: Banner here\\n⟧Keep too.'
    """
    out, pos = [], 0
    for s in sorted(spans, key=lambda s: s["start"]):
        out += [text[pos:s["start"]], f"⟦{s['kind']} <- {s['first_seen_in']}: {text[s['start']:s['end']]}⟧"]
        pos = s["end"]
    out.append(text[pos:])
    return "".join(out)


def sample_cut(spark: SparkSession, cfg: WinnowConfig, *, n: int = 5,
               text_chars: int = 600) -> list[dict[str, Any]]:
    """Seeded sample of documents the stage cut text from (kept or removed whole), in
    :func:`pipelines.tools.inspect.sample`'s shape, the input text marked by :func:`mark_removed`.

    Raises:
        tables.MissingTableError: the stage's input or output table does not exist in this run.
    """
    out_table = chain.stage(STAGE).main_table
    kept = (tables.read_table(spark, cfg, out_table, written_by=STAGE).where(F.col(SPANS_COLUMN).isNotNull())
            .select("doc_id", SPANS_COLUMN, F.array().cast("array<string>").alias("reason")))
    source = tables.read_table(spark, cfg, chain.stage(STAGE).input).select("doc_id", "text")
    rows = kept.join(source, "doc_id")
    removed = tables.read_if_exists(spark, cfg, "removed")
    if removed is not None and SPANS_COLUMN in removed.columns:
        mine = removed.where(F.col("stage") == STAGE)
        rows = rows.unionByName(mine.select("doc_id", SPANS_COLUMN, "reason", "text"))
    out = []
    for r in rows.orderBy(seeded_order(cfg.run.seed), "doc_id").limit(n).collect():
        d = r.asDict(recursive=True)
        spans = d[SPANS_COLUMN] or []
        out.append({
            "doc_id": d["doc_id"], "reason": d["reason"] or [], "duplicate_of": None,
            "signals": {"spans_cut": len(spans), "chars_cut": sum(s["end"] - s["start"] for s in spans)},
            "text": excerpt_around_marks(mark_removed(d["text"] or "", spans), text_chars),
            "n_chars": len(d["text"] or ""),
        })
    return out
