"""Scale benchmark: one large JSONL file and one large Parquet file through ingest -> dedup -> filter ->
tokenize -> shard on ``local[2]``, with peak memory by role and MB/s per core per stage.

``python -m bench.scale [jsonl_mb] [parquet_mb]``; ``python -m bench.scale inputs FOLDER JSONL_MB
PARQUET_MB`` writes the inputs only and ``python -m bench.scale chain FOLDER ROOT`` runs the chain alone on
them (:func:`chain_only`, for commits compared in turn on the same inputs); the ``make bench`` part ``scale`` reads the sizes
from ``BENCH_SCALE_MB`` (JSONL; default 2500, over Spark's 2 GB ``binaryFile`` limit) and
``BENCH_SCALE_PARQUET_MB`` (default 1000). The corpus is generated (:mod:`bench.corpus`, ~3.5 KB
documents, 2 % exact copies), nothing is shipped. The chain runs as ``jobs/pipeline.py`` in one
process tree with the driver memory Winnow sets for a local run (:func:`pipelines.core.session.local_driver_memory`);
per stage, MB/s per core = input text MB / (stage seconds x 2 cores), from each stage's end line, and MB per
CPU-second = input text MB / CPU-seconds of the whole process tree between the previous stage's end line and
this one's (the figure that survives a shared machine; ingest's includes session start).

The ingest goal (20 MB/s per core on JSONL) is checked apart, before the chain, by
:mod:`bench.ingest_scale` on the first ``BENCH_SCALE_INGEST_MB`` (default 1000) MB of ``big.jsonl``: the
ingest stage alone in a fresh ``local[2]`` session, MB of input per CPU-second of the whole process tree
(driver, JVM, Python workers) for the stage's work, session start apart; with Spark's floor beside it
(``spark.read.text`` into ``noop``, ``spark.read.json`` into Delta). ``goals.ingest_mb_per_cpu_s`` is that
figure; the chain's ingest figure (JSONL and Parquet, session start and JIT included) stays in ``stages``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import TreeSampler
from bench.corpus import iter_texts

REPO = Path(__file__).resolve().parents[1]
STAGES = ("ingest", "dedup", "filter", "tokenize", "shard")
_END = re.compile(r"^\[(\w+)\] in=(\d+) out=(\d+).* ([0-9.]+)s$")


def write_inputs(folder: Path, jsonl_mb: float, parquet_mb: float, seed: int = 0) -> dict:
    """One ``big.jsonl`` of about ``jsonl_mb`` MB and one ``big.parquet`` of about ``parquet_mb`` MB
    (row groups of 20,000 rows), documents continuing one seeded stream; returns sizes and counts."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = iter_texts(10**9, seed)
    n_json = 0
    with open(folder / "big.jsonl", "w") as f:
        size = 0
        while size < jsonl_mb * 1e6:
            t = next(texts)
            line = json.dumps({"id": f"j{n_json}", "text": t}) + "\n"
            f.write(line)
            size += len(line)
            n_json += 1
            if n_json % 50 == 0:  # an exact copy every 50 documents, for dedup to find
                f.write(json.dumps({"id": f"j{n_json}-copy", "text": t}) + "\n")
                n_json += 1
    n_pq, written = 0, 0
    writer = None
    while written < parquet_mb * 1e6:
        rows = [next(texts) for _ in range(20_000)]
        table = pa.table({"id": [f"p{n_pq + i}" for i in range(len(rows))], "text": rows})
        writer = writer or pq.ParquetWriter(folder / "big.parquet", table.schema)
        writer.write_table(table, row_group_size=20_000)
        n_pq += len(rows)
        written += sum(len(r) for r in rows)
    if writer:
        writer.close()
    return {"jsonl_mb": round((folder / "big.jsonl").stat().st_size / 1e6, 1), "jsonl_docs": n_json,
            "parquet_mb": round((folder / "big.parquet").stat().st_size / 1e6, 1) if n_pq else 0, "parquet_docs": n_pq,
            "parquet_text_mb": round(written / 1e6, 1)}


def ingest_alone(jsonl: Path, work: Path, mb: float) -> dict:
    """:func:`bench.ingest_scale.measure` (Winnow's ingest and Spark's floor, each in a fresh session) on
    the first ``mb`` MB of ``jsonl`` (whole lines; the file itself when it is no larger)."""
    from bench.ingest_scale import measure as measure_alone

    path = jsonl
    if jsonl.stat().st_size > mb * 1e6:
        path = work / "ingest-alone.jsonl"
        with open(jsonl, "rb") as src, open(path, "wb") as dst:
            left = int(mb * 1e6)
            while left > 0 and (chunk := src.read(min(left, 1 << 24))):
                dst.write(chunk)
                left -= len(chunk)
            dst.write(src.readline())  # to the end of the line the cut fell in
    return measure_alone(path, ("winnow", "text_noop", "json_delta"))


