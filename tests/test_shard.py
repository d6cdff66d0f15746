"""Shard stage on Spark: determinism (1 vs 4 partitions, re-run), balance, shuffle quality, verify, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from jobs import verify as verify_job
from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runner import run_stage
from pipelines.shard.stage import plan_shards, shard_id_column
from pipelines.tools.verify import verify
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
    """The same tokenized table sharded with 1 partition, then again into the same folder with 4 partitions."""
    base = tmp_path_factory.mktemp("shard")
    rows = tokenized_rows(N_DOCS)
    one = shard_cfg(base / "run", f"shard.output={base / 'out1'}", partitions=1)
    tables.write_table(spark.createDataFrame(rows, TOK_SCHEMA).repartition(3), one, "tokenized", properties=gpt2_props())
    r1 = run_stage(spark, one, "shard")
    first = {p.relative_to(base / "out1"): p.read_bytes() for p in sorted((base / "out1").rglob("*")) if p.is_file()}
    four = shard_cfg(base / "run", f"shard.output={base / 'out1'}", partitions=4)
    r4 = run_stage(spark, four, "shard")
    return {"rows": rows, "base": base, "one": r1, "four": r4, "first": first}


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def test_rerun_with_four_partitions_gives_byte_identical_files(runs):
    out = runs["base"] / "out1"
    again = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert len(again) == len(manifest(out)["files"]) + 1  # + manifest.json; no stray temporary file
    first = dict(runs["first"])
    m_first, m_again = (json.loads(d.pop(Path("manifest.json"))) for d in (first, again))
    assert again == first
    # The config fingerprints differ (spark.shuffle_partitions); every other manifest field is equal.
    for m in (m_first, m_again):
        del m["config_fingerprint"], m["stage_fingerprint"]
    assert m_again == m_first


def test_manifest_totals_balance_and_per_file_facts(runs):
    m = manifest(runs["base"] / "out1")
    tokens = sum(r[3] for r in runs["rows"])
    assert m["dtype"] == "uint16" and m["seed"] == 42 and m["tokenizer"]["eos_id"] == EOS
    assert (m["totals"]["documents"], m["totals"]["tokens"], m["totals"]["shards"]) == (N_DOCS, tokens, 3)
    longest = max(r[3] for r in runs["rows"])
    assert m["balance"]["longest_document_tokens"] == longest
    assert m["balance"]["max_tokens"] - m["balance"]["min_tokens"] <= longest
    kinds = sorted({(f["format"], f["kind"]) for f in m["files"]})
    assert kinds == [("blend", "blend"), ("mds", "index"), ("mds", "mds"), ("megatron", "bin"), ("megatron", "idx")]
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
    out = runs["base"] / "out1" / "train" / "megatron"
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
    with open(copy / "train" / "megatron" / "winnow_00001.bin", "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    assert verify_job.main(["--root", str(copy)]) == 1
    assert verify_job.main(["--root", str(runs["base"] / "out1")]) == 0


def test_stream_is_in_keyed_hash_order_and_another_seed_gives_another(runs):
    out = runs["base"] / "out1" / "train" / "megatron"
    got = []
    for k in range(3):
        idx = megatron.decode_index((out / f"winnow_{k:05d}.idx").read_bytes())
        got += [tuple(s.tolist()) for s in megatron.split_bin(idx, (out / f"winnow_{k:05d}.bin").read_bytes())]
    tokens = {r[0]: tuple(r[2]) for r in runs["rows"]}
    order = {seed: sorted(tokens, key=lambda d: (shuffle_key(seed, d), d)) for seed in (42, 7)}
    assert got == [tokens[d] for d in order[42]]
    assert order[7] != order[42]


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
    out = out / "train"
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


def test_shard_id_column_matches_a_binary_search(spark):
    keys = np.array(sorted(shuffle_key(0, f"k{i}") for i in range(400)), dtype="S64")
    bounds = keys[::37][1:]  # 10 boundaries -> 11 shards
    df = spark.createDataFrame([(k.decode(),) for k in keys], "_key string")
    got = [r["s"] for r in df.select(shard_id_column(bounds).alias("s")).collect()]
    assert got == np.searchsorted(bounds, keys, side="right").tolist()
    assert df.select(shard_id_column(bounds[:0]).alias("s")).distinct().collect()[0]["s"] == 0


def test_duplicated_doc_id_and_empty_input_are_clear_errors(spark):
    rows = [("x", 3), ("y", 2), ("x", 4)]
    with pytest.raises(ValueError, match="doc_id 'x' occurs more than once"):
        plan_shards(spark.createDataFrame(rows, "doc_id string, n_tokens int"), 1, 1, None, 2)
    with pytest.raises(ValueError, match="holds no documents"):
        plan_shards(spark.createDataFrame([], "doc_id string, n_tokens int"), 1, 1, None, 2)


def _writer_inputs(n: int):
    import pyarrow as pa

    rows = tokenized_rows(n, seed=3)
    keys = [shuffle_key(7, r[0]) for r in rows]
    table = pa.table({"doc_id": [r[0] for r in rows], "source": [r[1] for r in rows],
                      "tokens": pa.array([r[2] for r in rows], pa.list_(pa.int32())), "n_tokens": [r[3] for r in rows],
                      "_key": keys, "shard_id": pa.array([0] * n, pa.int32())})
    return table.sort_by([("_key", "ascending")])


def test_streamed_shard_writer_is_byte_identical_to_whole_shard_encoding(tmp_path):
    """Batches of 7 rows give the files a whole-shard encoding gives (the layout the old writer produced)."""
    from pipelines.shard.writer import make_shard_writer
    from udfs import mds

    table = _writer_inputs(500)
    lengths = np.array(table.column("n_tokens").to_pylist(), dtype=np.int64)
    plan = {0: {"docs": 500, "tokens": int(lengths.sum()), "first_doc": 0, "mds_first_file": 0}}
    kw = dict(prefix="train", formats=["megatron", "mds"], dtype="uint16", vocab_size=50257, seq_len=16, size_limit=512, window=50)
    out = list(make_shard_writer(str(tmp_path), plan, **kw)(iter(table.to_batches(max_chunksize=7))))
    assert len(out) == 1 and out[0].num_rows == 1
    flat = np.concatenate([np.array(t, dtype="<u2") for t in table.column("tokens").to_pylist()])
    assert (tmp_path / "megatron/train_00000.bin").read_bytes() == flat.tobytes()
    assert (tmp_path / "megatron/train_00000.idx").read_bytes() == megatron.encode_index(lengths, np.dtype("uint16"))
    samples = flat[: flat.size // 16 * 16].reshape(-1, 16)
    per = mds.samples_per_file(16, np.dtype("uint16"), 512)
    for j, lo in enumerate(range(0, len(samples), per)):
        assert (tmp_path / "mds" / mds.shard_basename(j)).read_bytes() == mds.encode_shard(samples[lo : lo + per], 512)
    assert not (tmp_path / "mds" / mds.shard_basename(j + 1)).exists()
    files = json.loads(out[0].column("files")[0].as_py())
    assert [f["kind"] for f in files[:2]] == ["bin", "idx"] and len(files) == 2 + j + 1


def test_streamed_shard_writer_refuses_rows_out_of_key_order(tmp_path):
    from pipelines.shard.writer import make_shard_writer

    table = _writer_inputs(40)
    plan = {0: {"docs": 40, "tokens": sum(table.column("n_tokens").to_pylist()), "first_doc": 0, "mds_first_file": 0}}
    write = make_shard_writer(str(tmp_path), plan, prefix="t", formats=["megatron"], dtype="uint16", vocab_size=50257,
                              seq_len=16, size_limit=512, window=10)
    batches = table.to_batches(max_chunksize=10)
    with pytest.raises(RuntimeError, match="out of shuffle order"):
        list(write(iter([batches[1], batches[0]])))


def test_sets_writer_writes_a_shard_under_its_own_set_by_its_number_there(tmp_path):
    """Shard id 3 with sets starting at 0 and 2 is the second set's shard 1: its files, its plan, id 3 kept."""
    import pyarrow as pa

    from pipelines.shard.writer import ShardLayout, make_sets_writer

    table = _writer_inputs(30)
    table = table.set_column(table.schema.get_field_index("shard_id"), "shard_id", pa.array([3] * 30, pa.int32()))
    tokens = sum(table.column("n_tokens").to_pylist())

    def layout(name, plan):
        return ShardLayout(str(tmp_path / name), plan, "t", ["megatron"], "uint16", 50257, 16, 512, 10)

    other = {k: {"docs": 1, "tokens": 1, "first_doc": k, "mds_first_file": 0} for k in range(2)}
    mine = {1: {"docs": 30, "tokens": tokens, "first_doc": 0, "mds_first_file": 0}}
    out = list(make_sets_writer([(0, layout("train", other)), (2, layout("validation", mine))])(
        iter(table.to_batches(max_chunksize=8))))
    assert out[0].column("shard_id").to_pylist() == [3]
    assert [f["path"] for f in json.loads(out[0].column("files")[0].as_py())] == ["megatron/t_00001.bin",
                                                                                  "megatron/t_00001.idx"]
    assert (tmp_path / "validation/megatron/t_00001.bin").is_file() and not (tmp_path / "train").exists()
    with pytest.raises(ValueError, match="ascending first shard id"):
        make_sets_writer([(2, layout("validation", mine)), (0, layout("train", other))])
