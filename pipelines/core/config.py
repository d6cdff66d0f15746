"""Typed configuration for every Winnow stage.

One pydantic model per stage section, mirrored key for key in ``conf/default.yaml`` (a test checks that
the YAML file equals the model defaults and that every key carries a comment). Unknown keys and bad
values fail at load time with the key path, the value found and the allowed values.

Config is loaded from zero or more YAML files (later wins, merged recursively) plus ``a.b=c``
overrides whose values are parsed as YAML, so ``ingest.inputs='[a.jsonl, b/*.wet.gz]'`` is a list.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipelines.core.chain import STAGES, document_tables_before
from pipelines.filter.rules import PROFILES, profile_overrides, rule_names
from udfs.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration file or override is invalid; the message names key, value and allowed values."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    @field_validator("*", mode="before")
    @classmethod
    def _bool_is_not_a_number(cls, v: Any, info: ValidationInfo) -> Any:
        # YAML reads true/yes/on as booleans and pydantic's lax mode turns them into 1/0, so a stray
        # `num_shards: yes` would silently mean 1; numbers must be written as numbers.
        if isinstance(v, bool) and info.field_name and _is_number(cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a number, not true/false")
        return v


def _is_number(annotation: Any) -> bool:
    types = get_args(annotation) or (annotation,)
    return bool({int, float} & set(types)) and bool not in types


# --------------------------------------------------------------------------------------------- run
class RunConfig(Section):
    root: str = "out"
    seed: int = Field(default=42, ge=0, lt=2**63)
    # Metastore mode (both set): stage tables are <catalog>.<schema>.<name> (pipelines/core/tables.py).
    catalog: str | None = None
    db_schema: str | None = Field(default=None, alias="schema")

    # The key is run.schema; the attribute is db_schema (BaseModel has a method named schema).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, serialize_by_alias=True)

    @field_validator("catalog", "db_schema")
    @classmethod
    def _identifier(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"must be a plain identifier (letters, digits, _), got {v!r}")
        return v

    @model_validator(mode="after")
    def _catalog_and_schema(self) -> RunConfig:
        if (self.catalog is None) != (self.db_schema is None):
            raise ValueError(
                f"run.catalog and run.schema go together (tables <catalog>.<schema>.<name>); got catalog="
                f"{self.catalog!r}, schema={self.db_schema!r}"
            )
        return self

    @field_validator("root")
    @classmethod
    def _root_not_blank(cls, v: str) -> str:
        # Outputs go to "<root>/tables/...": a blank root would write to /tables at the filesystem root.
        if not v.strip():
            raise ValueError("run.root must be a folder or URI (e.g. out/run1, s3://bucket/run1), not blank")
        return v


# ------------------------------------------------------------------------------------------- spark
class SparkConfig(Section):
    master: str | None = None
    shuffle_partitions: int = Field(default=200, ge=1)
    arrow_batch_rows: int = Field(default=1024, ge=1)
    jars: list[str] = Field(default_factory=list)
    conf: dict[str, str] = Field(default_factory=dict)
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = "WARN"
    local_jit: Literal["c1", "tiered"] = "c1"
    small_input_mb: int = Field(default=64, ge=0)


# ---------------------------------------------------------------------------------------- pipeline
class PipelineConfig(Section):
    stages: list[str] = Field(default_factory=lambda: list(STAGES))
    progress_s: float = Field(default=30.0, ge=0)

    @field_validator("stages")
    @classmethod
    def _known_and_ordered(cls, v: list[str]) -> list[str]:
        if not v:  # jobs/pipeline.py would start Spark, run nothing and exit 0
            raise ValueError(f"pipeline.stages is empty; list one or more of {list(STAGES)}")
        for s in v:
            if s not in STAGES:
                raise ValueError(f"unknown stage {s!r}; allowed: {list(STAGES)}")
        order = [STAGES.index(s) for s in v]
        if order != sorted(set(order)):
            raise ValueError(f"stages must be unique and in chain order {list(STAGES)}; got {v}")
        return v


# ------------------------------------------------------------------------------------------ ingest
class IngestFields(Section):
    """Which record fields (JSONL objects, Parquet columns) hold what; dotted paths reach into objects."""

    text: str = Field(default="text", min_length=1)
    id: str | None = "id"
    url: str | None = "url"
    source: str | None = "source"
    meta: list[str] = Field(default_factory=list)
    heading: str | None = None

    @model_validator(mode="after")
    def _heading_shares_text_array(self) -> IngestFields:
        if self.heading is not None:
            arr = self.text.rpartition("[]")[0]
            if not arr or self.heading.rpartition("[]")[0] != arr:
                raise ValueError(
                    f"ingest.fields.heading {self.heading!r} must iterate the same array as ingest.fields.text "
                    f"{self.text!r} (e.g. text: body_text[].text, heading: body_text[].section)"
                )
        return self


class NormalizeConfig(Section):
    """Text normalisation steps (udfs/text.py), each switchable; all on by default: newlines to ``\\n``,
    invisible and control characters removed, NFC."""

    nfc: bool = True
    newlines: bool = True
    strip_invisible: bool = True
    strip_control: bool = True
    fix_mojibake: bool = False


class JatsConfig(Section):
    """What the JATS / PMC NXML reader keeps of the targets of references (udfs/formats/jats.py)."""

    tables: Literal["keep", "caption", "drop"] = "keep"
    figures: Literal["keep", "drop"] = "keep"
    references: Literal["keep", "drop"] = "keep"


class MediaWikiConfig(Section):
    """What the MediaWiki dump reader keeps (udfs/formats/mediawiki.py)."""

    namespaces: list[int] = Field(default_factory=lambda: [0], min_length=1)
    templates: Literal["drop", "params"] = "drop"
    references: Literal["drop", "keep"] = "drop"
    tables: Literal["drop", "keep"] = "drop"


class IngestConfig(Section):
    """Stage 1: raw files -> ``documents`` + ``quarantine`` (pipelines/ingest/stage.py)."""

    inputs: list[str] = Field(default_factory=lambda: ["sample_data/*.jsonl.gz", "sample_data/*.wet.gz"], min_length=1)
    format: Literal[
        "auto", "jsonl", "json", "csv", "tsv", "jats", "latex", "mediawiki", "parquet", "text", "wet", "warc"
    ] = "auto"
    fields: IngestFields = Field(default_factory=IngestFields)
    csv_header: bool = True
    normalize: NormalizeConfig = Field(default_factory=NormalizeConfig)
    max_doc_bytes: int = Field(default=4_000_000, ge=1, lt=2**31)
    html_extractor: Literal["trafilatura", "none"] = "trafilatura"
    excerpt_chars: int = Field(default=200, ge=0, le=100_000)
    input_partitions: int | None = Field(default=None, ge=1)
    split_bytes: int = Field(default=64 << 20, ge=1024)
    batch_rows: int = Field(default=2048, ge=1)
    batch_bytes: int = Field(default=32 << 20, ge=1024, lt=2**31)
    max_quarantine_fraction: float = Field(default=0.5, gt=0, le=1)
    quarantine_min_records: int = Field(default=20, ge=1)
    on_bad_file: Literal["fail", "continue"] = "fail"
    max_replacement_fraction: float = Field(default=0.25, gt=0, le=1)
    replacement_action: Literal["quarantine", "flag"] = "quarantine"
    jats: JatsConfig = Field(default_factory=JatsConfig)
    mediawiki: MediaWikiConfig = Field(default_factory=MediaWikiConfig)


# ------------------------------------------------------------------------------------------- dedup
class DedupConfig(Section):
    """Exact + MinHash-LSH near-deduplication (``pipelines/dedup/stage.py``, ``udfs/minhash.py``)."""

    enabled: bool = True
    # exact dedup
    exact: bool = True
    exact_key: Literal["text", "collapsed_whitespace"] = "text"
    # near dedup: shingles (Lee et al. 2022 and RefinedWeb use word 5-grams)
    near: bool = True
    ngram_size: int = Field(default=5, ge=1, le=64)
    fold_digits: bool = False
    fold_diacritics: bool = False
    split_unspaced: bool = True
    # signatures
    scheme: Literal["fast", "datasketch_affine32", "datasketch_legacy"] = "fast"
    num_perm: int = Field(default=128, ge=1, le=1024)
    # LSH banding (datasketch MinHashLSH method) and the false-positive check
    threshold: float = Field(default=0.8, gt=0.0, lt=1.0)
    bands: int | None = Field(default=None, ge=1)
    rows: int | None = Field(default=None, ge=1)
    false_positive_weight: float = Field(default=0.05, ge=0.0, le=1.0)
    false_negative_weight: float = Field(default=0.95, ge=0.0, le=1.0)
    fp_check: Literal["exact", "estimated"] | None = "exact"
    log_buckets_over: int = Field(default=1000, ge=2)
    # connected components and representatives
    representative: str = "first"
    max_cc_iterations: int = Field(default=40, ge=1)
    checkpoint_dir: str | None = None
    # incremental dedup against an earlier run's band table
    reference: str | None = None
    reference_append: bool = Field(default=False, validate_default=True)

    @field_validator("representative")
    @classmethod
    def _policy(cls, v: str) -> str:
        if v in ("first", "longest") or (v.startswith("max:") and len(v) > 4):
            return v
        raise ValueError(f"representative {v!r} unknown; allowed: 'first', 'longest', 'max:<column>'")

    @field_validator("reference_append")
    @classmethod
    def _cross_checks(cls, v: bool, info) -> bool:  # last field: every other value is in info.data
        d = info.data
        bands, rows, num_perm = d.get("bands"), d.get("rows"), d.get("num_perm", 128)
        if (bands is None) != (rows is None):
            raise ValueError(f"dedup.bands and dedup.rows must be set together or both null; got bands={bands}, rows={rows}")
        if bands is not None and rows is not None and bands * rows > num_perm:
            raise ValueError(f"dedup.bands*rows = {bands}*{rows} exceeds dedup.num_perm = {num_perm}")
        if v and d.get("reference") is None:
            raise ValueError("dedup.reference_append=true needs dedup.reference (a band table path)")
        return v


# ------------------------------------------------------------------------------------------ filter
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


class LangIdConfig(Section):
    """fastText language ID (lid.176 by default; datatrove's LanguageFilter threshold)."""

    enabled: bool = True
    model: str | None = None
    label_prefix: str = "__label__"
    aliases: dict[str, str] = Field(default_factory=lambda: {"no": "nb"})
    max_chars: int = Field(default=1000, ge=1)
    sample_windows: int = Field(default=4, ge=1, le=64)
    topk_max_chars: int = Field(default=100_000, ge=1)
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
    # ---- rule profiles (issue 14): per-source rule sets on top of the settings above
    signals_from: Literal["text", "prose"] = "text"
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    profile_by_source: dict[str, str] = Field(default_factory=dict)
    default_profile: str = "web"

    _PROFILE_SECTIONS: ClassVar[tuple[str, ...]] = (
        "gopher_quality", "gopher_repetition", "c4", "fineweb", "langid", "quality_model", "signals_from")
    # LID and the classifier run once per document with the filter-wide settings (pipelines/filter/stage.py
    # compute_signals): in a profile these keys would be silently ignored, so they are refused.
    _SHARED_SIGNAL_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "langid": ("model", "label_prefix", "aliases", "max_chars", "sample_windows", "topk_max_chars", "top_k"),
        "quality_model": ("model", "positive_label")}

    @model_validator(mode="after")
    def _profiles_known_and_valid(self) -> FilterConfig:
        names = self.profile_names()
        for where, name in [("default_profile", self.default_profile),
                            *((f"profile_by_source.{k}", v) for k, v in self.profile_by_source.items())]:
            if name not in names:
                raise ValueError(f"filter.{where}={name!r} is not a profile; allowed: {names}")
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
                raise ValueError(f"{where}: {_describe(e, FilterConfig, where + '.')}") from None
        return self

    def profile_names(self) -> list[str]:
        """Built-in profiles (:data:`pipelines.filter.rules.PROFILES`) then user-defined ones, in order."""
        return list(dict.fromkeys([*PROFILES, *self.profiles]))

    def profiles_in_use(self) -> list[str]:
        """The profiles a row can be judged by: ``default_profile`` then those ``profile_by_source`` names.

        >>> FilterConfig(profile_by_source={"arxiv*": "science", "wiki*": "wiki", "w2*": "wiki"}).profiles_in_use()
        ['web', 'science', 'wiki']
        """
        return list(dict.fromkeys([self.default_profile, *self.profile_by_source.values()]))

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


