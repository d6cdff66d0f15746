"""What the passages stage adds to the framework (:mod:`pipelines.core.hooks`): its inspect sample and its
part of the run report."""

from __future__ import annotations

from typing import Any

EMPTY_HINT = "raise passages.doc_overlap or lower passages.min_chars_after (or set passages.enabled: false)"
"""What to change when the stage kept no document."""

INSPECT_WHAT = "with text cut by"
"""How ``jobs/inspect.py`` names what :func:`inspect_sample` shows without ``--reason`` or ``--kept``."""


def inspect_sample(spark: Any, cfg: Any, *, reason: str | None, kept: bool, n: int,
                   text_chars: int) -> list[dict[str, Any]] | None:
    """``jobs/inspect.py --stage passages`` without ``--reason`` or ``--kept``: documents the stage cut
    text from (kept or removed whole), the input text shown with every cut marked
    (:func:`pipelines.passages.inspect.sample_cut`); None otherwise (the generic sample)."""
    if kept or reason:
        return None
    from pipelines.passages.inspect import sample_cut

    return sample_cut(spark, cfg, n=n, text_chars=text_chars)


REPORT_TITLE = "Repeated paragraphs and reused passages (passages)"
BY_SOURCE_COLUMNS = ("source", "documents", "documents_cut", "documents_removed", "units_removed",
                     "passages_removed", "chars_removed", "chars_in")


def report_part(spark: Any, cfg: Any) -> dict[str, Any] | None:
    """The stage's part of ``stats.json``: the ``extra`` of its latest completion record.

    Returns:
        ``{"by_source": [{source, documents, documents_cut, documents_removed, units_removed,
        passages_removed, chars_removed, chars_in}], "top_units": [{occurrences, first_seen_in,
        excerpt}]}`` (:func:`pipelines.passages.stage.run`); None when the stage has not run on this
        run root or ran disabled.
    """
    import json

    from pipelines.core.runs import latest_records

    record = latest_records(spark, cfg).get("passages")
    extra = json.loads(record["extra"] or "{}") if record else {}
    return extra or None


def report_section(part: dict[str, Any]) -> str:
    """The stage's section of ``report.html``: cuts per source and the most repeated units, every value
    escaped (:mod:`pipelines.core.html`)."""
    from pipelines.core.html import esc, table

    body = table(part["by_source"], list(BY_SOURCE_COLUMNS), left=("source",))
    if part.get("top_units"):
        body += "<h3>Most repeated units</h3>" + table(
            part["top_units"], ["occurrences", "first_seen_in", "excerpt"], left=("first_seen_in", "excerpt"))
    return f"<h2>{esc(REPORT_TITLE)}</h2>\n{body}\n"


def inspect_annotations(row: dict[str, Any]) -> list[str]:
    """``jobs/inspect.py --doc-id``: the spans the stage cut from the document (kept or removed whole), each
    with its kind and the document it was first seen in.

    Args:
        row: the document's row in the stage's output table or ``removed`` (``passages_removed``:
            ``start``, ``end`` in code points of the stage's input text, ``kind``, ``first_seen_in``).

    Returns:
        Lines, ``[]`` when nothing was cut.

    >>> span = {"start": 6, "end": 18, "kind": "exact", "first_seen_in": "d1"}
    >>> inspect_annotations({"passages_removed": [span]})
    ['passages: 1 span cut (12 chars)', '  exact 6-18 (12 chars), first seen in d1']
    """
    from pipelines.passages.transform import SPANS_COLUMN

    spans = sorted(row.get(SPANS_COLUMN) or [], key=lambda s: s["start"])
    if not spans:
        return []
    total = sum(s["end"] - s["start"] for s in spans)
    lines = [f"passages: {len(spans)} span{'' if len(spans) == 1 else 's'} cut ({total} chars)"]
    lines += [f"  {s['kind']} {s['start']}-{s['end']} ({s['end'] - s['start']} chars),"
              f" first seen in {s['first_seen_in']}" for s in spans[:MAX_NOTES]]
    if len(spans) > MAX_NOTES:
        lines.append(f"  ... and {len(spans) - MAX_NOTES} more")
    return lines


MAX_NOTES = 10
"""Spans listed one by one by :func:`inspect_annotations`; the rest are counted."""
