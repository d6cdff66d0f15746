"""The run lock: one run per run root, stale locks taken over, ``--force-unlock``; no Spark needed."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.core import lock
from pipelines.core.config import load_config

REPO = Path(__file__).resolve().parents[1]


def _cfg(root: Path | str):
    return load_config(overrides=[f"run.root={root}"])


def _write(root: Path, **fields) -> None:
    info = {"owner": "ana", "host": socket.gethostname(), "pid": os.getpid(), "token": "t0",
            "started_at": lock._now().isoformat(), "heartbeat_at": lock._now().isoformat(), **fields}
    root.mkdir(parents=True, exist_ok=True)
    (root / lock.LOCK_NAME).write_text(json.dumps(info))


def test_second_acquire_names_the_owner_and_release_frees_the_root(tmp_path):
    cfg = _cfg(tmp_path / "run")
    held = lock.acquire(cfg, command="winnow run", heartbeat=False)
    info = json.loads((tmp_path / "run" / "_lock.json").read_text())
    assert {k: info[k] for k in ("pid", "host", "command")} == {
        "pid": os.getpid(), "host": socket.gethostname(), "command": "winnow run"}
    with pytest.raises(lock.RunLockedError, match=f"in use by another run: pid {os.getpid()} on host"):
        lock.acquire(cfg, heartbeat=False)
    held.release()
    assert not (tmp_path / "run" / "_lock.json").exists()
    lock.acquire(cfg, heartbeat=False).release()


def test_a_lock_whose_local_process_is_gone_is_taken_over_with_a_note(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write(tmp_path / "run", pid=dead.pid)
    with lock.acquire(_cfg(tmp_path / "run"), heartbeat=False) as held:
        assert held.notes and "its process is gone" in held.notes[0] and f"pid {dead.pid}" in held.notes[0]
        assert json.loads((tmp_path / "run" / "_lock.json").read_text())["pid"] == os.getpid()


def test_stale_rule_other_host_by_heartbeat_age():
    now = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
    fresh = {"host": "elsewhere", "pid": 1, "heartbeat_at": (now - dt.timedelta(seconds=lock.STALE_AFTER_S - 1)).isoformat()}
    old = {**fresh, "heartbeat_at": (now - dt.timedelta(seconds=lock.STALE_AFTER_S + 1)).isoformat()}
    assert lock.stale_reason(fresh, now) is None
    assert lock.stale_reason(old, now) == f"no heartbeat for {lock.STALE_AFTER_S + 1:.0f} s"


def test_force_unlock_takes_a_live_lock(tmp_path):
    _write(tmp_path / "run", host="elsewhere", pid=1)
    with pytest.raises(lock.RunLockedError, match="host elsewhere"):
        lock.acquire(_cfg(tmp_path / "run"), heartbeat=False)
    with lock.acquire(_cfg(tmp_path / "run"), force_unlock=True, heartbeat=False) as held:
        assert "--force-unlock" in held.notes[0]


def test_force_unlock_refuses_a_lock_whose_owner_is_alive_on_this_host(tmp_path):
    _write(tmp_path / "run")  # this process: alive, here
    with pytest.raises(lock.RunLockedError, match=f"alive on this host.*kill {os.getpid()}"):
        lock.acquire(_cfg(tmp_path / "run"), force_unlock=True, heartbeat=False)
    assert json.loads((tmp_path / "run" / "_lock.json").read_text())["token"] == "t0"


def test_heartbeat_refreshes_the_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "HEARTBEAT_S", 0.05)
    with lock.acquire(_cfg(tmp_path / "run")) as held:
        first = held.info["started_at"]
        held.info["heartbeat_at"] = "2000-01-01T00:00:00+00:00"
        (tmp_path / "run" / "_lock.json").write_text(json.dumps(held.info))
        deadline = time.monotonic() + 5
        while json.loads((tmp_path / "run" / "_lock.json").read_text())["heartbeat_at"].startswith("2000"):
            assert time.monotonic() < deadline, "no heartbeat within 5 s"
            time.sleep(0.05)
        assert held.info["started_at"] == first


def _race(root: str, ready, done, out) -> None:
    ready.wait()  # all four processes imported and waiting: they try at the same moment
    try:
        held = lock.acquire(_cfg(root), heartbeat=False)
    except lock.RunLockedError:
        out.put("locked")
        return
    out.put("won")
    done.wait(60)  # hold it until every other run has tried
    held.release()


def test_concurrent_runs_exactly_one_takes_the_root(tmp_path):
    ctx = mp.get_context("spawn")
    out, ready, done = ctx.Queue(), ctx.Barrier(4), ctx.Event()
    procs = [ctx.Process(target=_race, args=(str(tmp_path / "run"), ready, done, out)) for _ in range(4)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=120) for _ in procs)
    done.set()
    for p in procs:
        p.join(60)
    assert got == ["locked", "locked", "locked", "won"]
    assert not (tmp_path / "run" / "_lock.json").exists()


HOLDER = """
import sys, time
from pipelines.core import lock
from pipelines.core.config import load_config
held = lock.acquire(load_config(overrides=[f"run.root={sys.argv[1]}"]), command="winnow run --conf mine.yaml")
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    """Another live process holding the lock of ``tmp_path/run``, as a run in progress would."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.stdout.readline().strip() == "held"
    yield p
    p.kill()
    p.wait()


@pytest.mark.parametrize("job", ["pipeline", "dedup"])
def test_a_second_run_exits_2_at_once_naming_the_owner(tmp_path, holder, monkeypatch, capsys, job):
    from jobs import _cli, pipeline

    def no_spark(*a, **k):
        raise AssertionError("Spark must not start for a locked run root")

    monkeypatch.setattr("pipelines.core.session.get_spark", no_spark)
    argv = [f"--set=run.root={tmp_path / 'run'}", f"--set=ingest.inputs=[{REPO}/sample_data/web_en-00000.jsonl.gz]"]
    with pytest.raises(SystemExit) as e:
        pipeline.main(argv) if job == "pipeline" else _cli.run_single_stage(job, argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"in use by another run: pid {holder.pid} on host {socket.gethostname()}" in err[0]
    assert "winnow run --conf mine.yaml" in err[0] and "--force-unlock" in err[0]


def test_the_lock_is_released_when_the_run_fails(tmp_path, monkeypatch):
    from jobs import pipeline

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("pipelines.core.session.get_spark", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pipeline.main([f"--set=run.root={tmp_path / 'run'}", f"--set=ingest.inputs=[{REPO}/sample_data/web_en-00000.jsonl.gz]"])
    assert not (tmp_path / "run" / "_lock.json").exists()


def test_dry_run_takes_no_lock(tmp_path, holder, capsys):
    from jobs import pipeline

    root = tmp_path / "run"
    assert pipeline.main([f"--set=run.root={root}", f"--set=ingest.inputs=[{REPO}/sample_data/web_en-00000.jsonl.gz]", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "plan:" in out
    # ... and says that a run now would be refused, naming the holder.
    assert f"run.root {root} is in use by another run: pid {holder.pid} on host {socket.gethostname()}" in err
    assert "would be refused (exit 2)" in err


def test_s3_lock_is_a_conditional_put(monkeypatch):
    moto = pytest.importorskip("moto")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto.mock_aws():
        import boto3

        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="winnow-runs")
        cfg = load_config(overrides=["run.root=s3://winnow-runs/run1", "shard.storage.region=us-east-1"])
        held = lock.acquire(cfg, heartbeat=False)
        with pytest.raises(lock.RunLockedError, match="in use by another run"):
            lock.acquire(cfg, heartbeat=False)
        held.release()
        lock.acquire(cfg, heartbeat=False).release()


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_root_that_is_a_file_exits_2_with_one_line_before_any_lock(tmp_path, under):
    # The lock is the first thing a run writes under its root: a root that is a file (or lies below one)
    # is named in one line, not a traceback of the lock's mkdir.
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "hello"}\n')
    root = doc / under if under else doc
    p = subprocess.run([sys.executable, "jobs/pipeline.py", "--conf", "conf/local.yaml",
                        "--set", f"ingest.inputs=[{doc}]", "--set", f"run.root={root}"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"pipeline.py: error: run.root={str(root)!r}: {str(doc)!r} exists and is not a folder"], p.stderr
    assert doc.read_text() == '{"text": "hello"}\n'
