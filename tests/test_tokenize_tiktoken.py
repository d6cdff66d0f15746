"""The tiktoken engine gives the Hugging Face tokenizer's ids: every shared-sample document, hard cases, eligibility."""

from __future__ import annotations

import csv
import gzip
import json

import pyarrow as pa
import pytest

from tests.synthetic_vocab import build_70k_tokenizer
from udfs import tokenize as T
from udfs import tokenize_tiktoken as TT

EOS = 50256
HARD_CASES = [
    "a <|endoftext|> b",
    "<|endoftext|><|endoftext|>",
    "x<|endoftext|>",
    " " * 5000,
    "a" + " " * 4097 + "b",
    "\n" * 300 + "x" + "\t \t\n\n  \u3000 \u00a0" * 200,
    "trailing spaces   \n   ",
    "line one\r\nline two\r\n\r\n  \r\n",
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 and flag \U0001f3f4\U000e0067\U000e0062\U000e007f",
    "\U0001f44d\U0001f3fd skin tone, keycap 1\ufe0f\u20e3",
    "cafe\u0301 na\u00efve \u00c5ngstr\u00f6m",
    "I'm you're he'll we'd it's IT'S they've 'S",
    "12345678901234567890 3.14159 1,000,000",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u4e2d\u6587\u53e5\u5b50\u3002\ud55c\uad6d\uc5b4",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \u0440\u0443\u0441\u0441\u043a\u0438\u0439",
    "zero\u200bwidth\ufeffmarks\u200c\u200d",
    "\x00\x01 control \x7f\x85 chars",
    "\ufffd replacement \U0010ffff last plane",
    "",
    f"the sentinel is text: a{TT.SENTINEL}b {TT.SENTINEL}",
]


@pytest.fixture(scope="module")
def gpt2():
    return T.load_tokenizer("builtin:gpt2")


@pytest.fixture(scope="module")
def enc(gpt2):
    return TT.encoding_for(gpt2)


def _hf(tok, texts):
    return [list(ids) for ids in T.encode_ids(tok, texts)]


def _tt(tok, enc, texts):
    return [ids.tolist() for ids in T.encode_ids(tok, texts, enc)]


def _shared_texts(shared):
    from bench.tokenize_corpus import sample_texts

    texts = [t for _, t in sample_texts(shared)]
    with gzip.open(shared / "scientific" / "unarxive_arXiv_src_2212_086_part_a.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            paper = json.loads(line)
            texts += [p["text"] for p in paper.get("body_text", [])] + [str(paper.get("abstract", ""))]
    with gzip.open(shared / "multilingual_langid" / "lingua_sentences_75langs_part_a.tsv.gz", "rt", encoding="utf-8") as f:
        texts += [row[1] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if len(row) > 1]
    texts += list(json.loads((shared / "multilingual_langid" / "whatlang_examples.json").read_text()).values())
    with open(shared / "near_duplicates" / "clough_stevenson_short_answer_plagiarism.jsonl", encoding="utf-8") as f:
        texts += [json.loads(line)["text"] for line in f if line.strip()]
    texts += [p.read_text(encoding="utf-8") for p in sorted((shared / "scientific").glob("*.nxml"))]
    return texts


def test_gpt2_is_eligible_and_built_from_its_own_files(gpt2, enc):
    compat = TT.tiktoken_compatibility(gpt2.tokenizer)
    assert compat.ok and compat.reason == "" and compat.pattern == TT.GPT2_PATTERN
    # every byte and merge result; <|endoftext|> (a vocabulary entry no merge produces) is left out
    assert len(compat.ranks) == 50_256 and b"<|endoftext|>" not in compat.ranks
    # one special token, never allowed: only there so tiktoken's special-token search is not empty
    assert enc.special_tokens_set == {TT.SENTINEL} and enc.name == "winnow:builtin:gpt2"
    assert TT.resolve_engine(gpt2, "auto") == ("tiktoken", "")


def test_every_document_of_the_shared_samples_gets_the_same_ids(gpt2, enc, shared_data):
    texts = _shared_texts(shared_data)
    assert len(texts) > 38_000
    hf, tt = _hf(gpt2, texts), _tt(gpt2, enc, texts)
    diff = [i for i, (a, b) in enumerate(zip(hf, tt, strict=True)) if a != b]
    assert diff == [], f"{len(diff)} documents differ, first: {texts[diff[0]][:80]!r}"


@pytest.mark.parametrize("text", HARD_CASES, ids=range(len(HARD_CASES)))
def test_hard_cases_get_the_same_ids(gpt2, enc, text):
    assert _tt(gpt2, enc, [text]) == _hf(gpt2, [text])


def test_gpt2_split_gives_the_pieces_of_gpt2_pattern(gpt2, enc):
    """The form tiktoken runs (:data:`GPT2_SPLIT`) against the tokenizer's own regex, on random strings of the
    characters where the two could part: whitespace runs of every kind and length before letters, digits,
    punctuation, apostrophes and the end of the text."""
    import random

    import tiktoken

    assert enc._pat_str == TT.GPT2_SPLIT != TT.GPT2_PATTERN
    compat = TT.tiktoken_compatibility(gpt2.tokenizer, verify_tokens=False)
    ref = tiktoken.Encoding(name="reference", pat_str=TT.GPT2_PATTERN, mergeable_ranks=compat.ranks,
                            special_tokens={TT.SENTINEL: TT.SENTINEL_ID})
    alphabet = [" ", " ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0b", "'", "'s", "'ll", "'re",
                "a", "Ab", "\u00e9t\u00e9", "\u65e5", "1", "23", "\u0663", ".", "!?", "-", "\u2014", "\U0001f600",
                "\u0301", "\x00", "_"]
    rng = random.Random(7)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(20_000)]
    none: frozenset[str] = frozenset()
    for text in texts + HARD_CASES:
        assert enc.encode_ordinary(text) == ref.encode_ordinary(text), repr(text)
    assert _tt(gpt2, enc, texts[:500]) == _hf(gpt2, texts[:500])
    assert enc.encode(HARD_CASES[0], allowed_special=none, disallowed_special=()) == ref.encode_ordinary(HARD_CASES[0])


