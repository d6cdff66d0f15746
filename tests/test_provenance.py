"""What a run root was made from: a rerun that swaps inputs is refused, the card reads the recorded config."""

from __future__ import annotations

import json

import pytest

from jobs import pipeline
from pipelines.core import provenance
from pipelines.core.config import load_config
from pipelines.core.runs import latest_records
from pipelines.core.versions import version_changes, versions


def test_config_changes_name_each_key_from_what_to_what():
    old = load_config(overrides=["ingest.inputs=[a/*.jsonl]", "run.seed=1"])
    new = load_config(overrides=["ingest.inputs=[b/*.jsonl]", "run.seed=1", "dedup.threshold=0.9"])
    recorded = {"config": old.model_dump(mode="json")}
    assert provenance.config_changes(new, "ingest", recorded) == [("ingest.inputs", ["a/*.jsonl"], ["b/*.jsonl"])]
    assert provenance.config_changes(new, "dedup", recorded) == [("dedup.threshold", old.dedup.threshold, 0.9)]
    assert provenance.describe_changes([("k", 1, 2)] * 8, limit=2) == "k: 1 -> 2; k: 1 -> 2; +6 more"
    msg = provenance.replace_refusal(new, {"ingest": provenance.config_changes(new, "ingest", recorded)})
    assert 'ingest: ingest.inputs: ["a/*.jsonl"] -> ["b/*.jsonl"]' in msg
    assert "new run.root" in msg and "--replace" in msg


def test_a_changed_audit_key_is_named_as_a_change_of_the_tokenize_stage():
    old = load_config()
    new = load_config(overrides=["audit.text_sample_fraction=0.5"])
    recorded = {"config": old.model_dump(mode="json")}
    assert provenance.config_changes(new, "tokenize", recorded) == [("audit.text_sample_fraction", 0.05, 0.5)]
    assert provenance.config_changes(new, "shard", recorded) == []


def test_versions_name_the_libraries_and_the_language_model():
    v = versions(load_config())
    assert {"ftfy", "pyspark", "delta-spark", "tokenizers"} <= set(v["libraries"])
    assert v["files"]["filter.langid.model"].startswith("sha256:")
    changed = {**v, "libraries": {**v["libraries"], "ftfy": "0.0"}}
    assert version_changes(changed, v) == [("libraries.ftfy", "0.0", v["libraries"]["ftfy"])]


def _inputs(tmp_path, name, n):
    path = tmp_path / name
    path.write_text("".join(json.dumps({"id": f"{name}{i}", "text": f"document {i} of {name} " * 20}) + "\n"
                            for i in range(n)))
    return path


def test_a_rerun_with_other_inputs_is_refused_until_replace(spark, tmp_path, capsys, monkeypatch):
    root = tmp_path / "run"
    a, b = _inputs(tmp_path, "a.jsonl", 3), _inputs(tmp_path, "b.jsonl", 5)

    def args(inputs, *extra):
        return ["--set", f"run.root={root}", "--set", "pipeline.stages=[ingest]", "--set", f"ingest.inputs=[{inputs}]",
                "--set", "spark.shuffle_partitions=4", *extra]

    assert pipeline.main(args(a)) == 0
    capsys.readouterr()
    cfg_b = load_config(overrides=args(b)[1::2])
    before = latest_records(spark, cfg_b)["ingest"]

    # The plan says which key changed, from what to what.
    assert pipeline.main([*args(b), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert f'ingest    run   config changed (ingest.inputs: ["{a}"] -> ["{b}"])' in out
    assert "running now would be refused (exit 2)" in err and "--replace" in err  # the plan warns
    # A run refuses before Spark starts (a local run root): exit 2, the tables untouched.
    def no_spark(*a, **k):
        raise AssertionError("Spark must not start for a refused rerun")

    with monkeypatch.context() as m, pytest.raises(SystemExit) as e:
        m.setattr("pipelines.core.session.get_spark", no_spark)
        pipeline.main(args(b))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"run.root {root} was made with another config" in err
    assert f'ingest: ingest.inputs: ["{a}"] -> ["{b}"]' in err and "--replace" in err and "new run.root" in err
    assert latest_records(spark, cfg_b)["ingest"]["finished_at"] == before["finished_at"]

    # The dataset card describes the data exported: the recorded inputs, not the command's.
    from pipelines.tools.export import export_table

    export_table(spark, cfg_b, "documents", str(tmp_path / "hf"), hf=True)
    card = (tmp_path / "hf" / "README.md").read_text()
    assert str(a) in card and str(b) not in card
    assert "## Versions" in card and "ftfy:" in card

    # A stage kept from a run under other library versions is named in the plan.
    rec_file = root / "config" / "ingest.json"
    doc = json.loads(rec_file.read_text())
    doc["versions"]["libraries"]["ftfy"] = "0.0"
    rec_file.write_text(json.dumps(doc))
    assert pipeline.main([*args(a), "--dry-run"]) == 0
    assert '[ingest] kept tables were made with other versions (libraries.ftfy: "0.0" ->' in capsys.readouterr().out

    # --replace runs it.
    assert pipeline.main([*args(b), "--replace"]) == 0
    assert capsys.readouterr().out.count("--replace: the tables of ingest are replaced") == 1
    rec = latest_records(spark, cfg_b)["ingest"]
    assert rec["rows_out"] == 5
    assert provenance.run_config(spark, cfg_b, latest_records(spark, cfg_b))["ingest"]["inputs"] == [str(b)]