# -------------------------------------------------------------------------------------------- refs
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


class RefsConfig(Section):
    """The refs stage: dangling table / figure / equation / citation mentions (``pipelines/refs/stage.py``)."""

    enabled: bool = True
    policy: Literal["flag", "drop", "repair"] = "flag"
    max_dangling: int | None = Field(default=0, ge=0)
    default_language: str = "en"
    vocab: dict[str, RefsVocab] = Field(default_factory=_default_refs_vocab)

    @field_validator("vocab")
    @classmethod
    def _has_languages(cls, v: dict[str, RefsVocab]) -> dict[str, RefsVocab]:
        if not v:
            raise ValueError("needs at least one language vocabulary (e.g. en)")
        return v

    @model_validator(mode="after")
    def _default_language_known(self) -> RefsConfig:
        if self.default_language not in self.vocab:
            raise ValueError(
                f"refs.default_language {self.default_language!r} has no vocabulary; allowed: {sorted(self.vocab)}"
            )
        return self


# ---------------------------------------------------------------------------------------- decontam
class EvalSetConfig(Section):
    """One evaluation set whose text must not be in the training data (pipelines/decontam/stage.py)."""

    # Reason ids are decontam.<name>: stable snake_case.
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    paths: list[str] = Field(default_factory=list)
    table: str | None = None
    format: Literal["auto", "jsonl", "parquet"] = "auto"
    fields: list[str] = Field(min_length=1)
    id_field: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EvalSetConfig:
        if bool(self.paths) == (self.table is not None):
            raise ValueError(
                f"eval set {self.name!r}: give exactly one of paths (JSONL/Parquet files) and table (a Delta "
                f"table path); got paths={self.paths!r}, table={self.table!r}"
            )
        if any(not f.strip() for f in self.fields):
            raise ValueError(f"eval set {self.name!r}: fields must be non-blank column names; got {self.fields!r}")
        return self


