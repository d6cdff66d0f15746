"""``make bench``: run every stage benchmark and the scaling runs, then write ``bench/results.{md,json}``.

``python -m bench.run [--docs N] [--only STAGE[,STAGE]] [--note TEXT]``; ``BENCH_DOCS`` sets the default N.

1. The seeded corpus of N documents (:mod:`bench.corpus`) is generated once into an Arrow cache that
   ``generate_texts``/``generate_batch`` read (``$WINNOW_BENCH_CACHE``), so every module measures the
   same documents and none pays for generating them.
2. Each ``bench/<stage>.py`` that exists runs in its own Python process (``run(n_docs, seed) -> dict``),
   so one module's SparkSession, memory or crash cannot skew or stop the next; its wall time, CPU
   seconds and peak RSS by role (driver JVM, Python workers) are sampled from ``/proc``. A module not
   there yet is listed as skipped.
3. :mod:`bench.references` measures the peers alone (one thread, CPU seconds) as a calibration;
   :mod:`bench.scaling` runs the whole pipeline at N_s and 4·N_s documents on ``local[2]`` and at N_s on
   ``local[1]`` (N_s = ``--scaling-docs``, default N / 4, so its largest run is the stage modules' N).
4. Each goal is checked against the figures (see :data:`GOALS`), and the results are written
   with the machine's facts and its load while measuring. ``--only`` re-measures some parts and keeps
   the others from the existing ``results.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import TreeSampler, flatten, format_table, loadavg, machine_facts, summarize_pyspy_raw

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
STAGE_MODULES: tuple[str, ...] = ("ingest", "dedup", "filter", "refs", "decontam", "pii", "tokenize", "shard")
"""``bench/<name>.py`` modules the harness looks for, in chain order."""
PARTS: tuple[str, ...] = ("references", *STAGE_MODULES, "rensa", "scaling", "neardup", "passages", "audit", "scale", "skew",
                          "gate", "mediawiki")
"""Everything the harness runs, in order: the references alone (:mod:`bench.references`), each stage
module, the whole-pipeline scaling (:mod:`bench.scaling`)."""
OWN_CORPUS: frozenset[str] = frozenset({"scaling", "tokenize", "neardup", "passages", "audit", "scale", "skew", "gate",
                                        "mediawiki", "rensa"})
"""Parts that do not read the synthetic corpus cache (tokenize, audit and mediawiki measure real text,
bench/tokenize_corpus.py and the shared Wikipedia sample; neardup and scale generate their own files;
rensa generates its own 4,096 documents)."""
DEFAULT_DOCS = 60_000
"""Default N: ~190 MB of text. The fastest stage at its goal (filter + LID, 5 MB/s per core) then runs
~20 s on 2 cores, the floor the goals set so that fixed costs (Delta commits, task start) stay small.
Override with ``BENCH_DOCS``."""


# ------------------------------------------------------------------------------------------- goals
@dataclass(frozen=True)
class Goal:
    """One benchmark goal, found in a part's figures by key pattern.

    Attributes:
        id: stable id.
        text: what is measured.
        part: the bench part whose figures hold it (a stage module name or ``scaling``).
        keys: regexes over the part's flattened figure keys, tried in order; the first pattern with a
            numeric match decides. The explicit ``goals.<id>`` key of :data:`GOAL_KEYS_DOC` comes first.
            When one pattern matches several figures (e.g. one overhead per sub-benchmark) the worst
            counts: every one must meet the goal. A pattern ending in ``~1/x`` names a figure stated
            the other way round (e.g. ``spark_vs_plain`` = Spark throughput / plain throughput, whose
            inverse is the overhead ratio): its value is inverted.
        op: ``>=`` or ``<=``.
        target: the goal.
        stretch: the stretch goal, if any.
    """

    id: str
    text: str
    part: str
    keys: tuple[str, ...]
    op: str
    target: float
    stretch: float | None = None


GOAL_KEYS_DOC = """\
A stage module states a goal figure unambiguously with a top-level ``"goals"`` dict in its result:
``minhash_vs_datasketch`` (dedup), ``signals_vs_datatrove`` and ``filter_lid_mb_s_core`` (filter),
``tokenize_vs_raw`` (tokenize), ``spark_overhead`` (every stage; the worst of its sub-benchmarks).
Without it the harness looks for keys that name the same figure (patterns in ``bench/run.py``)."""

_INVERT = "~1/x"
# Besides the generic names, the keys the stage modules use today: bench/dedup.py ((a) Spark stage,
# (b) plain Arrow batch, (c) datasketch; "time a over b" is the overhead itself), bench/filter.py
# (spark_stage.overhead_vs_arrow; its lid.overhead is LID vs raw fastText, not Spark, so a bare
# "overhead" does not count), bench/refs.py (speed.spark_vs_plain, a throughput ratio).
_OVERHEAD_KEYS = (r"^goals\.spark_overhead$", r"spark_overhead(_ratio)?$", r"spark.*overhead", r"^ratio_time_a_over_b$",
                  r"spark_vs_plain$" + _INVERT, r"spark.*(vs|over|per).*plain$" + _INVERT)


def _goals(parts: list[str]) -> list[Goal]:
    goals = [
        Goal("minhash_vs_datasketch", "MinHash signatures per core vs datasketch `MinHash.update_batch`", "dedup",
             (r"^goals\.minhash_vs_datasketch$", r"minhash.*(vs|over|ratio|speedup).*datasketch",
              r"(signature|minhash).*(vs_reference|ratio|speedup)$", r"datasketch.*(ratio|speedup)", r"^ratio_a_over_c$"),
             ">=", 5.0, 10.0),
        Goal("minhash_vs_rensa", "MinHash kernel per core vs rensa's `RMinHash` given the same shingles (bench/rensa.py)",
             "rensa", (r"^goals\.minhash_vs_rensa$",), ">=", 1.0),
        Goal("signals_vs_datatrove", "quality signals per core vs datatrove Gopher-quality + Gopher-repetition + C4 + FineWeb",
             "filter", (r"^goals\.signals_vs_datatrove$", r"^signals\.speedup$", r"signals?.*(vs|over|ratio|speedup).*datatrove",
                        r"datatrove.*(ratio|speedup)", r"vs_datatrove"), ">=", 10.0),
        Goal("filter_lid_mb_s_core", "filter + LID together, MB/s per core (dolma LID + C4 tagging: ~2.3)", "filter",
             (r"^goals\.filter_lid_mb_s_core$", r"^spark_stage\.mb_per_s_per_core$", r"(filter|stage).*lid.*mb_s_core$", r"lid.*(filter|stage).*mb_s_core$",
              r"stage.*mb_s_core$"), ">=", 5.0),
        Goal("tokenize_vs_raw", "tokenize stage vs raw `tokenizers` GPT-2 `encode_batch` (tokens/s per core)", "tokenize",
             (r"^goals\.tokenize_vs_raw$", r"^ratio_stage_vs_encode_batch$", r"vs_raw", r"(ratio|speedup).*(raw|encode_batch)", r"(raw|encode_batch).*ratio"),
             ">=", 0.8),
        Goal("decontam_vs_python_set", "decontam stage (broadcast join) MB/s per core vs a plain Python set of 13-gram tuples",
             "decontam", (r"^goals\.decontam_vs_python_set$",), ">=", 1.0),
        Goal("tiktoken_vs_hf_stage", "tokenize stage with tiktoken vs with the HF tokenizer, same ids (tokens/s per core)",
             "tokenize", (r"^goals\.tiktoken_vs_hf_stage$",), ">=", 3.0),
        Goal("refs_nonscience_precision", "refs: precision of dangling mentions on the labelled legal, licence, wiki, "
             "LaTeX and hard-negative documents", "refs", (r"^goals\.refs_nonscience_precision$",), ">=", 0.95),
        Goal("refs_real_nonscience_precision", "refs: precision of the dangling flags on the shared real Wikipedia "
             "and web samples, each flag judged by reading it", "refs", (r"^goals\.refs_real_nonscience_precision$",),
             ">=", 0.9),
        Goal("refs_real_science_recall", "refs: recall of dangling table and figure mentions on the real PMC and "
             "unarXive papers (lowest view)", "refs", (r"^goals\.refs_real_science_recall$",), ">=", 0.95),
        Goal("scaling_exponent", "whole pipeline N -> 4N: exponent log(t4N/tN)/log 4", "scaling", (r"^exponent$",), "<=", 1.1),
        Goal("neardup_cpu_vs_datatrove", "ingest + near-dedup CPU seconds at >= 40,000 documents: datatrove MinHash "
             "pipeline / Winnow, at equal or better recall and precision",
             "neardup", (r"^goals\.neardup_cpu_vs_datatrove$",), ">=", 8.0),
        Goal("neardup_cpu_vs_text_dedup", "ingest + near-dedup CPU seconds at >= 40,000 documents: text-dedup 0.3.1's "
             "Spark MinHash job (its defaults) / Winnow", "neardup", (r"^goals\.neardup_cpu_vs_text_dedup$",), ">=", 3.0),
        Goal("passages_per_core_vs_datatrove", "passages stage (exact + near) documents per CPU-second vs datatrove's "
             "sentence dedup, whole process trees, at equal or better recall and precision", "passages",
             (r"^goals\.winnow_per_core_vs_datatrove$",), ">=", 3.0),
        Goal("mediawiki_mb_per_cpu_s", "MediaWiki reader: MB of wikitext per CPU-second on the shared Wikipedia sample "
             "(bench/mediawiki.py)", "mediawiki", (r"^goals\.mediawiki_kernel_mb_per_cpu_s$",), ">=", 2.0),
        Goal("audit_share_of_stage", "tokenizer audit filled inline: the stage worker's audit CPU per batch / the "
             "tokenize stage's per-batch CPU (tiktoken engine, shared real text; bench/audit.py)", "audit",
             (r"^goals\.audit_share_of_stage\.tiktoken$",), "<=", 0.05),
        Goal("ingest_mb_per_cpu_s", "ingest alone of 1 GB of JSONL on local[2], MB of input per CPU-second of the process tree, session start apart (20 MB/s per core; bench/ingest_scale.py)", "scale",
             (r"^goals\.ingest_mb_per_cpu_s$",), ">=", 20.0),
        Goal("gate_overhead_vs_plain_jax", "winnow gate: the gate's training loop CPU seconds / a plain JAX loop's, same model and arrays",
             "gate", (r"^goals\.gate_overhead_vs_plain_jax$",), "<=", 1.1),
        Goal("gate_mfu", "winnow gate: model FLOP utilisation against the CPU's measured float32 matmul rate (both per CPU second)", "gate",
             (r"^goals\.gate_mfu$",), ">=", 0.3),
        Goal("gate_default_minutes", "winnow gate: default gate (2 variants x 3 seeds + wavy check), training minutes on this machine idle (CPU rate x cores)",
             "gate", (r"^goals\.gate_default_minutes$",), "<=", 15.0),
    ]
    goals += [Goal(f"spark_overhead.{p}", f"{p}: Spark stage core-seconds / plain Arrow batch core-seconds", p,
                   _OVERHEAD_KEYS, "<=", 1.25) for p in parts if p in STAGE_MODULES]
    return goals


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def evaluate_goal(goal: Goal, figures: dict[str, Any] | None) -> dict[str, Any]:
    """Check one goal against a part's figures.

    Returns:
        ``id``, ``goal`` (text), ``target``, ``value``, ``keys`` (figure keys used), ``status`` (``pass``,
        ``stretch`` (stretch goal met too), ``miss`` or ``not measured``) and ``margin`` (value / target).
    """
    row: dict[str, Any] = {"id": goal.id, "goal": goal.text, "target": f"{goal.op} {goal.target:g}",
                           "value": None, "keys": [], "status": "not measured", "margin": None}
    flat = {k: v for k, v in flatten(figures or {}).items() if _numeric(v)}
    for pattern in goal.keys:
        invert = pattern.endswith(_INVERT)
        rx = re.compile(pattern.removesuffix(_INVERT), re.IGNORECASE)
        hits = {k: (1.0 / v if invert else v) for k, v in flat.items() if rx.search(k) and (v or not invert)}
        if not hits:
            continue
        worst_key = (min if goal.op == ">=" else max)(hits, key=lambda k: hits[k])
        value = float(hits[worst_key])
        met = value >= goal.target if goal.op == ">=" else value <= goal.target
        stretch = goal.stretch is not None and value >= goal.stretch
        row.update(value=round(value, 3), keys=[f"1/{k}" if invert else k for k in sorted(hits)], status=("stretch" if stretch else "pass") if met else "miss",
                   margin=round(value / goal.target, 3) if goal.target else None)
        break
    return row


def evaluate_goals(parts: dict[str, Any]) -> list[dict[str, Any]]:
    """Every goal of :func:`_goals` against the parts' figures, saying why one is not measured.

    The scaling exponent is ``inconclusive`` when a straight line through t(N) and t(4N) puts more than
    half of t(N) in the fixed part: then N is too small for the exponent to describe growth.
    """
    rows = []
    for goal in _goals(list(parts)):
        part = parts.get(goal.part) or {}
        row = evaluate_goal(goal, part.get("figures"))
        if row["status"] == "not measured" and part.get("status") != "ok":
            row["status"] = f"not measured ({goal.part}: {part.get('status') or 'not run'})"
        if goal.id == "scaling_exponent" and row["value"] is not None:
            f = part["figures"]
            t_n, t_4n, n = f["runs"]["N"]["stages_s"], f["runs"]["4N"]["stages_s"], f["n_docs"]
            fixed = t_n - (t_4n - t_n) / 3
            if t_n and fixed / t_n > 0.5:
                row["status"] = f"inconclusive (fixed cost {fixed / t_n:.0%} of t(N) at N = {n:,})"
        rows.append(row)
    return rows


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, int | float | bool) or (isinstance(v, str) and len(v) <= 80)


def _miss_text(row: dict[str, Any]) -> str:
    v, t = row["value"], float(row["target"].split()[1])
    if row["target"].startswith(">="):
        return f"{row['id']}: {v:g} vs goal {row['target']} – {t / v:.2f}x short" if v > 0 else f"{row['id']}: {v:g}"
    return f"{row['id']}: {v:g} vs goal {row['target']} – {v / t:.2f}x over"


# -------------------------------------------------------------------------------------------- parts
def module_exists(name: str) -> bool:
    """True when ``bench/<name>.py`` exists (found without importing it)."""
    return importlib.util.find_spec(f"bench.{name}") is not None


def _env(cache_dir: Path) -> dict[str, str]:
    env = dict(os.environ, WINNOW_BENCH_CACHE=str(cache_dir))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Modules look for ../shared/data next to the checkout; from a worktree it is further up.
    from bench.references import SHARED

    if SHARED.is_dir():
        env.setdefault("WINNOW_SHARED_DATA", str(SHARED))
    return env


def _py_spy() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.is_file() else shutil.which("py-spy")


def run_part(name: str, n_docs: int, seed: int, cache_dir: Path, timeout_s: float, scaling_docs: int,
             profile: bool = False) -> dict[str, Any]:
    """Run one part (``bench/<name>.py`` or scaling) in a child process and measure it from outside.

    Args:
        profile: sample the child and every Python process below it (the Spark workers included) with
            ``py-spy record --subprocesses --nonblocking`` (out of process, the target is not paused).

    Returns:
        ``status`` (``ok``, ``failed``, ``timeout``), ``figures`` (the module's dict), ``process`` (wall
        seconds, CPU seconds and peak RSS of the child's process tree), ``measured_at``, ``n_docs`` and,
        when profiled, ``profile`` (:func:`bench.common.summarize_pyspy_raw`).
    """
    with tempfile.TemporaryDirectory(prefix=f"winnow-bench-{name}-") as tmp:
        out_json = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "bench.run", "--child", name, "--docs", str(scaling_docs if name == "scaling" else n_docs),
               "--seed", str(seed), "--json", str(out_json)]
        print(f"\n=== bench {name}: {' '.join(cmd[1:])}", flush=True)
        prof_file = Path(tmp) / "profile.txt"
        spy = _py_spy() if profile else None
        if profile and spy is None:
            print("=== py-spy not found (pip install py-spy): not profiling", flush=True)
        if spy:
            cmd = [spy, "record", "--subprocesses", "--nonblocking", "--rate", "25", "--format", "raw",
                   "--output", str(prof_file), "--", *cmd]
        t0 = time.perf_counter()
        partial = Path(tmp) / "partial.json"  # a part may write its figures so far there (bench/scale.py does)
        # Its own process group, so a timeout also ends the chain, JVM and Python workers it started.
        proc = subprocess.Popen(cmd, cwd=REPO, env={**_env(cache_dir), "WINNOW_BENCH_PARTIAL": str(partial)},
                                start_new_session=True)
        status = "ok"
        with TreeSampler(root=proc.pid, interval=0.5) as sampler:
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc, status = proc.wait(), "timeout"
        wall = time.perf_counter() - t0
        if status == "ok" and (rc != 0 or not out_json.is_file()):
            status = "failed"
        figures = json.loads(out_json.read_text()) if out_json.is_file() else None
        if figures is None and partial.is_file():
            figures = {**json.loads(partial.read_text()), "partial": True}
        prof = summarize_pyspy_raw(prof_file) if prof_file.is_file() else None
    print(f"=== bench {name}: {status} in {wall:.0f}s", flush=True)
    return {
        "status": status,
        "returncode": rc,
        "n_docs": scaling_docs if name == "scaling" else n_docs,
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "process": {"wall_s": round(wall, 1), **sampler.summary()},
        "figures": figures,
        **({"profile": prof} if prof else {}),
    }


def _child(name: str, n_docs: int, seed: int, out_json: Path) -> int:
    if name == "scaling":
        from bench import scaling

        res = scaling.run(n_docs, seed)
    else:
        import importlib

        module = importlib.import_module(f"bench.{name}")
        res = module.run(n_docs, seed)
    if not isinstance(res, dict):
        raise TypeError(f"bench/{name}.py run() must return a dict; got {type(res).__name__}")
    out_json.write_text(json.dumps(res, default=str, indent=1))
    return 0


# ------------------------------------------------------------------------------------------ report
def render_markdown(results: dict[str, Any], notes: Path | None = None) -> str:
    """``results.md``: machine, load, goals, per-part figures, scaling, skipped parts, then ``notes``.

    Args:
        notes: a hand-written Markdown file (``bench/notes.md``: what the profiles of missed goals show)
            appended as the closing note when it exists.
    """
    m, p = results["machine"], results["params"]
    lines = [
        "# Winnow benchmark results",
        "",
        f"Written by `python -m bench.run` (`make bench`) on {m['date_utc']}; N = {p['n_docs']:,} documents "
        f"(seed {p['seed']}) of the synthetic corpus of `bench/corpus.py` (~3.2 KB each); scaling N = "
        f"{p['scaling_docs']:,}. Figures of a part re-measured alone (`--only`) carry their own date.",
        "",
        "## Machine",
        "",
        format_table([
            {"fact": "cores (affinity)", "value": m["cores"]},
            {"fact": "memory", "value": f"{m['memory_gb']} GiB"},
            {"fact": "CPU", "value": m["cpu_model"]},
            {"fact": "OS", "value": m["os"]},
            {"fact": "Python / Java", "value": f"{m['python']} / {m['java']}"},
            *({"fact": k, "value": v or "not installed"} for k, v in m["versions"].items()),
            {"fact": "git commit", "value": m["git_commit"]},
        ]),
        "",
        "## Load while measuring",
        "",
        f"Load average (1/5/15 min) at start: {', '.join(f'{x:.2f}' for x in m['load_at_start'])} on {m['cores']} cores. "
        "Per part, the 1-minute load average sampled while it ran (our own work counts ~2 when it keeps both "
        "cores busy; anything above that is other processes competing for the cores). `cores_got` = CPU seconds of the "
        "part's processes / wall seconds: the share of the machine the part really had. Figures computed from wall time "
        "(most stage modules' docs/s) are depressed by the load; figures from CPU seconds (bench/references.py, "
        "bench/common.py `Measure`) much less:",
        "",
    ]
    load_rows = [{"part": k, "status": v["status"], "wall_s": v["process"]["wall_s"], "cpu_s": v["process"].get("cpu_s"),
                  "cores_got": round(v["process"]["cpu_s"] / v["process"]["wall_s"], 2)
                  if v["process"].get("cpu_s") and v["process"]["wall_s"] else None,
                  "load1_mean": v["process"].get("load1_mean"), "load1_max": v["process"].get("load1_max"),
                  "measured_at": v["measured_at"]} for k, v in results["parts"].items() if v["status"] != "skipped"]
    lines += [format_table(load_rows) if load_rows else "(nothing measured)", ""]
    if results.get("note"):
        lines += [f"Note: {results['note']}", ""]
    lines += ["## Goals", "", GOAL_KEYS_DOC, ""]
    lines += [format_table([{**g, "keys": ", ".join(f"`{k}`" for k in g["keys"]) or "–"} for g in results["goals"]],
                           ["id", "goal", "target", "value", "status", "margin", "keys"]), ""]
    misses = [g for g in results["goals"] if g["status"] == "miss"]
    if misses:
        lines += ["Missed: " + "; ".join(_miss_text(g) for g in misses) + ".", ""]
    lines += ["## Per part", "",
              "`references` measures the peers alone, one thread, CPU time (bench/references.py): a calibration "
              "for the reference figures each stage module measures side by side with its stage.", ""]
    for name in ("references", *STAGE_MODULES, "rensa", "passages", "audit"):
        part = results["parts"].get(name)
        if part is None or part["status"] == "skipped":
            continue
        proc = part["process"]
        mem = proc.get("peak_rss_mb", {})
        lines += [f"### {name} ({part['status']}, N = {part['n_docs']:,}, {part['measured_at']})", "",
                  f"Process: {proc['wall_s']} s wall, {proc.get('cpu_s')} CPU s; peak RSS JVM {mem.get('jvm', 0)} MB, "
                  f"Python workers {mem.get('python_worker', 0)} MB (largest {proc.get('peak_python_worker_rss_mb')} MB), "
                  f"bench driver {mem.get('driver', 0)} MB.", ""]
        if part["figures"]:
            shown = {k: v for k, v in flatten(part["figures"]).items() if _scalar(v)}
            hidden = len(flatten(part["figures"])) - len(shown)
            lines += [format_table([{"figure": k, "value": v} for k, v in shown.items()]), ""]
            if hidden:
                lines += [f"({hidden} list or long-text figures omitted here; see results.json.)", ""]
    sc = results["parts"].get("scaling")
    if sc and sc["status"] != "skipped":
        lines += _scaling_md(sc)
    gate = results["parts"].get("gate")
    if gate and gate.get("figures"):
        from bench.gate import render_markdown as gate_md

        lines += [f"## Gate calibration ({gate['status']}, {gate['measured_at']})", "",
                  f"Measured by: {gate.get('measured_by') or 'python -m bench.gate'}.", "", *gate_md(gate["figures"])]
    profiled = {k: v["profile"] for k, v in results["parts"].items() if v.get("profile")}
    if profiled:
        lines += ["## Profiles (py-spy, all Python processes of the part)", "",
                  "Share of active samples per leaf function (where the Python time goes) and per function of the project's "
                  "own code anywhere on the stack; JVM time is not sampled.", ""]
        for k, prof in profiled.items():
            lines += [f"### {k} ({prof['samples']:,} samples)", "",
                      format_table([{"function": f, "self": sh, "": "", "project function (inclusive)": fi, "incl.": si}
                                    for (f, sh), (fi, si) in zip(prof["self"], prof["inclusive"], strict=False)]), ""]
            if prof.get("worker_self"):
                lines += [f"Spark Python workers only ({prof['worker_samples']:,} samples):", "",
                          format_table([{"worker function": f, "self": sh} for f, sh in prof["worker_self"]]), ""]
    skipped = {k: v.get("reason", "") for k, v in results["parts"].items() if v["status"] == "skipped"}
    if skipped:
        lines += ["## Skipped", "", *(f"- `{k}`: {r}" for k, r in skipped.items()), ""]
    failed = [k for k, v in results["parts"].items() if v["status"] in ("failed", "timeout")]
    if failed:
        lines += ["## Failed", "", *(f"- `{k}`: {results['parts'][k]['status']} (exit {results['parts'][k].get('returncode')})"
                                      for k in failed), ""]
    if notes is not None and notes.is_file():
        lines += ["## Closing note", "", notes.read_text(encoding="utf-8").strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def _scaling_md(sc: dict[str, Any]) -> list[str]:
    lines = [f"## Scaling: whole pipeline ({sc['status']}, {sc['measured_at']})", ""]
    f = sc.get("figures") or {}
    if not f:
        return [*lines, "(no figures)", ""]
    lines += [f"Stages: {', '.join(f['stages']) or 'none'} ({f['mode']}). Time = sum of the stages' own times "
              "(JVM start excluded); CPU = CPU seconds of the whole process tree; RSS = peak, summed per role.", ""]
    rows = [{"run": k, "docs": r["n_docs"], "master": r["master"], "ok": r["ok"], "stages_s": r["stages_s"],
             "wall_s": r["wall_s"], "cpu_s": r.get("cpu_s"), "load1_mean": r.get("load1_mean"),
             "jvm_mb": r["peak_rss_mb"].get("jvm"), "workers_mb": r["peak_rss_mb"].get("python_worker"),
             "driver_mb": r["peak_rss_mb"].get("driver")} for k, r in f["runs"].items()]
    lines += [format_table(rows), ""]
    per_stage = []
    for stage in f["runs"]["N"]["stages"]:
        row: dict[str, Any] = {"stage": stage}
        for k, r in f["runs"].items():
            s = r["stages"].get(stage)
            row[f"{k}_s"] = s["s"] if s else None
            row[f"{k}_out"] = s["rows_out"] if s else None
        row["exponent"] = f.get("exponent_by_stage", {}).get(stage)
        per_stage.append(row)
    if per_stage:
        lines += [format_table(per_stage), ""]
    n, n4 = f["runs"]["N"], f["runs"]["4N"]
    if f.get("exponent") is not None:
        b = (n4["stages_s"] - n["stages_s"]) / (3 * f["n_docs"])
        a = n["stages_s"] - b * f["n_docs"]
        lines += [f"- exponent N -> 4N: **{f['exponent']}** (stage time), {f.get('exponent_cpu')} (CPU seconds); "
                  f"a straight line through the two points: {a:.1f} s fixed + {b * 1e3:.2f} ms per document."]
        if n["stages_s"] and a / n["stages_s"] > 0.5:
            lines += [f"- caveat: the fixed part is {a / n['stages_s']:.0%} of t(N) (Delta commits, job and task start), so "
                      "at this N the exponent says little about how cost grows with data; the per-document cost is the "
                      "figure to extrapolate from (run with a larger BENCH_DOCS on an idle machine)."]
    if f.get("speedup_2_cores") is not None:
        lines += [f"- local[1] -> local[2] speed-up at N: **{f['speedup_2_cores']}x** (2.0 = perfect)."]
    pk = f.get("peak_rss_mb", {})
    lines += [f"- peak RSS over all runs: driver JVM {pk.get('jvm')} MB, Python workers {pk.get('python_worker', 0)} MB "
              f"summed (largest single worker {f.get('peak_python_worker_rss_mb')} MB), Python driver {pk.get('driver')} MB.", ""]
    bad = [k for k, r in f["runs"].items() if not r["ok"]]
    for k in bad:
        lines += [f"Run {k} failed:", "", "```", f["runs"][k].get("stderr_tail", "")[-1500:], "```", ""]
    return lines


# -------------------------------------------------------------------------------------------- main
def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description="Run Winnow's benchmarks.")
    p.add_argument("--docs", type=int, default=int(os.environ.get("BENCH_DOCS", DEFAULT_DOCS)),
                   help=f"N documents per stage benchmark (default $BENCH_DOCS or {DEFAULT_DOCS})")
    p.add_argument("--scaling-docs", type=int, default=None, help="N of the scaling runs (default N / 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default=None, help=f"comma-separated parts to run, of {list(PARTS)}; others are kept "
                                                "from the existing results.json")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per part before it is killed")
    p.add_argument("--profile", action="store_true", help="profile each part with py-spy (all Python processes)")
    p.add_argument("--note", default=None, help="a sentence on the machine's load, written into results.md")
    p.add_argument("--out", default=str(BENCH_DIR), help="folder for results.md and results.json")
    p.add_argument("--render", action="store_true", help="only rewrite results.md from results.json (and notes.md)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.docs < 1:
        p.error(f"--docs must be >= 1; got {args.docs}")
    if args.only:
        unknown = [x for x in args.only.split(",") if x not in PARTS]
        if unknown:
            p.error(f"--only: unknown part(s) {unknown}; allowed: {list(PARTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    if args.child:
        return _child(args.child, args.docs, args.seed, Path(args.json))
    if args.render:
        out = Path(args.out)
        results = json.loads((out / "results.json").read_text())
        results["goals"] = evaluate_goals(results["parts"])
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
        (out / "results.md").write_text(render_markdown(results, out / "notes.md"))
        return 0
    scaling_docs = args.scaling_docs or max(1, args.docs // 4)
    only = args.only.split(",") if args.only else list(PARTS)
    out = Path(args.out)
    previous = json.loads((out / "results.json").read_text()) if args.only and (out / "results.json").is_file() else {}
    parts: dict[str, Any] = dict(previous.get("parts", {}))
    load_start = loadavg()

    from bench.corpus import cache_corpus

    with tempfile.TemporaryDirectory(prefix="winnow-bench-cache-") as cache:
        os.environ["WINNOW_BENCH_CACHE"] = cache
        if any(p not in OWN_CORPUS and module_exists(p) for p in only):
            t0 = time.perf_counter()
            cache_corpus(args.docs, args.seed)
            print(f"corpus: {args.docs:,} documents (seed {args.seed}) in {time.perf_counter() - t0:.0f}s", flush=True)
        for name in PARTS:
            if name not in only:
                continue
            if name != "scaling" and not module_exists(name):
                parts[name] = {"status": "skipped", "reason": f"bench/{name}.py does not exist yet"}
                print(f"=== bench {name}: skipped (bench/{name}.py does not exist yet)", flush=True)
                continue
            parts[name] = run_part(name, args.docs, args.seed, Path(cache), args.timeout, scaling_docs, args.profile)
    machine = machine_facts()
    machine["load_at_start"] = load_start
    results = {
        "machine": machine,
        "params": {"n_docs": args.docs, "scaling_docs": scaling_docs, "seed": args.seed},
        "note": args.note or previous.get("note"),
        "parts": {k: parts[k] for k in PARTS if k in parts},
    }
    results["goals"] = evaluate_goals(parts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")
    md = render_markdown(results, out / "notes.md")
    (out / "results.md").write_text(md)
    print("\n" + format_table(results["goals"], ["id", "target", "value", "status", "keys"], markdown=False))
    print(f"\nwrote {out / 'results.md'} and {out / 'results.json'}")
    return 0 if all(v["status"] in ("ok", "skipped") for v in results["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
