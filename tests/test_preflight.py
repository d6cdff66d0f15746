"""Preflight: a run whose root cannot be written, or whose tokenizer does not load, fails before Spark starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.core.config import load_config
from pipelines.core.preflight import PreflightError, check, check_writable_root, local_path

ROOT = Path(__file__).resolve().parents[1]


def test_local_path_only_for_plain_paths_and_file_uris():
    assert local_path("out/run1") == "out/run1"
    assert local_path("file:///tmp/run") == "/tmp/run"
    assert local_path("s3://bucket/run") is None
    assert local_path("dbfs:/mnt/run") is None


def test_root_that_can_be_created_passes_and_is_not_created(tmp_path):
    root = tmp_path / "a" / "b"
    check_writable_root(str(root))
    assert not root.exists()


def test_root_under_a_file_names_the_key(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(PreflightError, match=r"run\.root=.*is not a folder"):
        check_writable_root(str(f / "out"))


def test_unwritable_root_names_the_key():
    # /sys refuses new files even to root (sysfs); os.access would have said yes.
    if os.access("/sys", os.W_OK) and os.geteuid() != 0:
        pytest.skip("/sys is writable here")
    with pytest.raises(PreflightError, match=r"run\.root='/sys/winnow/out' cannot be written: creating a file inside '/sys'"):
        check_writable_root("/sys/winnow/out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through folder permissions")
def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(PreflightError, match="cannot be written"):
            check_writable_root(str(ro))
    finally:
        ro.chmod(0o700)


def test_unknown_tokenizer_fails_only_when_tokenize_runs(tmp_path):
    cfg = load_config([], [f"run.root={tmp_path}", "tokenize.tokenizer=nope"])
    with pytest.raises(PreflightError, match=r"tokenize\.tokenizer='nope'"):
        check(cfg, ["ingest", "tokenize"])
    check(cfg, ["ingest", "dedup"])


def test_unknown_eos_token_names_the_key(tmp_path):
    cfg = load_config([], [f"run.root={tmp_path}", "tokenize.eos_token=<|nope|>"])
    with pytest.raises(PreflightError, match=r"tokenize\.eos_token"):
        check(cfg, ["tokenize"])


@pytest.mark.parametrize(
    ("override", "expected"),
    [("tokenize.tokenizer=nope", "tokenize.tokenizer='nope'"), ("run.root=/sys/winnow", "run.root='/sys/winnow'")],
)
def test_pipeline_dry_run_exits_2_before_spark(tmp_path, override, expected):
    """The plan needs Spark (it reads completion records); a bad setting must stop the job before that."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "pipeline.py"), "--conf", str(ROOT / "conf" / "local.yaml"),
         "--set", f"run.root={tmp_path}", "--set", override, "--dry-run"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "SparkContext" not in proc.stderr + proc.stdout


def test_shard_output_and_local_inputs_are_checked_when_their_stage_runs(tmp_path):
    cfg = load_config([], [f"run.root={tmp_path}", "shard.output=/sys/winnow-shards",
                           f"ingest.inputs=[{tmp_path}/none/*.jsonl]"])
    with pytest.raises(PreflightError, match=r"shard\.output='/sys/winnow-shards' cannot be written"):
        check(cfg, ["shard"])
    with pytest.raises(PreflightError, match=r"ingest\.inputs: .*none/\*\.jsonl' matches no file"):
        check(cfg, ["ingest"])
    check(cfg, ["dedup", "filter"])
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")  # ingest skips `_*` and `.*` names, as Spark's file sources do
    (folder / "sub").mkdir()
    (folder / "sub" / "a.jsonl").write_text("{}\n")  # a folder stands for the files directly in it
    for inputs in (f"['{folder}']", f"['{tmp_path}/i*']"):
        with pytest.raises(PreflightError, match=r"ingest\.inputs: .* matches no file that ingest reads"):
            check(load_config([], [f"run.root={tmp_path}", f"ingest.inputs={inputs}"]), ["ingest"])
    (folder / ".part-0.crc").write_text("")
    for name in ("_SUCCESS", ".part-0.crc"):  # named alone: still skipped by ingest
        with pytest.raises(PreflightError, match=r"matches no file that ingest reads"):
            check(load_config([], [f"run.root={tmp_path}", f"ingest.inputs=['{folder}/{name}']"]), ["ingest"])
    (folder / "a.jsonl").write_text("{}\n")
    check(load_config([], [f"run.root={tmp_path}", f"ingest.inputs=['{folder}', 's3://bucket/x/*', '{tmp_path}/{{a,b}}.jsonl']"]), ["ingest"])