class DecontamConfig(Section):
    """Evaluation-overlap removal (issue 16): ``refs_checked`` -> ``decontaminated``."""

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
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"eval set names must be unique; repeated: {dup}")
        return v


# --------------------------------------------------------------------------------------------- pii
def _default_pii_replacements() -> dict[str, str]:
    from udfs.pii import DEFAULT_REPLACEMENTS

    return dict(DEFAULT_REPLACEMENTS)


class PiiConfig(Section):
    """Owned by the pii stage (issue 17): personal data and secrets found, redacted, counted."""

    enabled: bool = True
    # null = the last document table that pipeline.stages produces before pii (pipelines/core/chain.py);
    # a name forces that table.
    input_table: Literal[tuple(document_tables_before("pii"))] | None = None  # type: ignore[valid-type]
    action: Literal["redact", "flag", "drop"] = "redact"
    kinds: list[str] = Field(default_factory=lambda: [
        "email", "ipv4", "ipv6", "ip_private", "phone", "card", "iban", "aws_key_id", "aws_secret",
        "github_token", "slack_token", "google_api_key", "private_key", "password"])
    report_only: list[str] = Field(default_factory=lambda: ["ip_private"])
    replacements: dict[str, str] = Field(default_factory=_default_pii_replacements)
    email_obfuscated: bool = False
    email_example_domains: bool = False
    phone_regions: list[str] = Field(default_factory=lambda: ["US", "GB", "DE", "FR"])
    max_per_1k_chars: float | None = Field(default=10.0, gt=0)
    drop_min_findings: int = Field(default=3, ge=1)
    hash_salt: str = ""

    @field_validator("kinds", "report_only")
    @classmethod
    def _known_kinds(cls, v: list[str]) -> list[str]:
        from udfs.pii_rules import KINDS

        unknown = [k for k in v if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown PII kinds {unknown}; allowed: {list(KINDS)}")
        if len(set(v)) != len(v):
            raise ValueError(f"kinds must be unique; got {v}")
        return v

    @field_validator("replacements")
    @classmethod
    def _every_kind_replaced(cls, v: dict[str, str]) -> dict[str, str]:
        from udfs.pii_rules import KINDS

        if sorted(v) != sorted(KINDS):
            raise ValueError(f"needs one token for each kind {list(KINDS)}; missing {[k for k in KINDS if k not in v]},"
                             f" unknown {[k for k in v if k not in KINDS]}")
        return v

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, v: list[str]) -> list[str]:
        import phonenumbers

        unknown = [r for r in v if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"unknown phone regions {unknown}; allowed: ISO 3166 alpha-2 codes such as US, GB, DE")
        return v


