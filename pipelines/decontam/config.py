"""The ``decontam`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from pipelines.core.section import EvalSetConfig, Section, unique_eval_set_names


class DecontamConfig(Section):
    """The decontam stage: evaluation-set overlap removed, ``refs_checked`` -> ``decontaminated``."""

    eval_sets: list[EvalSetConfig] = Field(default_factory=list)
    # GPT-3 (Brown et al. 2020, appendix C) used 13-grams; 8 is common too.
    ngram_size: int = Field(default=13, ge=1, le=64)
    min_item_words: int = Field(default=3, ge=1)
    min_matches: int = Field(default=1, ge=1)
    min_item_fraction: float | None = Field(default=0.5, gt=0.0, le=1.0)
    action: Literal["flag", "drop", "cut"] = "cut"
    cut_margin_chars: int = Field(default=200, ge=0)
    min_chars_after_cut: int = Field(default=200, ge=0)
    broadcast_max_ngrams: int = Field(default=5_000_000, ge=0)

    @field_validator("eval_sets")
    @classmethod
    def _unique_names(cls, v: list[EvalSetConfig]) -> list[EvalSetConfig]:
        return unique_eval_set_names(v)
