"""What the passages stage adds to the framework (:mod:`pipelines.core.hooks`): its inspect sample."""

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
