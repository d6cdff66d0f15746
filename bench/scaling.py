"""How the whole pipeline's cost grows: N vs 4N documents, ``local[1]`` vs ``local[2]``, peak memory.

Each measurement is a fresh ``python jobs/pipeline.py`` process (the chain of every stage that exists,
ingest first) over the seeded corpus of :mod:`bench.corpus` written as JSONL.gz, with its own run root.
A background :class:`bench.common.TreeSampler` reads ``/proc`` for the peak RSS of the driver JVM and
of the Python workers and for the CPU seconds of the whole process tree.

Figures:

* ``exponent`` = log(t(4N) / t(N)) / log 4 over the sum of the stages' own times (the JVM start, ~7 s,
  is not part of the pipeline's cost and would flatter the exponent); 1.0 = linear; goal <= 1.1.
* ``speedup_2_cores`` = t(local[1]) / t(local[2]) at N; 2.0 = perfect.

While some stages do not exist yet (stages merge one by one), a stand-in writes each missing stage's
table (``documents`` from the JSONL; a pass-through copy for dedup/filter/refs; ``[seed_<table>]``
lines, not counted) and the existing stages run through ``run_stage`` in one process (see
:func:`_child`), so the measurements still cover every stage that does exist.

``python -m bench.scaling --docs 2000`` prints the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FILES_PER_N = 8
"""JSONL.gz files per N documents: gzip is not splittable, so files bound ingest's parallelism."""

_SUMMARY = re.compile(r"^\[(?P<stage>\w+)\] in=(?P<rows_in>\d+) out=(?P<rows_out>\d+).*?(?P<s>[\d.]+)s\s*$")


def available_stages() -> list[str]:
    """The stages of the chain whose ``pipelines/<stage>/`` package exists, in chain order."""
    from pipelines.core.chain import STAGES

    return [s for s in STAGES if importlib.util.find_spec(f"pipelines.{s}") is not None]


def parse_summaries(stdout: str) -> dict[str, dict[str, float]]:
    """Stage summary lines (``[dedup] in=… out=… … 12.3s``) -> ``{stage: {rows_in, rows_out, s}}``."""
    out: dict[str, dict[str, float]] = {}
    for line in stdout.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            out[m["stage"]] = {"rows_in": int(m["rows_in"]), "rows_out": int(m["rows_out"]), "s": float(m["s"])}
    return out


def _overrides(root: Path, master: str, stages: list[str], files: list[Path], seed: int, driver_memory: str) -> list[str]:
    return [
        f"run.root={root}",
        f"run.seed={seed}",
        f"spark.master={master}",
        "pipeline.stages=[" + ", ".join(stages) + "]",
        "ingest.inputs=[" + ", ".join(str(f) for f in files) + "]",
        "ingest.format=jsonl",
        "spark.conf={spark.driver.memory: " + driver_memory + ", spark.ui.enabled: 'false'}",
    ]


def run_pipeline(
    files: list[Path], root: Path, master: str, stages: list[str], *, seed: int = 0, driver_memory: str = "3g",
    timeout_s: float = 3600,
) -> dict[str, Any]:
    """Run the chain once in a fresh process and measure it.

    Returns:
        ``wall_s`` (process, JVM start included), ``stages_s`` (sum of stage times), ``stages`` (per stage
        rows and seconds), ``cpu_s`` (process tree), peak RSS by role (MB), load seen, ``ok`` and, on
        failure, the tail of stderr.
    """
    from bench.common import TreeSampler

    sets = _overrides(root, master, stages, files, seed, driver_memory)
    if not has_gaps(stages):
        cmd = [sys.executable, str(REPO / "jobs" / "pipeline.py"), "--conf", str(REPO / "conf" / "local.yaml")]
    else:
        cmd = [sys.executable, "-m", "bench.scaling", "--child", "--conf", str(REPO / "conf" / "local.yaml")]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, text=True)
        with TreeSampler(root=proc.pid, interval=0.25) as sampler:
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    stage_figs = parse_summaries(stdout)
    result: dict[str, Any] = {
        "master": master,
        "ok": rc == 0,
        "wall_s": round(wall, 2),
        "stages_s": round(sum(v["s"] for k, v in stage_figs.items() if not k.startswith("seed_")), 2),
        "stages": stage_figs,
        **sampler.summary(),
    }
    if rc != 0:
        result["returncode"] = rc
        result["stderr_tail"] = stderr[-3000:]
    return result


