"""Shard stage on Spark: determinism (1 vs 4 partitions, re-run), balance, shuffle quality, verify, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from jobs import verify as verify_job
from pipelines import tables
from pipelines.config import load_config
from pipelines.stage import run_stage
from pipelines.verify import verify
from udfs import megatron
from udfs.shuffle_quality import shuffle_key

EOS = 50256
N_DOCS = 6000
TOK_SCHEMA = "doc_id string, source string, tokens array<int>, n_tokens int"


def tokenized_rows(n: int, seed: int = 0) -> list[tuple]:
    """``n`` documents, the first half from source ``a`` and the rest from ``b`` (fed in source order)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ids = rng.integers(0, 50_000, size=int(rng.integers(1, 13))).tolist() + [EOS]
        rows.append((f"d{i:05d}", "a" if i < n // 2 else "b", ids, len(ids)))
    return rows


def gpt2_props() -> dict:
    from udfs.tokenize import load_tokenizer

    tok = load_tokenizer("builtin:gpt2")
    return {"tokenizer": "builtin:gpt2", "tokenizer_fingerprint": tok.fingerprint, "vocab_size": tok.vocab_size,
            "eos_id": EOS, "bos_id": None, "input_table": "documents", "input_version": 0}


def shard_cfg(root: Path, *extra: str, partitions: int = 4):
    return load_config(overrides=[f"run.root={root}", f"spark.shuffle_partitions={partitions}", "shard.num_shards=3",
                                  "shard.seq_len=64", "shard.mds_size_limit=4096", *extra])


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """The same tokenized table sharded with 1 and with 4 partitions, and the first run repeated."""
    base = tmp_path_factory.mktemp("shard")
    rows = tokenized_rows(N_DOCS)
    one = shard_cfg(base / "run", f"shard.output={base / 'out1'}", partitions=1)
    tables.write_table(spark.createDataFrame(rows, TOK_SCHEMA).repartition(3), one, "tokenized", properties=gpt2_props())
    four = shard_cfg(base / "run", f"shard.output={base / 'out4'}", partitions=4)
    r1 = run_stage(spark, one, "shard")
    first_manifest = (base / "out1" / "manifest.json").read_bytes()
    r4 = run_stage(spark, four, "shard")
    again = run_stage(spark, one, "shard")
    return {"rows": rows, "base": base, "one": r1, "four": r4, "again": again, "first_manifest": first_manifest}


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def test_one_and_four_partitions_give_byte_identical_shards(runs):
    m1, m4 = manifest(runs["base"] / "out1"), manifest(runs["base"] / "out4")
    assert m1["files"] == m4["files"]
    for f in m1["files"]:
        assert (runs["base"] / "out1" / f["path"]).read_bytes() == (runs["base"] / "out4" / f["path"]).read_bytes()


def test_rerun_gives_an_identical_manifest(runs):
    assert (runs["base"] / "out1" / "manifest.json").read_bytes() == runs["first_manifest"]


def test_manifest_totals_balance_and_per_file_facts(runs):
    m = manifest(runs["base"] / "out1")
    tokens = sum(r[3] for r in runs["rows"])
    assert m["dtype"] == "uint16" and m["seed"] == 42 and m["tokenizer"]["eos_id"] == EOS
    assert (m["totals"]["documents"], m["totals"]["tokens"], m["totals"]["shards"]) == (N_DOCS, tokens, 3)
    longest = max(r[3] for r in runs["rows"])
    assert m["balance"]["longest_document_tokens"] == longest
    assert m["balance"]["max_tokens"] - m["balance"]["min_tokens"] <= longest
    kinds = sorted({(f["format"], f["kind"]) for f in m["files"]})
    assert kinds == [("mds", "index"), ("mds", "mds"), ("megatron", "bin"), ("megatron", "idx")]
    assert m["totals"]["mds_samples"] * 64 + m["totals"]["mds_dropped_tokens"] == tokens
    assert m["totals"]["mds_dropped_tokens"] < 3 * 64
    shares = m["token_share_by_source"]
    assert set(shares) == {"a", "b"} and abs(sum(shares.values()) - 1) < 1e-12
    assert set(m["input_tables"]) == {"tokenized", "documents"}


def test_two_sources_fed_in_order_come_out_mixed(runs):
    q = manifest(runs["base"] / "out1")["shuffle_quality"]
    assert q["full_windows"] == 6
    assert q["max_deviation_sigmas"] <= 3.0
    # P(run >= 20) for a fair coin over 6,000 documents is about 6000 / 2^20 < 0.6%
    assert 5 <= q["longest_same_source_run"] < 20


def test_megatron_shards_hold_every_document_once_in_shuffled_order(runs):
    out = runs["base"] / "out1" / "megatron"
    docs = []
    for k in range(3):
        idx = megatron.decode_index((out / f"winnow_{k:05d}.idx").read_bytes())
        docs += [s.tolist() for s in megatron.split_bin(idx, (out / f"winnow_{k:05d}.bin").read_bytes())]
    original = [r[2] for r in runs["rows"]]
    assert sorted(docs) == sorted(original) and docs != original


def test_verify_passes_and_catches_a_flipped_byte(runs, tmp_path):
    assert verify(str(runs["base"] / "out1")).problems == []
    copy = tmp_path / "copy"
    shutil.copytree(runs["base"] / "out1", copy)
    with open(copy / "megatron" / "winnow_00001.bin", "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    assert verify_job.main(["--root", str(copy)]) == 1
    assert verify_job.main(["--root", str(runs["base"] / "out1")]) == 0


def test_stream_is_in_keyed_hash_order_and_another_seed_gives_another(runs):
    out = runs["base"] / "out1" / "megatron"
    got = []
    for k in range(3):
        idx = megatron.decode_index((out / f"winnow_{k:05d}.idx").read_bytes())
        got += [tuple(s.tolist()) for s in megatron.split_bin(idx, (out / f"winnow_{k:05d}.bin").read_bytes())]
    tokens = {r[0]: tuple(r[2]) for r in runs["rows"]}
    order = {seed: sorted(tokens, key=lambda d: (shuffle_key(seed, d), d)) for seed in (42, 7)}
    assert got == [tokens[d] for d in order[42]]
    assert order[7] != order[42]


def test_empty_input_is_a_clear_error(spark, tmp_path):
    cfg = shard_cfg(tmp_path / "run")
    tables.write_table(spark.createDataFrame([], TOK_SCHEMA), cfg, "tokenized", properties=gpt2_props())
    with pytest.raises(ValueError, match="holds no documents; refusing to write empty shards"):
        run_stage(spark, cfg, "shard")
    assert not (tmp_path / "run" / "shards" / "manifest.json").exists()


def test_70k_vocabulary_gives_int32_shards_that_round_trip(spark, tmp_path):
    from tests.synthetic_vocab import build_70k_tokenizer
    from tests.test_tokenize import DOCS_SCHEMA, doc
    from udfs.tokenize import load_tokenizer

    path = build_70k_tokenizer(tmp_path / "tokenizer.json")
    cfg = shard_cfg(tmp_path / "run", "pipeline.stages=[ingest, tokenize, shard]", f"tokenize.tokenizer={path}",
                    "shard.num_shards=2", "shard.formats=[megatron]")
    texts = ["aab aac zzy", "xyz <|endoftext|> abc", "Plain text, 123!", "qqq"]
    tables.write_table(spark.createDataFrame([doc(f"t{i}", t) for i, t in enumerate(texts)], DOCS_SCHEMA), cfg, "documents")
    run_stage(spark, cfg, "tokenize")
    run_stage(spark, cfg, "shard")
    out = tmp_path / "run" / "shards"
    assert manifest(out)["dtype"] == "int32"
    tok = load_tokenizer(str(path))
    decoded, max_id = [], 0
    for k in range(2):
        idx = megatron.decode_index((out / "megatron" / f"winnow_{k:05d}.idx").read_bytes())
        assert idx.dtype == np.int32
        for s in megatron.split_bin(idx, (out / "megatron" / f"winnow_{k:05d}.bin").read_bytes()):
            max_id = max(max_id, int(s[:-1].max()))
            decoded.append(tok.tokenizer.decode(s[:-1].tolist()))
    assert sorted(decoded) == sorted(texts) and max_id > 65_535
    with pytest.raises(ValueError, match="cannot hold vocabulary size 70000"):
        run_stage(spark, cfg.model_copy(update={"shard": cfg.shard.model_copy(update={"dtype": "uint16"})}), "shard")
