"""pipelines/core/chain.py and pipelines/filter/rules.py: the declarations are whole and agree with the code (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.core import chain
from pipelines.core.config import WinnowConfig, load_config
from pipelines.filter import rules as filter_rules
from pipelines.filter.config import FilterConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("stage", chain.STAGES)
def test_every_stage_has_a_config_section_a_package_and_a_job(stage):
    import importlib

    assert stage in WinnowConfig.model_fields
    assert stage in yaml.safe_load((REPO / "conf" / "default.yaml").read_text())
    assert callable(importlib.import_module(f"pipelines.{stage}").run)
    assert (REPO / "jobs" / f"{stage}.py").is_file()


def test_each_table_has_one_writer_and_inputs_come_from_earlier_stages():
    outputs = [t for s in chain.CHAIN for t in s.outputs]
    assert len(outputs) == len(set(outputs))
    for i, s in enumerate(chain.CHAIN):
        if s.input not in (None, chain.PREVIOUS):
            assert chain.writer_of(s.input) in chain.STAGES[:i], s.name
    assert chain.writer_of("dedup_bands") == "dedup" and chain.writer_of("removed") is None


def test_marker_files_follow_the_effective_shard_root(tmp_path):
    cfg = load_config([], [f"run.root={tmp_path}", "shard.output=s3://bucket/run/"])
    assert cfg.shard_root == "s3://bucket/run"
    assert chain.marker_files(cfg, "shard") == {"manifest.json": "s3://bucket/run/manifest.json"}
    assert chain.marker_files(cfg, "report") == {"report/stats.json": f"{tmp_path}/report/stats.json"}
    assert chain.marker_files(cfg, "filter") == {}


def test_unknown_stage_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown stage 'dedupe'; allowed: \['ingest'"):
        chain.stage("dedupe")


def test_require_columns_names_what_is_missing():
    class Frame:
        columns = ["doc_id"]

    chain.require_columns(Frame(), ["doc_id"], "x")
    with pytest.raises(ValueError, match=r"refs: input is missing columns \['text', 'lang'\]; it has \['doc_id'\]"):
        chain.require_columns(Frame(), ["doc_id", "text", "lang"], "refs")


def test_every_rule_key_exists_and_every_threshold_key_has_a_rule():
    section = FilterConfig().model_dump()
    for rule in filter_rules.RULES:
        sub, _, key = rule.key.partition(".")
        assert key in section[sub], rule.key
    keyed = {r.key for r in filter_rules.RULES}
    thresholds = {f"{sub}.{k}" for sub, v in section.items() if isinstance(v, dict)
                  for k in v if k.startswith(("min_", "max_", "drop_")) or k == "allowed"}
    # langid.max_chars is how much text LID reads, not a threshold; profile options shape signals.
    assert thresholds - {"langid.max_chars", *filter_rules.PROFILE_OPTIONS} == keyed


def test_rule_names_are_what_rule_actions_accept():
    assert filter_rules.rule_names("gopher_quality")[:2] == ["word_count", "mean_word_length"]
    with pytest.raises(ValueError, match=r"unknown rule\(s\) \['nope'\]"):
        load_config([], ["filter.c4.rule_actions={nope: flag}"])
