"""What the tokenizer audit adds to the framework (:mod:`pipelines.core.hooks`): its report part."""

from __future__ import annotations

from typing import Any

from pipelines.core.config import WinnowConfig


def report_part(spark: Any, cfg: WinnowConfig) -> dict[str, Any] | None:
    """The audit's part of ``stats.json`` (:func:`pipelines.audit.html.report_stats`), or None when the
    audit never ran on this run (no ``<run.root>/audit/audit.json``)."""
    from pipelines.audit.html import read_audit, report_stats

    audit = read_audit(spark, cfg)
    return None if audit is None else report_stats(audit)


def report_section(part: dict[str, Any]) -> str:
    """The audit's section of ``report.html`` from its ``stats.json`` part
    (:func:`pipelines.audit.html.render_section`)."""
    from pipelines.audit.html import render_section

    return render_section(part)
