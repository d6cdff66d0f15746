"""Ingest alone on one large file, against Spark's own floor: CPU-seconds of the whole process tree.

Each variant runs in a fresh child process (its own JVM, so each pays the same session start and JIT)
on ``local[2]`` with ``conf/local.yaml``; inside it :class:`bench.common.Measure` counts the CPU of the
child, the JVM and every Python worker, apart for session start and for the work itself:

* ``winnow``: :func:`pipelines.ingest.stage.run` (parse, normalise, doc ids, line numbers, quarantine, both
  Delta tables, the stage's counts);
* ``text_noop``: ``spark.read.text`` into the ``noop`` sink: Spark splitting and reading the lines;
* ``arrow_noop``: the same lines through an identity ``mapInArrow``: Spark's JVM <-> Python Arrow
  transfer, the floor of any Python parser;
* ``json_delta``: ``spark.read.json`` with the ``id``/``text`` schema into a Delta table: a JVM-only
  ingest (no normalisation, no quarantine), the floor of "read JSONL, write Delta";
* ``text_delta`` / ``parquet_delta``: the lines (or the Parquet file's ``text``) copied into a Delta table:
  the cost of encoding that much text as Parquet.

MB are input bytes (SI) of the file; MB per CPU-second = MB / CPU-seconds of the work (session start
apart, reported too). ``python -m bench.ingest_scale FILE [VARIANT ...]``; ``BENCH_INGEST_PYSPY=DIR``
records each child with ``py-spy --subprocesses`` (raw stacks in ``DIR``, top frames in the result);
``BENCH_INGEST_SET="k=v;k2=v2"`` adds config overrides (A/B of a setting).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.common import _CLK_TCK, MB, TreeSampler, _cmdline, loadavg, roles

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("winnow", "text_noop", "arrow_noop", "json_delta", "text_delta", "parquet_delta")


def _child(variant: str, path: str, root: str) -> dict:
    """Run one variant in this process (a fresh interpreter) and return its figures."""
    from bench.common import Measure

    with Measure() as start:
        from pipelines.core.config import load_config
        from pipelines.core.session import get_spark

        cfg = load_config([REPO / "conf" / "local.yaml"], [
            f"run.root={root}", f"ingest.inputs={json.dumps([path])}", "spark.master=local[2]",
            "spark.shuffle_partitions=8", *filter(None, os.environ.get("BENCH_INGEST_SET", "").split(";")),
        ])
        spark = get_spark("ingest", cfg.spark)
        spark.range(1).count()  # the session is up and a first job ran
    load0 = loadavg()[0]
    jobs0 = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    print("INGEST-SCALE-PHASE work", flush=True)
    with Measure() as work:
        if variant == "winnow":
            from pipelines.core.runner import run_stage

            report = run_stage(spark, cfg, "ingest")
            rows = {"rows_in": report.rows_in, "rows_out": report.rows_out, "quarantined": report.n_quarantined}
        else:
            rows = {"rows_out": _floor(spark, variant, path, f"{root}/tables/floor")}
    print("INGEST-SCALE-PHASE done", flush=True)
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup()) - jobs0
    spark.stop()
    return {"variant": variant, "session_start": start.as_dict(), "work": work.as_dict(), **rows, "spark_jobs": jobs,
            "load1": [round(load0, 2), round(loadavg()[0], 2)]}


def _floor(spark, variant: str, path: str, out: str) -> int:
    if variant == "text_noop":
        spark.read.text(path).write.format("noop").mode("overwrite").save()
    elif variant == "arrow_noop":
        spark.read.text(path).mapInArrow(lambda it: it, "value string").write.format("noop").mode("overwrite").save()
    elif variant == "json_delta":
        spark.read.schema("id string, text string").json(path).write.format("delta").mode("overwrite").save(out)
    elif variant == "text_delta":
        spark.read.text(path).write.format("delta").mode("overwrite").save(out)
    elif variant == "parquet_delta":
        spark.read.parquet(path).select("id", "text").write.format("delta").mode("overwrite").save(out)
    else:
        raise ValueError(f"unknown variant {variant!r}; allowed: {list(VARIANTS)}")
    return spark.read.format("delta").load(out).count() if variant.endswith("_delta") else -1


class _RoleSampler(TreeSampler):
    """A :class:`TreeSampler` that remembers the role of every process it saw (``role_of``), so the CPU
    of Python workers that ended between two marks still counts as theirs; the sampler process of
    :class:`bench.common.Measure` is ``measure`` (its CPU is not part of any figure)."""

    def sample(self) -> None:
        super().sample()
        role_of = self.__dict__.setdefault("role_of", {})
        for pid, role in roles(self.root or os.getpid()):
            if pid not in role_of:
                role_of[pid] = "measure" if "_tree_cpu_sampler" in _cmdline(pid) else role


def _run_child(cmd: list[str]) -> tuple[dict, dict[str, float]]:
    """Run a child, sampling its tree from outside (so the sampler's own CPU is not counted): the
    child's figures and the CPU-seconds of its work phase by role (driver, jvm, python_worker)."""
    errf = tempfile.TemporaryFile("w+")  # a pipe could fill with Spark's log and stall the child
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=errf, text=True)
    marks: dict[str, Counter] = {}
    threads: dict[str, Counter] = {}
    lines = []
    with _RoleSampler(root=proc.pid, interval=0.5) as sampler:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("INGEST-SCALE-PHASE "):
                sampler.sample()
                c: Counter = Counter()
                for pid, cpu in sampler.cpu_by_pid.items():
                    c[sampler.role_of.get(pid, "unknown")] += cpu
                marks[line.split()[1]] = c
                threads[line.split()[1]] = _jvm_threads([p for p, r in sampler.role_of.items() if r == "jvm"])
        rc = proc.wait()
    errf.seek(0)
    err = errf.read()
    found = [x for x in lines if x.startswith("INGEST-SCALE ")]
    if rc or not found:
        return {"failed": rc, "tail": err.splitlines()[-15:]}, {}
    work = marks.get("done", Counter())
    work.subtract(marks.get("work", Counter()))
    jvm = threads.get("done", Counter())
    jvm.subtract(threads.get("work", Counter()))
    f = json.loads(found[-1].removeprefix("INGEST-SCALE "))
    f["work_jvm_cpu_s_by_thread"] = {k: round(v, 1) for k, v in jvm.most_common(8)}
    f["python_worker_processes"] = sum(r == "python_worker" for r in sampler.role_of.values())
    return f, {k: round(v, 1) for k, v in sorted(work.items())}


