"""Looking at the decontam stage's results: the report's contamination section and inspection samples.

:func:`contamination` gives the report (``stats.json`` key ``contamination``) the per-set summary the
stage stored on ``decontaminated`` and the documents per action; :func:`matched_samples` picks seeded
matched documents (kept, cut or removed) and marks the matched spans in their input text, for
``jobs/inspect.py --stage decontam``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.core import tables
from pipelines.core.config import WinnowConfig
from pipelines.core.samples import printable, seeded_order
from pipelines.core.tables import read_if_exists
from pipelines.decontam.stage import EVAL_TABLE, INPUT_TABLE, OUTPUT_TABLE, STAGE
from udfs.decontam import cut_spans

OPEN, CLOSE = "[[", "]]"
"""Markers around a matched span in :func:`mark_spans`."""


def contamination(spark: SparkSession, cfg: WinnowConfig, kept_actions: dict[str, int] | None = None,
                  removed_by_stage: dict[str, int] | None = None) -> dict[str, Any] | None:
    """Per-set summary and documents per action; None when the stage has not run.

    Args:
        kept_actions: documents of ``decontaminated`` per ``decontam_action``, when the caller has
            counted them (:func:`pipelines.report.stage.table_totals`); else counted here.
        removed_by_stage: documents of ``removed`` per stage, when the caller has counted them
            (:func:`pipelines.report.stage.removed_totals`); else the stage's rows are counted here.

    Returns:
        ``{"sets": [{set, items, indexed, items_found, docs_matched, ngrams_matched, top_items}],
        "actions": {action: documents}, "join": "broadcast"|"shuffle"|None}``.
    """
    out_df = read_if_exists(spark, cfg, OUTPUT_TABLE)
    if out_df is None:
        return None
    props = tables.table_properties(spark, cfg.table_path(OUTPUT_TABLE))
    if kept_actions is None:
        kept_actions = {r[0]: r[1] for r in out_df.groupBy("decontam_action").count().collect()}
    actions = dict(kept_actions)
    if removed_by_stage is not None:
        actions["drop"] = removed_by_stage.get(STAGE, 0)
    else:
        removed = read_if_exists(spark, cfg, "removed")
        if removed is not None:
            actions["drop"] = removed.where(F.col("stage") == STAGE).count()
    summary = json.loads(props.get("summary", "{}"))
    return {
        "sets": [{"set": name, **s} for name, s in sorted(summary.items())],
        "actions": dict(sorted((k, v) for k, v in actions.items() if v)),
        "join": props.get("join"),
    }


def mark_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with :data:`OPEN` / :data:`CLOSE` around each (sorted, disjoint) span.

    >>> mark_spans("abc def ghi", [(4, 7)])
    'abc [[def]] ghi'
    """
    out, pos = [], 0
    for s, e in spans:
        out += [text[pos:s], OPEN, text[s:e], CLOSE]
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _window(marked: str, chars: int) -> str:
    first = marked.find(OPEN)
    start = max(0, first - chars // 4)
    head = "…" if start else ""
    return head + marked[start : start + chars] + ("…" if start + chars < len(marked) else "")


def matched_samples(
    spark: SparkSession, cfg: WinnowConfig, n: int = 5, text_chars: int = 600
) -> list[dict[str, Any]]:
    """``n`` seeded documents that matched an evaluation item, with the matched spans marked.

    The spans are found again in the stage's *input* text (``refs_checked``; a cut document's output no
    longer holds them) from the ``eval_ngrams`` keys of the items it matched, without margin.

    Returns:
        ``[{doc_id, action, items: ["set/item_id (k n-grams)"], cuts: [(start, end)], spans, text}]``;
        ``text`` is a window of ``text_chars`` around the first marked span.

    Raises:
        MissingTableError: the stage has not run.
    """
    kept = tables.read_table(spark, cfg, OUTPUT_TABLE).where(F.col("decontam_action") != "none")
    cols = ["doc_id", "decontam_items", "decontam_action", "decontam_cuts"]
    docs = kept.select(*cols)
    removed = read_if_exists(spark, cfg, "removed")
    if removed is not None and "decontam_items" in removed.columns:
        docs = docs.unionByName(removed.where(F.col("stage") == STAGE).select(*cols))
    picked = docs.orderBy(seeded_order(cfg.run.seed)).limit(n).collect()
    if not picked:
        return []
    ids = [r["doc_id"] for r in picked]
    texts = {
        r["doc_id"]: r["text"]
        for r in tables.read_table(spark, cfg, INPUT_TABLE)
        .where(F.col("doc_id").isin(ids))
        .select("doc_id", "text")
        .collect()
    }
    evals = tables.read_table(spark, cfg, EVAL_TABLE)
    items = {(m["set_name"], m["item_id"]) for r in picked for m in r["decontam_items"]}
    keys: dict[tuple[str, str], list[int]] = {}
    short_lengths: set[int] = set()
    for e in evals.where(
        F.concat_ws("\u0000", "set_name", "item_id").isin(["\u0000".join(k) for k in items])
    ).collect():
        keys.setdefault((e["set_name"], e["item_id"]), []).append(e["hash"])
        if e["item_words"] < cfg.decontam.ngram_size:
            short_lengths.add(e["item_words"])
    out = []
    for r in picked:
        text = texts.get(r["doc_id"], "")
        mine = [h for m in r["decontam_items"] for h in keys.get((m["set_name"], m["item_id"]), [])]
        spans = cut_spans(
            text, np.asarray(mine, dtype=np.int64), cfg.decontam.ngram_size, sorted(short_lengths), 0
        )
        out.append(
            {
                "doc_id": r["doc_id"],
                "action": r["decontam_action"],
                "items": [
                    f"{m['set_name']}/{m['item_id']} ({m['n_ngrams']} n-grams)" for m in r["decontam_items"]
                ],
                "cuts": [(c["start"], c["end"]) for c in r["decontam_cuts"] or []],
                "spans": spans,
                "text": _window(mark_spans(text, spans), text_chars),
            }
        )
    return out


def format_matches(rows: list[dict[str, Any]], header: str) -> str:
    """Plain-text rendering of :func:`matched_samples` for a terminal."""
    lines = [header, f"matched spans are marked {OPEN} ... {CLOSE} in the stage's input text", ""]
    for i, r in enumerate(rows, 1):
        lines.append(f"--- {i}. {r['doc_id']}  action: {r['action']}  items: {', '.join(r['items'])}")
        if r["cuts"]:
            lines.append(f"    cut (input offsets): {r['cuts']}")
        # Escaped like jobs/inspect.py's other samples: the text is the input's, control bytes included.
        lines.extend("    | " + ln for ln in printable(r["text"]).splitlines() or [""])
        lines.append("")
    if not rows:
        lines.append("(no document matched an evaluation item)")
    return "\n".join(lines)
