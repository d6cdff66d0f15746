"""Prove that a refactoring changed nothing the chain produces: run ``make run``'s chain twice and compare.

``python -m tests.identity --rev 98b0ada [--work DIR] [--keep]`` checks out ``REV`` into a temporary git
worktree, runs ``jobs/pipeline.py --conf conf/local.yaml`` on the same copy of ``sample_data/`` once from
that checkout and once from the working tree (each in its own Python process, ``PYTHONPATH`` = its own
tree, so each run imports its own code), then compares the two run roots:

* every Delta table: schema and rows (sorted JSON lines), byte for byte; ``_runs`` without its clock
  columns (``elapsed_s``, ``started_at``, ``finished_at``, ``extra``) and its ``inputs``/``outputs`` maps
  (those hold Delta versions and the names of the tables the chain declares, which a refactoring may
  legitimately settle differently);
* every shard file byte for byte, and ``manifest.json``, ``stats.json`` and ``config/*.json`` as JSON
  with clock keys (``elapsed_s``, ``finished_at``, ``started_at``) removed; the blend files name the run's
  shard root, so they are compared as JSON and their sha256/bytes in ``manifest.json`` are left out;
* everywhere, the run root and the whole-config fingerprint (which covers ``run.root``, so two roots
  differ by it alone) are replaced by ``<root>`` and ``<config_fingerprint>``;
* the ``winnow.*`` table properties, reported apart (a change of the standard set of properties is
  a change of bookkeeping, not of data).

Exit status 0 when table rows, shard files and ``manifest.json`` are identical, 1 otherwise; differences of
table properties, ``stats.json`` and ``config/*.json`` are printed as bookkeeping.
Not part of ``make test``: it runs the whole chain twice (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CLOCK_KEYS = frozenset({"elapsed_s", "finished_at", "started_at"})
RUNS_COMPARED = ("stage", "stage_fingerprint", "config_fingerprint", "rows_in", "rows_out", "removed", "quarantined")


def chain_overrides(root: Path, inputs: Path) -> list[str]:
    """The ``--set`` overrides of one run: its root and the shared copy of the inputs."""
    return [f"run.root={root}", f"ingest.inputs=[{inputs}/*.jsonl.gz, {inputs}/*.wet.gz]"]


def run_chain(tree: Path, root: Path, inputs: Path, python: str) -> None:
    """Run ``jobs/pipeline.py`` of ``tree`` with ``conf/local.yaml`` on ``inputs`` into ``root``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    cmd = [python, str(tree / "jobs" / "pipeline.py"), "--conf", str(tree / "conf" / "local.yaml"), "--quiet"]
    for o in chain_overrides(root, inputs):
        cmd += ["--set", o]
    subprocess.run(cmd, cwd=tree, env=env, check=True)


def config_fingerprint(root: Path, inputs: Path) -> str:
    """The whole-config fingerprint of a run into ``root``: it covers ``run.root``, so two runs into two
    roots differ by it alone; the comparison replaces it by ``<config_fingerprint>``."""
    from pipelines.core.config import load_config

    return load_config([REPO / "conf" / "local.yaml"], chain_overrides(root, inputs)).fingerprint()


def _strip(obj: Any, subs: dict[str, str]) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v, subs) for k, v in obj.items() if k not in CLOCK_KEYS}
    if isinstance(obj, list):
        return [_strip(v, subs) for v in obj]
    if isinstance(obj, str):
        for a, b in subs.items():
            obj = obj.replace(a, b)
    return obj


def json_file(path: Path, subs: dict[str, str]) -> Any:
    """A JSON file with ``subs`` applied to its strings (run root, config fingerprint) and clock keys removed."""
    return _strip(json.loads(path.read_text(encoding="utf-8")), subs)


def _without_blend_digests(manifest: Any) -> Any:
    # The blend files name the run's own shard root, so their bytes and sha256 differ between any two
    # roots; the files themselves are compared as JSON with the root replaced by <root>.
    if isinstance(manifest, dict) and isinstance(manifest.get("files"), list):
        manifest = {**manifest, "files": [{k: v for k, v in f.items() if k not in ("sha256", "bytes")}
                                          if isinstance(f, dict) and f.get("kind") == "blend" else f
                                          for f in manifest["files"]]}
    return manifest