def test_literal_special_token_is_text_on_both_engines(gpt2, enc):
    tokens, _ = T.encode_documents(gpt2, pa.array(["a <|endoftext|> b"]), eos_id=EOS, engine=enc)
    assert T.token_lists(tokens) == [[64, 1279, 91, 437, 1659, 5239, 91, 29, 275, EOS]]


def test_invalid_utf8_and_lone_surrogates_become_u_fffd_on_both_engines(gpt2, enc):
    bad = pa.array([b"ok \xff\xfe end", b"cut \xe2\x82", None], pa.binary()).view(pa.string())
    texts = T.batch_texts(bad)
    assert texts == ["ok \ufffd\ufffd end", "cut \ufffd", ""]
    assert _tt(gpt2, enc, texts) == _hf(gpt2, texts)
    lone = ["a\ud800b", "pair \ud83d\ude00 ok", "\udfff"]
    assert _tt(gpt2, enc, lone) == _hf(gpt2, lone) == _hf(gpt2, ["a\ufffdb", "pair \U0001f600 ok", "\ufffd"])


def test_the_same_regex_as_a_split_pre_tokenizer_is_eligible_too(gpt2, tmp_path):
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    tok = Tokenizer.from_str(gpt2.tokenizer.to_str())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(TT.GPT2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.save(str(tmp_path / "split.json"))
    loaded = T.load_tokenizer(str(tmp_path / "split.json"))
    assert TT.resolve_engine(loaded, "tiktoken") == ("tiktoken", "")
    enc = TT.encoding_for(loaded)
    assert _tt(loaded, enc, HARD_CASES) == _hf(loaded, HARD_CASES) == _hf(T.load_tokenizer("builtin:gpt2"), HARD_CASES)


def test_a_vocab_whose_merges_tiktoken_would_not_follow_keeps_the_hf_engine(tmp_path):
    loaded = T.load_tokenizer(str(build_70k_tokenizer(tmp_path / "tokenizer.json")))
    engine, why = TT.resolve_engine(loaded, "auto")
    assert engine == "hf" and "is not its own BPE encoding" in why
    with pytest.raises(T.TokenizerError, match=r"tokenize.engine='tiktoken' cannot run tokenizer .* allowed for it: "
                                              r"tokenize.engine=auto or hf"):
        TT.resolve_engine(loaded, "tiktoken")
    assert TT.resolve_engine(loaded, "hf") == ("hf", "")


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda tok: setattr(tok, "normalizer", __import__("tokenizers").normalizers.Lowercase()), "it has a normalizer"),
    (lambda tok: setattr(tok, "pre_tokenizer", __import__("tokenizers").pre_tokenizers.ByteLevel(add_prefix_space=True)),
     "adds a prefix space"),
    (lambda tok: tok.add_tokens(["hello world"]), "non-special added tokens"),
])
def test_other_tokenizer_shapes_are_not_eligible(gpt2, tmp_path, edit, reason):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(gpt2.tokenizer.to_str())
    edit(tok)
    compat = TT.tiktoken_compatibility(tok)
    assert not compat.ok and reason in compat.reason


def test_a_wordpiece_tokenizer_is_not_eligible():
    from tokenizers import Tokenizer, models

    compat = TT.tiktoken_compatibility(Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]")))
    assert not compat.ok and compat.reason == "its model is 'WordPiece', not BPE"
