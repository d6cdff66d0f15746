"""The audit filled by the tokenize stage as it encodes: no second pass over the corpus.

The tokenize stage calls :func:`begin` before its write (the sample flags to add to what its encoder reads,
the worker settings, an accumulator), its encoder adds one partial per batch
(:func:`udfs.tokenizer_audit_batch.audit_encoded`), and :func:`end` after the write ranks the findings,
writes ``<run.root>/audit/audit.json`` (:func:`pipelines.audit.job.finish`) and returns the summary the
stage puts in its report. ``audit.inline: false`` switches it off (``winnow audit`` still audits a run).

Exactness: Spark applies an action's accumulator updates once per successful task, but a task run again
(a re-run stage, a speculative copy) may add its partial twice. :func:`end` therefore checks the documents
the partials counted against the rows the ``tokenized`` commit wrote (Delta's ``numOutputRows``); when
they differ it audits the written table instead (:func:`pipelines.audit.job.run`, the one case with a
second pass), so ``audit.json`` never holds counts of a retried task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark import Accumulator
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from pipelines.audit.findings import TokenizerFacts
from pipelines.audit.job import finish, prepare, run, sample_columns
from pipelines.audit.prompts import Prompts, configured_prompt_sets
from pipelines.core import tables
from pipelines.core.config import WinnowConfig
from udfs import tokenize as tok_udfs
from udfs import tokenizer_audit as ta
from udfs import tokenizer_audit_batch as tab


@dataclass(frozen=True)
class InlineAudit:
    """An audit being filled by the tokenize stage's pass.

    Attributes:
        spec: the worker settings (:attr:`udfs.tokenize_batch.EncoderSpec.audit`).
        columns: what the encoder's input needs besides ``doc_id``, ``text``, ``source``: the audit's
            sample flags and ``lang`` when the input has it.
        partials: the accumulator (:class:`udfs.tokenizer_audit_batch.PartialParam`) the encoder adds to.
        facts: the tokenizer facts (driver side).
        tok: the tokenizer that encodes.
        prompt_sets: the evaluation prompts the audit checks (read before the pass).
    """

    spec: tab.AuditSpec
    columns: tuple[Column, ...]
    partials: Accumulator
    facts: TokenizerFacts
    tok: tok_udfs.LoadedTokenizer
    prompt_sets: list[Prompts]


def begin(
    spark: SparkSession,
    cfg: WinnowConfig,
    tok: tok_udfs.LoadedTokenizer,
    eos_id: int,
    bos_id: int | None,
    engine: str,
    input_columns: list[str],
) -> InlineAudit | None:
    """Start the audit of the ids about to be written by the tokenize stage.

    Args:
        tok: the stage's tokenizer; ``eos_id``, ``bos_id`` its framing ids.
        engine: the engine the stage encodes with (``hf`` or ``tiktoken``).
        input_columns: the columns of the table the stage reads (``lang`` is audited when present).

    Returns:
        The :class:`InlineAudit`, or None with ``audit.inline: false``.
    """
    if not cfg.audit.inline:
        return None
    prompt_sets = configured_prompt_sets(cfg, None, spark)
    facts, spec = prepare(cfg, tok, eos_id, bos_id, engine, prompt_sets)
    lang = (F.col("lang"),) if "lang" in input_columns else ()
    partials = spark.sparkContext.accumulator(ta.Partial.empty(tok.vocab_size, cfg.audit.examples),
                                              tab.PartialParam())
    columns = (*sample_columns(cfg.run.seed, cfg.audit), *lang)
    return InlineAudit(spec, columns, partials, facts, tok, prompt_sets)


def end(
    spark: SparkSession,
    cfg: WinnowConfig,
    audit: InlineAudit,
    tokenized: str,
    documents: str,
    version: int | None,
) -> dict[str, Any]:
    """Rank the findings of the filled audit and write ``audit.json`` (after the ``tokenized`` write).

    Args:
        audit: what :func:`begin` returned, its accumulator filled by the write.
        tokenized: the location of the ``tokenized`` table just written.
        documents: the document table the stage read; ``version`` its Delta version.

    Returns:
        The summary for the stage report: ``path``, ``mode`` (``inline``, or ``rerun`` when the partials
        counted a document twice and the written table was audited again), ``flags``, ``errors``,
        ``warnings``, ``findings`` (the ids of the ranked findings, top first), ``documents`` audited and
        ``worker_seconds`` (wall seconds the workers spent auditing, summed over batches).
    """
    total: ta.Partial = audit.partials.value
    written = tables.written_rows(spark, tokenized)
    mode = "inline" if tab.documents(total) == written else "rerun"
    if mode == "inline":
        inputs = {"tokenized": tokenized, "documents": cfg.table_path(documents),
                  "documents_version": version, "tokenizer": audit.tok.spec}
        doc = finish(spark, cfg, audit.tok, audit.facts, total, inputs, audit.prompt_sets)
    else:
        doc = run(spark, cfg)
    findings = doc["findings"]
    return {
        "path": doc["path"],
        "mode": mode,
        "flags": doc["flags"],
        "errors": sum(f["severity"] == "error" for f in findings),
        "warnings": sum(f["severity"] == "warn" for f in findings),
        "findings": [f["id"] for f in findings],
        "documents": written,
        "worker_seconds": round(total.seconds, 3),
    }
