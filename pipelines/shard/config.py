"""The ``shard`` config section: shard layout, the validation split, the data mix and the upload
(mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipelines.core.section import Section, StorageConfig


class SplitConfig(Section):
    """The held-out validation set: documents chosen by a seeded hash of ``doc_id`` (``pipelines/shard/split.py``)."""

    # How much is held out, in `unit`: a fraction in [0, 1) of documents or tokens, or a token count.
    validation: float = Field(default=0.0, ge=0.0)
    unit: Literal["documents", "tokens", "token_count"] = "documents"
    # Shards of the validation set (num_shards / tokens_per_shard apply to train).
    validation_shards: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _amount_fits_unit(self) -> SplitConfig:
        if self.unit in ("documents", "tokens") and self.validation >= 1.0:
            raise ValueError(f"shard.split.validation={self.validation} with unit={self.unit!r} is a fraction; "
                             "allowed: 0 <= validation < 1 (or unit=token_count for a number of tokens)")
        if self.unit == "token_count" and self.validation != int(self.validation):
            raise ValueError(f"shard.split.validation={self.validation} with unit='token_count' must be a whole number of tokens")
        return self


class MixSourceConfig(Section):
    """How much of one source the train shards hold (``shard.mix.<source>``, ``pipelines/shard/mix.py``).

    Exactly one of ``weight`` (share of the output tokens), ``target_tokens`` or ``epochs`` (2.5 = every
    document twice plus a seeded half).
    """

    weight: float | None = Field(default=None, gt=0.0, le=1.0)
    target_tokens: int | None = Field(default=None, ge=1)
    epochs: float | None = Field(default=None, gt=0.0)
    # Fewest documents from one copy of a document to the next in the shuffled train stream (>= 1).
    min_repeat_distance: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _exactly_one_amount(self) -> MixSourceConfig:
        given = [k for k in ("weight", "target_tokens", "epochs") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"set exactly one of weight, target_tokens, epochs; got {given or 'none'}")
        return self


class ShardConfig(Section):
    """The shard stage: ``tokenized`` -> Megatron/MDS shards + ``manifest.json`` (``pipelines/shard/stage.py``)."""

    output: str | None = None
    formats: list[Literal["megatron", "mds"]] = Field(default_factory=lambda: ["megatron", "mds"], min_length=1)
    num_shards: int | None = Field(default=2, ge=1)
    tokens_per_shard: int | None = Field(default=None, ge=1, validate_default=True)
    dtype: Literal["auto", "uint16", "int32"] = "auto"
    name_prefix: str = Field(default="winnow", pattern=r"^[A-Za-z0-9_.-]+$")
    seq_len: int = Field(default=2048, ge=1)
    mds_size_limit: int = Field(default=1 << 26, ge=1024, lt=1 << 32)
    shuffle_window_docs: int = Field(default=1000, ge=2)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    split: SplitConfig = Field(default_factory=SplitConfig)
    # Per source (the ingest `source` column): how much of it the train shards hold; {} = every document once.
    mix: dict[str, MixSourceConfig] = Field(default_factory=dict)
    # Also write each source's train documents once, unmixed, under sources/<source>/ (load-time blending).
    per_source_sets: bool = False
    # Warn (manifest "short", verify) when MDS drops more than this share of a split's tokens.
    max_dropped_share: float = Field(default=0.1, ge=0, le=1)
    # Fail instead of warning when a split/format holds fewer tokens than one sample or drops too many.
    strict: bool = False

    @field_validator("mix")
    @classmethod
    def _weights_sum_to_one(cls, v: dict[str, MixSourceConfig]) -> dict[str, MixSourceConfig]:
        weights = {s: m.weight for s, m in v.items() if m.weight is not None}
        total = sum(weights.values())
        if weights and len(weights) == len(v) and abs(total - 1.0) > 1e-6:
            raise ValueError(f"shard.mix: the weights {weights} sum to {total:.6g}; when every source has a weight "
                             "they must sum to 1 (or give some sources epochs / target_tokens)")
        if weights and len(weights) < len(v) and total >= 1.0:
            raise ValueError(f"shard.mix: the weights {weights} sum to {total:.6g}; beside sources with epochs / "
                             "target_tokens they must sum to less than 1")
        return v

    @field_validator("tokens_per_shard")
    @classmethod
    def _one_shard_count(cls, v: int | None, info: Any) -> int | None:
        if "num_shards" not in info.data:  # num_shards itself failed validation: that error says enough
            return v
        if (info.data.get("num_shards") is None) == (v is None):
            raise ValueError(
                "set exactly one of shard.num_shards and shard.tokens_per_shard (the other null); "
                f"got num_shards={info.data.get('num_shards')!r}, tokens_per_shard={v!r}"
            )
        return v
