"""The ``audit`` config section: what the tokenizer audit samples and the thresholds of its findings.

Threshold names say the comparison and the unit (``max_*`` flags values above it, ``min_*`` values below
it); ``null`` switches a finding off. The rules and their defaults are explained in ``docs/audit.md``.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from pipelines.core.section import EvalSetConfig, Section


class AuditConfig(Section):
    """The tokenizer audit (``pipelines/audit``): tokenizer and data fit, checked before training."""

    # true = the tokenize stage fills the audit in its own pass (pipelines/audit/inline.py) and writes
    # audit.json; false = it does not (`winnow audit` still audits a run's tokenized table).
    inline: bool = True
    # Share of documents (seeded by run.seed and doc_id) decoded again and compared with their text
    # (byte-level tokenizers such as GPT-2 decode in Arrow, the others through the tokenizer). 2 %: twice
    # tokenize's own round-trip check, within the audit's budget of 5 % of the stage (docs/audit.md).
    roundtrip_sample_fraction: float = Field(default=0.02, ge=0.0, le=1.0)
    # Share of documents (seeded) whose bytes are scanned for words (tokens per word), whitespace runs,
    # digit runs and digit tokens; the other figures count every document. 5 %: the scan is the audit's
    # dearest per-byte part (docs/audit.md); a small run that wants every group judged raises it.
    text_sample_fraction: float = Field(default=0.05, ge=0.0, le=1.0)
    # Share of documents (seeded) whose ids are compared across both engines where tiktoken can run the
    # tokenizer; drawn from the hash of tokenize's round-trip sample, which tokenize already compares when it
    # encodes with tiktoken (those documents are not encoded again).
    engine_sample_fraction: float = Field(default=0.01, ge=0.0, le=1.0)
    # Examples kept per finding (documents, tokens, prompts).
    examples: int = Field(default=5, ge=0, le=1000)
    # Unknown-token ids per token of a source or language above this is flagged (lost text); null = off.
    max_unknown_share: float | None = Field(default=0.0001, ge=0.0, le=1.0)
    # Byte-fallback ids per token of a source or language above this is flagged (text spelled in bytes).
    max_byte_fallback_share: float | None = Field(default=0.05, ge=0.0, le=1.0)
    # A source or language whose tokens per word or bytes per token differs from the corpus median
    # document's by more than this factor (either way) is flagged; null = off.
    max_fertility_ratio: float | None = Field(default=2.0, gt=1.0)
    # Sources and languages with fewer words in the text sample are too small to judge (listed only).
    min_group_words: int = Field(default=1000, ge=1)
    # Vocabulary ids seen fewer times than this in the content are "rare" (under-trained candidates).
    min_count: int = Field(default=5, ge=1)
    # Coverage is judged only when the corpus holds at least this many tokens per vocabulary id.
    min_tokens_per_id: float = Field(default=100.0, ge=0.0)
    # Never-seen and rare tokens listed with their strings.
    max_listed_tokens: int = Field(default=50, ge=0)
    # A prompt's last token is judged from the data only when the content holds it at least this often.
    prompt_min_count: int = Field(default=20, ge=1)
    # ... and flagged when the content follows it with the answer's kind of first token in a smaller share
    # of its occurrences than this; null = judge prompts by the tokenizer alone (canonical boundary).
    min_follow_share: float | None = Field(default=0.001, ge=0.0, le=1.0)
    # Prompt files besides decontam.eval_sets: first field the prompt (trailing whitespace kept), second
    # field (optional) the answer.
    prompt_sets: list[EvalSetConfig] = Field(default_factory=list)

    @field_validator("prompt_sets")
    @classmethod
    def _unique_names(cls, v: list[EvalSetConfig]) -> list[EvalSetConfig]:
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"prompt set names must be unique; repeated: {dup}")
        return v
