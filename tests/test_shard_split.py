"""The validation split of the shard stage: seeded by doc_id, exact amounts, its own shard set, no near copy."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pyarrow as pa
import pytest

from pipelines.core import tables
from pipelines.core.config import ConfigError, load_config
from pipelines.core.runner import run_stage
from pipelines.tools.verify import verify
from tests.chain import reference_run  # noqa: F401  (the session fixture)
from tests.test_shard import TOK_SCHEMA, gpt2_props, tokenized_rows
from udfs import megatron

N = 400


def split_key(seed: int, doc_id: str) -> str:
    return hashlib.sha256(f"{seed}:validation:{doc_id}".encode()).hexdigest()


def megatron_docs(folder) -> list[tuple[int, ...]]:
    docs = []
    for idx_path in sorted(folder.glob("*.idx")):
        idx = megatron.decode_index(idx_path.read_bytes())
        docs += [tuple(s.tolist()) for s in megatron.split_bin(idx, idx_path.with_suffix(".bin").read_bytes())]
    return docs


@pytest.fixture(scope="module")
def split_run(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("split")
    rows = tokenized_rows(N, seed=5)

    def run(*extra: str):
        cfg = load_config(overrides=[f"run.root={base}", "spark.shuffle_partitions=3", "shard.num_shards=2",
                                     "shard.seq_len=16", *extra])
        if not (base / "tables" / "tokenized").exists():
            tables.write_table(spark.createDataFrame(rows, TOK_SCHEMA), cfg, "tokenized", properties=gpt2_props())
        report = run_stage(spark, cfg, "shard")
        return report, json.loads((base / "shards" / "manifest.json").read_text())

    return {"rows": rows, "base": base, "run": run}


def test_a_fraction_of_documents_is_held_out_by_split_key_into_its_own_shard_set(spark, split_run):
    report, m = split_run["run"]("shard.split.validation=0.1", "shard.split.validation_shards=2")
    rows = split_run["rows"]
    by_key = sorted(rows, key=lambda r: split_key(42, r[0]))
    held, kept = by_key[:40], by_key[40:]  # round(0.1 * 400) documents with the smallest split keys
    out = split_run["base"] / "shards"
    assert sorted(megatron_docs(out / "validation" / "megatron")) == sorted(tuple(r[2]) for r in held)
    assert sorted(megatron_docs(out / "train" / "megatron")) == sorted(tuple(r[2]) for r in kept)
    assert (m["split"]["validation_documents"], m["split"]["validation_tokens"]) == (40, sum(r[3] for r in held))
    assert split_key(42, held[-1][0]) < m["split"]["cut"] <= split_key(42, kept[0][0])
    assert (m["splits"]["validation"]["documents"], m["splits"]["validation"]["shards"]) == (40, 2)
    assert (m["splits"]["train"]["documents"], m["splits"]["train"]["shards"]) == (360, 2)
    assert m["totals"]["documents"] == N and report.extra["split"]["validation_documents"] == 40
    for name in ("train", "validation"):
        assert (out / name / "mds" / "index.json").is_file()
    # Blend files: Megatron-LM's --per-split-data-args-path (weight = shard tokens) and streaming streams.
    meg = json.loads((out / "blend" / "megatron.json").read_text())
    tokens = {f["path"][: -len(".bin")]: f["tokens"] for f in m["files"] if f["kind"] == "bin"}
    assert meg["test"] == [] and len(meg["train"]) == len(meg["valid"]) == 4
    for split, folder in (("train", "train"), ("valid", "validation")):
        pairs = list(zip(meg[split][::2], meg[split][1::2], strict=True))
        # Paths relative to the shard root (the manifest's folder), whatever folder the run started in.
        assert [(int(w), p) for w, p in pairs] == [(tokens[f"{folder}/megatron/winnow_{k:05d}"], f"{folder}/megatron/winnow_{k:05d}")
                                                   for k in range(2)]
    assert json.loads((out / "blend" / "streams.json").read_text()) == {
        s: {s: {"local": f"{s}/mds", "proportion": 1.0}} for s in ("train", "validation")}
    assert m["readers"]["megatron"]["per_split_data_args_path"] == "blend/megatron.json"
    assert m["output"] == str(out.resolve()) and set(m["versions"]) >= {"shard"}
    assert verify(str(out)).problems == []
    # jobs/inspect.py --doc-id names the shard set a document went to.
    from pipelines.tools.inspect import doc_path

    cfg = load_config(overrides=[f"run.root={split_run['base']}"])
    assert doc_path(spark, cfg, held[0][0])[-1]["status"] == "validation"
    assert doc_path(spark, cfg, kept[0][0])[-1]["status"] == "train"


def test_a_fraction_of_tokens_and_a_token_count_stop_at_the_first_document_that_reaches_them(split_run):
    rows = sorted(split_run["rows"], key=lambda r: split_key(42, r[0]))
    cum = np.cumsum([r[3] for r in rows])
    total = int(cum[-1])
    for setting, target in ((["shard.split.unit=tokens", "shard.split.validation=0.25"], 0.25 * total),
                            (["shard.split.unit=token_count", "shard.split.validation=500"], 500)):
        _, m = split_run["run"](*setting)
        n = int(np.searchsorted(cum, target, side="left")) + 1
        assert (m["split"]["validation_documents"], m["split"]["validation_tokens"]) == (n, int(cum[n - 1]))
        assert cum[n - 2] < target <= cum[n - 1]


def test_no_split_writes_train_only_and_a_split_that_takes_everything_is_refused(split_run):
    _, m = split_run["run"]()
    assert set(m["splits"]) == {"train"} and m["split"]["cut"] is None
    assert not (split_run["base"] / "shards" / "validation").exists()
    with pytest.raises(ValueError, match="holds out every document"):
        split_run["run"]("shard.split.unit=token_count", "shard.split.validation=1000000")


@pytest.mark.parametrize(("override", "fragment"), [
    ("shard.split.validation=1.0", "is a fraction"),
    ("shard.split.validation=-0.1", "shard.split.validation"),
    ("shard.split.unit=rows", "shard.split.unit"),
])
def test_bad_split_settings_fail_before_spark_naming_the_key(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(overrides=[override])
    with pytest.raises(ConfigError, match="whole number of tokens"):
        load_config(overrides=["shard.split.unit=token_count", "shard.split.validation=10.5"])


def test_no_held_out_document_has_a_near_copy_in_train_under_the_dedup_settings(spark, reference_run):  # noqa: F811
    from udfs import minhash

    root = reference_run.root
    cfg = load_config(overrides=[f"run.root={root}"])
    m = json.loads((root / "shards" / "manifest.json").read_text())
    assert m["split"]["validation_documents"] > 0, "the reference run holds out a validation set"
    cut = m["split"]["cut"]
    docs = tables.read_table(spark, cfg, "deduped").select("doc_id", "text").collect()
    tokenized = {r["doc_id"] for r in tables.read_table(spark, cfg, "tokenized").select("doc_id").collect()}
    held = [r["text"] for r in docs if r["doc_id"] in tokenized and split_key(m["seed"], r["doc_id"]) < cut]
    train = [r["text"] for r in docs if r["doc_id"] in tokenized and split_key(m["seed"], r["doc_id"]) >= cut]
    assert len(held) == m["split"]["validation_documents"] and len(train) == m["splits"]["train"]["documents"]
    d = cfg.dedup
    spec = minhash.ShingleSpec(d.ngram_size, d.fold_digits, d.fold_diacritics, d.split_unspaced)
    a = pa.array([h for h in held for _ in train])
    b = pa.array([t for _ in held for t in train])
    assert float(minhash.exact_jaccard(a, b, spec).max()) < d.threshold


def test_a_moved_shard_folder_is_read_through_its_blend_files(split_run, tmp_path):
    _, m = split_run["run"]("shard.split.validation=0.1")
    moved = tmp_path / "elsewhere" / "shards"
    shutil.copytree(split_run["base"] / "shards", moved)
    shutil.rmtree(split_run["base"] / "shards")
    try:
        assert verify(str(moved)).problems == []
        meg = json.loads((moved / m["readers"]["megatron"]["per_split_data_args_path"]).read_text())
        docs = []
        for prefix in meg["train"][1::2] + meg["valid"][1::2]:
            idx = megatron.decode_index((moved / f"{prefix}.idx").read_bytes())
            docs += megatron.split_bin(idx, (moved / f"{prefix}.bin").read_bytes())
        assert len(docs) == N
        streams = json.loads((moved / "blend" / "streams.json").read_text())
        for split, by_name in streams.items():
            assert (moved / by_name[split]["local"] / "index.json").is_file()
    finally:
        split_run["run"]()  # the module's later tests find a shard folder where the run writes it
