"""What the pii stage adds to the framework (:mod:`pipelines.core.hooks`)."""

from __future__ import annotations

from typing import Any

EMPTY_HINT = "set pii.action: redact"
"""What to change when the stage kept no document."""

INSPECT_WHAT = "with findings kept by"
"""How ``jobs/inspect.py`` names what :func:`inspect_sample` shows without ``--reason`` or ``--kept``."""


def inspect_sample(spark: Any, cfg: Any, *, reason: str | None, kept: bool, n: int,
                   text_chars: int) -> list[dict[str, Any]]:
    """``jobs/inspect.py --stage pii``: documents with findings (with ``reason``: removed for it), each
    finding marked by kind and value hash, never the value (:func:`pipelines.pii.inspect.sample_pii`)."""
    from pipelines.pii.inspect import sample_pii

    return sample_pii(spark, cfg, reason=reason, n=n, text_chars=text_chars)


def inspect_annotations(row: dict[str, Any]) -> list[str]:
    """``jobs/inspect.py --doc-id``: the stage's findings in the document (kept or removed), each by kind,
    offsets and the first 8 hex digits of its value hash, never the value.

    Args:
        row: the document's row in ``pii_redacted`` or ``removed`` (``pii_spans``: ``kind``, ``start``,
            ``end`` in code points of the stage's input text, ``value_hash``; ``pii_action``).

    Returns:
        Lines, ``[]`` when the stage found nothing.

    >>> found = {"kind": "email", "start": 3, "end": 20, "value_hash": "ab12cd34ef"}
    >>> inspect_annotations({"pii_spans": [found], "pii_action": "redact"})
    ['pii: 1 finding (action redact)', '  email #ab12cd34 at 3-20']
    """
    spans = sorted(row.get("pii_spans") or [], key=lambda s: s["start"])
    if not spans:
        return []
    s = "" if len(spans) == 1 else "s"
    return [f"pii: {len(spans)} finding{s} (action {row.get('pii_action') or '-'})",
            *(f"  {f['kind']} #{(f['value_hash'] or '')[:8]} at {f['start']}-{f['end']}" for f in spans)]