def _jvm_threads(pids: list[int]) -> Counter:
    """CPU-seconds of the JVMs' threads so far, by thread group (``/proc/<pid>/task/*/stat``; names
    with their numbers cut: ``C2 CompilerThre``, ``GC Thread``, ``Executor task l``, ...). Threads
    that ended before the sample are missing (Spark's task threads are pooled, so few)."""
    out: Counter = Counter()
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            raw = _read_task(pid, tid)
            if raw is None:
                continue
            name, cpu = raw
            out[re.sub(r"[#\d-]+$", "", name).strip()] += cpu
    return out


def _read_task(pid: int, tid: str) -> tuple[str, float] | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            raw = fh.read()
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    fields = rest.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / _CLK_TCK


def measure(path: str | Path, variants: tuple[str, ...] = ("winnow", "text_noop", "arrow_noop", "json_delta")) -> dict:
    """Each of ``variants`` on the file ``path`` in its own child process.

    Returns:
        ``mb`` (the file's size, SI MB) and per variant its figures plus ``mb_per_cpu_s`` (work only)
        and ``mb_per_cpu_s_with_start`` (session start included).
    """
    path = str(Path(path).resolve())
    mb = os.path.getsize(path) / MB
    out: dict = {"file": path, "mb": round(mb, 1), "variants": {}}
    pyspy = os.environ.get("BENCH_INGEST_PYSPY")
    for v in variants:
        root = tempfile.mkdtemp(prefix=f"winnow-ingest-{v}-")
        try:
            cmd = [sys.executable, "-m", "bench.ingest_scale", "--child", v, path, root]
            raw = None
            if pyspy:
                raw = Path(pyspy) / f"{v}.raw"
                cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--subprocesses", "--format", "raw",
                       "--rate", "50", "-o", str(raw), "--", *cmd]
            f, by_role = _run_child(cmd)
            if "failed" in f:
                out["variants"][v] = f
                continue
            f["work_cpu_s_by_role"] = by_role
            f["mb_per_cpu_s"] = round(mb / max(f["work"]["cpu_s"], 1e-9), 2)
            f["mb_per_cpu_s_with_start"] = round(mb / max(f["work"]["cpu_s"] + f["session_start"]["cpu_s"], 1e-9), 2)
            if raw is not None and raw.exists():
                from bench.common import summarize_pyspy_raw

                f["pyspy"] = summarize_pyspy_raw(raw, top=12)
            out["variants"][v] = f
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--child":
        print("INGEST-SCALE " + json.dumps(_child(a[1], a[2], a[3])), flush=True)
    else:
        print(json.dumps(measure(a[0], tuple(a[1:]) or VARIANTS[:4]), indent=1))
