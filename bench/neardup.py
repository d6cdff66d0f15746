"""End-to-end near-dedup, Winnow against datatrove's MinHash pipeline, on one generated corpus with
known duplicates: CPU seconds per document and recall / precision of both.

``python -m bench.neardup [n_docs] [workers]``; :func:`run` is the ``make bench`` part ``neardup``.

* **Corpus** (seeded, :mod:`bench.corpus` prose, ~3.5 KB per document), written as 4 JSONL files:
  ``n_docs`` base documents; for every 10th one a near copy (0.5-1 % of its words replaced: true
  5-gram Jaccard about 0.9), for every 50th an exact copy, and for every 10th (offset 5) a *hard
  negative* (30 % of its words replaced: Jaccard about 0.1). Ground truth: a base and its near or exact
  copies form a cluster of which all but one must go; every other document must stay.
* **Winnow**: ``ingest`` then ``dedup`` (default config: signatures, LSH 16 x 8, exact-Jaccard check,
  connected components, Delta writes) on ``local[workers]``, one process tree, from Python start to end.
  ``BENCH_NEARDUP_SCHEMES=oph`` (comma-separated ``dedup.scheme`` values) adds a Winnow run per scheme.
* **datatrove 0.10.1** (the pipeline of its ``examples/minhash_deduplication.py``):
  ``JsonlReader -> MinhashDedupSignature``, ``MinhashDedupBuckets``, ``MinhashDedupCluster``,
  ``JsonlReader -> MinhashDedupFilter -> JsonlWriter`` with its default ``MinhashConfig`` (14 x 8,
  5-grams), ``LocalPipelineExecutor(workers=workers)``; its shingle hash is given UTF-8 bytes
  (:func:`xxhash64_text`), as datatrove 0.10.1 with xxhash >= 4 fails on str.
* CPU seconds: every process of each tool's tree (JVM, Python workers, pool workers), sampled from
  ``/proc`` plus what was reaped; per document = CPU seconds / documents in the corpus.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import TreeSampler
from bench.corpus import iter_texts

N_FILES = 4


def _edit(text: str, fraction: float, rng: np.random.Generator, vocab: list[str]) -> str:
    words = text.split(" ")
    k = max(1, int(len(words) * fraction))
    for i in rng.choice(len(words), size=k, replace=False):
        words[i] = vocab[int(rng.integers(len(vocab)))]
    return " ".join(words)


def write_corpus(folder: Path, n_docs: int, seed: int = 0) -> dict:
    """Write the corpus; returns ``clusters`` (lists of ids that are duplicates of each other), ``docs``, ``bytes``."""
    rng = np.random.default_rng(seed + 1)
    folder.mkdir(parents=True, exist_ok=True)
    outs = [open(folder / f"part-{i}.jsonl", "w") for i in range(N_FILES)]  # noqa: SIM115
    clusters: list[list[str]] = []
    n, size = 0, 0
    vocab: list[str] = []

    def emit(doc_id: str, text: str) -> None:
        nonlocal n, size
        line = json.dumps({"id": doc_id, "text": text}) + "\n"
        outs[n % N_FILES].write(line)
        n += 1
        size += len(line)

    for i, text in enumerate(iter_texts(n_docs, seed)):
        if len(vocab) < 5000:
            vocab += text.split(" ")[:50]
        base = f"d{i}"
        emit(base, text)
        group = [base]
        if i % 10 == 0:
            emit(f"{base}-near", _edit(text, 0.005 + 0.005 * (i % 20 == 0), rng, vocab))
            group.append(f"{base}-near")
        if i % 50 == 0:
            emit(f"{base}-exact", text)
            group.append(f"{base}-exact")
        if i % 10 == 5:
            emit(f"{base}-neg", _edit(text, 0.3, rng, vocab))
        if len(group) > 1:
            clusters.append(group)
    for f in outs:
        f.close()
    return {"clusters": clusters, "docs": n, "bytes": size}


def score(removed: set[str], clusters: list[list[str]]) -> dict:
    """Recall / precision of a set of removed ids: per cluster at most ``size - 1`` removals count as right."""
    right = sum(min(len(removed & set(c)), len(c) - 1) for c in clusters)
    should = sum(len(c) - 1 for c in clusters)
    return {"removed": len(removed), "correct": right, "expected": should,
            "recall": round(right / should, 4) if should else None,
            "precision": round(right / len(removed), 4) if removed else None}


def _winnow_child(corpus: Path, root: Path, workers: int, out: Path, scheme: str | None = None) -> None:
    from pipelines.core.config import load_config
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    sets = [f"run.root={root}", f"ingest.inputs=['{corpus}/*.jsonl']", f"spark.master=local[{workers}]",
            f"spark.shuffle_partitions={2 * workers}"] + ([f"dedup.scheme={scheme}"] if scheme else [])
    cfg = load_config(["conf/local.yaml"], sets)
    spark = get_spark("winnow-bench-neardup", cfg.spark)
    reports = {s: run_stage(spark, cfg, s) for s in ("ingest", "dedup")}
    removed = [r["doc_id"].split("/", 1)[1] for r in
               spark.read.format("delta").load(cfg.table_path("removed")).where("stage = 'dedup'").select("doc_id").collect()]
    out.write_text(json.dumps({"removed": removed, "rows_in": reports["ingest"].rows_out}))
    spark.stop()


def xxhash64_text(data: str | bytes) -> int:
    """datatrove's default shingle hash (``xxhash.xxh64_intdigest``) for str input: datatrove 0.10.1
    passes str, which xxhash >= 4 refuses; encoding to UTF-8 is what older xxhash did itself."""
    import xxhash

    return xxhash.xxh64_intdigest(data.encode("utf-8") if isinstance(data, str) else data)


def _datatrove_child(corpus: Path, work: Path, workers: int, out: Path) -> None:
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = MinhashConfig()
    reader = dict(data_folder=str(corpus), glob_pattern="*.jsonl", id_key="id", text_key="text")
    logs = str(work / "logs")
    signer = MinhashDedupSignature(output_folder=str(work / "sigs"), config=config)
    signer._hash_func = xxhash64_text  # see xxhash64_text
    LocalPipelineExecutor([JsonlReader(**reader), signer],
                          tasks=N_FILES, workers=workers, logging_dir=f"{logs}/1").run()
    LocalPipelineExecutor([MinhashDedupBuckets(input_folder=str(work / "sigs"), output_folder=str(work / "buckets"), config=config)],
                          tasks=config.num_buckets, workers=workers, logging_dir=f"{logs}/2").run()
    LocalPipelineExecutor([MinhashDedupCluster(input_folder=str(work / "buckets"), output_folder=str(work / "remove_ids"), config=config)],
                          tasks=1, workers=1, logging_dir=f"{logs}/3").run()
    LocalPipelineExecutor([JsonlReader(**reader),
                           MinhashDedupFilter(input_folder=str(work / "remove_ids"),
                                              exclusion_writer=JsonlWriter(str(work / "removed"))),
                           JsonlWriter(str(work / "deduped"))],
                          tasks=N_FILES, workers=workers, logging_dir=f"{logs}/4").run()
    import gzip

    removed = []
    for p in sorted((work / "removed").glob("*.jsonl.gz")):
        with gzip.open(p, "rt") as f:
            removed += [json.loads(line)["id"] for line in f]
    out.write_text(json.dumps({"removed": removed}))


def _measure(tool: str, corpus: Path, work: Path, workers: int) -> dict:
    out = work / f"{tool}.json"
    cmd = [sys.executable, "-m", "bench.neardup", "--child", tool, str(corpus), str(work / tool), str(workers), str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL,
                            stderr=open(work / f"{tool}.log", "w"))  # noqa: SIM115
    with TreeSampler(root=proc.pid, interval=0.5) as sampler:
        rc = proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = sampler.summary()
    if rc != 0:
        raise RuntimeError(f"{tool} failed (rc {rc}); see {work / f'{tool}.log'}")
    return {"wall_s": round(wall, 1), "cpu_s": round(max(summary["cpu_s"], reaped), 1), "peak_rss_mb": summary["peak_rss_mb"],
            "load1_mean": summary["load1_mean"], "removed": set(json.loads(out.read_text())["removed"])}


def run(n_docs: int, seed: int = 0, workers: int = 2) -> dict:
    """Both tools on one corpus of about ``1.12 * n_docs`` documents (``BENCH_NEARDUP_DOCS`` overrides
    ``n_docs``); figures as a JSON-ready dict."""
    n_docs = int(os.environ.get("BENCH_NEARDUP_DOCS", n_docs))
    schemes = [x for x in os.environ.get("BENCH_NEARDUP_SCHEMES", "").split(",") if x]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="winnow-neardup-"))
    try:
        facts = write_corpus(work / "corpus", n_docs, seed)
        res = {"n_docs": facts["docs"], "mb": round(facts["bytes"] / 1e6, 1), "workers": workers,
               "duplicate_clusters": len(facts["clusters"])}
        for tool in ("datatrove", "winnow", *(f"winnow_{x}" for x in schemes)):
            m = _measure(tool, work / "corpus", work, workers)
            res[tool] = {**{k: v for k, v in m.items() if k != "removed"}, **score(m["removed"], facts["clusters"]),
                         "cpu_ms_per_doc": round(1000 * m["cpu_s"] / facts["docs"], 3)}
        w, d = res["winnow"], res["datatrove"]
        res["goals"] = {"neardup_cpu_vs_datatrove": round(d["cpu_s"] / w["cpu_s"], 2)}
        for x in schemes:
            res["goals"][f"neardup_cpu_vs_datatrove_{x}"] = round(d["cpu_s"] / res[f"winnow_{x}"]["cpu_s"], 2)
        res["quality_at_least_datatrove"] = (w["recall"] or 0) >= (d["recall"] or 0) and (w["precision"] or 0) >= (d["precision"] or 0)
    except Exception:
        print(f"kept {work} for its logs", file=sys.stderr)
        raise
    shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        tool, corpus, work, workers, out = argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), Path(argv[5])
        if tool == "datatrove":
            _datatrove_child(corpus, work, workers, out)
        else:
            _winnow_child(corpus, work, workers, out, tool.partition("_")[2] or None)
        return
    n = int(argv[0]) if argv else 20_000
    workers = int(argv[1]) if len(argv) > 1 else 2
    print(json.dumps(run(n, workers=workers), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
