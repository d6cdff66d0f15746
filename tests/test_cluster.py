"""A real Spark standalone cluster (master + two workers on 127.0.0.1) runs jobs/pipeline.py shipped as a
zip with --py-files, and its outputs equal a local-mode run byte for byte."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from tests import chain
from tests.chain import chain_args, output_fingerprint

reference_run = chain.reference_run  # the shared session fixture

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def build_zip(dest: Path) -> Path:
    """The `make dist` zip: every file of pipelines/, udfs/, jobs/ (same code as the Makefile)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for d in ("pipelines", "udfs", "jobs"):
            for p in sorted((REPO / d).rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    z.write(p, p.relative_to(REPO))
    return dest


def _clean_env(tmp: Path) -> dict[str, str]:
    # No PYTHONPATH: executors must import Winnow from the --py-files zip, not from this checkout.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_GATEWAY_PORT")}
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_NO_DAEMONIZE": "1"})
    return env


def _wait_for(path: Path, pattern: str, timeout: float, proc: subprocess.Popen, count: int = 1) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(pattern, path.read_text(errors="replace")) if path.exists() else []
        if len(found) >= count:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} x{count} not seen in {path} within {timeout}s:\n{path.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a master and two 1-core/1 GB workers on ephemeral ports; always torn down."""
    tmp = tmp_path_factory.mktemp("cluster")
    env = _clean_env(tmp)
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = tmp / f"{name}.log"
        p = subprocess.Popen([str(BIN / "spark-class"), *args], cwd=tmp, env=env, stdout=log.open("w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p, log

    try:
        master, mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", "0", "--webui-port", "0")
        url = _wait_for(mlog, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", 180, master)[0]
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                  "--webui-port", "0", "--cores", "1", "--memory", "1g", "--work-dir", str(tmp / f"work{i}"), url)
        _wait_for(mlog, r"Registering worker", 180, master, count=2)
        yield url, env
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def zip_only_python(dest: Path) -> Path:
    """A python for the driver and executors that cannot see this checkout or the venv's editable install.

    ``-S`` skips site processing, so the ``__editable__`` finder the venv's ``.pth`` file installs (it
    maps ``pipelines``/``udfs``/``jobs`` to whichever checkout ran ``pip install -e``) never loads;
    the venv's site-packages is appended to the ``PYTHONPATH`` Spark sets (pyspark, py4j, the
    ``--py-files`` zip), so third-party packages still import and Winnow comes from the zip alone.
    """
    site = sysconfig.get_paths()["purelib"]
    dest.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec {sys.executable} -S "$@"\n')
    dest.chmod(0o755)
    return dest


@pytest.mark.cluster
@pytest.mark.slow
def test_standalone_cluster_matches_local_mode(spark, reference_run, standalone_cluster, tmp_path):
    from pipelines.core.session import delta_coordinates

    ref = reference_run
    url, env = standalone_cluster

    # A clean copy of the code: the zip for executors, the zip's own files for the driver script.
    zip_path = build_zip(tmp_path / "dist" / "winnow.zip")
    app = tmp_path / "app"
    zipfile.ZipFile(zip_path).extractall(app)
    python = str(zip_only_python(tmp_path / "python"))
    probe = subprocess.run([python, "-c", "import pyarrow, pyspark, delta; import pipelines"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert "No module named 'pipelines'" in probe.stderr, probe.stderr  # only the zip can provide Winnow

    cluster_root = tmp_path / "cluster"
    cmd = [str(BIN / "spark-submit"), "--master", url, "--packages", delta_coordinates(), "--py-files", str(zip_path),
           "--driver-memory", "1g", "--executor-memory", "700m", "--conf", f"spark.pyspark.python={python}",
           "--conf", f"spark.pyspark.driver.python={python}", "--conf", "spark.ui.enabled=false",
           # What get_spark gives a local master (pipelines/core/session.py): Delta's 50 log-replay tasks per
           # snapshot would cost this test minutes on two 1-core workers.
           "--conf", "spark.databricks.delta.snapshotPartitions=2",
           str(app / "jobs" / "pipeline.py"), *chain_args(cluster_root, ref.chain, ref.inputs), "--quiet"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    # --quiet, for schedulers: stdout holds one summary line per stage and nothing else.
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert all(re.match(r"\[\w+\] in=\d+ out=\d+", ln) for ln in lines), r.stdout
    assert [ln.split("]")[0] + "]" for ln in lines] == [f"[{s}]" for s in ref.chain], r.stdout
    assert output_fingerprint(spark, cluster_root, ref.chain) == ref.fingerprint


def test_zip_holds_every_module(tmp_path):
    names = set(zipfile.ZipFile(build_zip(tmp_path / "winnow.zip")).namelist())
    assert {"jobs/pipeline.py", "pipelines/core/runs.py", "pipelines/report/stage.py", "udfs/__init__.py"} <= names
    assert not [n for n in names if "__pycache__" in n]
    shutil.rmtree(tmp_path)
