"""The filter stage as the chain runs it, against its own per-batch work: CPU-seconds by role.

``python -m bench.filter_chain stage DEDUPED OUT [rounds] [BASE_COMMIT]`` runs the filter stage alone on
the Delta table ``DEDUPED`` (a ``deduped`` table of the scale chain, :mod:`bench.scale`), writing under
``OUT/<tree>-<round>`` (``DEDUPED`` is only read, through a symbolic link). Each run is a fresh process:
the session is started first (not measured), then :func:`pipelines.core.runs.run_and_record` runs the
stage as ``jobs/pipeline.py`` does, with the chain's settings (``conf/local.yaml``, ``local[2]``, 8
shuffle partitions, ``pipeline.stages`` ending at the filter). CPU-seconds of the process tree are split
by role: the driver JVM (driver and tasks in local mode), the Python workers, the driver's Python;
the largest Python worker's peak RSS (sampled every 0.5 s) is reported beside them.
With ``BASE_COMMIT`` the base's ``udfs``, ``pipelines`` and ``conf`` are extracted to a temporary folder
and its stage runs alternate with the working tree's, ``rounds`` times each (default 1).

``python -m bench.filter_chain kernel DEDUPED [rows]`` runs only the stage's per-batch function
(:func:`pipelines.filter.signals.batch_function`) on the table's rows read with pyarrow, in batches of
``spark.arrow_batch_rows``, no Spark: CPU-seconds per part (profile choice, prose, signals, LID).

``python -m bench.filter_chain same OUT_A OUT_B`` compares two output roots row for row: ``filtered``
and the filter's ``removed`` rows, sorted by ``doc_id``, every column.

Every figure is MB of UTF-8 text of the input per CPU-second, printed as JSON with the load average
and the UTC time (on a shared machine only ratios measured in the same minutes count).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import cpu_by_role, delta_files

REPO = Path(__file__).resolve().parents[1]
_SETTINGS = ("spark.master=local[2]", "spark.shuffle_partitions=8", "pipeline.stages=[ingest, dedup, filter]",
             "pipeline.progress_s=0")


def text_mb(table: Path) -> float:
    """MB (10^6 bytes) of UTF-8 ``text`` in the Delta table's latest version."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return sum(pc.sum(pc.binary_length(pq.read_table(f, columns=["text"])["text"])).as_py() or 0
               for f in delta_files(table)) / 1e6


def _cpu_by_role(sampler) -> dict[str, float]:
    return cpu_by_role(sampler.cpu_by_pid, sampler.role_by_pid)


def _mark_actions(sampler) -> list[list]:
    """Wrap the Spark actions the stage calls (``collect``, table writes) so that each records the CPU
    it cost by role: ``[[action, {role: CPU-s}], ...]`` in call order, filled as the stage runs."""
    from pyspark.sql import DataFrameWriter, DataFrameWriterV2
    from pyspark.sql.classic.dataframe import DataFrame

    out: list[list] = []

    def wrap(cls: type, name: str) -> None:
        orig = getattr(cls, name)

        def timed(self, *a, **k):
            sampler.sample()
            b = _cpu_by_role(sampler)
            try:
                return orig(self, *a, **k)
            finally:
                sampler.sample()
                e = _cpu_by_role(sampler)
                out.append([f"{cls.__name__}.{name}", {r: round(e[r] - b.get(r, 0.0), 1) for r in sorted(e)
                                                       if e[r] - b.get(r, 0.0) >= 0.05}])
        setattr(cls, name, timed)

    for cls, name in ((DataFrame, "collect"), (DataFrameWriterV2, "createOrReplace"), (DataFrameWriter, "save"),
                      (DataFrameWriter, "saveAsTable")):
        wrap(cls, name)
    return out


def stage(deduped: Path, out: Path) -> dict:
    """Run the filter stage once in this process on ``deduped``, writing under ``out``; CPU by role."""
    from bench.common import TreeSampler, roles
    from jobs._cli import spark_config
    from pipelines.core.config import load_config
    from pipelines.core.runs import run_and_record
    from pipelines.core.session import get_spark

    (out / "tables").mkdir(parents=True, exist_ok=True)
    link = out / "tables" / "deduped"
    if not link.exists():
        link.symlink_to(deduped.resolve(), target_is_directory=True)
    cfg = load_config([REPO / "conf" / "local.yaml"], [f"run.root={out}", *_SETTINGS])
    spark = get_spark("winnow-filter", spark_config(cfg, True))
    spark.range(1).count()  # the JVM is up and a Python-free job has run before the measured part

    class _Sampler(TreeSampler):
        def sample(self) -> None:  # also remember each process's role, for the split below
            for pid, role in roles(self.root or os.getpid()):
                self.role_by_pid[pid] = role
            super().sample()

    sampler = _Sampler(root=os.getpid(), interval=0.5)
    sampler.role_by_pid = {}
    sampler.sample()
    before = _cpu_by_role(sampler)
    actions = _mark_actions(sampler)
    t0 = time.perf_counter()
    with sampler:
        report = run_and_record(spark, cfg, "filter")
    sampler.sample()
    after = _cpu_by_role(sampler)
    split = {r: round(after.get(r, 0.0) - before.get(r, 0.0), 1) for r in sorted(set(after) | set(before))}
    spark.stop()
    return {"cpu_s": round(sum(split.values()), 1), "by_role": split, "wall_s": round(time.perf_counter() - t0, 1),
            "actions": actions,
            "rows_in": report.rows_in, "rows_out": report.rows_out,
            "peak_python_worker_rss_mb": round(sampler.peak_worker_rss / 2**20, 1),
            "load1_mean": round(sum(sampler.load) / max(len(sampler.load), 1), 2)}