# ---------------------------------------------------------------------------------------- tokenize
class TokenizeConfig(Section):
    """The tokenize stage: the last document table of the chain -> ``tokenized`` (``pipelines/tokenize/stage.py``)."""

    # null = the last document table that pipeline.stages produces before tokenize (pipelines/core/chain.py);
    # a name forces that table.
    input_table: Literal[tuple(document_tables_before("tokenize"))] | None = None  # type: ignore[valid-type]
    tokenizer: str = "builtin:gpt2"
    allow_download: bool = False
    # EOS: the id is looked up from eos_token unless eos_id is given (GPT-2: <|endoftext|> = 50256).
    eos_token: str = "<|endoftext|>"
    eos_id: int | None = Field(default=None, ge=0)
    # BOS: null = none (GPT-2 style: documents are separated by EOS only).
    bos_token: str | None = None
    roundtrip_sample_fraction: float = Field(default=0.01, ge=0.0, le=1.0)
    roundtrip_examples: int = Field(default=5, ge=0)
    threads_per_task: int = Field(default=1, ge=1)
    # auto = tiktoken when it gives the tokenizer's ids (a byte-level BPE whose merge order is its id
    # order: udfs/tokenize_tiktoken.py), else the Hugging Face tokenizer; hf / tiktoken force one.
    engine: Literal["auto", "hf", "tiktoken"] = "auto"
    # Arrow batch handed to one encoder call, in MB of input (rows are not capped).
    batch_mb: int = Field(default=8, ge=1, le=512)


