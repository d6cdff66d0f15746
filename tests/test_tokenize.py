"""Tokenize stage on Spark: exact ids, zero-token removals, table properties, input-table resolution."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runner import run_stage
from pipelines.tokenize.stage import input_table_name
from udfs.tokenize import pack_token_ids as pack

DOCS_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)
EOS = 50256


def doc(doc_id, text, source="web"):
    n = len(text or "")
    return (doc_id, text, source, None, {"k": "v"}, "in.jsonl", n, n, 0)


@pytest.fixture(scope="module")
def tokenized(spark, tmp_path_factory):
    cfg = load_config(overrides=[f"run.root={tmp_path_factory.mktemp('tok')}", "spark.shuffle_partitions=4",
                                 "pipeline.stages=[ingest, tokenize]", "tokenize.roundtrip_sample_fraction=1.0"])
    rows = [doc("d1", "Hello world", "a"), doc("d2", "a <|endoftext|> b", "b"), doc("d3", "Bonjour, café!", "b"),
            doc("e1", "", "a"), doc("e2", None, "a")]
    tables.write_table(spark.createDataFrame(rows, DOCS_SCHEMA), cfg, "documents")
    return cfg, run_stage(spark, cfg, "tokenize")


def test_ids_are_exact_with_one_eos_and_literal_special_text(spark, tokenized):
    cfg, report = tokenized
    got = spark.read.format("delta").load(cfg.table_path("tokenized"))
    expected = spark.createDataFrame(
        [("d1", "a", pack([15496, 995, EOS]), 3),
         ("d2", "b", pack([64, 1279, 91, 437, 1659, 5239, 91, 29, 275, EOS]), 10),
         ("d3", "b", pack([20682, 73, 454, 11, 40304, 0, EOS]), 7)],
        "doc_id string, source string, tokens binary, n_tokens int",
    )
    assertDataFrameEqual(got, expected, checkRowOrder=False)
    assert (report.rows_in, report.rows_out, report.removed) == (5, 3, {"tokenize.zero_tokens": 2})
    assert report.extra["tokens"] == 20 and report.extra["tokens_by_source"] == {"a": 3, "b": 17}
    assert (report.extra["roundtrip_checked"], report.extra["roundtrip_mismatches"]) == (5, 0)


def test_zero_token_documents_are_removed_with_full_row_and_reason(spark, tokenized):
    cfg, _ = tokenized
    removed = spark.read.format("delta").load(cfg.table_path("removed")).select("doc_id", "text", "source", "stage", "reason")
    expected = spark.createDataFrame(
        [("e1", "", "a", "tokenize", ["tokenize.zero_tokens"]), ("e2", None, "a", "tokenize", ["tokenize.zero_tokens"])],
        "doc_id string, text string, source string, stage string, reason array<string>",
    )
    assertDataFrameEqual(removed, expected, checkRowOrder=False)


def test_a_rerun_that_removes_nothing_clears_this_stages_rows_only(spark, make_cfg):
    cfg = make_cfg("pipeline.stages=[ingest, tokenize]")
    other = spark.createDataFrame([doc("x1", "kept by tokenize, removed by dedup")], DOCS_SCHEMA)
    tables.write_removed(other.selectExpr("*", "array('dedup.exact') AS reason"), cfg, "dedup")
    tables.write_table(spark.createDataFrame([doc("d1", "Hello"), doc("e1", "")], DOCS_SCHEMA), cfg, "documents")
    run_stage(spark, cfg, "tokenize")
    removed = cfg.table_path("removed")
    assert sorted(spark.read.format("delta").load(removed).select("doc_id", "stage").collect()) == [
        ("e1", "tokenize"), ("x1", "dedup")]
    tables.write_table(spark.createDataFrame([doc("d1", "Hello")], DOCS_SCHEMA), cfg, "documents")
    assert run_stage(spark, cfg, "tokenize").removed == {}
    assert spark.read.format("delta").load(removed).select("doc_id", "stage").collect() == [("x1", "dedup")]
    version = tables.table_version(spark, removed)
    run_stage(spark, cfg, "tokenize")  # nothing to clear: no commit
    assert tables.table_version(spark, removed) == version


def test_table_properties_record_tokenizer_facts(spark, tokenized):
    cfg, _ = tokenized
    props = tables.table_properties(spark, cfg.table_path("tokenized"))
    assert props["tokenizer"] == "builtin:gpt2" and props["vocab_size"] == "50257"
    assert props["eos_id"] == "50256" and props["bos_id"] == "null" and props["input_table"] == "documents"
    assert len(props["tokenizer_fingerprint"]) == 64
    assert props["engine"] == "tiktoken"  # auto picks tiktoken for GPT-2


def test_the_hf_engine_writes_the_same_table(spark, tokenized, make_cfg):
    cfg, report = tokenized
    hf_cfg = make_cfg("pipeline.stages=[ingest, tokenize]", "tokenize.roundtrip_sample_fraction=1.0", "tokenize.engine=hf")
    src = spark.read.format("delta").load(cfg.table_path("documents"))
    tables.write_table(src, hf_cfg, "documents")
    hf_report = run_stage(spark, hf_cfg, "tokenize")
    assert (report.extra["engine"], hf_report.extra["engine"]) == ("tiktoken", "hf")
    assertDataFrameEqual(spark.read.format("delta").load(hf_cfg.table_path("tokenized")),
                         spark.read.format("delta").load(cfg.table_path("tokenized")), checkRowOrder=False)
    assert tables.table_properties(spark, hf_cfg.table_path("tokenized"))["engine"] == "hf"


def test_the_runtime_audit_fails_the_stage_when_tiktoken_differs(spark):
    from pipelines.tokenize.config import TokenizeConfig
    from pipelines.tokenize.stage import _executor_failure, tokenize

    def without_the(loaded):  # nested, so Spark ships it by value to the workers
        # GPT-2's ranks without the token "the": tiktoken then splits "the" where the HF tokenizer does not.
        from udfs import tokenize_tiktoken as TT

        compat = TT.tiktoken_compatibility(loaded.tokenizer, verify_tokens=False)
        ranks = {k: v for k, v in compat.ranks.items() if k != b"the"}
        return TT.build_encoding(loaded.spec, TT.Compatibility(True, pattern=compat.pattern, ranks=ranks))

    df = spark.createDataFrame([("d1", "the cat", "a"), ("d2", "dog", "a")], "doc_id string, text string, source string")
    out = tokenize(df, TokenizeConfig(roundtrip_sample_fraction=1.0), engine="tiktoken", encoding_factory=without_the)
    with pytest.raises(Exception, match=r"tokenize.engine=tiktoken gave ids different from the Hugging Face tokenizer "
                                        r"'builtin:gpt2' on doc_id 'd1'") as err:
        out.write.format("noop").mode("overwrite").save()
    failure = _executor_failure(err.value)
    assert failure is not None and str(failure).startswith("tokenize.engine=tiktoken gave ids different")
    assert "Set tokenize.engine=hf" in str(failure)


def test_engine_tiktoken_for_a_tokenizer_it_cannot_run_fails_before_any_job(spark, make_cfg, tmp_path):
    from pipelines.core.preflight import PreflightError
    from pipelines.tokenize.hooks import check_tokenizer
    from tests.synthetic_vocab import build_70k_tokenizer

    path = build_70k_tokenizer(tmp_path / "tokenizer.json")
    cfg = make_cfg("pipeline.stages=[ingest, tokenize]", f"tokenize.tokenizer={path}", "tokenize.engine=tiktoken")
    with pytest.raises(PreflightError, match=r"tokenize.engine='tiktoken' cannot run tokenizer"):
        check_tokenizer(cfg)


@pytest.mark.parametrize(("stages", "forced", "expected"), [
    ("[ingest, dedup, filter, refs, tokenize]", None, "refs_checked"),
    ("[ingest, dedup, tokenize, shard]", None, "deduped"),
    ("[ingest, tokenize]", None, "documents"),
    ("[ingest, refs, tokenize]", "filtered", "filtered"),
])
def test_input_table_follows_the_chain(stages, forced, expected):
    over = [f"pipeline.stages={stages}"] + ([f"tokenize.input_table={forced}"] if forced else [])
    assert input_table_name(load_config(overrides=over)) == expected


def test_unknown_eos_token_fails_before_any_job(spark, make_cfg):
    from udfs.tokenize import TokenizerError

    cfg = make_cfg("pipeline.stages=[ingest, tokenize]", "tokenize.eos_token=<eos>")
    tables.write_table(spark.createDataFrame([doc("d1", "x")], DOCS_SCHEMA), cfg, "documents")
    with pytest.raises(TokenizerError, match=r"tokenize.eos_token='<eos>' is not in tokenizer 'builtin:gpt2'"):
        run_stage(spark, cfg, "tokenize")
