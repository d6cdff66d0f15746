"""Helpers shared by the end-to-end tests: which stages exist here, and a byte-level fingerprint of a run."""

from __future__ import annotations

import hashlib
from pathlib import Path

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