def kernel(deduped: Path, rows: int | None = None) -> dict:
    """CPU-seconds of the stage's per-batch function on ``deduped``'s rows, no Spark, per part."""
    import fnmatch

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.core.config import load_config
    from pipelines.filter import signals as S

    cfg = load_config([REPO / "conf" / "local.yaml"], list(_SETTINGS))
    fcfg = cfg.filter
    table = pa.concat_tables(pq.read_table(f, columns=["text", "source"]) for f in delta_files(deduped))
    if rows:
        table = table.slice(0, rows)
    fn = S.batch_function(fcfg, S.lid_locator(None, fcfg), None)

    def profile(source: str) -> str:
        return next((p for g, p in fcfg.profile_by_source.items() if fnmatch.fnmatchcase(source or "", g)),
                    fcfg.default_profile)

    names = np.array([profile(s) for s in table["source"].to_pylist()], dtype=object)
    batch = cfg.spark.arrow_batch_rows
    texts = table["text"].combine_chunks()
    fn(texts.slice(0, 64), pa.array(names[:64], pa.string()))  # model load and first calls
    t0 = time.process_time()
    for i in range(0, len(texts), batch):
        fn(texts.slice(i, batch), pa.array(names[i : i + batch], pa.string()))
    cpu = time.process_time() - t0
    mb = sum(len(t.encode()) for t in texts.to_pylist()) / 1e6 if rows else text_mb(deduped)
    return {"rows": len(texts), "mb": round(mb, 1), "cpu_s": round(cpu, 1), "mb_per_cpu_s": round(mb / cpu, 2),
            "batch_rows": batch}


def same(a: Path, b: Path) -> dict:
    """Row-for-row comparison of ``filtered`` and the filter's ``removed`` rows of two output roots."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = {}
    for name in ("filtered", "removed"):
        tabs = []
        for root in (a, b):
            t = pa.concat_tables(pq.read_table(f) for f in delta_files(root / "tables" / name))
            if name == "removed":
                t = t.filter(pc.equal(t["stage"], "filter"))
            t = t.sort_by("doc_id")
            tabs.append(t.select(sorted(t.column_names)))
        ta, tb = tabs
        cols_differ = [c for c in ta.column_names if c not in tb.column_names or not ta[c].equals(tb[c])]
        out[name] = {"rows": [ta.num_rows, tb.num_rows], "schema_equal": ta.schema.equals(tb.schema),
                     "columns_differ": cols_differ}
    return out


def _run_tree(pythonpath: str, args: list[str]) -> dict:
    code = (f"import runpy, sys; sys.argv = ['filter_chain', *{args!r}]; "
            f"runpy.run_path({__file__!r}, run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": pythonpath}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=pythonpath)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(deduped: Path, out: Path, rounds: int, base: str | None) -> dict:
    """Stage runs alternating the base commit's tree and the working tree (see the module docstring)."""
    mb = text_mb(deduped)
    with tempfile.TemporaryDirectory(prefix="filter-chain-") as tmp:
        trees = {}
        if base:
            tree = Path(tmp) / "base"
            tree.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", base, "udfs", "pipelines", "conf", "jobs"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            (tree / "bench").mkdir()
            for f in ("__init__.py", "common.py"):
                (tree / "bench" / f).write_bytes((REPO / "bench" / f).read_bytes())
            trees[base] = str(tree)
        trees["work"] = str(REPO)
        runs: dict[str, list[dict]] = {k: [] for k in trees}
        for r in range(rounds):
            for label, path in trees.items():
                res = _run_tree(path, ["_one", str(deduped), str(out / f"{label}-{r}")])
                res["at"] = time.strftime("%H:%M:%SZ", time.gmtime())
                res["mb_per_cpu_s"] = round(mb / res["cpu_s"], 2)
                runs[label].append(res)
                print(json.dumps({"tree": label, **res}), file=sys.stderr)
    return {"mb": round(mb, 1), "runs": runs}


def main(argv: list[str]) -> None:
    """Command line: see the module docstring."""
    what = argv[0] if argv else ""
    if what == "stage":
        rounds = int(argv[3]) if len(argv) > 3 else 1
        print(json.dumps(compare(Path(argv[1]), Path(argv[2]), rounds, argv[4] if len(argv) > 4 else None)))
    elif what == "_one":
        print(json.dumps(stage(Path(argv[1]), Path(argv[2]))))
    elif what == "kernel":
        print(json.dumps(kernel(Path(argv[1]), int(argv[2]) if len(argv) > 2 else None)))
    elif what == "same":
        print(json.dumps(same(Path(argv[1]), Path(argv[2]))))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
