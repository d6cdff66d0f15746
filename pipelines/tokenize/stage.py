"""Tokenize stage: the last document table of the chain -> ``tokenized`` (+ ``removed`` for empty documents).

Every document becomes ``[BOS] content EOS`` token ids (:mod:`udfs.tokenize`), encoded batch by batch in
``mapInArrow`` with the tokenizer loaded once per Python worker; what the workers run is
:mod:`udfs.tokenize_batch` (this module only wires it into Spark, so workers never import it).
Documents with no content tokens are removed with reason ``tokenize.zero_tokens``. A seeded fraction of documents (chosen by a keyed hash of
``run.seed`` and ``doc_id``, so independent of partitioning) is decoded again and compared with its text;
mismatches are counted and a few kept as examples in the stage report. Any id outside ``[0, vocab)``
fails the stage before anything is written.

The tokenizer audit is filled in the same pass (``audit.inline``, :mod:`pipelines.audit.inline`): the
encoder audits each batch it has just encoded, and after the write the stage writes
``<run.root>/audit/audit.json`` and puts its summary in the stage report (``extra["audit"]``).

Threads: Spark runs one task per core and each task has its own Python worker, so the tokenizers Rust
pool is limited to ``tokenize.threads_per_task`` threads (default 1) per worker; cores x cores threads
would only add contention.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
from pyspark import Accumulator
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import audit as audit_pkg
from pipelines.core import chain, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.core.samples import in_seeded_sample
from pipelines.tokenize.config import TokenizeConfig
from udfs import tokenize as tok_udfs
from udfs import tokenize_batch as tok_batch

STAGE = "tokenize"
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text", "source")
OUTPUT_COLUMNS: tuple[str, ...] = ("doc_id", "source", "tokens", "n_tokens")
SIGNAL_COLUMNS: tuple[str, ...] = ("n_content_tokens", "roundtrip_checked", "roundtrip_mismatch", "roundtrip_error")
REASON_ZERO_TOKENS = "tokenize.zero_tokens"
OUTPUT_TABLE = chain.stage(STAGE).main_table


def input_table_name(cfg: WinnowConfig, spark: SparkSession | None = None) -> str:
    """The table tokenize reads: ``tokenize.input_table``, else the last document table of the chain
    (:func:`pipelines.core.tables.previous_document_table`)."""
    return tables.stage_input_table(cfg, STAGE, spark)


def special_ids(tcfg: TokenizeConfig) -> tuple[tok_udfs.LoadedTokenizer, int, int | None]:
    """Load the tokenizer on the driver and resolve the EOS/BOS ids (fail fast, before any Spark job).

    Raises:
        TokenizerError: the tokenizer cannot be loaded, the EOS/BOS token is unknown, or ``eos_id`` is
            outside the vocabulary.
    """
    tok = tok_udfs.load_tokenizer(tcfg.tokenizer, allow_download=tcfg.allow_download)
    if tcfg.eos_id is not None:
        eos = tcfg.eos_id
        if eos >= tok.vocab_size:
            raise tok_udfs.TokenizerError(f"tokenize.eos_id={eos} is outside the vocabulary [0, {tok.vocab_size})")
    else:
        eos = tok.token_id(tcfg.eos_token)
        if eos is None:
            raise tok_udfs.TokenizerError(
                f"tokenize.eos_token={tcfg.eos_token!r} is not in tokenizer {tcfg.tokenizer!r}; set tokenize.eos_id"
            )
    bos = None
    if tcfg.bos_token is not None:
        bos = tok.token_id(tcfg.bos_token)
        if bos is None:
            raise tok_udfs.TokenizerError(f"tokenize.bos_token={tcfg.bos_token!r} is not in tokenizer {tcfg.tokenizer!r}")
    return tok, int(eos), bos


def resolve_engine(tcfg: TokenizeConfig) -> tuple[str, str]:
    """``tokenize.engine`` resolved for the configured tokenizer (driver side, cached per process).

    Returns:
        ``(engine, why_not_tiktoken)`` as :func:`udfs.tokenize_tiktoken.resolve_engine`.

    Raises:
        TokenizerError: ``engine: tiktoken`` for a tokenizer tiktoken cannot run with identical ids.
    """
    from udfs.tokenize_tiktoken import resolve_engine as resolve

    return resolve(tok_udfs.load_tokenizer(tcfg.tokenizer, allow_download=tcfg.allow_download), tcfg.engine)


COUNTS = tok_batch.COUNTS
TokenizeFailure = tok_batch.TokenizeFailure
_FAIL = tok_batch.FAIL_MARK


def tokenize(df: DataFrame, tcfg: TokenizeConfig, seed: int = 0, *, engine: str | None = None,
             encoding_factory: Callable[[tok_udfs.LoadedTokenizer], object] | None = None,
             counts: Accumulator | None = None, by_source: Accumulator | None = None,
             audit: audit_pkg.InlineAudit | None = None) -> DataFrame:
    """Token ids and validation signals of every document.

    Only ``doc_id``, ``text`` and ``source`` cross into Python; every other input column stays on the JVM
    (the ``removed`` rows are joined back from the input by ``run``).

    Args:
        df: documents with at least ``doc_id`` (string), ``text`` (string), ``source`` (string).
        tcfg: the ``tokenize`` config section.
        seed: ``run.seed``; picks the audit sample.
        engine: ``hf`` or ``tiktoken``; None resolves ``tcfg.engine`` (:func:`resolve_engine`).
        encoding_factory: builds the tiktoken encoding on the executor (default
            :func:`udfs.tokenize_tiktoken.encoding_for`); tests pass a deliberately wrong one.
        counts: an accumulator (:class:`udfs.tokenize_batch.CountsParam`) that receives the :data:`COUNTS`
            of every batch.
        by_source: an accumulator (:class:`udfs.tokenize_batch.SumBySourceParam`) that receives the tokens
            (incl. EOS/BOS) of the documents with content, per ``source`` (null source -> ``"None"``).

    Returns:
        ``doc_id``, ``source``, ``tokens`` (binary: [BOS] content EOS as little-endian uint32 ids,
        :data:`udfs.tokenize.TOKEN_DTYPE`; read with :func:`udfs.tokenize.token_ids`), ``n_tokens`` (int, tokens
        incl. EOS/BOS), ``n_content_tokens`` (int), ``roundtrip_checked`` (boolean),
        ``roundtrip_mismatch`` (boolean: the decoded text differs), ``roundtrip_error`` (string: the
        difference, kept for the ``roundtrip_examples`` smallest doc_ids of each batch, else null).
        Evaluating it raises (a Spark job failure carrying a :class:`TokenizeFailure` message) when an id
        is outside the vocabulary or, with tiktoken, when a sampled document's ids differ from the
        Hugging Face tokenizer's.

    Raises:
        ValueError: a required input column is missing.
        TokenizerError: see :func:`special_ids` and :func:`resolve_engine`.
    """
    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    tok, eos_id, bos_id = special_ids(tcfg)
    engine = engine or resolve_engine(tcfg)[0]
    spec = tok_batch.EncoderSpec(tokenizer=tcfg.tokenizer, allow_download=tcfg.allow_download,
                                 threads=tcfg.threads_per_task, vocab_size=tok.vocab_size, eos_id=eos_id, bos_id=bos_id,
                                 engine=engine, keep_examples=tcfg.roundtrip_examples,
                                 audit=audit.spec if audit is not None else None)
    staged = df.select("doc_id", "text", "source", _in_sample(seed, tcfg.roundtrip_sample_fraction).alias("_rt_sample"),
                       *(audit.columns if audit is not None else ()))
    out_schema = T.StructType(
        [
            df.schema["doc_id"],
            df.schema["source"],
            T.StructField("tokens", T.BinaryType(), False),
            T.StructField("n_tokens", T.IntegerType(), False),
            T.StructField("n_content_tokens", T.IntegerType(), False),
            T.StructField("roundtrip_checked", T.BooleanType(), False),
            T.StructField("roundtrip_mismatch", T.BooleanType(), False),
            T.StructField("roundtrip_error", T.StringType(), True),
        ]
    )
    arrow_schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in out_schema.fields])
    # Built here, run on the workers: the function and what it holds come from udfs only (see udfs.tokenize_batch).
    encode = tok_batch.make_encoder(spec, arrow_schema, encoding_factory=encoding_factory, counts=counts,
                                    by_source=by_source, audit=audit.partials if audit is not None else None)
    return staged.mapInArrow(encode, out_schema)


def _in_sample(seed: int, fraction: float) -> Column:
    """True for the round-trip sample (:func:`pipelines.core.samples.in_seeded_sample`: partitioning-
    independent; the tokenizer audit's engine sample is drawn from the same hash, so the two are nested)."""
    return in_seeded_sample(seed, fraction)


def _arrow_type(dt: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dt)


@contextmanager
def _arrow_batches_of(spark: SparkSession, mb: int) -> Iterator[None]:
    """Arrow batches into the Python workers sized by bytes (``mb``), not by rows, while the block runs."""
    with tables.session_conf(spark, {"spark.sql.execution.arrow.maxBytesPerBatch": str(mb * 1_000_000),
                                     "spark.sql.execution.arrow.maxRecordsPerBatch": "-1"}):
        yield


def _executor_failure(e: Exception) -> TokenizeFailure | None:
    text = str(e)
    at = text.find(_FAIL)
    if at < 0:
        return None
    return TokenizeFailure(text[at + len(_FAIL):].split("\n", 1)[0].strip())


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read the input table, tokenize, write ``tokenized`` and this stage's ``removed`` rows.

    One pass over the input: the counts and the tokens per source come from the ``tokenized`` write
    itself (accumulators, applied once per successful task); the full rows of zero-token documents are joined back from the input only when there are any.

    Returns:
        A :class:`StageReport` with ``removed = {"tokenize.zero_tokens": n}`` and in ``extra``: total
        tokens, tokens per source, round-trip sample size, mismatches and examples, tokenizer facts,
        the engine used and, with ``audit.inline``, ``audit`` (:func:`pipelines.audit.end`'s summary).

    Raises:
        MissingTableError: the input table does not exist.
        TokenizeFailure: ids outside the vocabulary, or the tiktoken audit found a difference (nothing
            is written).
    """
    tcfg = cfg.tokenize
    name = input_table_name(cfg, spark)
    src = tables.read_table(spark, cfg, name)
    src_version = tables.table_version(spark, cfg.table_path(name))
    tok, eos_id, bos_id = special_ids(tcfg)
    engine, why_hf = resolve_engine(tcfg)

    counts = spark.sparkContext.accumulator([0] * len(COUNTS), tok_batch.CountsParam())
    by_source = spark.sparkContext.accumulator({}, tok_batch.SumBySourceParam())
    audit = audit_pkg.begin(spark, cfg, tok, eos_id, bos_id, engine, src.columns)
    annotated = tokenize(src, tcfg, cfg.run.seed, engine=engine, counts=counts, by_source=by_source, audit=audit)
    zero = F.col("n_content_tokens") == 0
    props = {
        "tokenizer": tcfg.tokenizer,
        "tokenizer_fingerprint": tok.fingerprint,
        "vocab_size": tok.vocab_size,
        "eos_id": eos_id,
        "bos_id": bos_id,
        "engine": engine,
        "input_table": name,
        "input_version": src_version,
    }
    try:
        with _arrow_batches_of(spark, tcfg.batch_mb):
            outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: annotated.filter(~zero).select(*OUTPUT_COLUMNS)},
                                     properties=props)
    except Exception as e:
        failure = _executor_failure(e)
        if failure is None:
            raise
        raise failure from None
    total = dict(zip(COUNTS, counts.value, strict=True))
    examples = []
    if total["rt_bad"] and tcfg.roundtrip_examples:
        # Rare (a tokenizer that does not round-trip): re-encode the audit sample only to show examples.
        again = tokenize(src.filter(_in_sample(cfg.run.seed, tcfg.roundtrip_sample_fraction)), tcfg, cfg.run.seed,
                         engine=engine)
        rows = (again.filter(F.col("roundtrip_error").isNotNull()).select("doc_id", "source", "roundtrip_error")
                .orderBy("doc_id").limit(tcfg.roundtrip_examples).collect())
        examples = [r.asDict() for r in rows]

    tokens_by_source = dict(sorted(by_source.value.items()))
    total["tokens"] = sum(tokens_by_source.values())
    # After the write: which documents had no tokens is known only then (publish wrote the config).
    reason = F.array(F.lit(REASON_ZERO_TOKENS)).alias("reason")
    if total["zero"]:
        kept = tables.read_path(spark, outputs[OUTPUT_TABLE]).select("doc_id")
        gone = src.select("doc_id").join(kept, "doc_id", "left_anti")
        outputs["removed"] = tables.write_removed(src.join(gone, "doc_id", "left_semi").select("*", reason), cfg, STAGE)
    else:
        # The usual case: nothing to write, only a previous run's rows of this stage to clear.
        outputs["removed"] = tables.clear_removed(spark, cfg, STAGE, src.limit(0).select("*", reason))
    audited = {}
    if audit is not None:
        audited["audit"] = audit_pkg.end(spark, cfg, audit, outputs[OUTPUT_TABLE], name, src_version)

    return StageReport(
        stage=STAGE,
        rows_in=total["docs"],
        rows_out=total["docs"] - total["zero"],
        removed={REASON_ZERO_TOKENS: total["zero"]} if total["zero"] else {},
        outputs=outputs,
        extra={
            "input_table": name,
            "tokens": total["tokens"],
            "tokens_by_source": tokens_by_source,
            "roundtrip_checked": total["rt_checked"],
            "roundtrip_mismatches": total["rt_bad"],
            "roundtrip_examples": examples,
            "tokenizer_fingerprint": tok.fingerprint,
            "vocab_size": tok.vocab_size,
            "eos_id": eos_id,
            "bos_id": bos_id,
            "engine": engine,
            **({"engine_note": f"tiktoken not used: {why_hf}"} if why_hf else {}),
            **audited,
        },
    )
