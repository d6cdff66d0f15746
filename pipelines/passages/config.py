"""The ``passages`` config section: passage-level dedup (``pipelines/passages``, ``udfs/paragraphs.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pipelines.core.section import Section


class PassagesConfig(Section):
    """Repeated paragraphs (exact and BFF-style near repeats) and reused passages removed.

    Defaults: ``ngram_size`` 13 and ``overlap`` 0.8 are DCLM's BFF settings (Li et al. 2024, section 4.3
    and appendix; ``bff --filtering-threshold 0.8``), ``doc_overlap`` the same threshold applied to the
    document (BFF's ``--remove-type old-both``); ``min_span_words`` 50 is ExactSubstr's 50-token minimum
    (Lee et al. 2022, section 4.1) counted in words. ``min_words`` and ``min_chars_after`` are judgements:
    menu items and one-word lines are left to the filter stage.
    """

    enabled: bool = False
    unit: Literal["line", "blank_line", "sentence"] = "line"
    min_words: int = Field(default=5, ge=1, le=10_000)
    exempt_math: bool = True
    exact: bool = True
    exact_key: Literal["text", "collapsed_whitespace"] = "collapsed_whitespace"
    near: bool = True
    ngram_size: int = Field(default=13, ge=1, le=64)
    overlap: float = Field(default=0.8, gt=0.0, le=1.0)
    doc_overlap: float | None = Field(default=0.8, gt=0.0, le=1.0)
    min_chars_after: int | None = Field(default=100, ge=0)
    spans: bool = False
    min_span_words: int = Field(default=50, ge=2, le=10_000)
    top_paragraphs: int = Field(default=20, ge=0, le=1000)

    @model_validator(mode="after")
    def _something_to_find(self) -> PassagesConfig:
        if self.enabled and not (self.exact or self.near or self.spans):
            raise ValueError(
                "passages.enabled=true with passages.exact, passages.near and passages.spans all false: "
                "nothing to find; turn one on or set passages.enabled=false"
            )
        return self