# ------------------------------------------------------------------------------------------- shard
class StorageConfig(Section):
    """Object-store upload of shards when the shard output is ``s3://bucket/prefix`` (``pipelines/core/storage.py``)."""

    endpoint_url: str | None = None
    region: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    multipart_threshold_mb: int = Field(default=64, ge=5)
    multipart_chunksize_mb: int = Field(default=64, ge=5)
    max_attempts: int = Field(default=10, ge=1)
    verify_download: bool = False
    staging_dir: str | None = None


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


# ------------------------------------------------------------------------------------------ report
class ReportConfig(Section):
    """The run report: ``report.html`` + ``stats.json`` under ``<run.root>/report/`` (``pipelines/report/stage.py``)."""

    samples_per_reason: int = Field(default=5, ge=0)
    text_chars: int = Field(default=600, ge=20)
    hist_sample_rows: int = Field(default=100_000, ge=100)
    hist_bins: int = Field(default=40, ge=2, le=1000)
    plot_format: Literal["svg", "png"] = "svg"


# ---------------------------------------------------------------------------------------- tracking
class TrackingConfig(Section):
    """MLflow tracking of runs (``pipelines/core/tracking.py``)."""

    mlflow: bool = False
    uri: str | None = None
    experiment: str | None = None
    timeout_s: float = Field(default=5.0, gt=0)
    # The scheduler's run this process belongs to (Databricks: {{job.run_id}}): every process with the
    # same key logs its stages under one parent MLflow run, found by its tag. Not part of the config
    # fingerprint (see WinnowConfig.canonical_json): which job run this is does not change the data.
    parent_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:/-]{1,200}$")

    @field_validator("parent_key", mode="before")
    @classmethod
    def _number_is_a_key(cls, v: Any) -> Any:
        # `--set tracking.parent_key=123` reads as a YAML int; a job run id is a name, not a number.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


