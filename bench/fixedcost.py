"""Where a small run's time goes, per Winnow stage: Spark jobs and stages, driver time between jobs,
Delta commits and snapshot jobs, Python workers started, JIT and GC, CPU-seconds.

``python -m bench.fixedcost [--root DIR] [pipeline.py options]`` runs ``jobs/pipeline.py`` in this
process (``make run``'s command, same config: ``conf/local.yaml`` on ``sample_data/`` unless told)
with Spark's event log on (added to the config's ``spark.conf``) and :func:`pipelines.core.runs.run_and_record` wrapped to note each
stage's wall-clock window and tag its jobs. It prints one table row per stage:

* ``wall_s``: the stage's window (input state, the stage, its completion record), as the chain pays it;
* ``jobs`` / ``stages`` / ``tasks``: Spark jobs started, Spark stages run (skipped ones not counted)
  and tasks, from the event log;
* ``in_jobs_s``: wall time covered by at least one running job; ``driver_s`` = ``wall_s - in_jobs_s``,
  the time the driver spent planning, committing, listing or in Python between jobs;
* ``task_s``: summed task run time (executor side), ``deser_s``: summed task deserialisation time;
* ``snapshot_jobs``: jobs Delta started to rebuild a table snapshot from its log (description or call
  site names a snapshot / state reconstruction);
* ``commits``: Delta commit files written under ``<root>/tables`` by the stage;
* ``py_workers``: Python worker processes that appeared below the JVM during the stage;
* ``jit_s`` / ``gc_s``: JVM compilation and GC time (MXBeans, wall-ms summed over threads);
* ``cpu_s``: CPU-seconds of the whole process tree (driver, JVM, Python workers) in the window.

The event log and the per-job list (call site, duration) are kept under ``--keep DIR`` when given.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT_WORDS = ("snapshot", "state reconstruction", "stateReconstruction", "Delta: Compute")


# --------------------------------------------------------------------------------------- event log
def read_event_log(path: str) -> dict[str, Any]:
    """Jobs, stages and task totals of one Spark event log (JSON lines, uncompressed).

    Returns:
        ``{"jobs": [{id, start_ms, end_ms, stages, props}], "stages": {id: {tasks, start_ms, end_ms}},
        "tasks": [{stage, run_ms, deser_ms, cpu_ns, launch_ms}], "sql": {id: description}}``.
    """
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    tasks: list[dict[str, Any]] = []
    sql: dict[int, str] = {}
    files = sorted(glob.glob(f"{path}/events_*"), key=lambda f: int(Path(f).name.split("_")[1])) if os.path.isdir(path) else [path]
    for line in (ln for name in files for ln in open(name, encoding="utf-8")):
        if True:
            ev = json.loads(line)
            kind = ev.get("Event", "")
            if kind == "SparkListenerJobStart":
                props = ev.get("Properties") or {}
                jobs[ev["Job ID"]] = {"id": ev["Job ID"], "start_ms": ev["Submission Time"], "end_ms": None,
                                      "stages": ev.get("Stage IDs", []), "props": props,
                                      "names": [s.get("Stage Name", "") for s in ev.get("Stage Infos", [])],
                                      "details": [s.get("Details", "")[:400] for s in ev.get("Stage Infos", [])]}
            elif kind == "SparkListenerJobEnd":
                if ev["Job ID"] in jobs:
                    jobs[ev["Job ID"]]["end_ms"] = ev["Completion Time"]
            elif kind == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                stages[info["Stage ID"]] = {"tasks": info.get("Number of Tasks", 0),
                                            "start_ms": info.get("Submission Time"), "end_ms": info.get("Completion Time")}
            elif kind == "SparkListenerTaskEnd":
                m = ev.get("Task Metrics") or {}
                tasks.append({"stage": ev.get("Stage ID"), "run_ms": m.get("Executor Run Time", 0),
                              "deser_ms": m.get("Executor Deserialize Time", 0),
                              "cpu_ns": m.get("Executor CPU Time", 0),
                              "launch_ms": (ev.get("Task Info") or {}).get("Launch Time", 0)})
            elif kind.endswith("SparkListenerSQLExecutionStart"):
                sql[ev.get("executionId")] = ev.get("description", "")
    return {"jobs": sorted(jobs.values(), key=lambda j: j["id"]), "stages": stages, "tasks": tasks, "sql": sql}


def _union_ms(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def is_snapshot_job(job: dict[str, Any]) -> bool:
    """A job Delta runs to rebuild a snapshot (its description, call site or stage details say so)."""
    text = " ".join([str(job["props"].get("spark.job.description", "")), str(job["props"].get("callSite.short", "")),
                     *job["names"], *job["details"]])
    return any(w.lower() in text.lower() for w in SNAPSHOT_WORDS)


def call_site(job: dict[str, Any]) -> str:
    """The job's short call site (``collect at /path/x.py:12``) or its description."""
    p = job["props"]
    return str(p.get("spark.job.description") or p.get("callSite.short") or (job["names"] or ["?"])[0])


