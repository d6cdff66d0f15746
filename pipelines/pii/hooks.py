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
