"""The filter's per-batch work against another commit: MB per CPU-second and decision agreement.

``python -m bench.filter_speed BASE_COMMIT[,BASE_COMMIT...] [rounds]`` extracts ``udfs``, ``pipelines``,
``bench`` and ``conf`` of each base commit into a temporary folder and runs this file once per code tree
(each base's and the working tree's) in fresh processes, alternating, ``rounds`` times (default 3). It
prints JSON (with several bases, one such object per base under ``bases``, all measured in the same
rounds):

* ``kernels``: CPU seconds (``time.process_time``, best over the rounds and over 2 calls a round) of
  the filter's signal kernels (:func:`udfs.quality.quality_signals`, the ``web`` reading) and of its
  language ID (:func:`udfs.langid.identify` with the configured ``filter.langid``) on one Arrow batch of
  every shared real document (scientific, Wikipedia, Common Crawl web pages, multilingual paragraphs;
  :func:`bench.auto_profile.labelled`), as MB of UTF-8 text per CPU-second, and each tree's ratio.
* ``agreement``: per data set, documents kept or dropped alike by both trees (each document under the
  profile ``auto`` picks, decided by the filter's rule rows, :func:`bench.auto_profile.judge_auto`),
  and every document whose reasons differ, with both reason lists.

On a shared machine CPU seconds drift less than wall time, and alternating the trees in the same
minutes keeps the ratio honest when the machine's speed drifts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA_SETS = ("scientific", "wikipedia", "web_crawl", "multilingual")
_TREE_DIRS = ("udfs", "pipelines", "bench", "conf")


def _batch() -> tuple[dict, list[str]]:
    from bench import auto_profile

    data = auto_profile.labelled()
    return data, [t for ds in DATA_SETS for _, _, t in data[ds]]


def kernels(calls: int = 2) -> dict:
    """CPU seconds of the signal kernels and of LID on the shared batch, best of ``calls`` calls."""
    import pyarrow as pa

    from pipelines.filter.config import FilterConfig
    from udfs import langid, quality

    _, texts = _batch()
    arr = pa.array(texts, pa.string())
    lid = FilterConfig().langid
    model = langid.load_model(langid.default_model_path())
    # a base commit's config may predate a keyword (this file runs against older trees)
    extra = {"confident": lid.confident_score} if hasattr(lid, "confident_score") else {}
    parts = {
        "signals": lambda: quality.quality_signals(arr),
        "lid": lambda: langid.identify(model, arr, lid.max_chars, lid.sample_windows, lid.topk_max_chars, lid.top_k,
                                       **extra),
    }
    out = {"mb": sum(len(t.encode()) for t in texts) / 1e6, "docs": len(texts)}
    for name, fn in parts.items():
        best = float("inf")
        for _ in range(calls):
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
        out[name] = best
    return out


def decisions() -> dict:
    """Per data set, document id -> [profile ``auto`` picks, drop reasons]."""
    from bench import auto_profile

    data, _ = _batch()
    out = {}
    for ds in DATA_SETS:
        rows = data[ds]
        picks, reasons = auto_profile.judge_auto([t for _, _, t in rows])
        out[ds] = {k: [p, r] for (k, _, _), p, r in zip(rows, picks, reasons, strict=True)}
    return out


def agreement(base: dict, new: dict) -> dict:
    """Documents decided alike (kept by both or dropped by both) per data set, and every difference."""
    out = {}
    same_all = n_all = 0
    for ds in base:
        diffs = []
        same = 0
        for k, (profile, r_old) in base[ds].items():
            r_new = new[ds][k][1]
            same += (not r_old) == (not r_new)
            if set(r_old) != set(r_new):
                diffs.append({"id": k, "profile": profile, "kept_before": not r_old, "kept_after": not r_new,
                              "only_before": [r for r in r_old if r not in r_new],
                              "only_after": [r for r in r_new if r not in r_old]})
        n = len(base[ds])
        same_all, n_all = same_all + same, n_all + n
        out[ds] = {"docs": n, "decided_alike": same, "share": round(same / n, 4), "reasons_differ": diffs}
    out["all"] = {"docs": n_all, "decided_alike": same_all, "share": round(same_all / n_all, 4)}
    return out


def _run_tree(pythonpath: str, what: str, cwd: str) -> dict:
    # run from a neutral folder, by path but not as a script (its folder would come first on sys.path
    # and bench/tokenize.py would shadow the standard library's tokenize)
    from bench.references import SHARED

    env = {**os.environ, "PYTHONPATH": pythonpath, "WINNOW_SHARED_DATA": str(SHARED)}
    code = f"import runpy, sys; sys.argv = ['filter_speed', {what!r}]; runpy.run_path({__file__!r}, run_name='__main__')"
    res = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True, cwd=cwd)
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(base_commits: str, rounds: int = 3) -> dict:
    """Each tree's kernel CPU seconds (alternating, best of ``rounds``) and the working tree's decision
    agreement with each base (``base_commits``: commits separated by commas)."""
    repo = Path(__file__).resolve().parents[1]
    bases = base_commits.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for i, commit in enumerate(bases):
            root = os.path.join(tmp, f"base{i}")
            os.mkdir(root)
            archive = subprocess.run(["git", "-C", str(repo), "archive", commit, *_TREE_DIRS], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
            trees[commit] = f"{root}{os.pathsep}{repo}"
        trees["new"] = str(repo)
        tmp_cwd = tempfile.mkdtemp(dir=tmp)
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        load = []
        for _ in range(rounds):
            for name, path in trees.items():
                runs[name].append(_run_tree(path, "kernels", tmp_cwd))
                load.append(os.getloadavg()[0])
        decided = {name: _run_tree(path, "decisions", tmp_cwd) for name, path in trees.items()}
    best = {}
    for name, rs in runs.items():
        sig, lid = min(r["signals"] for r in rs), min(r["lid"] for r in rs)
        best[name] = {"mb": round(rs[0]["mb"], 3), "docs": rs[0]["docs"], "signals_cpu_s": round(sig, 3),
                      "lid_cpu_s": round(lid, 3), "mb_per_cpu_s": round(rs[0]["mb"] / (sig + lid), 3)}
    per_base = {}
    for commit in bases:
        per_base[commit] = {"base_commit": commit, "rounds": rounds, "load_avg_1m": [min(load), max(load)],
                            "base": best[commit], "new": best["new"],
                            "speedup": round(best["new"]["mb_per_cpu_s"] / best[commit]["mb_per_cpu_s"], 2),
                            "agreement": agreement(decided[commit], decided["new"])}
    return per_base[bases[0]] if len(bases) == 1 else {"bases": per_base}


if __name__ == "__main__":
    if sys.argv[1] == "kernels":
        print(json.dumps(kernels()))
    elif sys.argv[1] == "decisions":
        print(json.dumps(decisions()))
    else:
        print(json.dumps(compare(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3), indent=1))
