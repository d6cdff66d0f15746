"""The ``passages`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from pydantic import Field

from pipelines.core.section import Section


class PassagesConfig(Section):
    """Repeated-paragraph removal (``pipelines/passages/stage.py``, ``udfs/passages.py``)."""

    enabled: bool = True
    # Shortest paragraph compared, in characters after collapsing whitespace: shorter ones (headings,
    # "Share this", dates) repeat legitimately and are never removed.
    min_chars: int = Field(default=200, ge=1)
    # Documents left with fewer characters than this after the cuts are removed (passages.all_repeated).
    min_chars_after_cut: int = Field(default=1, ge=0)
