"""The README's command: `spark-submit --packages <delta> jobs/ingest.py --conf conf/local.yaml --set ...`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.core.session import delta_coordinates

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_spark_submit_ingest(tmp_path):
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    cmd = [
        str(bin_dir / "spark-submit"), "--master", "local[2]", "--packages", delta_coordinates(),
        "--conf", "spark.ui.enabled=false", "jobs/ingest.py", "--conf", "conf/local.yaml",
        "--set", "ingest.inputs=[sample_data/*.jsonl.gz]", "--set", f"run.root={tmp_path}",
    ]
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    # 328 records: 322 documents + 6 quarantined (sample_data/generate.py EXPECTED)
    assert "[ingest] in=328 out=322 quarantined=6 (" in r.stdout, r.stdout
    assert (tmp_path / "tables" / "documents" / "_delta_log").is_dir()
    assert (tmp_path / "config" / "ingest.json").is_file()