def _progress(res: dict) -> None:
    """Write the figures so far to ``$WINNOW_BENCH_PARTIAL`` (set by ``bench.run``) and to stdout, so a run
    that is killed or fails still says how far it got and what each finished stage cost."""
    if path := os.environ.get("WINNOW_BENCH_PARTIAL"):
        Path(path).write_text(json.dumps(res, default=str, indent=1))
    print("SCALE-PROGRESS " + json.dumps(res, default=str), flush=True)


def run_chain(inputs: list[str], root: Path, cores: int = 2, extra: list[str] | None = None,
              facts: dict | None = None, stages: tuple[str, ...] = STAGES) -> dict:
    """Run the chain once in a child process; per-stage rows, seconds, CPU-seconds and peak RSS by role,
    the tree's CPU and memory. Each stage's figures are written by :func:`_progress` as it ends."""
    cmd = [sys.executable, "jobs/pipeline.py", "--conf", "conf/local.yaml", "--set", f"run.root={root}",
           "--set", f"ingest.inputs={json.dumps(inputs)}", "--set", f"pipeline.stages=[{', '.join(stages)}]",
           "--set", "tokenize.input_table=null", "--set", f"spark.master=local[{cores}]",
           "--set", f"spark.shuffle_partitions={4 * cores}", "--set", "shard.num_shards=4", *(extra or [])]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stages: dict[str, dict] = {}
    tail: list[str] = []
    with TreeSampler(root=proc.pid, interval=1.0) as sampler:
        cpu_before = 0.0
        for line in proc.stdout:  # type: ignore[union-attr]
            tail = (tail + [line.rstrip()])[-30:]
            if m := _END.match(line.strip()):
                sampler.sample()
                summary = sampler.summary()
                # Peaks are per stage: reset after each stage's end (the sampler thread only raises them).
                sampler.peak_rss.clear()
                sampler.peak_worker_rss = 0
                stages[m.group(1)] = {"rows_in": int(m.group(2)), "rows_out": int(m.group(3)), "seconds": float(m.group(4)),
                                      "cpu_s": round(summary["cpu_s"] - cpu_before, 1),
                                      "peak_rss_mb": summary["peak_rss_mb"],
                                      "peak_python_worker_rss_mb": summary["peak_python_worker_rss_mb"],
                                      "load1_mean": summary["load1_mean"]}
                cpu_before = summary["cpu_s"]
                _progress({**(facts or {}), "finished": False, "stages_done": list(stages),
                           "elapsed_s": round(time.perf_counter() - t0, 1), "stages": stages})
        rc = proc.wait()
    total = sampler.summary()
    # Peaks were reset at each stage's end: the run's peak is the largest of the stages' and the rest's.
    for f in stages.values():
        for role, mb in f["peak_rss_mb"].items():
            total["peak_rss_mb"][role] = max(total["peak_rss_mb"].get(role, 0.0), mb)
        total["peak_python_worker_rss_mb"] = max(total["peak_python_worker_rss_mb"], f["peak_python_worker_rss_mb"])
    return {"finished": rc == 0, "returncode": rc, "wall_s": round(time.perf_counter() - t0, 1), "stages": stages,
            **total, **({} if rc == 0 else {"tail": tail})}


def describe_inputs(folder: Path) -> dict:
    """The facts :func:`write_inputs` returns, for a folder it wrote earlier (``BENCH_SCALE_INPUTS``)."""
    import pyarrow.compute as pc

    with open(folder / "big.jsonl", "rb") as f:
        n_json = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    facts = {"jsonl_mb": round((folder / "big.jsonl").stat().st_size / 1e6, 1), "jsonl_docs": n_json,
             "parquet_mb": 0, "parquet_docs": 0, "parquet_text_mb": 0, "reused_inputs": str(folder)}
    if (folder / "big.parquet").is_file():
        pf = pq.ParquetFile(folder / "big.parquet")
        text_bytes = sum(pc.sum(pc.utf8_length(pf.read_row_group(i, columns=["text"])["text"])).as_py()
                         for i in range(pf.num_row_groups))
        facts.update(parquet_mb=round((folder / "big.parquet").stat().st_size / 1e6, 1),
                     parquet_docs=pf.metadata.num_rows, parquet_text_mb=round(text_bytes / 1e6, 1))
    return facts