def test_malformed_tokenizer_json_names_the_key(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"x": 1')
    cfg = load_config([], [f"run.root={tmp_path}", f"tokenize.tokenizer={bad}"])
    with pytest.raises(PreflightError, match=r"tokenize\.tokenizer=.*is not a valid tokenizer\.json"):
        check(cfg, ["tokenize"])


def test_filter_languages_and_models_are_checked(tmp_path):
    bad = load_config([], [f"run.root={tmp_path}", "filter.langid.allowed=[en, xx, english]"])
    with pytest.raises(PreflightError, match=r"filter\.langid\.allowed: \['english', 'xx'\] not among the 17\d languages"):
        check(bad, ["filter"])
    check(load_config([], [f"run.root={tmp_path}", "filter.langid.allowed=[en, de, nb, zh]"]), ["filter"])
    missing = load_config([], [f"run.root={tmp_path}", f"filter.quality_model.model={tmp_path}/q.bin"])
    with pytest.raises(PreflightError, match=r"filter\.quality_model\.model=.*no such file"):
        check(missing, ["filter"])
    check(missing, ["ingest", "dedup"])


def test_swapped_word_limits_fail_at_load():
    from pipelines.core.config import ConfigError

    with pytest.raises(ConfigError, match="min_words=500 is greater than max_words=10"):
        load_config([], ["filter.gopher_quality.min_words=500", "filter.gopher_quality.max_words=10"])


def test_inputs_that_match_the_run_root_are_refused(tmp_path):
    from pipelines.ingest.hooks import check_inputs_outside_root

    (tmp_path / "data" / "run").mkdir(parents=True)
    (tmp_path / "data" / "a.jsonl").write_text("{}\n")
    check_inputs_outside_root([f"{tmp_path}/data/*.jsonl"], f"{tmp_path}/data/run")  # the root not matched
    with pytest.raises(PreflightError, match=r"ingest.inputs: '.*/data/\*' matches '.*/data/run', inside run.root"):
        check_inputs_outside_root([f"{tmp_path}/data/*"], f"file://{tmp_path}/data/run")
    (tmp_path / "data" / "run" / "in").mkdir()  # the user's own folder inside the root: fine
    check_inputs_outside_root([f"{tmp_path}/data/run/in"], f"{tmp_path}/data/run")
    (tmp_path / "data" / "run" / "tables").mkdir()
    with pytest.raises(PreflightError, match=r"matches '.*/data/run/tables'"):
        check_inputs_outside_root([f"{tmp_path}/data/run/*"], f"{tmp_path}/data/run")


def test_tracking_without_the_mlflow_package_stops_the_run(tmp_path, monkeypatch):
    # It warned once at the top and ran without the tracking asked for: a missing package, unlike a
    # server that is down, does not come back during the run.
    import importlib.util

    cfg = load_config([], [f"run.root={tmp_path}", "tracking.mlflow=true"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(PreflightError, match=r"^tracking.mlflow=true needs the mlflow package, which is not installed: "
                                             r"\.venv/bin/pip install -e '\.\[mlflow\]' in the Winnow checkout"):
        check(cfg, ["ingest"])
    check(load_config([], [f"run.root={tmp_path}"]), ["ingest"])
