"""The ``tokenize`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipelines.core.chain import document_tables_before
from pipelines.core.section import Section


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