# ---------------------------------------------------------------------------------------- sampling
class WorkerWatch:
    """Count Python worker processes (below the JVM) that appear, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="worker-watch", daemon=True)

    def _loop(self) -> None:
        from bench.common import roles

        me = os.getpid()
        while not self._stop.wait(self.interval):
            for pid, role in roles(me):
                if role == "python_worker" and pid not in self.seen:
                    self.seen[pid] = time.time()

    def start(self) -> WorkerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, t0: float, t1: float) -> int:
        return sum(1 for t in self.seen.values() if t0 <= t < t1)


def _tree_cpu() -> float:
    from bench.common import _snapshot

    return sum(cpu for cpu, _ in _snapshot(os.getpid(), -1).values())


def _jvm_times(spark: Any) -> tuple[float, float]:
    """(JIT compilation s, GC s) of the driver JVM so far, from its MXBeans."""
    try:
        mf = spark._jvm.java.lang.management.ManagementFactory
        jit = mf.getCompilationMXBean().getTotalCompilationTime() / 1000
        gc = sum(b.getCollectionTime() for b in mf.getGarbageCollectorMXBeans()) / 1000
        return float(jit), float(gc)
    except Exception:  # noqa: BLE001 - not a HotSpot JVM / no session: leave the columns empty
        return float("nan"), float("nan")


def jvm_counters(spark: Any) -> dict[str, float]:
    """Whole-run totals of the driver JVM, seconds: class loading (``sun.cls.time``), bytecode
    verification, JIT compilation (``sun.ci.totalTime``), from ``jcmd PerfCounter.print``; and Spark's
    Janino compilations of generated code (``CodegenMetrics``: count, and count x mean ms)."""
    out: dict[str, float] = {}
    try:
        pid = int(spark._jvm.ProcessHandle.current().pid())
        text = subprocess.run(["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True, timeout=60).stdout
        counters = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        freq = float(counters.get("sun.os.hrt.frequency", "1e9"))
        for key, name in (("sun.cls.time", "class_load_s"), ("sun.cls.classVerifyTime", "class_verify_s"),
                          ("sun.ci.totalTime", "jit_s"), ("sun.cls.sharedClassLoadTime", "shared_class_load_s")):
            if key in counters:
                out[name] = round(float(counters[key]) / freq, 2)
        for key, name in (("sun.cls.loadedBytes", "class_bytes"), ("java.cls.loadedClasses", "classes"),
                          ("sun.cls.sharedLoadedClasses", "shared_classes")):
            if key in counters:
                out[name] = float(counters[key])
    except Exception as e:  # noqa: BLE001 - no jcmd: leave them out
        out["jcmd_error"] = str(e)[:100]
    try:
        h = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        out["janino_compiles"] = float(h.getCount())
        out["janino_s"] = round(h.getCount() * h.getSnapshot().getMean() / 1000, 2)
    except Exception as e:  # noqa: BLE001
        out["codegen_error"] = str(e)[:100]
    return out


def _commit_files(root: str) -> set[str]:
    return set(glob.glob(f"{root}/tables/*/_delta_log/*.json"))


# ------------------------------------------------------------------------------------------ run
def run(argv: list[str], root: str, keep: str | None, defaults: list[str] = (), event_log: bool = True) -> list[dict[str, Any]]:
    """Run the pipeline in this process with the event log on; return one row per stage.

    ``defaults``: extra ``key=value`` Spark settings for this run (e.g. JVM options to compare);
    ``event_log=False`` measures without the log's own cost (the job columns are then empty)."""
    import pipelines.core.runs as runs
    from pipelines.core.config import load_config

    logdir = tempfile.mkdtemp(prefix="winnow-evlog-")
    # The event log goes in through spark.conf (merged with the config's own map), not a SPARK_CONF_DIR:
    # that folder is on the JVM's class path, and another class path would not match the class archive.
    confs = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--conf"]
    sets = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--set"]
    conf = dict(load_config(confs, sets).spark.conf)
    if event_log:
        conf.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{logdir}",
                     "spark.eventLog.compress": "false"})
    conf.update(d.split("=", 1) for d in defaults)
    argv = [*argv, "--set", "spark.conf={" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in conf.items()) + "}"]
    windows: list[dict[str, Any]] = []
    original = runs.run_and_record
    watch = WorkerWatch().start()
    holder: dict[str, Any] = {}

    def wrapped(spark: Any, cfg: Any, stage: str, **kw: Any) -> Any:
        holder["spark"] = spark
        spark.sparkContext.setLocalProperty("winnow.stage", stage)
        w = {"stage": stage, "t0": time.time(), "cpu0": _tree_cpu(), "jvm0": _jvm_times(spark),
             "commits0": _commit_files(root)}
        try:
            report = original(spark, cfg, stage, **kw)
            w["printed_s"] = report.elapsed_s
            return report
        finally:
            w.update(t1=time.time(), cpu1=_tree_cpu(), jvm1=_jvm_times(spark), commits1=_commit_files(root))
            spark.sparkContext.setLocalProperty("winnow.stage", None)
            windows.append(w)

    runs.run_and_record = wrapped
    sys.path.insert(0, str(REPO))
    from jobs import pipeline

    t_start, cpu_start = time.time(), _tree_cpu()
    try:
        rc = pipeline.main([*argv, "--set", f"run.root={root}"])
    finally:
        runs.run_and_record = original
        watch.stop()
    t_end, cpu_end = time.time(), _tree_cpu()
    spark = holder.get("spark")
    jvm_totals = jvm_counters(spark) if spark is not None else {}
    if spark is not None:
        spark.stop()  # flushes the event log
    log_path = (sorted(glob.glob(f"{logdir}/*")) or [None])[0]
    run_info = {"log": log_path, "t_start": t_start, "t_end": t_end, "cpu_start": cpu_start, "cpu_end": cpu_end,
                "windows": [{**w, "commits0": sorted(w["commits0"]), "commits1": sorted(w["commits1"])} for w in windows],
                "workers": watch.seen, "rc": rc, "jvm_totals": jvm_totals}
    keep = keep or tempfile.mkdtemp(prefix="winnow-fixedcost-keep-")
    Path(keep).mkdir(parents=True, exist_ok=True)
    Path(keep, "run.json").write_text(json.dumps(run_info) + "\n")
    print(f"exit status {rc}; wall {t_end - t_start:.1f} s; CPU {cpu_end - cpu_start:.1f} s; kept in {keep}", file=sys.stderr)
    return analyse(keep)


