"""The ``report`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipelines.core.section import Section


class ReportConfig(Section):
    """The run report: ``report.html`` + ``stats.json`` under ``<run.root>/report/`` (``pipelines/report/stage.py``)."""

    samples_per_reason: int = Field(default=5, ge=0)
    text_chars: int = Field(default=600, ge=20)
    hist_sample_rows: int = Field(default=100_000, ge=100)
    hist_bins: int = Field(default=40, ge=2, le=1000)
    plot_format: Literal["svg", "png"] = "svg"
