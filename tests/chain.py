"""Helpers shared by the end-to-end tests: which stages exist here, and a byte-level fingerprint of a run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipelines.config import STAGES

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"


def implemented_chain() -> list[str]:
    """The leading run of stages (ingest..shard) that have a ``pipelines/<stage>.py`` here."""
    chain: list[str] = []
    for s in STAGES[:-1]:
        if not (REPO / "pipelines" / f"{s}.py").is_file():
            break
        chain.append(s)
    return chain


def has_sample_data() -> bool:
    return SAMPLE_DATA.is_dir() and any(p.is_file() and p.suffix != ".py" for p in SAMPLE_DATA.iterdir())


def output_fingerprint(spark, root: Path, chain: list[str]) -> dict[str, str]:
    """sha256 of every shard file when the run has a manifest, else of the last table's rows (sorted
    JSON lines), so two runs compare byte for byte."""
    shards = root / "shards"
    if (shards / "manifest.json").exists():
        files = sorted(p for p in shards.rglob("*") if p.is_file() and p.name != "manifest.json")
        return {str(p.relative_to(shards)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    from pipelines.runs import STAGE_TABLES

    table = STAGE_TABLES[chain[-1]][0]
    rows = spark.read.format("delta").load(str(root / "tables" / table)).toJSON().collect()
    return {table: hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest(), "rows": str(len(rows))}


def chain_args(root: Path, chain: list[str]) -> list[str]:
    """jobs/pipeline.py arguments for ``chain`` on sample_data/ under ``root`` (4 shuffle partitions)."""
    import json

    return ["--set", f"run.root={root}", "--set", f"pipeline.stages={json.dumps(chain)}",
            "--set", f"ingest.inputs=[{SAMPLE_DATA}/*]", "--set", "spark.shuffle_partitions=4"]


@pytest.fixture(scope="session")
def reference_run(spark, tmp_path_factory) -> tuple[Path, list[str], dict[str, str]]:
    """One uninterrupted local-mode run of the implemented chain on sample_data/, shared by the resume
    and cluster tests: ``(root, chain, output_fingerprint)``."""
    from jobs import pipeline

    chain = implemented_chain()
    if not chain or not has_sample_data():
        pytest.skip(f"needs the ingest stage and sample_data/ (chain here: {chain})")
    # Imported into two test modules, pytest may build the fixture once per module: run the chain once.
    if "run" not in _REFERENCE:
        root = tmp_path_factory.mktemp("reference") / "run"
        assert pipeline.main([*chain_args(root, chain), "--quiet"]) == 0
        _REFERENCE["run"] = (root, chain, output_fingerprint(spark, root, chain))
    return _REFERENCE["run"]


_REFERENCE: dict[str, tuple[Path, list[str], dict[str, str]]] = {}
