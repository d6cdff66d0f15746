"""The audit job: a run's ``tokenized`` table + the documents tokenize read -> ``audit/audit.json``.

One pass: ``tokenized`` is joined with the text of its documents on ``doc_id`` and every Arrow batch is
audited on the workers (:mod:`udfs.tokenizer_audit_batch`), one merged partial per task; the driver merges
them, checks the evaluation prompts against the merged histograms and ranks the findings
(:mod:`pipelines.audit.findings`). The tokenizer is the one recorded on ``tokenized`` (its ``tokenizer``,
``eos_id``, ``bos_id`` and ``input_table`` properties), so the audit judges the ids that were written.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.audit.config import AuditConfig
from pipelines.audit.findings import PromptSet, TokenizerFacts, summarize, tokenizer_facts
from pipelines.audit.prompts import Prompts, boundary_ids, configured_prompt_sets
from pipelines.core import tables
from pipelines.core.config import EvalSetConfig, WinnowConfig
from pipelines.core.samples import in_seeded_sample
from pipelines.core.words import plural
from udfs import tokenize as tok_udfs
from udfs import tokenizer_audit as ta
from udfs import tokenizer_audit_batch as tab
from udfs.tokenizer_prompts import prompt_boundaries

TOKENIZED = "tokenized"
AUDIT_FILE = "audit/audit.json"
"""Where the audit is written, under ``run.root``."""
_BUCKETS = 1_000_000


def audit_path(cfg: WinnowConfig) -> str:
    """``<run.root>/audit/audit.json``."""
    return f"{cfg.run.root.rstrip('/')}/{AUDIT_FILE}"


def sample_columns(seed: int, acfg: AuditConfig) -> list[Column]:
    """The audit's seeded sample flags ``_audit_rt_sample``, ``_engine_sample`` and ``_text_sample``: a keyed
    hash of ``run.seed``, a per-sample salt and ``doc_id`` below each fraction (independent of
    partitioning). The engine sample has no salt: it is drawn from the hash of the tokenize stage's
    round-trip sample (:func:`pipelines.core.samples.in_seeded_sample`), so the two are nested and the
    documents the stage already compared across engines are not encoded again
    (:func:`udfs.tokenizer_audit_batch.audit_encoded`)."""

    def below(salt: str, fraction: float) -> Column:
        h = F.pmod(F.xxhash64(F.lit(seed), F.lit(salt), F.col("doc_id")), F.lit(_BUCKETS))
        return h < F.lit(int(round(fraction * _BUCKETS)))

    return [
        below("audit.roundtrip", acfg.roundtrip_sample_fraction).alias(tab.ROUNDTRIP_SAMPLE),
        in_seeded_sample(seed, acfg.engine_sample_fraction).alias("_engine_sample"),
        below("audit.text", acfg.text_sample_fraction).alias("_text_sample"),
    ]


def _inputs(spark: SparkSession, cfg: WinnowConfig) -> tuple[dict[str, str], str, int | None]:
    """``tokenized``'s properties, the document table it was made from and that table's version."""
    props = tables.table_properties(spark, cfg.table_path(TOKENIZED))
    name = props.get("input_table") or tables.stage_input_table(cfg, "tokenize", spark)
    version = json.loads(props.get("input_version", "null"))
    return props, name, None if version is None else int(version)


def prepare(
    cfg: WinnowConfig,
    tok: tok_udfs.LoadedTokenizer,
    eos_id: int,
    bos_id: int | None,
    engine_written: str | None,
    prompt_sets: list[Prompts],
) -> tuple[TokenizerFacts, tab.AuditSpec]:
    """The tokenizer facts (driver) and the worker settings of an audit of ids written by ``tok``.

    Used by :func:`run` and by a caller that fills the audit while it encodes (the tokenize stage): pass
    the spec to :func:`udfs.tokenizer_audit_batch.audit_record_batch` per batch, add the partials to an
    accumulator of :class:`udfs.tokenizer_audit_batch.PartialParam`, then call :func:`finish` with the
    same ``prompt_sets``.

    Args:
        prompt_sets: the prompts the audit will check (:func:`pipelines.audit.prompts.
            configured_prompt_sets`): the pass counts what follows their last ids.
    """
    from udfs.tokenize_tiktoken import resolve_engine

    engine, why_not = resolve_engine(tok, "auto")
    literals = tuple(s for s in (cfg.tokenize.eos_token, cfg.tokenize.bos_token) if s)
    facts = tokenizer_facts(
        tok,
        eos_id=eos_id,
        bos_id=bos_id,
        literals=literals,
        shard_dtype=cfg.shard.dtype,
        engine={
            "engine_written": engine_written,
            "tiktoken_possible": engine == "tiktoken",
            **({"tiktoken_not_possible": why_not} if why_not else {}),
        },
    )
    spec = tab.AuditSpec(
        tokenizer=tok.spec,
        allow_download=cfg.tokenize.allow_download,
        bos=bos_id is not None,
        specials=tuple(facts.special_encodings),
        keep=cfg.audit.examples,
        engines=engine == "tiktoken",
        watch=boundary_ids(tok, prompt_sets),
    )
    return facts, spec


def finish(
    spark: SparkSession,
    cfg: WinnowConfig,
    tok: tok_udfs.LoadedTokenizer,
    facts: TokenizerFacts,
    total: ta.Partial,
    inputs: dict[str, Any],
    prompt_sets: list[Prompts],
) -> dict[str, Any]:
    """Check the prompts against the merged counters, rank the findings and write ``audit.json``.

    Args:
        total: the merged partial of every batch.
        inputs: what was audited (tables, versions, tokenizer), recorded under ``inputs``.
        prompt_sets: the prompt sets given to :func:`prepare`.

    Returns:
        The audit document plus ``path``.
    """
    vocab = tab.cached_vocab_tables(tok)
    checked = []
    for p in prompt_sets:
        signals = prompt_boundaries(tok, vocab, p.prompts, p.answers, total.id_counts, total.follow)
        checked.append(PromptSet(p.name, p.ids, p.prompts, signals))
    doc = summarize(total, facts, cfg.audit, checked)
    doc["inputs"] = {**inputs, "prompt_sets": [p.name for p in checked]}
    path = audit_path(cfg)
    tables.write_text(spark, path, json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    doc["path"] = path
    return doc


def run(
    spark: SparkSession, cfg: WinnowConfig, extra_prompt_sets: list[EvalSetConfig] | None = None
) -> dict[str, Any]:
    """Audit the run's tokenizer against its data and write ``audit.json``.

    Args:
        extra_prompt_sets: prompt sets besides the configured ones (``winnow audit --prompts FILE``).

    Returns:
        The audit document (:func:`pipelines.audit.findings.summarize`) plus ``inputs`` and ``path``.

    Raises:
        MissingTableError: ``tokenized`` or its document table does not exist.
        TokenizerError: the recorded tokenizer cannot be loaded.
        EvalSetError: a prompt file is missing or unreadable.
    """
    tcfg = cfg.tokenize
    tokd = tables.read_table(spark, cfg, TOKENIZED)
    props, doc_table, doc_version = _inputs(spark, cfg)
    docs = tables.read_table(spark, cfg, doc_table, version=doc_version)
    tok = tok_udfs.load_tokenizer(props.get("tokenizer", tcfg.tokenizer), allow_download=tcfg.allow_download)
    eos = json.loads(props.get("eos_id", "null"))  # recorded as JSON by tokenize (null: none)
    if eos is None:
        eos = tok.token_id(tcfg.eos_token)
    # Read before the pass: a bad prompt file fails before any work.
    prompt_sets = configured_prompt_sets(cfg, extra_prompt_sets, spark)
    facts, spec = prepare(
        cfg, tok, int(eos or 0), json.loads(props.get("bos_id", "null")), props.get("engine"), prompt_sets
    )
    lang = ["lang"] if "lang" in docs.columns else []
    joined = (
        tokd.select("doc_id", "source", "tokens")
        .join(docs.select("doc_id", "text", *lang), "doc_id")
        .select("*", *sample_columns(cfg.run.seed, cfg.audit))
    )
    schema = T.StructType([T.StructField("partial", T.BinaryType(), False)])
    total = ta.Partial.empty(tok.vocab_size, cfg.audit.examples)
    for row in joined.mapInArrow(tab.make_auditor(spec), schema).collect():
        ta.merge(total, pickle.loads(row["partial"]))  # noqa: S301 - written by this job's own workers
    inputs = {
        "tokenized": cfg.table_path(TOKENIZED),
        "documents": cfg.table_path(doc_table),
        "documents_version": doc_version,
        "tokenizer": tok.spec,
    }
    return finish(spark, cfg, tok, facts, total, inputs, prompt_sets)


def summary_lines(doc: dict[str, Any], top: int = 5) -> list[str]:
    """A short text summary: counts by severity, the top findings, where the file is."""
    by = {s: sum(f["severity"] == s for f in doc["findings"]) for s in ("error", "warn", "info")}
    lines = [
        f"audit: {plural(by['error'], 'error')}, {plural(by['warn'], 'warning')}, "
        f"{plural(by['info'], 'note')} "
        f"({doc['inputs']['tokenizer']}; {doc['inputs']['tokenized']} + {doc['inputs']['documents']})"
    ]
    lines += [f"  [{f['severity']}] {f['title']}: {f['detail']}" for f in doc["findings"][:top]]
    if "path" in doc:
        lines.append(f"  audit.json: {doc['path']}")
    return lines
