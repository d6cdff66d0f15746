"""Shared fixtures: one local[2] SparkSession for the whole suite, run configs, the shared data folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Before any JVM starts: loopback only, and Python workers import this checkout's packages.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python workers run this interpreter (the venv with pyarrow/tokenizers), not whatever python3 is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])

SHARED_DATA = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data"))

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.driver.memory": "2g",
}


@pytest.fixture(scope="session")
def spark():
    """The suite's one SparkSession: local[2], 4 shuffle partitions, Delta enabled, UI off."""
    from pipelines.core.config import SparkConfig
    from pipelines.core.session import get_spark

    session = get_spark("winnow-tests", SparkConfig(master="local[2]", shuffle_partitions=4, conf=TEST_SPARK_CONF))
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _drop_cached_frames(request):
    """After each test that used the session, drop every frame it left persisted.

    Tests call transforms (dedup's and passages' ``annotate``) that persist frames for their caller to
    release; left in the suite's one JVM, each pins the broadcast relations of its plan on the driver's
    heap, and a few hundred tests later a 2 GB driver could not build a small broadcast."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()


@pytest.fixture
def make_cfg(tmp_path):
    """Build a WinnowConfig rooted in this test's tmp dir: ``make_cfg("dedup.threshold=0.9", ...)``."""
    from pipelines.core.config import load_config

    def _make(*overrides: str, root: Path | None = None):
        base = [f"run.root={root or tmp_path / 'run'}", "spark.shuffle_partitions=4"]
        return load_config(overrides=[*base, *overrides])

    return _make


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or $WINNOW_SHARED_DATA); tests that need it skip, saying so, when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set WINNOW_SHARED_DATA)")
    return SHARED_DATA
