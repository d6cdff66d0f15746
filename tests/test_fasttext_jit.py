"""udfs/fasttext_jit.py: the compiled predict gives fastText's labels and probabilities bit for bit."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pytest

from udfs import fasttext_jit, langid


@pytest.fixture(scope="module")
def models():
    path = langid.default_model_path()
    return langid.load_model(path), fasttext_jit.load(path)


def _assert_same(ft, cm, texts: list[str], k: int, threshold: float = 0.0) -> None:
    want_labels, want_probs = ft.predict(texts, k=k, threshold=threshold)
    got_labels, got_probs = cm.predict(texts, k=k, threshold=threshold)
    assert len(got_labels) == len(texts)
    for i, text in enumerate(texts):
        assert got_labels[i] == want_labels[i], text
        assert got_probs[i].dtype == np.float32
        assert got_probs[i].tobytes() == np.asarray(want_probs[i], np.float32).tobytes(), text


EDGE = ["", " ", "\t\v\f\r \x00", "hello world", "a", "</s>", "x </s> y z", "__label__en", "__label__en word",
        "__label__xx word", "word __label__", "supercalifragilistic expialidocious", "Здравствуй мир",
        "日本語のテキストです", "\U0001f600 emoji \U00010348", "é" * 300, "ab\x00cd", "mixed ελληνικά and English",
        "12345 678.90 -- ++", " ".join(["repeated"] * 500)]


@pytest.mark.parametrize("k", [1, 2, 3, 176, 200])
@pytest.mark.parametrize("threshold", [0.0, 0.05])
def test_edge_cases_match_fasttext(models, k, threshold):
    _assert_same(*models, EDGE, k, threshold)


def test_random_text_matches_fasttext(models):
    rng = np.random.default_rng(7)
    # ASCII, Latin-1, Cyrillic, Greek, kana, astral characters, fastText's separators (NUL included),
    # and the markers its reader gives a meaning to
    alphabet = ([chr(c) for c in [*range(32, 127), *range(0xA0, 0x600), *range(0x3040, 0x30FF)]]
                + ["\U0001f600", "\U00010348", "\x00", "\t", "\v", "\f", "\r", "</s>", "__label__"])
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 80))) for _ in range(3000)]
    for k in (1, 3):
        _assert_same(*models, texts, k)


def test_real_text_matches_fasttext(models, shared_data):
    with gzip.open(shared_data / "multilingual_langid" / "lingua_sentences_75langs_part_a.tsv.gz", "rt") as f:
        sentences = [line.rstrip("\n").partition("\t")[2] for line in f][:20000]
    pages = []
    with open(shared_data / "web_crawl" / "dolma_ccnet_cc_en_head-0091.jsonl") as f:
        pages = [json.loads(line)["text"] for line in f][:300]
    lines = [ln for p in pages for ln in p.split("\n") if ln]
    texts = sentences + langid.preprocess(pa.array(pages), 1000) + lines
    for k in (1, 3):
        _assert_same(*models, texts, k)


def test_langid_gives_the_same_with_either_model(models, shared_data):
    ft, cm = models
    with open(shared_data / "web_crawl" / "dolma_ccnet_cc_en_head-0174.jsonl") as f:
        pages = pa.array([json.loads(line)["text"] for line in f][:300])
    prepared = langid.preprocess(pages, 1000)
    for k in (1, 3):
        want = langid.predict(ft, prepared, k=k)
        got = langid.predict(cm, prepared, k=k)
        assert all(a.equals(b) for a, b in zip(want, got, strict=True))
    want = langid.identify(ft, pages, 1000, 4, confident=0.8)
    got = langid.identify(cm, pages, 1000, 4, confident=0.8)
    assert all(a.equals(b) for a, b in zip(want, got, strict=True))
    assert langid.load_predictor(langid.default_model_path()) is cm


def test_refuses_what_fasttext_refuses(models):
    _, cm = models
    with pytest.raises(ValueError, match="one line"):
        cm.predict(["two\nlines"])
    with pytest.raises(ValueError, match="k must be"):
        cm.predict(["text"], k=0)


def _write_model(path, loss: int = 1, quant: bool = False, dim: int = 10) -> None:
    """A fastText model file written field by field (the layout ``FastText::loadModel`` reads): random
    weights, a small vocabulary, three labels; ``quant``: a product-quantized input matrix (4-float
    sub-vectors, so the last one is shorter; norms quantized) over a pruned bucket index."""
    import struct

    rng = np.random.default_rng(11)
    words = [b"</s>", b"hello", b"world", b"foo", b"ab", "caf\u00e9".encode()]
    labels = [b"__label__x", b"__label__y", b"__label__z"]
    bucket, minn, maxn = 997, 2, 4
    out = [struct.pack("<ii", 793712314, 12),
           struct.pack("<12id", dim, 5, 5, 1, 5, 1, loss, 3, bucket, minn, maxn, 100, 1e-4)]
    pruned = rng.choice(bucket, 300, replace=False) if quant else np.zeros(0, np.int64)
    out.append(struct.pack("<iiiqq", len(words) + len(labels), len(words), len(labels), 1000,
                           len(pruned) if quant else -1))
    for i, w in enumerate(words + labels):
        out.append(w + b"\0" + struct.pack("<qb", 100 - i, int(i >= len(words))))
    for j, b in enumerate(pruned):
        out.append(struct.pack("<ii", b, j))
    rows = len(words) + (len(pruned) if quant else bucket)
    out.append(struct.pack("<?", quant))
    if quant:
        dsub = 4
        nsubq, last = -(-dim // dsub), dim % dsub or dsub
        out.append(struct.pack("<?qqi", True, rows, dim, rows * nsubq))
        out.append(rng.integers(0, 256, rows * nsubq, dtype=np.uint8).tobytes())
        out.append(struct.pack("<4i", dim, nsubq, dsub, last) + rng.normal(size=dim * 256).astype(np.float32).tobytes())
        out.append(rng.integers(0, 256, rows, dtype=np.uint8).tobytes())
        out.append(struct.pack("<4i", 1, 1, 1, 1) + rng.uniform(0.5, 2, 256).astype(np.float32).tobytes())
    else:
        out.append(struct.pack("<qq", rows, dim) + rng.normal(size=rows * dim).astype(np.float32).tobytes())
    out.append(struct.pack("<?qq", False, len(labels), dim) + rng.normal(size=len(labels) * dim).astype(np.float32).tobytes())
    path.write_bytes(b"".join(out))


TOY = ["hello world", "foo ab caf\u00e9", "unseen words here", "", "</s> hello", "__label__x hello", "helloworld",
       "h\u00e9llo w\u00f6rld \U0001f600", "ab " * 40]


@pytest.mark.parametrize("quant", [False, True])
def test_dense_and_quantized_hierarchical_softmax_models_match(tmp_path, quant):
    import fasttext

    path = tmp_path / "toy.bin"
    _write_model(path, quant=quant)
    ft, cm = fasttext.load_model(str(path)), fasttext_jit.load(str(path))
    assert cm is not None
    for k in (1, 2, 3, 5):
        _assert_same(ft, cm, TOY, k)


def test_other_models_stay_with_fasttext(tmp_path):
    _write_model(tmp_path / "softmax.bin", loss=3)
    assert fasttext_jit.load(str(tmp_path / "softmax.bin")) is None
    assert not hasattr(langid.load_predictor(str(tmp_path / "softmax.bin")), "predict_flat")
    with pytest.raises(FileNotFoundError):
        fasttext_jit.load(str(tmp_path / "missing.ftz"))


def test_word_table_kept_across_calls_and_restarted(models, monkeypatch):
    ft, cm = models
    rng = np.random.default_rng(5)
    letters = list("abcdefghijklmnopqrstuvwxyzäöüß")
    words = ["".join(rng.choice(letters, rng.integers(1, 14))) for _ in range(400)]
    batches = [[" ".join(rng.choice(words, 12)) for _ in range(50)] for _ in range(4)]
    monkeypatch.setattr(fasttext_jit, "MAX_WORDS", len(cm.labels) + 7_300)  # restarts every call or two
    for texts in batches + batches:
        _assert_same(ft, cm, texts, 2)
