"""The ``gate`` config section: variants, model size, token budget, schedule, seeds, evaluation sets."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipelines.core.section import EvalSetConfig, Section, unique_eval_set_names


class GateEvalSetConfig(EvalSetConfig):
    """An evaluation set of the gate: ``decontam.eval_sets``' shape, plus optional multiple choice.

    ``choices`` names a field holding a list of answer texts and ``answer`` the field holding the index
    (0-based int), letter (``A``..) or text of the right one; an item with both is also scored by
    comparing the likelihood of each choice after its ``fields`` text.
    """

    choices: str | None = None
    answer: str | None = None

    @model_validator(mode="after")
    def _choices_with_answer(self) -> GateEvalSetConfig:
        if (self.choices is None) != (self.answer is None):
            raise ValueError(
                f"gate eval set {self.name!r}: choices and answer go together; got "
                f"choices={self.choices!r}, answer={self.answer!r}"
            )
        if self.table is not None:
            raise ValueError(f"gate eval set {self.name!r}: the gate reads local files (paths), not table")
        return self


class GateModelConfig(Section):
    """The small transformer's sizes; null = the default of the backend JAX finds (CPU / accelerator)."""

    d_model: int | None = Field(default=None, ge=16, le=8192)
    n_layers: int | None = Field(default=None, ge=1, le=64)
    n_heads: int | None = Field(default=None, ge=1, le=128)

    @model_validator(mode="after")
    def _heads_divide(self) -> GateModelConfig:
        if self.d_model is not None and self.n_heads is not None and self.d_model % self.n_heads:
            raise ValueError(
                f"gate.model.d_model={self.d_model} must divide by gate.model.n_heads={self.n_heads}"
            )
        return self


CPU_MODEL = {"d_model": 192, "n_layers": 3, "n_heads": 4}
"""Default model on CPU: ~2.1 M parameters with 4096 ids (sized for a 15-minute gate on 2 cores)."""
ACCELERATOR_MODEL = {"d_model": 512, "n_layers": 8, "n_heads": 8}
"""Default model when JAX finds a GPU/TPU."""


class GateConfig(Section):
    """The gating run (``winnow gate``): small models trained per variant, scored on fixed evaluations."""

    variants: list[str] = Field(default_factory=list)
    output: str | None = None
    seeds: int = Field(default=3, ge=2, le=100)
    tokens: int = Field(default=393_216, ge=1024)
    seq_len: int = Field(default=128, ge=8, le=8192)
    batch_size: int = Field(default=32, ge=1)
    order: Literal["shard", "shuffled"] = "shard"
    vocab_size: int | None = Field(default=4096, ge=16)
    model: GateModelConfig = Field(default_factory=GateModelConfig)
    lr: float = Field(default=3e-3, gt=0, le=1.0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1.0)
    warmup: float = Field(default=0.1, ge=0, lt=1.0)
    weight_decay: float = Field(default=0.1, ge=0)
    eval_sets: list[GateEvalSetConfig] = Field(default_factory=list)
    use_decontam_sets: bool = True
    validation: bool = True
    reference: str | None = None
    eval_max_tokens: int = Field(default=65_536, ge=64)
    ngram: bool = True
    wavy: bool = True
    wavy_smooth_steps: int = Field(default=9, ge=3)
    wavy_max_order_share: float = Field(default=0.5, gt=0, le=1.0)
    progress_s: float = Field(default=10.0, ge=0)

    @field_validator("eval_sets")
    @classmethod
    def _unique_names(cls, v: list[GateEvalSetConfig]) -> list[GateEvalSetConfig]:
        return unique_eval_set_names(v)  # the same rule as decontam.eval_sets

    @model_validator(mode="after")
    def _budget_holds_a_batch(self) -> GateConfig:
        if self.tokens < self.seq_len * self.batch_size:
            raise ValueError(
                f"gate.tokens={self.tokens} is less than one batch (gate.seq_len x gate.batch_size = "
                f"{self.seq_len * self.batch_size}); raise gate.tokens or lower gate.batch_size"
            )
        return self
