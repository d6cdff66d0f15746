"""Helpers shared by the end-to-end tests: a small input, one reference run, a pause hook, a byte-level
fingerprint of a run.

``python -m tests.chain MODULE:FUNCTION[:ARG] <jobs/pipeline.py args>`` runs the pipeline with
``MODULE.FUNCTION`` wrapped so that, when called (with a positional argument equal to ``ARG`` if given),
it prints ``[pause] MODULE:FUNCTION`` and sleeps: the resume test SIGKILLs the process on that line, so
the kill lands at a named point inside a stage whatever the machine's speed.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib
import itertools
import json
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from pipelines.core.chain import STAGES

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"

SUBSET_RECORDS = 40
"""Records kept from the head of each sample_data/ JSONL file for the end-to-end runs (WET files are
kept whole). Enough that documents reach every shard; small, since the chain's cost here is per stage
and per Delta commit, not per document."""

SEQ_LEN = 64
"""MDS sample length of the end-to-end runs: short enough that the few surviving documents fill MDS
samples, so MDS shard files are compared too (at the default 2048 every token would be dropped)."""

VALIDATION = 0.2
"""Fraction of documents the end-to-end runs hold out (shard.split.validation), so that the validation
shard set is written, compared and read by the loaders too."""

SHUFFLE_PARTITIONS = 2
"""Shuffle partitions of the end-to-end runs: one task per core of local[2] and of the two 1-core workers."""

PAUSE = "[pause] "
"""Prefix of the line ``python -m tests.chain`` prints when it reaches its pause point."""


class Reference(NamedTuple):
    """The uninterrupted local-mode run every end-to-end test compares with."""

    root: Path
    chain: list[str]
    inputs: Path
    fingerprint: dict[str, str]


def implemented_chain() -> list[str]:
    """The leading run of stages (ingest..shard) that have a ``pipelines/<stage>/`` package here."""
    chain: list[str] = []
    for s in STAGES[:-1]:
        if not (REPO / "pipelines" / s / "__init__.py").is_file():
            break
        chain.append(s)
    return chain


def has_sample_data() -> bool:
    return SAMPLE_DATA.is_dir() and any(p.is_file() and p.suffix != ".py" for p in SAMPLE_DATA.iterdir())


def small_inputs(dest: Path, records: int = SUBSET_RECORDS) -> Path:
    """Write a handful of sample documents to ``dest``: the first ``records`` lines of every JSONL file
    of sample_data/ and every WET/WARC file whole (one gzip member per record there, so cutting it
    would need a WARC parser). Read at test time: sample_data/ may change under the tests."""
    dest.mkdir(parents=True, exist_ok=True)
    for src in sorted(SAMPLE_DATA.iterdir()):
        name = src.name
        if ".jsonl" in name:
            gz = name.endswith(".gz")
            with (gzip.open if gz else open)(src, "rb") as f:
                head = b"".join(itertools.islice(f, records))
            # mtime=0: the same bytes every time, as generate.py writes them.
            (dest / name).write_bytes(gzip.compress(head, mtime=0) if gz else head)
        elif ".wet" in name or ".warc" in name:
            shutil.copyfile(src, dest / name)
    return dest


def output_fingerprint(spark, root: Path, chain: list[str]) -> dict[str, str]:
    """sha256 of every shard file when the run has a manifest, else of the last table's rows (sorted
    JSON lines), so two runs compare byte for byte. The manifest and the ``blend/`` files name the run's
    own output location (loaders need it), so runs under two roots are compared on the data and MDS
    index files only."""
    shards = root / "shards"
    if (shards / "manifest.json").exists():
        files = sorted(p for p in shards.rglob("*")
                       if p.is_file() and p.name != "manifest.json" and p.relative_to(shards).parts[0] != "blend")
        return {str(p.relative_to(shards)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    from pipelines.core.chain import stage

    table = stage(chain[-1]).main_table
    rows = spark.read.format("delta").load(str(root / "tables" / table)).toJSON().collect()
    return {table: hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest(), "rows": str(len(rows))}


def chain_args(root: Path, chain: list[str], inputs: Path) -> list[str]:
    """jobs/pipeline.py arguments for ``chain`` on the files under ``inputs``, writing under ``root``."""
    return ["--set", f"run.root={root}", "--set", f"pipeline.stages={json.dumps(chain)}",
            "--set", f"ingest.inputs=[{inputs}/*]", "--set", f"spark.shuffle_partitions={SHUFFLE_PARTITIONS}",
            "--set", f"shard.seq_len={SEQ_LEN}", "--set", f"shard.split.validation={VALIDATION}"]


@contextmanager
def session_conf_kept(spark):
    """Restore the shared session's shuffle partitions after an in-process ``pipeline.main`` (which
    applies the run's ``spark.shuffle_partitions`` to the active session)."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    try:
        yield
    finally:
        spark.conf.set(key, before)


@pytest.fixture(scope="session")
def reference_run(spark, tmp_path_factory) -> Reference:
    """One uninterrupted local-mode run of the implemented chain on :func:`small_inputs`, shared by the
    resume and cluster tests."""
    from jobs import pipeline

    chain = implemented_chain()
    if not chain or not has_sample_data():
        pytest.skip(f"needs the ingest stage and sample_data/ (chain here: {chain})")
    # Imported into two test modules, pytest may build the fixture once per module: run the chain once.
    if "run" not in _REFERENCE:
        base = tmp_path_factory.mktemp("reference")
        inputs = small_inputs(base / "inputs")
        root = base / "run"
        with session_conf_kept(spark):
            assert pipeline.main([*chain_args(root, chain, inputs), "--quiet"]) == 0
        _REFERENCE["run"] = Reference(root, chain, inputs, output_fingerprint(spark, root, chain))
    return _REFERENCE["run"]


_REFERENCE: dict[str, Reference] = {}


def pause_at(target: str) -> None:
    """Wrap ``MODULE:FUNCTION[:ARG]`` so that calling it prints ``[pause] target`` and sleeps for good."""
    module, attr, *arg = target.split(":")
    mod = importlib.import_module(module)
    original = getattr(mod, attr)

    @functools.wraps(original)
    def paused(*args, **kwargs):
        if not arg or arg[0] in (str(a) for a in args):
            print(f"{PAUSE}{target}", flush=True)
            while True:
                time.sleep(60)
        return original(*args, **kwargs)

    setattr(mod, attr, paused)


if __name__ == "__main__":
    from jobs import pipeline

    pause_at(sys.argv[1])
    sys.exit(pipeline.main(sys.argv[2:]))
