"""Small corpora: a shard set with fewer tokens than one sample, or that drops too much, is named."""

from __future__ import annotations

import json

import pytest

from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runner import run_stage
from pipelines.shard.short import ShortShardsError, short_sets
from pipelines.tools.verify import verify
from tests.test_shard import TOK_SCHEMA, gpt2_props, tokenized_rows


def _manifest(**split):
    sec = {"tokens": 1000, "shards": 2, "mds_samples": 3, "mds_dropped_tokens": 100, **split}
    return {"seq_len": 256, "formats": ["megatron", "mds"], "splits": {"train": sec}}


def test_short_sets_just_inside_and_outside_the_dropped_share():
    assert short_sets(_manifest(mds_dropped_tokens=100), 0.1) == []
    assert short_sets(_manifest(mds_dropped_tokens=101), 0.1) == [
        "train/mds: 101 of 1,000 tokens dropped (10.1%, more than shard.max_dropped_share 10%): each shard's "
        "tokens past its last whole sample of 256; lower shard.seq_len or num_shards"]


def test_short_sets_no_sample_at_all():
    lines = short_sets(_manifest(tokens=200, shards=1, mds_samples=0, mds_dropped_tokens=200), 0.1)
    assert lines[0].startswith("train/mds: 0 samples from 200 tokens in 1 shard (seq_len 256): a loader")
    assert lines[1].startswith("train/megatron: 200 tokens, fewer than one sample of seq_len 256 + 1")
    assert short_sets({**_manifest(tokens=0, mds_samples=0), "formats": ["megatron"]}, 0.1) == []


@pytest.fixture
def small_run(spark, tmp_path):
    rows = tokenized_rows(60, seed=3)  # about 400 tokens

    def run(*extra):
        cfg = load_config(overrides=[f"run.root={tmp_path}", "spark.shuffle_partitions=2", "shard.num_shards=2",
                                     "shard.seq_len=64", "shard.split.validation=0.1", *extra])
        if not (tmp_path / "tables" / "tokenized").exists():
            tables.write_table(spark.createDataFrame(rows, TOK_SCHEMA), cfg, "tokenized", properties=gpt2_props())
        run_stage(spark, cfg, "shard")
        return json.loads((tmp_path / "shards" / "manifest.json").read_text())

    return run, tmp_path / "shards"


def test_a_validation_split_under_one_sample_warns_verify_reports_and_strict_fails(small_run, caplog):
    run, out = small_run
    m = run()
    val = m["splits"]["validation"]
    assert val["mds_samples"] == 0 and val["tokens"] > 0
    assert any(line.startswith("validation/mds: 0 samples from") for line in m["short"])
    assert any("validation/mds: 0 samples" in r.getMessage() for r in caplog.records)
    res = verify(str(out))
    assert res.ok and res.warnings == m["short"]

    with pytest.raises(ShortShardsError, match=r"shard.strict: .*validation/mds: 0 samples"):
        run("shard.strict=true")
    assert not (out / "manifest.json").exists()
