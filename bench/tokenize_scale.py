"""Tokenize and shard alone on an existing run root's tables, CPU-seconds split by process role.

One stage per call, in this process: the Spark session is built first, then the process tree is sampled
(:class:`bench.common.TreeSampler`) from just before the stage to just after it, so the figures leave out
the session's start. CPU is split by role (:func:`bench.common.classify`): the driver's Python, the JVM
(driver and executor threads in one process in ``local[k]``), the Python workers.

``prepare`` makes a run root whose input tables are symbolic links to another root's (read, never
written) and whose ``_runs`` and ``removed`` tables are copies, so a stage can run on the shared scale
tables without writing under them. ``kernel`` times tiktoken's ``encode_ordinary_batch`` on the texts
of a table, in one process on one thread: the stage's kernel, for the ratio stage CPU / kernel CPU.

Run from a checkout, e.g.::

    PYTHONPATH=$PWD python bench/tokenize_scale.py prepare --from /work/scaleroot-main --to /tmp/x \
        --link filtered
    PYTHONPATH=$PWD python bench/tokenize_scale.py stage tokenize --root /tmp/x
    PYTHONPATH=$PWD python bench/tokenize_scale.py kernel --table /work/scaleroot-main/tables/filtered
"""

from __future__ import annotations

import os
import sys

# Run as a script, Python puts bench/ first on sys.path, where bench/tokenize.py would shadow the standard
# library's tokenize module: put the checkout's root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.getcwd()

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.common import TreeSampler, cpu_by_role, delta_files, roles  # noqa: E402

CHAIN = "[ingest, dedup, filter, tokenize, shard]"
"""``pipeline.stages`` of ``bench.scale.run_chain`` (tokenize reads ``filtered``)."""


def prepare(src: Path, dst: Path, link: list[str]) -> None:
    """A run root at ``dst`` reading ``src``'s tables ``link`` (symlinks) with copies of its bookkeeping.

    Raises:
        FileNotFoundError: a table of ``link`` is missing under ``src``.
    """
    shutil.rmtree(dst, ignore_errors=True)
    (dst / "tables").mkdir(parents=True)
    for name in link:
        target = (src / "tables" / name).resolve()
        if not target.is_dir():
            raise FileNotFoundError(f"no table {name!r} under {src}/tables")
        (dst / "tables" / name).symlink_to(target)
    for name in ("_runs", "removed"):
        if (src / "tables" / name).is_dir():
            shutil.copytree(src / "tables" / name, dst / "tables" / name)
    if (src / "config").is_dir():
        shutil.copytree(src / "config", dst / "config")


class _RoleSampler(TreeSampler):
    """A :class:`TreeSampler` that also remembers each process's role."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.role_of: dict[int, str] = {}

    def sample(self) -> None:
        self.role_of.update(roles(self.root or os.getpid()))
        super().sample()

    def by_role(self) -> dict[str, float]:
        return cpu_by_role(self.cpu_by_pid, self.role_of)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU-seconds of the live threads of process ``pid`` by thread name, digits dropped (``GC Thread#3``
    -> ``GC Thread#``): the JVM's split between task threads, garbage collection and the JIT compiler."""
    import re

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = re.sub(r"[0-9]+", "", raw[raw.index("(") + 1: raw.rindex(")")]).strip()
        fields = raw[raw.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def run_stage(stage: str, root: Path, overrides: list[str], event_log: Path | None = None) -> dict:
    """Run ``stage`` on ``root`` (``conf/local.yaml``, ``local[2]``, 8 shuffle partitions, 4 shards, as
    ``bench.scale.run_chain``); returns its CPU-seconds by role, wall seconds and load.

    Args:
        event_log: a folder for Spark's event log (read by :func:`spark_stages`), or None for none.
    """
    from jobs._cli import spark_config
    from pipelines.core.config import load_config
    from pipelines.core.runs import run_and_record
    from pipelines.core.session import get_spark

    sets = [f"run.root={root}", f"pipeline.stages={CHAIN}", "tokenize.input_table=null", "spark.master=local[2]",
            "spark.shuffle_partitions=8", "shard.num_shards=4", *overrides]
    cfg = load_config(["conf/local.yaml"], sets)
    scfg = spark_config(cfg, True)
    if event_log is not None:
        event_log.mkdir(parents=True, exist_ok=True)
        scfg = scfg.model_copy(update={"conf": {**scfg.conf, "spark.eventLog.enabled": "true",
                                                "spark.eventLog.dir": f"file://{event_log}",
                                                "spark.eventLog.compress": "false"}})
    spark = get_spark(f"bench-{stage}", scfg)
    spark.range(1).count()  # the JVM's start-up work, before the sampled part
    sampler = _RoleSampler(root=os.getpid(), interval=0.5)
    with sampler:
        before = dict(sampler.cpu_by_pid)
        jvm = next((pid for pid, role in sampler.role_of.items() if role == "jvm"), None)
        threads0 = thread_cpu(jvm) if jvm else {}
        t0 = time.perf_counter()
        report = run_and_record(spark, cfg, stage)
        wall = time.perf_counter() - t0
        sampler.sample()
        threads = {k: round(v - threads0.get(k, 0.0), 1) for k, v in (thread_cpu(jvm) if jvm else {}).items()}
    cpu = sampler.by_role()
    for pid, c in before.items():  # CPU spent before the stage (session start) is not the stage's
        role = sampler.role_of.get(pid, "other")
        cpu[role] -= c
    spark.stop()
    return {"stage": stage, "root": str(root), "start": time.strftime("%H:%M:%S", time.gmtime(time.time() - wall)),
            "wall_s": round(wall, 1), "cpu_s": round(sum(cpu.values()), 1),
            "cpu_by_role": {k: round(v, 1) for k, v in sorted(cpu.items())},
            "jvm_threads": dict(sorted(((k, v) for k, v in threads.items() if v >= 0.3), key=lambda kv: -kv[1])),
            "load1_mean": sampler.summary()["load1_mean"], "rows_out": report.rows_out}


def spark_stages(log: Path) -> list[dict]:
    """Per Spark stage of an event log: its name (call site), tasks, executor CPU and run time (s),
    bytes read, shuffle bytes written and read; in submission order."""
    stages: list[dict] = []
    files = sorted(log.iterdir()) if log.is_dir() else [log]  # Spark 4 writes a folder of rolled files
    lines = [line for f in files if f.name.startswith("events") for line in f.read_text().splitlines()]
    for line in lines:
        ev = json.loads(line)
        if ev.get("Event") != "SparkListenerStageCompleted":
            continue
        info = ev["Stage Info"]
        acc = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}

        def val(name: str, acc: dict = acc) -> float:
            v = acc.get(name)
            return float(v) if v is not None else 0.0

        stages.append({"id": info["Stage ID"], "name": info["Stage Name"], "tasks": info["Number of Tasks"],
                       "cpu_s": round(val("internal.metrics.executorCpuTime") / 1e9, 2),
                       "run_s": round(val("internal.metrics.executorRunTime") / 1e3, 2),
                       "read_mb": round(val("internal.metrics.input.bytesRead") / 1e6, 1),
                       "shuffle_write_mb": round(val("internal.metrics.shuffle.write.bytesWritten") / 1e6, 1),
                       "shuffle_read_mb": round((val("internal.metrics.shuffle.read.remoteBytesRead")
                                                 + val("internal.metrics.shuffle.read.localBytesRead")) / 1e6, 1)})
    return stages