def run(n_docs: int = 0, seed: int = 0) -> dict:
    """The ``make bench`` part: sizes from ``BENCH_SCALE_MB`` / ``BENCH_SCALE_PARQUET_MB``, or the files
    ``big.jsonl`` / ``big.parquet`` of an earlier run's folder ``BENCH_SCALE_INPUTS`` (generating 3.5 GB
    takes ~15 CPU-minutes)."""
    reuse = os.environ.get("BENCH_SCALE_INPUTS")
    return measure(float(os.environ.get("BENCH_SCALE_MB", 2500)), float(os.environ.get("BENCH_SCALE_PARQUET_MB", 1000)), seed,
                   inputs=Path(reuse) if reuse else None)


def measure(jsonl_mb: float, parquet_mb: float, seed: int = 0, cores: int = 2, inputs: Path | None = None) -> dict:
    from pipelines.core.session import local_driver_memory

    work = Path(tempfile.mkdtemp(prefix="winnow-scale-"))
    try:
        t0 = time.perf_counter()
        if inputs is None:
            inputs = work / "in"
            facts = write_inputs(inputs, jsonl_mb, parquet_mb, seed)
        else:
            facts = describe_inputs(inputs)
        facts["generate_s"] = round(time.perf_counter() - t0, 1)
        files = [str(inputs / "big.jsonl")] + ([str(inputs / "big.parquet")] if facts["parquet_docs"] else [])
        alone = ingest_alone(inputs / "big.jsonl", work, float(os.environ.get("BENCH_SCALE_INGEST_MB", 1000)))
        facts["ingest_alone"] = alone
        _progress({**facts, "finished": False, "stages_done": []})
        chain = run_chain(files, work / "out", cores, facts=facts)
        mb = facts["jsonl_mb"] + facts["parquet_text_mb"]
        docs = facts["jsonl_docs"] + facts["parquet_docs"]
        per_stage = {}
        for s, f in chain["stages"].items():
            share = f["rows_in"] / docs if docs else 0  # input MB of the stage ~ its share of the documents
            per_stage[s] = {**f, "mb_per_s_core": round(mb * share / max(f["seconds"], 1e-9) / cores, 2),
                            "mb_per_cpu_s": round(mb * share / max(f["cpu_s"], 1e-9), 2)}
        res = {**facts, "cores": cores, "driver_memory": local_driver_memory(), **chain, "stages": per_stage}
        winnow = alone["variants"].get("winnow", {})
        res["goals"] = {"ingest_mb_per_cpu_s": winnow.get("mb_per_cpu_s"),
                        "ingest_chain_mb_per_cpu_s": per_stage.get("ingest", {}).get("mb_per_cpu_s")}
        return res
    finally:
        if keep := os.environ.get("BENCH_SCALE_KEEP"):  # inputs and run root, for inspect / audit afterwards
            shutil.move(str(work), keep)
        else:
            shutil.rmtree(work, ignore_errors=True)


def chain_only(folder: Path, root: Path, cores: int = 2) -> dict:
    """The chain alone on the inputs :func:`write_inputs` left in ``folder``, into ``root``: per stage
    CPU-seconds, seconds and load, and the whole chain's MB of text per CPU-second. Run it from two
    checkouts in turn on the same ``folder`` to compare commits (the before/after of ``bench/notes.md``)."""
    facts = describe_inputs(folder)
    files = [str(folder / "big.jsonl")] + ([str(folder / "big.parquet")] if facts["parquet_docs"] else [])
    chain = run_chain(files, root, cores, facts=facts)
    cpu = sum(f["cpu_s"] for f in chain["stages"].values())
    mb = facts["jsonl_mb"] + facts["parquet_text_mb"]
    return {**facts, "finished": chain["finished"], "wall_s": chain["wall_s"], "cpu_s": round(cpu, 1),
            "mb_per_cpu_s": round(mb / cpu, 3) if cpu else None,
            "stages": {s: {k: f[k] for k in ("cpu_s", "seconds", "load1_mean")} for s, f in chain["stages"].items()}}


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["inputs"]:  # python -m bench.scale inputs FOLDER JSONL_MB PARQUET_MB
        print(json.dumps(write_inputs(Path(a[1]), float(a[2]), float(a[3]))))
    elif a[:1] == ["chain"]:  # python -m bench.scale chain FOLDER ROOT
        print(json.dumps(chain_only(Path(a[1]), Path(a[2])), indent=1))
    else:
        print(json.dumps(measure(float(a[0]) if a else 2500, float(a[1]) if len(a) > 1 else 1000), indent=1))
