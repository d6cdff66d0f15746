"""What the refs stage adds to the framework (:mod:`pipelines.core.hooks`)."""

EMPTY_HINT = "set refs.policy: flag or raise refs.max_dangling"
"""What to change when the stage kept no document."""

MAX_NOTES = 10
"""Mentions listed one by one by :func:`inspect_annotations`; the rest are counted."""


def inspect_annotations(row: dict) -> list[str]:
    """``jobs/inspect.py --doc-id``: the reference mentions the stage found in the document (kept or removed),
    the dangling ones marked, and its repairs.

    Args:
        row: the document's row in ``refs_checked`` or ``removed`` (``ref_mentions``: ``kind``, ``label``,
            ``start``, ``end`` in code points, ``dangling``; ``refs_action``; ``refs_repairs``).

    Returns:
        Lines, ``[]`` when the stage found no mention.

    >>> inspect_annotations({"ref_mentions": [{"kind": "table", "label": "2", "start": 4, "end": 11,
    ...     "dangling": True}], "refs_action": "flag"})
    ['refs: 1 mention, 1 dangling (action flag)', '  table 2 at 4-11: dangling']
    """
    mentions = row.get("ref_mentions") or []
    if not mentions:
        return []
    dangling = sum(1 for m in mentions if m.get("dangling"))
    s = "" if len(mentions) == 1 else "s"
    action = row.get("refs_action") or "-"
    lines = [f"refs: {len(mentions)} mention{s}, {dangling} dangling (action {action})"]
    for m in mentions[:MAX_NOTES]:
        state = "dangling" if m.get("dangling") else "target found"
        lines.append(f"  {m['kind']} {m['label']} at {m['start']}-{m['end']}: {state}")
    if len(mentions) > MAX_NOTES:
        lines.append(f"  ... and {len(mentions) - MAX_NOTES} more")
    lines += [f"  repaired {r['start']}-{r['end']} -> {r['text']!r}" for r in row.get("refs_repairs") or []]
    return lines