def _exponent(t_n: float, t_4n: float) -> float | None:
    return round(math.log(t_4n / t_n) / math.log(4), 3) if t_n > 0 and t_4n > 0 else None


def run(n_docs: int, seed: int = 0, *, stages: list[str] | None = None, workdir: str | Path | None = None,
        skip_local1: bool = False) -> dict[str, Any]:
    """Measure the whole pipeline at N and 4N documents on ``local[2]``, and at N on ``local[1]``.

    Args:
        n_docs: N, documents of the small run.
        seed: corpus and ``run.seed``.
        stages: stages to chain (default: every stage that exists, see :func:`available_stages`).
        workdir: folder for the corpus and run roots (default: a temp dir, removed afterwards).
        skip_local1: skip the ``local[1]`` run (quick checks).

    Returns:
        ``runs`` (each measured run), ``exponent`` and ``exponent_cpu`` (N -> 4N, stage time and CPU
        seconds), ``exponent_by_stage``, ``speedup_2_cores``, ``peak_rss_mb`` (largest over runs, by role).
    """
    from bench.corpus import write_jsonl_gz

    stages = stages or available_stages()
    own_tmp = workdir is None
    work = Path(workdir or tempfile.mkdtemp(prefix="winnow-scaling-"))
    try:
        t0 = time.perf_counter()
        files = write_jsonl_gz(work / "corpus", 4 * n_docs, seed, n_files=4 * FILES_PER_N)
        corpus_s = time.perf_counter() - t0
        plan = [("N", files[:FILES_PER_N], "local[2]"), ("4N", files, "local[2]")]
        if not skip_local1:
            plan.append(("N_local1", files[:FILES_PER_N], "local[1]"))
        runs: dict[str, Any] = {}
        for name, fs, master in plan:
            root = work / f"run-{name}"
            print(f"[scaling] {name}: {len(fs)} files, {master}, stages {stages}", file=sys.stderr, flush=True)
            runs[name] = {"n_docs": n_docs * (4 if name == "4N" else 1),
                          **run_pipeline(fs, root, master, stages, seed=seed)}
            shutil.rmtree(root, ignore_errors=True)
    finally:
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    n, n4 = runs["N"], runs["4N"]
    ok = n["ok"] and n4["ok"]
    result: dict[str, Any] = {
        "n_docs": n_docs,
        "stages": stages,
        "mode": "jobs/pipeline.py" if not has_gaps(stages) else "bench.scaling --child: missing stages stood in for by seeded tables",
        "corpus_bytes_gz": sum(f.stat().st_size for f in files) if not own_tmp else None,
        "corpus_write_s": round(corpus_s, 1),
        "runs": runs,
        "exponent": _exponent(n["stages_s"], n4["stages_s"]) if ok else None,
        "exponent_cpu": _exponent(n["cpu_s"], n4["cpu_s"]) if ok else None,
        "exponent_by_stage": {
            s: _exponent(n["stages"][s]["s"], n4["stages"][s]["s"])
            for s in n["stages"] if s in n4["stages"] and not s.startswith("seed_")
        } if ok else {},
    }
    if "N_local1" in runs and runs["N_local1"]["ok"] and n["ok"]:
        result["speedup_2_cores"] = round(runs["N_local1"]["stages_s"] / n["stages_s"], 3) if n["stages_s"] else None
    peaks: dict[str, float] = {}
    for r in runs.values():
        for role, mb in r.get("peak_rss_mb", {}).items():
            peaks[role] = max(peaks.get(role, 0.0), mb)
    result["peak_rss_mb"] = peaks
    result["peak_python_worker_rss_mb"] = max(r.get("peak_python_worker_rss_mb", 0.0) for r in runs.values())
    return result


