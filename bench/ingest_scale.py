"""Ingest alone on one large file, against Spark's own floor: CPU-seconds of the whole process tree.

Each variant runs in a fresh child process (its own JVM, so each pays the same session start and JIT)
on ``local[2]`` with ``conf/local.yaml``; inside it :class:`bench.common.Measure` counts the CPU of the
child, the JVM and every Python worker, apart for session start and for the work itself:

* ``winnow``: :func:`pipelines.ingest.run` (parse, normalise, doc ids, line numbers, quarantine, both
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
records each child with ``py-spy --subprocesses`` (raw stacks in ``DIR``, top frames in the result).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import MB, loadavg

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("winnow", "text_noop", "arrow_noop", "json_delta", "text_delta", "parquet_delta")


def _child(variant: str, path: str, root: str) -> dict:
    """Run one variant in this process (a fresh interpreter) and return its figures."""
    from bench.common import Measure

    with Measure() as start:
        from pipelines.config import load_config
        from pipelines.session import get_spark

        cfg = load_config([REPO / "conf" / "local.yaml"], [
            f"run.root={root}", f"ingest.inputs={json.dumps([path])}", "spark.master=local[2]",
            "spark.shuffle_partitions=8",
        ])
        spark = get_spark("ingest", cfg.spark)
        spark.range(1).count()  # the session is up and a first job ran
    load0 = loadavg()[0]
    with Measure() as work:
        if variant == "winnow":
            from pipelines.stage import run_stage

            report = run_stage(spark, cfg, "ingest")
            rows = {"rows_in": report.rows_in, "rows_out": report.rows_out, "quarantined": report.n_quarantined}
        else:
            rows = {"rows_out": _floor(spark, variant, path, f"{root}/tables/floor")}
    spark.stop()
    return {"variant": variant, "session_start": start.as_dict(), "work": work.as_dict(), **rows,
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
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("INGEST-SCALE ")]
            if proc.returncode or not lines:
                out["variants"][v] = {"failed": proc.returncode, "tail": proc.stderr.splitlines()[-15:]}
                continue
            f = json.loads(lines[-1].removeprefix("INGEST-SCALE "))
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