def kernel(table: Path, limit_mb: float | None) -> dict:
    """CPU-seconds of tiktoken ``encode_ordinary_batch`` (one thread) over the texts of ``table``."""
    import pyarrow.parquet as pq

    from udfs.tokenize import load_tokenizer
    from udfs.tokenize_tiktoken import encoding_for

    enc = encoding_for(load_tokenizer("builtin:gpt2"))
    cpu = tokens = nbytes = 0.0
    for path in delta_files(table):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048, columns=["text"]):
            texts = batch.column(0).to_pylist()
            nbytes += sum(len(t.encode("utf-8")) for t in texts)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            ids = enc.encode_ordinary_batch(texts, num_threads=1)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu += (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            tokens += sum(map(len, ids))
            if limit_mb and nbytes >= limit_mb * 1e6:
                break
    return {"kernel": "tiktoken encode_ordinary_batch, 1 thread", "mb": round(nbytes / 1e6, 1),
            "tokens": int(tokens), "cpu_s": round(cpu, 1), "mb_per_cpu_s": round(nbytes / 1e6 / cpu, 2)}


def main(argv: list[str] | None = None) -> int:
    """Command line: ``prepare``, ``stage`` or ``kernel`` (see the module docstring)."""
    p = argparse.ArgumentParser(prog="tokenize_scale.py", description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--from", dest="src", type=Path, required=True)
    pp.add_argument("--to", dest="dst", type=Path, required=True)
    pp.add_argument("--link", nargs="+", required=True, help="tables to read from --from")
    ps = sub.add_parser("stage")
    ps.add_argument("stage", choices=["tokenize", "shard"])
    ps.add_argument("--root", type=Path, required=True)
    ps.add_argument("--set", dest="sets", action="append", default=[], help="extra config override k=v")
    ps.add_argument("--out", type=Path, help="append the JSON line to this file")
    ps.add_argument("--event-log", type=Path, help="keep Spark's event log in this folder and print its stages")
    pk = sub.add_parser("kernel")
    pk.add_argument("--table", type=Path, required=True)
    pk.add_argument("--limit-mb", type=float)
    a = p.parse_args(argv)
    if a.cmd == "prepare":
        prepare(a.src, a.dst, a.link)
        return 0
    res = run_stage(a.stage, a.root, a.sets, a.event_log) if a.cmd == "stage" else kernel(a.table, a.limit_mb)
    line = json.dumps(res)
    print(line)
    if getattr(a, "out", None):
        with open(a.out, "a") as f:
            f.write(line + "\n")
    if getattr(a, "event_log", None) is not None:
        for st in spark_stages(max(a.event_log.iterdir(), key=lambda f: f.stat().st_mtime)):
            print(json.dumps(st))
    return 0


if __name__ == "__main__":
    sys.exit(main())
