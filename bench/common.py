"""Shared measuring tools for the ``bench/*.py`` modules and the harness (``bench/run.py``).

What is here and why:

* :func:`time_spark` – the same for a Spark DataFrame, forced with the ``noop`` sink.
* :func:`time_best` – wall and CPU time of a callable with warm-up runs (first calls pay for imports,
  JIT and page faults) and the best of ``repeat`` runs (the least disturbed by other processes).
* :func:`throughput` – docs/s, MB/s and MB/s per core from a count, a size and a time.
* :class:`Measure` – wall time plus CPU seconds of this process *and every descendant* (the Spark JVM,
  its Python daemon and workers), read from ``/proc``. On a shared machine wall time is inflated by
  other people's work, CPU seconds much less so; "per core" figures divide work by CPU seconds.
* :func:`spark_overhead` – the Spark-overhead ratio: core-seconds of the Spark stage over core-seconds
  of the same per-batch function on plain Arrow batches (goal <= 1.25).
* :func:`run_plain_batches` – the plain-Arrow-batch runner: a table cut into Spark-sized record batches,
  the function applied batch after batch in one thread, no Spark.
* :class:`TreeSampler` – peak RSS of the driver JVM and of the Python workers, and the load average,
  sampled from ``/proc`` in a background thread.
* :func:`machine_facts`, :func:`format_table` – what the results were measured on, and a table printer.

No pyspark import at module level: plain-batch benchmarks and the harness use this without a JVM.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

MB = 1_000_000
"""Megabyte as used in every MB/s figure here (SI, 10^6 bytes), like dolma's and datatrove's reports."""

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# --------------------------------------------------------------------------------------------- /proc
def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:  # the process exited between listing and reading
        return None


def _stat_fields(pid: int) -> list[str] | None:
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    # comm (field 2) may hold spaces and parentheses: split after its closing parenthesis.
    head, _, rest = raw.rpartition(")")
    return [head.split("(", 1)[0].strip(), head.split("(", 1)[1] if "(" in head else "", *rest.split()]


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        f = _stat_fields(int(name))
        if f is None:
            continue
        # After pid and comm: state (index 2), ppid (index 3).
        kids.setdefault(int(f[3]), []).append(int(name))
    return kids


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants (pids), read from ``/proc``."""
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` including its waited-for children (``/proc/<pid>/stat``)."""
    f = _stat_fields(pid)
    if f is None:
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17 of proc(5); here index 13..16 (pid, comm first).
    return sum(int(x) for x in f[13:17]) / _CLK_TCK


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of ``root`` (default: this process) and every live descendant."""
    return sum(cpu_seconds(p) for p in process_tree(root or os.getpid()))


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (``VmRSS`` of ``/proc/<pid>/status``; 0 if gone)."""
    raw = _read(f"/proc/{pid}/status") or ""
    for line in raw.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _cmdline(pid: int) -> str:
    return (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ")


def classify(pid: int, root: int, under_jvm: bool = False) -> str:
    """Role of a process in a local Spark run: ``jvm``, ``python_worker``, ``driver`` or ``other``.

    In ``local[k]`` mode the one JVM is driver and executor; Python UDF/Arrow work runs in
    ``pyspark.daemon`` and the workers it forks (every Python process below the JVM).
    """
    cmd = _cmdline(pid)
    exe = cmd.split(" ", 1)[0]
    if exe.endswith("java") or "org.apache.spark" in cmd:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or (under_jvm and "python" in exe):
        return "python_worker"
    if pid == root:
        return "driver"
    return "other"


def roles(root: int) -> list[tuple[int, str]]:
    """``(pid, role)`` for ``root`` and its live descendants; roles as in :func:`classify`."""
    kids = _children_map()
    out: list[tuple[int, str]] = []
    todo = [(root, False)]
    while todo:
        pid, under_jvm = todo.pop()
        role = classify(pid, root, under_jvm)
        out.append((pid, role))
        todo.extend((k, under_jvm or role == "jvm") for k in kids.get(pid, ()))
    return out


def loadavg() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (runnable processes, machine-wide)."""
    raw = (_read("/proc/loadavg") or "0 0 0").split()
    return float(raw[0]), float(raw[1]), float(raw[2])


# ------------------------------------------------------------------------------------------ sampler
@dataclass
class TreeSampler:
    """Sample RSS by role and the load average of a process tree every ``interval`` seconds.

    Use as a context manager around the work (``root`` = the pid whose tree to watch, default this
    process). Peaks are maxima over samples of the *sum* over processes of one role, so short spikes
    between samples are missed; ``interval`` 0.25 s catches anything that lasts a Spark task.

    Attributes:
        peak_rss: role -> peak summed RSS in bytes (roles of :func:`classify`).
        peak_worker_rss: peak RSS of the single largest Python worker, bytes.
        max_workers: largest number of Python worker processes seen at once.
        load: load-average (1 min) samples taken while running.
        cpu_by_pid: last CPU seconds seen per process; their sum is the tree's CPU time, including
            processes that have exited since (up to one interval short for each).
    """

    root: int | None = None
    interval: float = 0.25
    peak_rss: dict[str, int] = field(default_factory=dict)
    peak_worker_rss: int = 0
    max_workers: int = 0
    load: list[float] = field(default_factory=list)
    cpu_by_pid: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def sample(self) -> None:
        root = self.root or os.getpid()
        sums: dict[str, int] = {}
        workers = []
        for pid, role in roles(root):
            f = _stat_fields(pid)
            if f is not None:
                # Own utime + stime only: children's time is counted at their own pids.
                self.cpu_by_pid[pid] = max(self.cpu_by_pid.get(pid, 0.0), (int(f[13]) + int(f[14])) / _CLK_TCK)
            rss = rss_bytes(pid)
            sums[role] = sums.get(role, 0) + rss
            if role == "python_worker":
                workers.append(rss)
        for role, v in sums.items():
            self.peak_rss[role] = max(self.peak_rss.get(role, 0), v)
        if workers:
            self.peak_worker_rss = max(self.peak_worker_rss, max(workers))
            self.max_workers = max(self.max_workers, len(workers))
        self.load.append(loadavg()[0])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> TreeSampler:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> dict[str, Any]:
        """Peaks in MB (SI) and the load seen: JSON-ready."""
        return {
            "peak_rss_mb": {k: round(v / MB, 1) for k, v in sorted(self.peak_rss.items())},
            "peak_python_worker_rss_mb": round(self.peak_worker_rss / MB, 1),
            "max_python_workers": self.max_workers,
            "cpu_s": round(sum(self.cpu_by_pid.values()), 2),
            "load1_mean": round(statistics.fmean(self.load), 2) if self.load else None,
            "load1_max": round(max(self.load), 2) if self.load else None,
        }


# ------------------------------------------------------------------------------------------ timing
_SIGCHLD_BIT = 1 << (17 - 1)  # SIGCHLD is signal 17 on Linux; SigIgn is a bit mask of signals 1..64


def _ignores_sigchld(pid: int) -> bool:
    for line in (_read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    return False


def _snapshot(root: int, skip: int) -> dict[int, tuple[float, int]]:
    """pid -> (own + reaped-children CPU seconds, ppid) for ``root``'s tree, without ``skip``."""
    kids: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = _stat_fields(int(name))
            if f is not None:
                stats[int(name)] = f
                kids.setdefault(int(f[3]), []).append(int(name))
    out: dict[int, tuple[float, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        f = stats.get(pid)
        if f is not None and pid != skip:
            out[pid] = (sum(int(x) for x in f[13:17]) / _CLK_TCK, int(f[3]))
        todo.extend(kids.get(pid, ()))
    return out


def _tree_cpu_sampler(root: int, interval: float) -> None:
    """Body of :class:`Measure`'s sampler process: prints ``ready``, samples until stdin closes, then
    prints the CPU seconds ``root``'s tree used meanwhile (this process excluded)."""
    import select
    import sys

    me = os.getpid()
    base = _snapshot(root, me)
    last = dict(base)
    ign = {p: _ignores_sigchld(p) for p in base}
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], interval)[0]:
        for pid, seen in _snapshot(root, me).items():
            # Asked again until it says yes: pyspark.daemon sets SIG_IGN a moment after it starts, and a
            # "no" read before that lost the CPU of every worker it forked and that ended in the block.
            if not ign.get(pid):
                ign[pid] = _ignores_sigchld(pid)
            last[pid] = seen
    end = _snapshot(root, me)
    total = 0.0
    for pid, (cpu, ppid) in last.items():
        b = base[pid][0] if pid in base else 0.0
        if pid in end:
            total += end[pid][0] - b
        elif ign.get(ppid, False):  # auto-reaped: its time is nowhere else
            total += cpu - b
        else:  # waited for: its whole time is in the parent's cutime now
            total -= b
    print(f"{total:.4f}", flush=True)


class Measure:
    """Wall seconds and CPU seconds of this process tree over a ``with`` block.

    ``cpu_s`` counts this process and every descendant (a Spark JVM launched by this process and its
    Python workers included), also those that end inside the block. A sampler process reads the tree
    from ``/proc`` every ``interval`` seconds because Spark's ``pyspark.daemon`` ignores SIGCHLD: the
    kernel then reaps the Python workers it forks without adding their CPU time to the daemon's
    ``cutime`` (getrusage(2), Linux >= 2.6.9), so a before/after difference loses a worker that ends
    inside the block and even subtracts the whole past of one that was alive at the start. Such a
    process counts with its last sampled CPU time (at most ``interval`` of its work is lost); a child
    reaped by a waiting parent counts through the parent's ``cutime``. The sampler is a process, not a
    thread (a thread would wait for the GIL behind busy Python code), and its own CPU is not counted.
    ``cores_used`` = ``cpu_s / wall_s``.
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.wall_s = self.cpu_s = 0.0

    def __enter__(self) -> Measure:
        import subprocess
        import sys

        here = Path(__file__).resolve().parent.parent
        code = f"from bench.common import _tree_cpu_sampler; _tree_cpu_sampler({os.getpid()}, {self.interval})"
        self._proc = subprocess.Popen([sys.executable, "-c", code], cwd=here, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("Measure: the CPU sampler process did not start")
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._t0
        out, _ = self._proc.communicate("")
        self.cpu_s = max(0.0, float(out.strip()))

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": round(self.wall_s, 4), "cpu_s": round(self.cpu_s, 4), "cores_used": round(self.cores_used, 3)}


def time_best(fn: Callable[[], Any], *, warmup: int = 1, repeat: int = 3) -> dict[str, float]:
    """Run ``fn`` ``warmup`` times unmeasured, then ``repeat`` times; report the best and the median.

    Returns:
        ``best_s``/``median_s`` (wall seconds) and ``best_cpu_s`` (CPU seconds of the process tree in
        the run with the best wall time).
    """
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(max(1, repeat)):
        with Measure() as m:
            fn()
        runs.append((m.wall_s, m.cpu_s))
    best = min(runs)
    return {
        "best_s": round(best[0], 4),
        "median_s": round(statistics.median(r[0] for r in runs), 4),
        "best_cpu_s": round(best[1], 4),
        "repeat": len(runs),
    }


def time_spark(make_df: Callable[[], Any], *, warmup: int = 1, repeat: int = 1) -> dict[str, float]:
    """Time a Spark transform end to end with the ``noop`` sink (every row computed, nothing written).

    Args:
        make_df: returns the DataFrame to run (called once per run, so each run plans afresh); cache
            its input first, or the source read is timed too.
        warmup: unmeasured runs first (start the Python workers, load models into their caches).
        repeat: measured runs; the best wall time is kept.

    Returns:
        As :func:`time_best`: ``best_s``, ``median_s`` and ``best_cpu_s`` = CPU seconds of this process
        tree (driver, the JVM it launched, the Python workers), the core-seconds that
        :func:`spark_overhead` compares with a plain-batch run's.
    """

    def go() -> None:
        make_df().write.format("noop").mode("overwrite").save()

    return time_best(go, warmup=warmup, repeat=repeat)


def throughput(n_docs: int, n_bytes: int, seconds: float, cores: float = 1.0) -> dict[str, float]:
    """Docs/s, MB/s and both per core.

    Args:
        n_docs: documents processed.
        n_bytes: UTF-8 bytes of their text.
        seconds: wall seconds (or CPU seconds with ``cores=1`` for per-core figures that ignore load).
        cores: cores the work ran on (``local[2]`` -> 2; a single-threaded loop -> 1).
    """
    s = max(seconds, 1e-9)
    return {
        "docs_s": round(n_docs / s, 1),
        "mb_s": round(n_bytes / MB / s, 3),
        "docs_s_core": round(n_docs / s / cores, 1),
        "mb_s_core": round(n_bytes / MB / s / cores, 3),
    }


def ratio(ours: float, reference: float) -> float | None:
    """``ours / reference`` rounded to 3 decimals; None when the reference is 0 or missing."""
    return round(ours / reference, 3) if reference else None


def spark_overhead(spark_core_s: float, plain_core_s: float) -> float | None:
    """Spark-overhead ratio: core-seconds of the Spark stage / core-seconds of the plain-batch run.

    Pass CPU seconds (:class:`Measure` ``cpu_s``) for both, or wall seconds times cores used. 1.0 means
    Spark adds nothing; the goal is <= 1.25 for every stage.
    """
    return ratio(spark_core_s, plain_core_s)


def text_bytes(texts: Iterable[str] | pa.Array | pa.ChunkedArray) -> int:
    """UTF-8 bytes of the texts (Arrow string data length when given an Arrow array)."""
    if isinstance(texts, pa.ChunkedArray | pa.Array):
        import pyarrow.compute as pc

        return int(pc.sum(pc.binary_length(texts)).as_py() or 0)
    return sum(len(t.encode("utf-8")) for t in texts)


def run_plain_batches(fn: Callable[[pa.RecordBatch], Any], data: pa.Table | pa.RecordBatch, batch_rows: int = 1024) -> list[Any]:
    """The plain-Arrow-batch runner: ``fn`` applied to ``data`` cut into ``batch_rows``-row batches.

    One thread, no Spark: the reference point of the Spark-overhead ratio. ``batch_rows`` should equal
    ``spark.arrow_batch_rows`` (the rows per batch Spark hands a ``mapInArrow`` function).

    Returns:
        ``fn``'s result for each batch, in order.
    """
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    return [fn(b) for b in table.to_batches(max_chunksize=batch_rows)]


# --------------------------------------------------------------------------------------- machine
def _meminfo_total() -> int:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_model() -> str:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (out.stderr or out.stdout).splitlines()
    return first[0].strip() if first else None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_facts() -> dict[str, Any]:
    """Where and with what the figures were measured: cores, memory, CPU, versions, date, load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": cores,
        "memory_gb": round(_meminfo_total() / 2**30, 1),
        "cpu_model": _cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _java_version(),
        "versions": {d: _version(d) for d in (
            "pyspark", "delta-spark", "numpy", "pyarrow", "datasketch", "tokenizers", "fasttext",
            "datatrove")},
        "git_commit": _git_commit(),
        "load_at_start": loadavg(),
    }


# ------------------------------------------------------------------------------------------ tables
def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v == 0:
            return "0"
        a = abs(v)
        return f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 1 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, *, markdown: bool = True) -> str:
    """Render dict rows as a Markdown table (or aligned plain text with ``markdown=False``).

    Numbers get thousands separators and ~3 significant digits; None shows as "–".
    """
    if not rows:
        return "(no rows)"
    cols = list(columns or dict.fromkeys(k for r in rows for k in r))
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    if markdown:
        out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        return "\n".join(out)
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    out = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    out += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level with dotted keys: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def print_figures(title: str, figures: dict[str, Any]) -> None:
    """Print a bench module's result as a two-column table (its ``__main__`` can call this)."""
    print(f"## {title}")
    print(format_table([{"figure": k, "value": v} for k, v in flatten(figures).items()], markdown=False))


# ------------------------------------------------------------------------------------------ profile
_PROCESS_FRAME = re.compile(r'process \d+:".*?"(;|$)', re.DOTALL)
_PROJECT_FRAME = re.compile(r"\((pipelines|udfs|jobs|bench)/(?!run\.py)[^)]*\)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(:\d+)?\)$")


def _frame_name(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    file = m["file"]
    # Keep the path from the package root down (site-packages/x/y.py -> x/y.py; /repo/udfs/a.py -> udfs/a.py).
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    else:
        parts = Path(file).parts
        file = "/".join(parts[-2:]) if len(parts) >= 2 else file
    return f"{m['func']} ({file})"


def summarize_pyspy_raw(path: str | Path, top: int = 8) -> dict[str, Any]:
    """Summarise a ``py-spy record --format raw`` file (collapsed stacks, any number of processes).

    Returns:
        ``samples`` (active samples: py-spy drops idle threads by default), ``self`` (the ``top`` leaf
        functions by share of samples: where the time goes) and ``inclusive`` (the ``top`` functions of
        the project's own code, ``pipelines/``, ``udfs/``, ``jobs/`` and ``bench/`` minus the harness, by
        share of samples with them anywhere on the stack), each a list of ``[name, share]``; then
        ``worker_samples`` and ``worker_self``: the same leaf table over the Spark Python workers only
        (processes started as ``pyspark.daemon``), shares of the workers' samples: what the Python side
        of a Spark stage spends its time on (the UDF, Arrow conversion, worker start-up imports).
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    leaf: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    wleaf: Counter[str] = Counter()
    total = wtotal = 0
    buf = ""
    for line in text.splitlines():
        buf = f"{buf}\n{line}" if buf else line
        stack, sep, count = buf.rpartition(" ")
        if not sep or not count.isdigit() or stack.count('"') % 2:
            continue  # a process command line spanning several lines: keep reading
        buf = ""
        procs = [m.group(0) for m in _PROCESS_FRAME.finditer(stack)]
        worker = bool(procs) and ("pyspark.daemon" in procs[-1] or "pyspark.worker" in procs[-1])
        frames = [f for f in _PROCESS_FRAME.sub("", stack).split(";") if f]
        n = int(count)
        total += n
        wtotal += n if worker else 0
        if not frames:
            continue
        names = [_frame_name(f) for f in frames]
        leaf[names[-1]] += n
        if worker:
            wleaf[names[-1]] += n
        for name in set(names):
            if _PROJECT_FRAME.search(name):
                incl[name] += n

    def share(c: Counter[str], of: int) -> list[list[Any]]:
        return [[k, round(v / of, 3)] for k, v in c.most_common(top)] if of else []

    return {"samples": total, "self": share(leaf, total), "inclusive": share(incl, total),
            "worker_samples": wtotal, "worker_self": share(wleaf, wtotal)}


def delta_files(table: Path) -> list[Path]:
    """The data files of the latest version of the Delta table at ``table`` (read by delta-rs, no JVM).

    Raises:
        deltalake.exceptions.TableNotFoundError: no Delta table there.
    """
    from deltalake import DeltaTable

    return [Path(u.removeprefix("file://")) for u in DeltaTable(str(table)).file_uris()]


def cpu_by_role(cpu_by_pid: dict[int, float], role_by_pid: dict[int, str]) -> dict[str, float]:
    """CPU-seconds summed by process role (``role_by_pid``; a pid without one counts as ``other``)."""
    out: dict[str, float] = {}
    for pid, cpu in cpu_by_pid.items():
        role = role_by_pid.get(pid, "other")
        out[role] = out.get(role, 0.0) + cpu
    return out