def analyse(keep: str) -> list[dict[str, Any]]:
    """The per-stage rows of a run kept by :func:`run` (``run.json`` + its event log); also writes
    ``jobs.json`` (every job: stage, duration, call site) and ``stages.json`` there."""
    info = json.loads(Path(keep, "run.json").read_text())
    ev = read_event_log(info["log"]) if info["log"] else {"jobs": [], "stages": {}, "tasks": [], "sql": {}}
    windows, t_start, t_end = info["windows"], info["t_start"], info["t_end"]
    cpu_start, cpu_end = info["cpu_start"], info["cpu_end"]
    seen = {int(k): v for k, v in info["workers"].items()}
    task_by_stage: dict[int, list[dict[str, Any]]] = {}
    for t in ev["tasks"]:
        task_by_stage.setdefault(t["stage"], []).append(t)

    rows = []
    bounds = [("(start+plan)", t_start, windows[0]["t0"] if windows else t_end, cpu_start,
               windows[0]["cpu0"] if windows else cpu_end, None, None, [], [], None)]
    for w in windows:
        bounds.append((w["stage"], w["t0"], w["t1"], w["cpu0"], w["cpu1"], w["jvm0"], w["jvm1"], w["commits0"],
                       w["commits1"], w.get("printed_s")))
    bounds.append(("(closing)", windows[-1]["t1"] if windows else t_end, t_end,
                   windows[-1]["cpu1"] if windows else cpu_end, cpu_end, None, None, [], [], None))
    per_job = []
    for name, t0, t1, c0, c1, j0, j1, k0, k1, printed in bounds:
        lo, hi = t0 * 1000, t1 * 1000
        jobs = [j for j in ev["jobs"] if j["end_ms"] is not None and lo <= j["start_ms"] < hi]
        stage_ids = [s for j in jobs for s in j["stages"] if s in ev["stages"]]
        tasks = [t for s in stage_ids for t in task_by_stage.get(s, [])]
        in_jobs = _union_ms([(max(j["start_ms"], lo), min(j["end_ms"], hi)) for j in jobs]) / 1000
        wall = t1 - t0
        rows.append({
            "stage": name, "printed_s": None if printed is None else round(printed, 2), "wall_s": round(wall, 2), "jobs": len(jobs), "stages": len(stage_ids),
            "tasks": len(tasks), "in_jobs_s": round(in_jobs, 2), "driver_s": round(wall - in_jobs, 2),
            "task_s": round(sum(t["run_ms"] for t in tasks) / 1000, 2),
            "deser_s": round(sum(t["deser_ms"] for t in tasks) / 1000, 2),
            "snapshot_jobs": sum(1 for j in jobs if is_snapshot_job(j)),
            "commits": len(set(k1) - set(k0)), "py_workers": sum(1 for t in seen.values() if t0 <= t < t1),
            "jit_s": round(j1[0] - j0[0], 2) if j0 else None, "gc_s": round(j1[1] - j0[1], 2) if j0 else None,
            "cpu_s": round(c1 - c0, 2),
        })
        prev_end = lo
        for j in jobs:
            per_job.append({"stage": name, "job": j["id"], "ms": j["end_ms"] - j["start_ms"],
                            "gap_before_ms": j["start_ms"] - prev_end,
                            "stages": len([s for s in j["stages"] if s in ev["stages"]]),
                            "snapshot": is_snapshot_job(j), "site": call_site(j)})
            prev_end = max(prev_end, j["end_ms"])
    total = {k: round(sum(r[k] or 0 for r in rows), 2) for k in rows[0] if k != "stage"} if rows else {}
    rows.append({"stage": "total", **total})
    Path(keep, "jobs.json").write_text(json.dumps(per_job, indent=1) + "\n")
    Path(keep, "stages.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    """CLI: run, print the table (markdown)."""
    from bench.common import format_table, loadavg

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=None, help="run root (default: a fresh temporary folder)")
    p.add_argument("--keep", default=None, help="folder to keep run.json, jobs.json and stages.json in")
    p.add_argument("--analyse", default=None, metavar="KEEP", help="only print the table of a kept run")
    p.add_argument("--spark-default", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for this run (repeatable), e.g. JVM options")
    p.add_argument("--no-event-log", action="store_true", help="measure without the event log's own cost")
    args, rest = p.parse_known_args(argv)
    if args.analyse:
        print(format_table(analyse(args.analyse)))
        return 0
    root = args.root or tempfile.mkdtemp(prefix="winnow-fixedcost-")
    if not any(a == "--conf" for a in rest):
        rest = ["--conf", "conf/local.yaml", *rest]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    load0 = loadavg()
    rows = run(rest, root, args.keep, args.spark_default, not args.no_event_log)
    print(f"load before {load0}, after {loadavg()}")
    print(format_table(rows))
    keep_dir = args.keep or ""
    if keep_dir:
        print("JVM totals:", json.loads(Path(keep_dir, "run.json").read_text()).get("jvm_totals"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
