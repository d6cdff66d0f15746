"""The ``pii`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from pipelines.core.chain import document_tables_before
from pipelines.core.section import Section, over_default


def _default_pii_replacements() -> dict[str, str]:
    from udfs.pii import DEFAULT_REPLACEMENTS

    return dict(DEFAULT_REPLACEMENTS)


class PiiConfig(Section):
    """The pii stage: personal data and secrets found, redacted, counted."""

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
    # one kind's token given (pii.replacements.email) changes that token, the other kinds keep theirs
    _replacements_over_default = field_validator("replacements", mode="before")(over_default(_default_pii_replacements))
    email_obfuscated: bool = False
    email_example_domains: bool = False
    phone_regions: list[str] = Field(default_factory=lambda: ["US", "GB", "DE", "FR"])
    max_per_1k_chars: float | None = Field(default=10.0, gt=0)
    drop_min_findings: int = Field(default=3, ge=1)
    hash_salt: str = ""
    # Arrow batches sent to the detector cut by size (MB of the batch), not by rows: one batch per
    # spark.arrow_batch_rows rows (1024, ~3.5 MB of web text) costs the JVM ~7 % more CPU than 8 MB
    # batches (bench/notes.md).
    batch_mb: int = Field(default=8, ge=1, le=512)

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

        if unknown := [k for k in v if k not in KINDS]:
            raise ValueError(f"unknown PII kinds {unknown}; allowed: {list(KINDS)}")
        if missing := [k for k in KINDS if k not in v]:  # only a default that lacks one gets here
            raise ValueError(f"needs one token for each kind {list(KINDS)}; missing {missing}")
        return v

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, v: list[str]) -> list[str]:
        import phonenumbers

        unknown = [r for r in v if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"unknown phone regions {unknown}; allowed: ISO 3166 alpha-2 codes such as US, GB, DE")
        return v