def json_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (at most a few per branch)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in json_diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)]
    if a != b:
        return [f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"]
    return []


def table_rows(spark: Any, path: Path, subs: dict[str, str]) -> tuple[str, list[str]]:
    """(schema as a DDL string, rows as sorted JSON lines with ``subs`` applied) of the Delta table at ``path``."""
    df = spark.read.format("delta").load(str(path))
    if path.name == "_runs":
        df = df.select(*RUNS_COMPARED)
    rows = [_strip(r, subs) for r in df.toJSON().collect()]
    return df.schema.simpleString(), sorted(rows)


def compare(base: Path, work: Path, inputs: Path) -> tuple[list[str], list[str]]:
    """Compare two run roots. Returns (data differences, bookkeeping differences: table properties and
    the run report / effective configs, which may change with the declarations they are drawn from)."""
    from pipelines.core import tables
    from pipelines.core.session import get_spark

    spark = get_spark("winnow-identity")
    subs = {r: {str(r): "<root>", config_fingerprint(r, inputs): "<config_fingerprint>"} for r in (base, work)}
    data: list[str] = []
    props: list[str] = []
    names = sorted({p.name for r in (base, work) for p in (r / "tables").iterdir() if p.is_dir()})
    for name in names:
        a, b = base / "tables" / name, work / "tables" / name
        if not (a.is_dir() and b.is_dir()):
            data.append(f"table {name}: only in {'base' if a.is_dir() else 'work'}")
            continue
        ra, rb = table_rows(spark, a, subs[base]), table_rows(spark, b, subs[work])
        if ra[0] != rb[0]:
            data.append(f"table {name}: schema {ra[0]} != {rb[0]}")
        if ra[1] != rb[1]:
            only_a, only_b = set(ra[1]) - set(rb[1]), set(rb[1]) - set(ra[1])
            data.append(f"table {name}: {len(ra[1])} vs {len(rb[1])} rows; {len(only_a)} only in base, "
                        f"{len(only_b)} only in work; e.g. {sorted(only_a)[:1]} / {sorted(only_b)[:1]}")
        pa_, pb = (_strip(tables.table_properties(spark, str(p)), subs[r]) for p, r in ((a, base), (b, work)))
        for k in sorted(set(pa_) | set(pb)):
            if pa_.get(k) != pb.get(k):
                props.append(f"table {name}: property {k}: {pa_.get(k)!r} -> {pb.get(k)!r}")
    files = sorted({p.relative_to(r) for r in (base, work) for sub in ("shards", "config", "report")
                    for p in (r / sub).rglob("*") if p.is_file()})
    for rel in files:
        a, b = base / rel, work / rel
        if not (a.is_file() and b.is_file()):
            data.append(f"file {rel}: only in {'base' if a.is_file() else 'work'}")
        elif rel.suffix == ".json":
            ja, jb = json_file(a, subs[base]), json_file(b, subs[work])
            if rel.name == "manifest.json":
                ja, jb = _without_blend_digests(ja), _without_blend_digests(jb)
            diffs = json_diff(ja, jb)
            where = data if rel.parts[0] == "shards" else props
            where += [f"file {rel}: {d}" for d in diffs[:8]]
        elif rel.suffix == ".html":
            continue  # rendered from stats.json (compared above) plus timings
        elif a.read_bytes() != b.read_bytes():
            data.append(f"file {rel}: bytes differ")
    return data, props


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m tests.identity", description=__doc__.splitlines()[0])
    p.add_argument("--rev", required=True, help="git revision to compare the working tree with")
    p.add_argument("--work", type=Path, default=None, help="folder for the two runs (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the runs and the checkout")
    p.add_argument("--reuse-base", action="store_true", help="reuse the base run already under --work (rerun work only)")
    p.add_argument("--compare-only", action="store_true", help="compare the two runs already under --work")
    p.add_argument("--python", default=sys.executable, help="interpreter with Winnow's dependencies")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="winnow-identity-"))
    work.mkdir(parents=True, exist_ok=True)
    checkout = work / "base-tree"
    if not checkout.is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(checkout), args.rev], check=True,
                       stdout=subprocess.DEVNULL)
    try:
        inputs = work / "inputs"
        shutil.copytree(checkout / "sample_data", inputs, dirs_exist_ok=True)
        for tree, side in ((checkout, "base"), (REPO, "work")):
            if (args.compare_only or (side == "base" and args.reuse_base)) and (work / side / "tables" / "_runs").is_dir():
                continue
            print(f"[identity] running the chain of {side} ({tree})", flush=True)
            shutil.rmtree(work / side, ignore_errors=True)
            run_chain(tree, work / side, inputs, args.python)
        data, props = compare(work / "base", work / "work", inputs)
    finally:
        if not args.keep:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(checkout)], check=False)
    for line in props:
        print(f"[identity] bookkeeping: {line}")
    for line in data:
        print(f"[identity] DIFFERENT: {line}")
    print(f"[identity] {args.rev} vs working tree: "
          + ("table rows, shard files and manifest.json identical" if not data else f"{len(data)} differences"))
    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not data else 1


if __name__ == "__main__":
    sys.exit(main())
