"""Crash and resume: SIGKILL the pipeline mid-dedup, then mid-shard, rerun, and get the shards of an
uninterrupted run byte for byte; a killed stage never has a completion record, and a killed shard stage
never leaves a manifest behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from tests import chain
from tests.chain import PAUSE, REPO, chain_args, output_fingerprint, session_conf_kept

reference_run = chain.reference_run  # the shared session fixture

pytestmark = pytest.mark.slow

# Named pause points (see tests/chain.py): dedup has committed its tables (written side by side) but
# not its effective config or its record; shard has written every shard file but not the manifest.
MID_DEDUP = "pipelines.core.tables:write_effective_config:dedup"
MID_SHARD = "pipelines.shard.stage:build_manifest"


def _kill_at(target: str, args: list[str], timeout: float = 900) -> list[str]:
    """Run the pipeline (``python -m tests.chain target args``) in its own process group and SIGKILL the
    group (driver and JVM) when it prints the pause line, or after ``timeout`` s. Returns the lines printed."""
    p = subprocess.Popen([sys.executable, "-m", "tests.chain", target, *args], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    lines: list[str] = []
    # A run that hangs or never reaches the pause point is killed too, and fails the assertion below.
    watchdog = threading.Timer(timeout, lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(PAUSE):
                os.killpg(p.pid, signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL and lines[-1] == PAUSE + target, "\n".join(lines)
    return lines


def _starts(lines: list[str]) -> list[str]:
    return [ln.split("]")[0] + "]" for ln in lines if "] start" in ln]


def test_sigkill_mid_dedup_and_mid_shard_then_resume(spark, reference_run, tmp_path, capsys):
    from jobs import pipeline
    from pipelines.core.config import load_config
    from pipelines.core.runs import delta_version, latest_records

    ref = reference_run
    if not {"dedup", "shard"} <= set(ref.chain):
        pytest.skip(f"needs dedup and shard on this branch (chain here: {ref.chain})")
    root = tmp_path / "crashed"
    args = chain_args(root, ref.chain, ref.inputs)
    cfg = load_config(overrides=args[1::2])

    # 1. Killed inside dedup, after it committed its tables: ingest is complete, dedup is not.
    lines = _kill_at(MID_DEDUP, args)
    assert _starts(lines) == ["[ingest]", "[dedup]"]
    assert delta_version(spark, cfg.table_path("deduped")) is not None
    assert delta_version(spark, cfg.table_path("dup_clusters")) is not None
    assert set(latest_records(spark, cfg)) == {"ingest"}

    # 2. The rerun skips ingest, redoes dedup, and is killed with every shard file written, before the
    #    manifest: no manifest, no shard record.
    lines = _kill_at(MID_SHARD, args)
    assert "[ingest] skip: up to date" in "\n".join(lines)
    assert _starts(lines) == [f"[{s}]" for s in ref.chain[1:]]
    assert any((root / "shards" / "train" / "megatron").iterdir())
    assert not (root / "shards" / "manifest.json").exists()
    assert set(latest_records(spark, cfg)) == set(ref.chain) - {"shard"}

    # 3. The second rerun runs shard alone and ends with the uninterrupted run's shards.
    capsys.readouterr()
    with session_conf_kept(spark):
        assert pipeline.main(args) == 0
    assert _starts(capsys.readouterr().out.splitlines()) == ["[shard]"]
    assert output_fingerprint(spark, root, ref.chain) == ref.fingerprint
    manifest = json.loads((root / "shards" / "manifest.json").read_text())
    assert manifest["totals"] == json.loads((ref.root / "shards" / "manifest.json").read_text())["totals"]
    assert set(latest_records(spark, cfg)) == set(ref.chain)



def test_ctrl_c_mid_stage_prints_one_line_and_the_rerun_resumes(tmp_path, monkeypatch):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it (driver, JVM, Python workers),
    while dedup's Spark jobs run: stderr holds the one "interrupted" line, no Python, Py4J or JVM
    traceback, and the rerun skips the stage that had completed."""
    monkeypatch.delenv("MAKELEVEL", raising=False)  # make test sets it; the hint names make then
    inputs = chain.small_inputs(tmp_path / "in")
    args = chain_args(tmp_path / "root", ["ingest", "dedup"], inputs)
    p = subprocess.Popen([sys.executable, "jobs/pipeline.py", *args], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    watchdog = threading.Timer(600, lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in p.stdout:
            if line.startswith("[dedup] start"):
                threading.Timer(1.5, lambda: os.killpg(p.pid, signal.SIGINT)).start()
        err = p.stderr.read()
    finally:
        watchdog.cancel()
        p.wait()
    lines = err.splitlines()
    if p.returncode == 0:  # dedup ended within the 1.5 s: nothing was interrupted
        pytest.skip("the chain finished before the interrupt")
    assert p.returncode == -signal.SIGINT and lines == [
        "pipeline.py: interrupted; the same command again skips the stages that completed"], err
    rerun = subprocess.run([sys.executable, "jobs/pipeline.py", *args], cwd=REPO, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "[ingest] skip" in rerun.stdout and "[dedup] in=" in rerun.stdout, rerun.stdout


def test_sigterm_mid_ingest_cleans_up_and_prints_one_line(tmp_path, monkeypatch):
    """SIGTERM to the process group (a scheduler stopping the job) while ingest holds its parsed records
    in a ``/dev/shm`` spool folder: the folder and the run lock are gone when the driver exits, with
    status 143 and one line on stderr."""
    monkeypatch.delenv("MAKELEVEL", raising=False)  # make test sets it; the hint names make then
    import glob
    import gzip

    from pipelines.core.lock import LOCK_NAME
    from pipelines.ingest.spool import SPOOL_PREFIX

    plain = tmp_path / "plain"  # plain JSONL: spooled in /dev/shm (compressed inputs spool to disk)
    plain.mkdir()
    for src in sorted(chain.small_inputs(tmp_path / "in").glob("*.jsonl.gz")):
        (plain / src.name.removesuffix(".gz")).write_bytes(gzip.decompress(src.read_bytes()))
    spools = set(glob.glob(f"/dev/shm/{SPOOL_PREFIX}*"))
    root = tmp_path / "root"
    p = subprocess.Popen([sys.executable, "-m", "tests.chain", "pipelines.ingest.tally:tally_partials",
                          *chain_args(root, ["ingest"], plain)], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    watchdog = threading.Timer(600, lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
    watchdog.start()
    try:
        for line in p.stdout:
            if line.startswith(PAUSE):
                new = set(glob.glob(f"/dev/shm/{SPOOL_PREFIX}*")) - spools
                os.killpg(p.pid, signal.SIGTERM)
        err = p.stderr.read()
    finally:
        watchdog.cancel()
        p.wait()
    lines = err.splitlines()
    assert p.returncode == 143 and lines == [
        "chain.py: terminated (SIGTERM); the stage did not complete; the same command again runs it"], err
    # made under /dev/shm, then removed (a folder left is a concurrent live run's: its owner holds its lock)
    assert new and not [d for d in new if os.path.exists(d) and not _held(d)], new
    assert not (root / LOCK_NAME).exists()


def _held(folder: str) -> bool:
    """Whether a live process holds the lock of an ingest spool folder's owner file."""
    import fcntl

    from pipelines.ingest.spool import OWNER_FILE

    try:
        fd = os.open(os.path.join(folder, OWNER_FILE), os.O_RDWR)
    except OSError:  # no owner file (yet): not a folder a dead run left
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)
