"""Crash and resume: SIGKILL the pipeline mid-dedup, then mid-shard, rerun, and get the shards of an
uninterrupted run byte for byte; a killed shard stage never leaves a manifest behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import chain
from tests.chain import REPO, chain_args, output_fingerprint

reference_run = chain.reference_run  # the shared session fixture

pytestmark = pytest.mark.slow


def _kill_when(root: Path, chain: list[str], stage: str, ready, timeout: float = 600) -> list[str]:
    """Run jobs/pipeline.py in its own process group; SIGKILL the group (driver and JVM) once the
    ``[stage] start`` line has been printed and ``ready()`` holds (waited for at most ``timeout`` s
    after that line). Returns the lines printed."""
    p = subprocess.Popen([sys.executable, str(REPO / "jobs" / "pipeline.py"), *chain_args(root, chain)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(f"[{stage}] start"):
                deadline = time.monotonic() + timeout
                while not ready():
                    assert time.monotonic() < deadline and p.poll() is None, "\n".join(lines)
                    time.sleep(0.02)
                os.killpg(p.pid, signal.SIGKILL)
                break
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL, "\n".join(lines)
    return lines


def test_sigkill_mid_dedup_and_mid_shard_then_resume(spark, reference_run, tmp_path, capsys):
    from jobs import pipeline
    from pipelines.config import load_config
    from pipelines.runs import latest_records

    ref_root, chain, expected = reference_run
    if not {"dedup", "shard"} <= set(chain):
        pytest.skip(f"needs dedup and shard on this branch (chain here: {chain})")
    root = tmp_path / "crashed"
    cfg = load_config(overrides=[f"run.root={root}"])

    # 1. Killed as soon as dedup starts: ingest is recorded complete, dedup is not.
    _kill_when(root, chain, "dedup", lambda: True)
    assert set(latest_records(spark, cfg)) == {"ingest"}

    # 2. The rerun skips ingest and is killed while shard files are being written: no manifest.
    megatron = root / "shards" / "megatron"
    lines = _kill_when(root, chain, "shard", lambda: megatron.is_dir() and any(megatron.iterdir()))
    assert "[ingest] skip: up to date" in "\n".join(lines)
    assert not (root / "shards" / "manifest.json").exists()
    assert "shard" not in latest_records(spark, cfg)

    # 3. The second rerun runs shard alone and ends with the uninterrupted run's shards.
    capsys.readouterr()
    assert pipeline.main(chain_args(root, chain)) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines() if "] start" in ln] == ["[shard]"]
    assert output_fingerprint(spark, root, chain) == expected
    assert json.loads((root / "shards" / "manifest.json").read_text())["totals"] == json.loads(
        (ref_root / "shards" / "manifest.json").read_text())["totals"]
