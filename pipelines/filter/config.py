"""The ``filter`` config section: rule families, language ID, the quality classifier and rule profiles
(mirrored in ``conf/default.yaml``; the rules themselves are rows of :data:`pipelines.filter.rules.RULES`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from pipelines.core.section import ERRORS_HEADER, Section, deep_merge, describe_error, over_default
from pipelines.filter.rules import AUTO, AUTO_CHOICES, PROFILES, profile_overrides, rule_names

Action = Literal["drop", "flag", "off"]
"""What a failing rule does: ``drop`` (to ``removed``), ``flag`` (kept, id in ``filter_flags``) or ``off``."""


def _yaml_off(v: Any) -> Any:
    # YAML 1.1 reads a bare `off` as false; accept it as the action "off".
    if v is False:
        return "off"
    if isinstance(v, dict):
        return {k: ("off" if x is False else x) for k, x in v.items()}
    return v


class RuleFamily(Section):
    """Settings every rule family shares: the action of its rules and the languages they apply to.

    ``family`` names the subsection; its rules are the rows of :data:`pipelines.filter.rules.RULES`
    whose config key lies in it.
    """

    family: ClassVar[str]
    action: Action = "drop"
    rule_actions: dict[str, Action] = Field(default_factory=dict)
    languages: list[str] | None = None
    rule_languages: dict[str, list[str] | None] = Field(default_factory=dict)

    _off = field_validator("action", "rule_actions", mode="before")(_yaml_off)

    @field_validator("rule_actions", "rule_languages")
    @classmethod
    def _known_rules(cls, v: dict[str, Any]) -> dict[str, Any]:
        allowed = rule_names(cls.family)
        unknown = sorted(set(v) - set(allowed))
        if unknown:
            raise ValueError(f"unknown rule(s) {unknown}; allowed: {list(allowed)}")
        return v


class GopherQualityConfig(RuleFamily):
    """Gopher quality rules (Rae et al. 2021, appendix A.1.1); defaults are the paper's."""

    family: ClassVar[str] = "gopher_quality"

    rule_languages: dict[str, list[str] | None] = Field(default_factory=lambda: {"stop_words": ["en"]})
    min_words: int | None = Field(default=50, ge=0)
    max_words: int | None = Field(default=100_000, ge=0)
    min_mean_word_length: float | None = Field(default=3.0, ge=0)
    max_mean_word_length: float | None = Field(default=10.0, ge=0)
    max_symbol_word_ratio: float | None = Field(default=0.1, ge=0)
    max_bullet_lines_ratio: float | None = Field(default=0.9, ge=0, le=1)
    max_ellipsis_lines_ratio: float | None = Field(default=0.3, ge=0, le=1)
    min_alpha_words_ratio: float | None = Field(default=0.8, ge=0, le=1)
    min_stop_words: int | None = Field(default=2, ge=0, le=8)
    # Which words alpha_words counts: the paper's whitespace-separated words, or datatrove's spaCy tokens
    # (punctuation and numbers are words there, so math and citations pull the ratio down).
    alpha_words_reading: Literal["whitespace", "datatrove"] = "whitespace"

    @model_validator(mode="after")
    def _ranges_not_empty(self) -> GopherQualityConfig:
        # min > max would drop every document; almost certainly two keys swapped or a typo.
        for lo, hi in (("min_words", "max_words"), ("min_mean_word_length", "max_mean_word_length")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{lo}={a} is greater than {hi}={b}: every document would be dropped")
        return self


class GopherRepetitionConfig(RuleFamily):
    """Gopher repetition rules (Rae et al. 2021, table A1); defaults are the paper's."""

    family: ClassVar[str] = "gopher_repetition"

    max_dup_line_frac: float | None = Field(default=0.30, ge=0, le=1)
    max_dup_para_frac: float | None = Field(default=0.30, ge=0, le=1)
    max_dup_line_char_frac: float | None = Field(default=0.20, ge=0, le=1)
    max_dup_para_char_frac: float | None = Field(default=0.20, ge=0, le=1)
    max_top_2gram_char_frac: float | None = Field(default=0.20, ge=0)
    max_top_3gram_char_frac: float | None = Field(default=0.18, ge=0)
    max_top_4gram_char_frac: float | None = Field(default=0.16, ge=0)
    max_dup_5gram_char_frac: float | None = Field(default=0.15, ge=0, le=1)
    max_dup_6gram_char_frac: float | None = Field(default=0.14, ge=0, le=1)
    max_dup_7gram_char_frac: float | None = Field(default=0.13, ge=0, le=1)
    max_dup_8gram_char_frac: float | None = Field(default=0.12, ge=0, le=1)
    max_dup_9gram_char_frac: float | None = Field(default=0.11, ge=0, le=1)
    max_dup_10gram_char_frac: float | None = Field(default=0.10, ge=0, le=1)


class C4Config(RuleFamily):
    """C4 page rules (Raffel et al. 2020, section 2.2; TFDS ``text/c4_utils.py``) and C4's line cleaning.

    Defaults follow datatrove's ``C4QualityFilter`` (the ``web`` profile); the ``c4`` profile sets the
    values of the code that built C4 (see :data:`pipelines.filter.rules.PROFILES`).
    """

    family: ClassVar[str] = "c4"

    drop_lorem_ipsum: bool = True
    drop_curly_bracket: bool = True
    min_sentences: int | None = Field(default=5, ge=0)
    min_words_per_line: int = Field(default=3, ge=1, le=50)
    end_marks: str = Field(default=".?!\"'", min_length=1)
    page_checks: Literal["page", "kept_lines"] = "page"
    sentences_in: Literal["kept_lines", "text"] = "kept_lines"
    clean_lines: bool = False


class FineWebConfig(RuleFamily):
    """FineWeb quality rules (Penedo et al. 2024, section 3.3; datatrove defaults)."""

    family: ClassVar[str] = "fineweb"

    min_line_punct_ratio: float | None = Field(default=0.12, ge=0, le=1)
    max_short_line_ratio: float | None = Field(default=0.67, ge=0, le=1)
    max_char_dup_ratio: float | None = Field(default=0.01, ge=0, le=1)
    max_newline_ratio: float | None = Field(default=0.3, ge=0)


LANG_ALIASES: dict[str, str] = {"no": "nb"}
"""Built-in ``filter.langid.aliases``: lid.176's ``no`` is Norwegian Bokmål (nb)."""


class LangIdConfig(Section):
    """fastText language ID (lid.176 by default; datatrove's LanguageFilter threshold)."""

    enabled: bool = True
    model: str | None = None
    label_prefix: str = "__label__"
    aliases: dict[str, str] = Field(default_factory=lambda: dict(LANG_ALIASES))
    # an alias given is added to the built-in ones, not put in their place
    _aliases_over_default = field_validator("aliases", mode="before")(over_default(lambda: LANG_ALIASES))
    max_chars: int = Field(default=1000, ge=1)
    sample_windows: int = Field(default=4, ge=1, le=64)
    topk_max_chars: int | None = Field(default=None, ge=1)
    confident_score: float | None = Field(default=0.8, ge=0, le=1)
    top_k: int = Field(default=3, ge=1, le=20)
    action: Action = "drop"
    _off = field_validator("action", mode="before")(_yaml_off)
    allowed: list[str] | None = Field(default_factory=lambda: ["en"])
    min_score: float | None = Field(default=0.65, ge=0, le=1)


class QualityModelConfig(Section):
    """fastText quality classifier (DCLM-style), trained by jobs/train_quality.py."""

    model: str | None = None
    positive_label: str = "__label__hq"
    action: Action = "drop"
    _off = field_validator("action", mode="before")(_yaml_off)
    min_score: float | None = Field(default=0.5, ge=0, le=1)


class FilterConfig(Section):
    """The filter stage: heuristic rule families, language ID and the quality classifier (``pipelines/filter/stage.py``;
    the rules themselves are rows of :data:`pipelines.filter.rules.RULES`)."""

    enabled: bool = True
    gopher_quality: GopherQualityConfig = Field(default_factory=GopherQualityConfig)
    gopher_repetition: GopherRepetitionConfig = Field(default_factory=GopherRepetitionConfig)
    c4: C4Config = Field(default_factory=C4Config)
    fineweb: FineWebConfig = Field(default_factory=FineWebConfig)
    langid: LangIdConfig = Field(default_factory=LangIdConfig)
    quality_model: QualityModelConfig = Field(default_factory=QualityModelConfig)
    # ---- rule profiles: per-source rule sets on top of the settings above
    signals_from: Literal["text", "prose"] = "text"
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    profile_by_source: dict[str, str] = Field(default_factory=dict)
    default_profile: str = "auto"
    # ---- a source that loses more than this share of its documents is named on the stage line and
    # at the top of the report (null: never)
    warn_source_removed: float | None = Field(default=0.5, ge=0, le=1)

    _PROFILE_SECTIONS: ClassVar[tuple[str, ...]] = (
        "gopher_quality", "gopher_repetition", "c4", "fineweb", "langid", "quality_model", "signals_from")
    # LID and the classifier run once per document with the filter-wide settings (pipelines/filter/stage.py
    # compute_signals): in a profile these keys would be silently ignored, so they are refused.
    _SHARED_SIGNAL_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "langid": ("model", "label_prefix", "aliases", "max_chars", "sample_windows", "topk_max_chars",
                   "confident_score", "top_k"),
        "quality_model": ("model", "positive_label")}

    @model_validator(mode="after")
    def _profiles_known_and_valid(self) -> FilterConfig:
        names = self.profile_names()
        if AUTO in self.profiles:
            raise ValueError(f"filter.profiles.{AUTO}: {AUTO!r} is the per-document profile choice, not a "
                             f"profile name; name the profile otherwise")
        for where, name in [("default_profile", self.default_profile),
                            *((f"profile_by_source.{k}", v) for k, v in self.profile_by_source.items())]:
            if name not in names and name != AUTO:
                raise ValueError(f"filter.{where}={name!r} is not a profile; allowed: {[*names, AUTO]}")
        for name, over in self.profiles.items():
            bad = sorted(set(over) - set(self._PROFILE_SECTIONS))
            if bad:
                raise ValueError(f"filter.profiles.{name}: unknown section(s) {bad}; allowed: "
                                 f"{list(self._PROFILE_SECTIONS)}")
            for section, keys in self._SHARED_SIGNAL_KEYS.items():
                shared = sorted(set(over.get(section) or {}) & set(keys))
                if shared:
                    per_profile = sorted(set(type(getattr(self, section)).model_fields) - set(keys))
                    raise ValueError(f"filter.profiles.{name}.{section}.{shared[0]}: {section} signals are computed "
                                     f"once for every profile; set filter.{section}.{shared[0]} instead "
                                     f"(per profile: {per_profile})")
            try:
                self.profile_config(name)
            except ValidationError as e:
                where = f"filter.profiles.{name}"
                # its lines name the full key path already: without the header, one error reads as one line
                raise ValueError(describe_error(e, FilterConfig, where + ".").removeprefix(ERRORS_HEADER)) from None
        return self

    def profile_names(self) -> list[str]:
        """Built-in profiles (:data:`pipelines.filter.rules.PROFILES`) then user-defined ones, in order."""
        return list(dict.fromkeys([*PROFILES, *self.profiles]))

    def profiles_in_use(self) -> list[str]:
        """The profiles a row can be judged by: ``default_profile`` then those ``profile_by_source`` names,
        ``auto`` standing for every profile it picks among (:data:`pipelines.filter.rules.AUTO_CHOICES`).

        >>> FilterConfig(default_profile="web", profile_by_source={"arxiv*": "science", "wiki*": "wiki"}).profiles_in_use()
        ['web', 'science', 'wiki']
        >>> FilterConfig(default_profile="auto", profile_by_source={"c4*": "c4"}).profiles_in_use()
        ['wiki', 'science', 'code', 'books', 'web', 'c4']
        """
        chosen = [self.default_profile, *self.profile_by_source.values()]
        return list(dict.fromkeys(p for name in chosen for p in (AUTO_CHOICES if name == AUTO else (name,))))

    def uses_auto(self) -> bool:
        """Whether some rows get their profile from ``auto`` (``default_profile`` or a source's)."""
        return AUTO in (self.default_profile, *self.profile_by_source.values())

    def profile_config(self, name: str) -> FilterConfig:
        """The complete rule set of profile ``name``: these settings, the built-in profile's overrides,
        then ``profiles.<name>`` (later wins, merged recursively); its own profile keys are empty.

        Raises:
            ValueError: ``name`` is not a profile.
        """
        if name not in self.profile_names():
            raise ValueError(f"unknown filter profile {name!r}; allowed: {self.profile_names()}")
        base = self.model_dump(exclude={"profiles", "profile_by_source", "default_profile"})
        merged = deep_merge(deep_merge(base, profile_overrides(name)), self.profiles.get(name, {}))
        return FilterConfig.model_validate(merged)
