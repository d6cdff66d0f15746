"""Tokenize stage: the last document table of the chain -> ``tokenized`` (+ ``removed`` for empty documents).

Every document becomes ``[BOS] content EOS`` token ids (:mod:`udfs.tokenize`), encoded batch by batch in
``mapInArrow`` with the tokenizer loaded once per Python worker. Documents with no content tokens are
removed with reason ``tokenize.zero_tokens``. A seeded fraction of documents (chosen by a keyed hash of
``run.seed`` and ``doc_id``, so independent of partitioning) is decoded again and compared with its text;
mismatches are counted and a few kept as examples in the stage report. Any id outside ``[0, vocab)``
fails the stage before anything is written.

Threads: Spark runs one task per core and each task has its own Python worker, so the tokenizers Rust
pool is limited to ``tokenize.threads_per_task`` threads (default 1) per worker; cores x cores threads
would only add contention.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import chain, tables
from pipelines.config import TokenizeConfig, WinnowConfig
from pipelines.stage import StageReport
from udfs import tokenize as tok_udfs

STAGE = "tokenize"
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "text", "source")
OUTPUT_COLUMNS: tuple[str, ...] = ("doc_id", "source", "tokens", "n_tokens")
SIGNAL_COLUMNS: tuple[str, ...] = ("n_content_tokens", "n_bad_ids", "roundtrip_checked", "roundtrip_error")
REASON_ZERO_TOKENS = "tokenize.zero_tokens"
OUTPUT_TABLE = chain.stage(STAGE).main_table

_RT_BUCKETS = 1_000_000  # round-trip sample resolution: fraction is honoured to 1e-6


def input_table_name(cfg: WinnowConfig, spark: SparkSession | None = None) -> str:
    """The table tokenize reads: ``tokenize.input_table``, else the last document table of the chain
    (:func:`pipelines.tables.previous_document_table`)."""
    return tables.previous_document_table(cfg, STAGE, cfg.tokenize.input_table, spark)


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


def tokenize(df: DataFrame, tcfg: TokenizeConfig, seed: int = 0) -> DataFrame:
    """Add token ids and validation signals to every document.

    Args:
        df: documents with at least ``doc_id`` (string), ``text`` (string), ``source`` (string).
        tcfg: the ``tokenize`` config section.
        seed: ``run.seed``; picks the round-trip sample.

    Returns:
        ``df``'s columns plus ``tokens`` (array<int32>: [BOS] content EOS), ``n_tokens`` (int, tokens
        incl. EOS/BOS), ``n_content_tokens`` (int), ``n_bad_ids`` (int, ids outside the vocabulary),
        ``roundtrip_checked`` (boolean), ``roundtrip_error`` (string, null unless the decoded text differs).

    Raises:
        ValueError: a required input column is missing.
        TokenizerError: see :func:`special_ids`.
    """
    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    tok, eos_id, bos_id = special_ids(tcfg)
    spec, allow, threads, vocab = tcfg.tokenizer, tcfg.allow_download, tcfg.threads_per_task, tok.vocab_size
    threshold = int(round(tcfg.roundtrip_sample_fraction * _RT_BUCKETS))
    sample = F.pmod(F.xxhash64(F.lit(seed), F.col("doc_id")), F.lit(_RT_BUCKETS)) < F.lit(threshold)
    staged = df.withColumn("_rt_sample", sample)
    out_schema = T.StructType(
        list(df.schema.fields)
        + [
            T.StructField("tokens", T.ArrayType(T.IntegerType(), containsNull=False), False),
            T.StructField("n_tokens", T.IntegerType(), False),
            T.StructField("n_content_tokens", T.IntegerType(), False),
            T.StructField("n_bad_ids", T.IntegerType(), False),
            T.StructField("roundtrip_checked", T.BooleanType(), False),
            T.StructField("roundtrip_error", T.StringType(), True),
        ]
    )

    in_names = list(df.columns)
    arrow_schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in out_schema.fields])

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tok_udfs.set_thread_budget(threads)
        loaded = tok_udfs.load_tokenizer(spec, allow_download=allow)
        for batch in batches:
            texts = batch.column("text")
            tokens, n_content = tok_udfs.encode_documents(loaded, texts, eos_id=eos_id, bos_id=bos_id)
            checked = batch.column("_rt_sample").to_pylist()
            errors: list[str | None] = [None] * batch.num_rows
            offsets = tokens.offsets.to_numpy()
            flat = tokens.values.to_numpy(zero_copy_only=False)
            first = 1 if bos_id is not None else 0
            for i in (j for j, c in enumerate(checked) if c):  # the sampled ~1% only
                ids = flat[offsets[i] + first : offsets[i + 1] - 1].tolist()
                errors[i] = tok_udfs.roundtrip_mismatch(loaded, texts[i].as_py() or "", ids)
            cols = [batch.column(c) for c in in_names]
            yield pa.RecordBatch.from_arrays(
                [
                    *cols,
                    tokens,
                    pa.array(n_content + (1 + (bos_id is not None)), pa.int32()),
                    pa.array(n_content, pa.int32()),
                    pa.array(tok_udfs.ids_out_of_range(tokens, vocab), pa.int32()),
                    pa.array([bool(c) for c in checked], pa.bool_()),
                    pa.array(errors, pa.string()),
                ],
                schema=arrow_schema,
            )

    return staged.mapInArrow(encode, out_schema)


def _arrow_type(dt: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dt)


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read the input table, tokenize, write ``tokenized`` and this stage's ``removed`` rows.

    Returns:
        A :class:`StageReport` with ``removed = {"tokenize.zero_tokens": n}`` and in ``extra``: total
        tokens, tokens per source, round-trip sample size, mismatches and examples, tokenizer facts.

    Raises:
        MissingTableError: the input table does not exist.
        ValueError: the tokenizer produced ids outside its vocabulary (nothing is written).
    """
    tcfg = cfg.tokenize
    name = input_table_name(cfg, spark)
    src = tables.read_table(spark, cfg, name)
    src_version = tables.table_version(spark, cfg.table_path(name))
    tok, eos_id, bos_id = special_ids(tcfg)

    annotated = tokenize(src, tcfg, cfg.run.seed).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        zero = F.col("n_content_tokens") == 0
        by_source = (
            annotated.groupBy("source")
            .agg(
                F.count(F.lit(1)).alias("docs"),
                F.sum(zero.cast("long")).alias("zero"),
                F.sum(F.when(~zero, F.col("n_tokens")).otherwise(0).cast("long")).alias("tokens"),
                F.sum(F.col("n_bad_ids").cast("long")).alias("bad_ids"),
                F.sum(F.col("roundtrip_checked").cast("long")).alias("rt_checked"),
                F.sum(F.col("roundtrip_error").isNotNull().cast("long")).alias("rt_bad"),
            )
            .collect()
        )
        total = {k: sum(int(r[k] or 0) for r in by_source) for k in ("docs", "zero", "tokens", "bad_ids", "rt_checked", "rt_bad")}
        if total["bad_ids"]:
            raise ValueError(
                f"tokenize: tokenizer {tcfg.tokenizer!r} produced {total['bad_ids']} ids outside [0, {tok.vocab_size}); "
                "nothing written"
            )
        examples = []
        if total["rt_bad"] and tcfg.roundtrip_examples:
            rows = (
                annotated.filter(F.col("roundtrip_error").isNotNull())
                .select("doc_id", "source", "roundtrip_error")
                .orderBy("doc_id")
                .limit(tcfg.roundtrip_examples)
                .collect()
            )
            examples = [r.asDict() for r in rows]

        props = {
            "tokenizer": tcfg.tokenizer,
            "tokenizer_fingerprint": tok.fingerprint,
            "vocab_size": tok.vocab_size,
            "eos_id": eos_id,
            "bos_id": bos_id,
            "input_table": name,
            "input_version": src_version,
        }
        removed = annotated.filter(zero).drop(*SIGNAL_COLUMNS, "tokens", "n_tokens")
        removed = removed.withColumn("reason", F.array(F.lit(REASON_ZERO_TOKENS)))
        kept = annotated.filter(~zero).select(*OUTPUT_COLUMNS)
        outputs = tables.publish(spark, cfg, STAGE, {OUTPUT_TABLE: kept}, removed=removed, properties=props)
    finally:
        annotated.unpersist()

    return StageReport(
        stage=STAGE,
        rows_in=total["docs"],
        rows_out=total["docs"] - total["zero"],
        removed={REASON_ZERO_TOKENS: total["zero"]} if total["zero"] else {},
        outputs=outputs,
        extra={
            "input_table": name,
            "tokens": total["tokens"],
            "tokens_by_source": {str(r["source"]): int(r["tokens"] or 0) for r in by_source},
            "roundtrip_checked": total["rt_checked"],
            "roundtrip_mismatches": total["rt_bad"],
            "roundtrip_examples": examples,
            "tokenizer_fingerprint": tok.fingerprint,
            "vocab_size": tok.vocab_size,
            "eos_id": eos_id,
            "bos_id": bos_id,
        },
    )

