"""The gate's shard reader against the shard stage's writer, the draw, and the variant checks."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket

import numpy as np
import pytest

from pipelines.core.lock import RunLockedError
from pipelines.gate import shards
from pipelines.gate.runner import open_variants
from pipelines.gate.shards import GateInputError, GateUsageError
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


@pytest.mark.parametrize("manifest, why", [("{}", "key 'tokenizer' missing"), ("\x00\x01", "Expecting value")])
def test_variant_with_a_foreign_manifest_says_what_is_wrong(tmp_path, manifest, why):
    (tmp_path / "manifest.json").write_text(manifest)
    with pytest.raises(GateInputError, match=f"is not a Winnow manifest \\({why}.*re-run the shard stage"):
        shards.open_variant(str(tmp_path))


def test_variants_of_two_tokenizers_are_refused_naming_both(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    make_variant(tmp_path / "b", random_docs(5, seed=4), fingerprint="another")
    with pytest.raises(GateInputError, match=r"variants '.*a' and '.*b' have different tokenizers: tokenizer.fingerprint"):
        open_variants([str(tmp_path / "a"), str(tmp_path / "b")])


def test_one_variant_is_not_a_gate(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    with pytest.raises(GateUsageError, match="two or more variants"):
        open_variants([str(tmp_path / "a")])


def test_one_shard_set_given_twice_is_refused_under_any_path(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    for second in (tmp_path / "a", tmp_path / "a" / "shards"):
        with pytest.raises(GateUsageError, match=r"gate.variants: '.*a' and '.*' are the same shard set"):
            open_variants([str(tmp_path / "a"), str(second)])


def test_two_folders_of_one_name_get_two_labels(tmp_path):
    make_variant(tmp_path / "x" / "a", random_docs(5, seed=4))
    make_variant(tmp_path / "y" / "a", random_docs(5, seed=5))
    assert [v.name for v in open_variants([str(tmp_path / "x" / "a"), str(tmp_path / "y" / "a")])] == ["a", "a_1"]


def test_budget_error_names_every_variant_too_short(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=3))
    make_variant(tmp_path / "b", random_docs(60, seed=3))
    make_variant(tmp_path / "c", random_docs(4, seed=4))
    vs = open_variants([str(tmp_path / x) for x in "abc"])
    with pytest.raises(GateInputError) as e:
        shards.check_budget(vs, 1000, 16)
    msg = str(e.value)
    assert f"variant {str(tmp_path / 'a')!r} holds {vs[0].tokens('train')} train tokens" in msg
    assert f"variant {str(tmp_path / 'c')!r} holds {vs[2].tokens('train')} train tokens" in msg
    assert str(tmp_path / "b") not in msg and "\n" not in msg
    assert f"lower gate.tokens to at most {min(vs[0].tokens('train'), vs[2].tokens('train')) - 1}" in msg
    shards.check_budget(vs, min(v.tokens("train") for v in vs) - 1, 16)  # the largest budget all hold


def _lock(root, pid: int, beat: str | None = None) -> None:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    (root / "_lock.json").write_text(json.dumps({"owner": "ana", "host": socket.gethostname(), "pid": pid,
                                                 "started_at": now, "heartbeat_at": beat or now,
                                                 "command": "pipeline.py --set run.root=x", "token": "t"}))


def test_variant_of_a_run_in_progress_is_refused_naming_the_owner(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    make_variant(tmp_path / "b", random_docs(5, seed=5))
    _lock(tmp_path / "b", os.getpid())
    for given in (tmp_path / "b", tmp_path / "b" / "shards"):
        with pytest.raises(RunLockedError, match=rf"variant '.*b.*': its run is in progress \(pid {os.getpid()} on "
                                                 r"host .* \(user ana\).*; lock .*_lock.json\)"):
            open_variants([str(tmp_path / "a"), str(given)])
    assert not (tmp_path / "a" / "_lock.json").exists()  # the gate only reads: it takes no variant's lock


def test_stale_lock_of_a_variant_does_not_stop_the_gate(tmp_path):
    make_variant(tmp_path / "a", random_docs(5, seed=4))
    make_variant(tmp_path / "b", random_docs(5, seed=5))
    _lock(tmp_path / "b", 2**22 + 12345)  # no such process on this host: a crashed run
    assert [v.name for v in open_variants([str(tmp_path / "a"), str(tmp_path / "b")])] == ["a", "b"]


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
