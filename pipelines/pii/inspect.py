"""What ``jobs/inspect.py --stage pii`` shows: documents with findings, each finding marked by its kind and
the hash of its value, never the value."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.core import tables
from pipelines.core.config import WinnowConfig
from pipelines.core.samples import excerpt_around_marks, reason_matches, seeded_order


def mark_pii(text: str, spans: list[dict[str, Any]], replaced: dict[str, str]) -> str:
    """A ``pii_redacted`` text with every finding shown as ``⟦kind #hash⟧`` (8 hex digits of its value hash).

    Args:
        text: the text as the pii stage stored it (replacement tokens in place of replaced kinds).
        spans: its ``pii_spans`` (``kind``, ``start``, ``end`` into the *input* text, ``value_hash``).
        replaced: kind -> token of the kinds the stage replaced ({} when it only flagged).

    Returns:
        The text with no value of any finding in it, flagged ones included.
    """
    out, pos, shift = [], 0, 0
    for s in sorted(spans, key=lambda s: s["start"]):
        width = s["end"] - s["start"]
        stored = len(replaced[s["kind"]]) if s["kind"] in replaced else width
        at = s["start"] + shift
        out += [text[pos:at], f"⟦{s['kind']} #{s['value_hash'][:8]}⟧"]
        pos, shift = at + stored, shift + stored - width
    out.append(text[pos:])
    return "".join(out)


def sample_pii(
    spark: SparkSession, cfg: WinnowConfig, *, reason: str | None = None, n: int = 5, text_chars: int = 600,
) -> list[dict[str, Any]]:
    """Seeded sample of documents the pii stage found something in (or, with ``reason``, removed), in
    :func:`sample`'s shape, text marked by :func:`mark_pii` (no value shown, only its hash).

    Raises:
        tables.MissingTableError: ``pii_redacted`` (or ``removed``) does not exist in this run.
    """
    from pipelines.pii.stage import OUTPUT_TABLE, pii_options

    if reason:
        df = tables.read_table(spark, cfg, "removed", written_by="pii").where((F.col("stage") == "pii") & reason_matches(reason))
    else:
        df = tables.read_table(spark, cfg, OUTPUT_TABLE, written_by="pii").where(F.size("pii_spans") > 0)
    tokens = pii_options(cfg.pii).replacements
    out = []
    for r in df.orderBy(seeded_order(cfg.run.seed), "doc_id").limit(n).collect():
        d = r.asDict(recursive=True)
        marked = mark_pii(d["text"] or "", d["pii_spans"] or [], {} if d["pii_action"] == "flag" else tokens)
        out.append({
            "doc_id": d["doc_id"], "reason": d.get("reason") or [], "duplicate_of": None,
            "signals": {"pii_action": d["pii_action"], **{f"pii.{k}": v for k, v in sorted((d["pii_counts"] or {}).items())}},
            "text": excerpt_around_marks(marked, text_chars), "n_chars": len(d["text"] or ""),
        })
    return out