# -------------------------------------------------------------------------------------------- root
class WinnowConfig(Section):
    run: RunConfig = Field(default_factory=RunConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    refs: RefsConfig = Field(default_factory=RefsConfig)
    decontam: DecontamConfig = Field(default_factory=DecontamConfig)
    pii: PiiConfig = Field(default_factory=PiiConfig)
    tokenize: TokenizeConfig = Field(default_factory=TokenizeConfig)
    shard: ShardConfig = Field(default_factory=ShardConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    # ---- derived locations (the run layout documented in the README) ----
    def table_path(self, name: str) -> str:
        """Location of the Delta table ``name``: ``<run.root>/tables/<name>``, or in metastore mode
        (``run.catalog`` and ``run.schema`` set) the table name ``<catalog>.<schema>.<name>``, which
        :mod:`pipelines.core.tables` reads and writes through the catalog."""
        if self.run.catalog and self.run.db_schema:
            return f"{self.run.catalog}.{self.run.db_schema}.{name}"
        return _join(self.run.root, "tables", name)

    @property
    def shards_path(self) -> str:
        """Default shard root, ``<run.root>/shards``; the effective one is :attr:`shard_root`."""
        return _join(self.run.root, "shards")

    @property
    def shard_root(self) -> str:
        """Where the shard stage writes: ``shard.output`` when set, else :attr:`shards_path`; no trailing ``/``."""
        return (self.shard.output or self.shards_path).rstrip("/")

    @property
    def report_path(self) -> str:
        """Location of ``report.html`` and ``stats.json``: ``<run.root>/report``."""
        return _join(self.run.root, "report")

    @property
    def config_path(self) -> str:
        """Folder holding each stage's effective config: ``<run.root>/config``."""
        return _join(self.run.root, "config")

    # ---- fingerprints ----
    def canonical_json(self) -> str:
        """The whole config as canonical JSON (sorted keys, no whitespace), less ``tracking.parent_key``:
        a new scheduler run id every day must not make the same data a different config (manifest,
        ``_runs``), and without it the JSON is the one of configs from before the key existed."""
        return canonical_json(self.model_dump(mode="json", exclude={"tracking": {"parent_key"}}))

    def fingerprint(self) -> str:
        """sha256 hex of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def stage_fingerprint(self, stage: str) -> str:
        """sha256 hex over what decides one stage's output: its own section plus ``run.seed``.

        Raises:
            ValueError: ``stage`` is not one of :data:`STAGES`.
        """
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; allowed: {list(STAGES)}")
        payload = {"stage": stage, "seed": self.run.seed, stage: getattr(self, stage).model_dump(mode="json")}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _join(root: str, *parts: str) -> str:
    # Plain string joining: roots may be URIs (s3://, dbfs:/, abfss://) that pathlib would mangle.
    return "/".join([root.rstrip("/"), *parts])


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace, for fingerprints."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------ loading
def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``over`` into a copy of ``base``; mappings merge, everything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads exponents without a dot or an exponent sign (``1e9``, ``2.5e3``)
    as floats, as YAML 1.2 does; PyYAML follows YAML 1.1, where they are strings, and an integer key said
    "not a valid integer". An integer key takes ``1e9`` and refuses ``1.5e0`` (pydantic's lax mode).

    A key given twice in one mapping is an error (YAML 1.2 section 3.2.1.1: keys are unique); PyYAML
    keeps the later value silently, so a setting written twice hid one of its values."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping node as a dict; raises ``yaml.constructor.ConstructorError`` on a repeated key."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges, and the keys given beside it override the merged ones
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"key {key!r} is given twice",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"), list("-+.0123456789")
)


def parse_override(item: str) -> dict[str, Any]:
    """Turn ``a.b.c=value`` into ``{"a": {"b": {"c": <value parsed as YAML>}}}``.

    Raises:
        ConfigError: no ``=``, or an empty key path.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set expects KEY.PATH=VALUE (e.g. dedup.threshold=0.8); got {item!r}")
    try:
        value = yaml.load(raw, Loader=_Loader) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML: {e}") from None
    node: Any = value
    for part in reversed(key.split(".")):
        node = {part: node}
    return node


def _read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {str(path)!r}")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at top level; got {type(data).__name__}")
    return data


def load_config(files: Iterable[str | Path] = (), overrides: Iterable[str] = ()) -> WinnowConfig:
    """Build the effective config: model defaults, then each file in order, then each override.

    Args:
        files: YAML files, later ones win (merged recursively).
        overrides: ``KEY.PATH=VALUE`` strings, values parsed as YAML, applied after the files.

    Returns:
        The validated :class:`WinnowConfig`.

    Raises:
        ConfigError: a file is missing or malformed, a key is unknown, or a value is out of range;
            the message names the key path, the value found and the allowed values.
    """
    data: dict[str, Any] = {}
    for f in files:
        data = deep_merge(data, _read_yaml(f))
    for o in overrides:
        data = deep_merge(data, parse_override(o))
    return validate_config(data)


def validate_config(data: Mapping[str, Any]) -> WinnowConfig:
    """Validate a plain mapping into :class:`WinnowConfig`, turning pydantic errors into :class:`ConfigError`."""
    try:
        return WinnowConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_describe(e)) from None


