"""The ``refs`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipelines.core.section import Section, over_default


class RefsVocab(Section):
    """One language's reference vocabulary (see :data:`udfs.refs.vocab.DEFAULT_VOCAB` for the fields)."""

    table: list[str]
    figure: list[str]
    equation: list[str]
    section: list[str]
    appendix: list[str]
    algorithm: list[str]
    listing: list[str]
    # empty = no theorem-like mentions in this language (a vocabulary written before the kind existed)
    theorem: list[str] = Field(default_factory=list)
    footnote: list[str]
    numbers: list[str]
    ordinals: list[str]
    conjunctions: list[str]
    prepositions: list[str]
    external: list[str]
    bibliography: list[str]

    @field_validator("table", "figure", "equation", "section", "appendix", "algorithm", "listing", "footnote",
                     "numbers", "ordinals", "conjunctions", "prepositions")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        if not v or any(not t.strip() for t in v):
            raise ValueError(f"must be a non-empty list of non-blank terms; got {v!r}")
        return v

    @field_validator("theorem")
    @classmethod
    def _no_blank(cls, v: list[str]) -> list[str]:
        if any(not t.strip() for t in v):
            raise ValueError(f"must be a list of non-blank terms (empty = none); got {v!r}")
        return v


def _default_refs_vocab() -> dict[str, RefsVocab]:
    from udfs.refs.vocab import DEFAULT_VOCAB

    return {lang: RefsVocab(**v) for lang, v in DEFAULT_VOCAB.items()}


def _default_vocab_data() -> dict[str, dict[str, list[str]]]:
    from udfs.refs.vocab import DEFAULT_VOCAB

    return DEFAULT_VOCAB


class RefsConfig(Section):
    """The refs stage: dangling table / figure / equation / citation mentions (``pipelines/refs/stage.py``)."""

    enabled: bool = True
    policy: Literal["flag", "drop", "repair"] = "flag"
    max_dangling: int | None = Field(default=0, ge=0)
    default_language: str = "en"
    vocab: dict[str, RefsVocab] = Field(default_factory=_default_refs_vocab)
    # a language or a list given merges over the supplied vocabulary (en, de, fr, es) instead of replacing it
    _vocab_over_default = field_validator("vocab", mode="before")(over_default(_default_vocab_data))

    @model_validator(mode="after")
    def _default_language_known(self) -> RefsConfig:
        if self.default_language not in self.vocab:
            raise ValueError(
                f"refs.default_language {self.default_language!r} has no vocabulary; allowed: {sorted(self.vocab)}"
            )
        return self
