"""The gate's shard reader against the shard stage's writer, the draw, and the variant checks."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.gate import shards
from pipelines.gate.runner import open_variants
from pipelines.gate.shards import GateInputError
from tests.gate_shards import make_variant, random_docs


def test_reader_returns_the_documents_the_writer_wrote(tmp_path):
    docs = random_docs(120, seed=1)
    written = make_variant(tmp_path / "a", docs, validation=10, shard_docs=40)
    v = shards.open_variant(str(tmp_path / "a"))
    assert v.name == "a" and v.root == tmp_path / "a" / "shards"
    assert [d.tolist() for d in shards.documents(v, "train")] == written
    assert v.tokens("train") == sum(map(len, written)) and len(shards.documents(v, "validation")) == 10
    # the shard folder itself is a variant too
    assert shards.open_variant(str(tmp_path / "a" / "shards")).name == "a"


def test_draw_packs_megatron_samples_from_a_seeded_document(tmp_path):
    written = make_variant(tmp_path / "a", random_docs(60, seed=2))
    v = shards.open_variant(str(tmp_path / "a"))
    s = shards.draw(v, tokens=200, seq_len=16, seed=7)
    assert s.shape == (12, 17) and s.dtype == np.int32
    assert np.array_equal(s[1:, 0], s[:-1, -1])  # consecutive samples share one token
    first = int(np.random.default_rng(7).integers(len(written)))
    stream = np.concatenate([np.array(d) for d in written[first:] + written[:first]])
    assert np.array_equal(np.concatenate([s[:, :-1].ravel(), s[-1:, -1]]), stream[: 12 * 16 + 1])
    assert np.array_equal(shards.draw(v, 200, 16, 7), s) and not np.array_equal(shards.draw(v, 200, 16, 8), s)


def test_budget_larger_than_the_variant_names_the_key(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=3))
    v = shards.open_variant(str(tmp_path / "a"))
    with pytest.raises(GateInputError, match=r"gate.tokens=100000: variant .* holds \d+ train tokens"):
        shards.draw(v, 100_000, 16, 0)


def test_variant_without_shards_names_the_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(GateInputError, match="no manifest.json in .*empty"):
        shards.open_variant(str(tmp_path / "empty"))


def test_variants_of_two_tokenizers_are_refused_naming_both(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    make_variant(tmp_path / "b", random_docs(5, seed=4), fingerprint="another")
    with pytest.raises(GateInputError, match=r"variants '.*a' and '.*b' have different tokenizers: tokenizer.fingerprint"):
        open_variants([str(tmp_path / "a"), str(tmp_path / "b")])


def test_one_variant_is_not_a_gate(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    with pytest.raises(GateInputError, match="two or more variants"):
        open_variants([str(tmp_path / "a")])


def test_same_folder_twice_gets_two_labels(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    assert [v.name for v in open_variants([str(tmp_path / "a"), str(tmp_path / "a")])] == ["a", "a_1"]


def test_wavy_control_draw_holds_the_same_documents_in_another_order(tmp_path):
    written = make_variant(tmp_path / "a", random_docs(30, seed=5))
    v = shards.open_variant(str(tmp_path / "a"))
    total = sum(map(len, written))
    tokens = (total - 1) // 16 * 16  # the window holds every document
    a = shards.draw(v, tokens, 16, 3)
    b = shards.draw(v, tokens, 16, 3, doc_order_seed=3)
    assert a.shape == b.shape and not np.array_equal(a, b)
    counts = np.bincount(np.concatenate(written), minlength=50257)
    for s in (a, b):
        drawn = np.bincount(np.concatenate([s[:, :-1].ravel(), s[-1:, -1]]), minlength=50257)
        assert np.abs(counts - drawn).sum() < 16 + 1  # at most the cut tail differs
