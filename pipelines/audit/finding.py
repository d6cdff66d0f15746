"""The shape of an audit finding, shared by the modules that produce findings, and their ranking.

A finding is a dict with fixed keys: ``id`` (stable, ``audit.``-prefixed), ``severity`` (:data:`SEVERITIES`),
``title``, ``detail``, ``fix``, ``weight`` (the share of the corpus, of the checked documents or of the
prompts it touches, for ranking) and ``examples``.
"""

from __future__ import annotations

from typing import Any

SEVERITIES: tuple[str, ...] = ("error", "warn", "info")
"""Finding severities, most serious first; ``error`` and ``warn`` are flags, ``info`` is not."""


def finding(
    fid: str,
    severity: str,
    title: str,
    detail: str,
    fix: str,
    weight: float,
    examples: list[Any] | None = None,
) -> dict[str, Any]:
    """One finding (see the module docstring); ``weight`` is cast to float and ``examples`` defaults to []."""
    return {
        "id": fid,
        "severity": severity,
        "title": title,
        "detail": detail,
        "fix": fix,
        "weight": float(weight),
        "examples": examples or [],
    }


def share(num: int, den: int) -> float:
    """``num / den``, 0.0 when ``den`` is 0."""
    return num / den if den else 0.0


def rank(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Errors, then warnings, then notes; within each, the largest weight (the share of the corpus, the
    checked documents or the prompts it touches) first, then by id and title."""
    return sorted(
        findings, key=lambda f: (SEVERITIES.index(f["severity"]), -f["weight"], f["id"], f["title"])
    )
