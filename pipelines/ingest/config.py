"""The ``ingest`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from pipelines.core.section import Section, byte_size


class IngestFields(Section):
    """Which record fields (JSONL objects, Parquet columns) hold what; dotted paths reach into objects."""

    text: str = Field(default="text", min_length=1)
    id: str | None = "id"
    url: str | None = "url"
    source: str | None = "source"
    meta: list[str] = Field(default_factory=list)
    heading: str | None = None
    record_format: Literal["auto", "flat", "s2orc", "unarxive", "mediawiki"] = "auto"

    @field_validator("text", "id", "url", "source", "heading", mode="before")
    @classmethod
    def _column_index_as_name(cls, v: Any) -> Any:
        # A headerless CSV/TSV names its columns by 0-based index, and `--set ingest.fields.text=1` parses
        # as YAML's integer 1: the field's name is the index's digits.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v

    @field_validator("meta", mode="before")
    @classmethod
    def _column_indices_as_names(cls, v: Any) -> Any:
        return [cls._column_index_as_name(x) for x in v] if isinstance(v, list) else v

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
    fields_by_input: dict[str, dict[str, Any]] = Field(default_factory=dict)
    jats: JatsConfig = Field(default_factory=JatsConfig)
    mediawiki: MediaWikiConfig = Field(default_factory=MediaWikiConfig)

    @field_validator("max_doc_bytes", "split_bytes", "batch_bytes", mode="before")
    @classmethod
    def _byte_sizes(cls, v: Any) -> Any:
        # a size as Spark's settings write one ("64m", :func:`byte_size`) as well as a number of bytes
        if not isinstance(v, str):
            return v
        if (n := byte_size(v)) is None:
            raise ValueError("allowed: a number of bytes or a size such as 64m (a number, then an optional "
                             "k, m, g, t or p)")
        return n

    @model_validator(mode="after")
    def _fields_by_input_names_inputs(self) -> IngestConfig:
        for glob in self.fields_by_input:
            if glob not in self.inputs:
                raise ValueError(
                    f"ingest.fields_by_input: {glob!r} is not one of ingest.inputs; allowed: {self.inputs}"
                )
            self.fields_for(glob)  # the merged block must be valid too (heading beside text)
        return self

    def fields_for(self, glob: str) -> IngestFields:
        """The fields of the files a glob of ``ingest.inputs`` matched: ``ingest.fields`` with the keys
        ``ingest.fields_by_input.<glob>`` sets laid over it.

        Raises:
            ValueError: the merged block is invalid (a heading that does not share the text's array).
        """
        over = self.fields_by_input.get(glob)
        if not over:
            return self.fields
        unknown = sorted(set(over) - set(IngestFields.model_fields))
        if unknown:
            raise ValueError(f"ingest.fields_by_input.{glob}.{unknown[0]}: unknown key; allowed: "
                             f"{list(IngestFields.model_fields)}")
        try:
            return IngestFields.model_validate({**self.fields.model_dump(), **over})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            found = f" (found {err.get('input')!r})" if where else ""
            raise ValueError(f"ingest.fields_by_input.{glob}{'.' + where if where else ''}: "
                             f"{err['msg'].removeprefix('Value error, ')}{found}") from None