def _chain_output() -> dict[str, str]:
    """The main document table of each stage before tokenize (the tables a later stage may read)."""
    from pipelines.core import chain

    return {s.name: s.main_table for s in chain.before("tokenize") if s.documents and s.main_table}


CHAIN_OUTPUT: dict[str, str] = _chain_output()


def has_gaps(stages: list[str]) -> bool:
    """True when a stage up to refs is missing before the last stage to run (the chain needs stand-ins)."""
    if not stages:
        return False
    from pipelines.core.chain import STAGES

    upto = STAGES[: STAGES.index(stages[-1]) + 1]
    return any(s in CHAIN_OUTPUT and s not in stages for s in upto)


def _child(argv: list[str]) -> int:
    """Run the chain with stand-ins for stages not built yet.

    A missing ``ingest`` is replaced by a small Spark job writing ``documents`` from the JSONL inputs; a
    missing later stage up to refs by a pass-through copy of the previous table under its output name
    (``[seed_<table>]`` lines, left out of the pipeline's time). Existing stages run through
    :func:`pipelines.core.runner.run_stage`, as ``jobs/pipeline.py`` runs them.
    """
    from pyspark.sql import functions as F

    from jobs._cli import base_parser, parse_config
    from pipelines.core import tables
    from pipelines.core.chain import STAGES
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    parser = base_parser("bench.scaling --child", "the chain with stand-ins for missing stages")
    _, cfg = parse_config(parser, argv)
    spark = get_spark("winnow-bench-scaling", cfg.spark)
    stages = cfg.pipeline.stages
    last = stages[-1] if stages else "ingest"
    previous = None
    for stage in STAGES[: STAGES.index(last) + 1]:
        t0 = time.perf_counter()
        if stage in stages:
            report = run_stage(spark, cfg, stage)
            print(report.summary_line(), flush=True)
        elif stage == "ingest":
            docs = (
                spark.read.schema("id string, text string, source string, url string").json(cfg.ingest.inputs)
                .select(
                    F.col("id").alias("doc_id"), "text", "source", "url",
                    F.create_map().cast("map<string,string>").alias("meta"),
                    F.input_file_name().alias("input_file"),
                    F.length("text").cast("int").alias("n_chars"),
                    F.octet_length("text").cast("int").alias("n_bytes"),
                    F.lit(0).cast("int").alias("n_replaced"),
                )
            )
            tables.write_table(docs, cfg, "documents", properties={"written_by": "bench.scaling"})
        elif stage in CHAIN_OUTPUT and previous is not None:
            src = tables.read_table(spark, cfg, previous)
            tables.write_table(src, cfg, CHAIN_OUTPUT[stage], properties={"written_by": "bench.scaling"})
        if stage not in stages and stage in CHAIN_OUTPUT:
            n = tables.read_table(spark, cfg, CHAIN_OUTPUT[stage]).count()
            print(f"[seed_{CHAIN_OUTPUT[stage]}] in={n} out={n} {time.perf_counter() - t0:.1f}s", flush=True)
        previous = CHAIN_OUTPUT.get(stage, previous)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return _child(argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=int(os.environ.get("BENCH_DOCS", "2000")), help="N documents")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stages", default=None, help="comma-separated stages (default: all that exist)")
    p.add_argument("--skip-local1", action="store_true", help="skip the local[1] run")
    args = p.parse_args(argv)
    stages = args.stages.split(",") if args.stages else None
    res = run(args.docs, args.seed, stages=stages, skip_local1=args.skip_local1)
    from bench.common import format_table

    rows = [{"run": k, "docs": r["n_docs"], "master": r["master"], "ok": r["ok"], "stages_s": r["stages_s"],
             "wall_s": r["wall_s"], "cpu_s": r.get("cpu_s"), "jvm_mb": r["peak_rss_mb"].get("jvm"),
             "workers_mb": r["peak_rss_mb"].get("python_worker")} for k, r in res["runs"].items()]
    print(format_table(rows, markdown=False))
    print(json.dumps({k: v for k, v in res.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