def _model_inside(tp: Any) -> Any:
    """``tp`` without ``None`` in a union (``X | None`` -> ``X``), so optional sections are walked too."""
    if get_origin(tp) in (Union, UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _allowed_keys(loc: tuple[Any, ...], root: Any = None) -> list[str]:
    """The keys allowed beside the last part of ``loc``, walking models, ``dict[str, Model]`` values
    (``shard.mix.<source>``, a loc part that is the user's key) and ``list[Model]`` items; [] if unknown."""
    tp: Any = WinnowConfig if root is None else root
    for part in loc[:-1]:
        tp = _model_inside(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return []
            tp = field.annotation
        elif get_origin(tp) in (dict, Mapping):
            tp = get_args(tp)[1]
        elif get_origin(tp) in (list, tuple):
            tp = get_args(tp)[0]
        else:
            return []
    tp = _model_inside(tp)
    return sorted(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def _describe(e: ValidationError, root: Any = None, prefix: str = "") -> str:
    lines = []
    for err in e.errors():
        loc = tuple(err["loc"])
        key = prefix + ".".join(str(p) for p in loc) or "<root>"
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc, root)
            lines.append(f"unknown config key {key!r}; allowed keys here: {allowed}")
        else:
            lines.append(f"config key {key!r}: got {err.get('input')!r}: {err['msg']}")
    return "invalid configuration:\n  " + "\n  ".join(lines)
