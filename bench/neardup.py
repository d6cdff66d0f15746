"""End-to-end near-dedup, Winnow against datatrove's MinHash pipeline and text-dedup's Spark MinHash job,
on one generated corpus with known duplicates: CPU seconds per document and recall / precision of each.

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
* **text-dedup 0.3.1** (``text_dedup/minhash_spark.py``, the last release whose Spark job needs no JVM
  package beyond Spark; 0.4's imports graphframes): its ``__main__`` as written, with its defaults
  (256 permutations, threshold 0.7 -> 25 bands x 10 rows, 5-grams, 512 RDD partitions, its own
  large-star / small-star connected components, kept documents written as JSON), run with ``runpy``.
  Only its input changes: its ``spark.read.format("bigquery").option("table", X).load()`` reads the
  corpus JSONL ``X`` (``spark.read.schema("id STRING, text STRING").json``); argv ``--table <corpus glob>
  --output <dir> --column text``; the master is ``local[workers]`` through ``PYSPARK_SUBMIT_ARGS`` (its
  ``SparkConf`` sets none). Removed = all ids - the ids it kept. Not a dependency (its wheel pins numpy<2,
  pyspark<4, scipy==1.9.1, datasets...; the job itself needs only numpy, scipy, pyspark, xxhash): install
  it with ``pip install --no-deps text-dedup==0.3.1``; without it the tool is skipped with that reason.
* ``BENCH_NEARDUP_THRESHOLDS=0.7,0.8`` (comma-separated) adds, for each threshold that is not a tool's
  default, a run of Winnow (``dedup.threshold``) and of text-dedup (``--threshold``) at it;
  ``BENCH_NEARDUP_TOOLS`` (comma-separated of ``datatrove``, ``winnow``, ``text_dedup``; default all)
  picks the tools.
* ``missed``: per tool, the copies it left (up to 20) with their word count and true Jaccard to the
  base (:func:`missed`).
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


def _texts(corpus: Path, ids: set[str]) -> dict[str, str]:
    """The corpus texts of ``ids``."""
    out: dict[str, str] = {}
    for p in sorted(corpus.glob("*.jsonl")):
        with open(p) as f:
            for line in f:
                rec = json.loads(line)
                if rec["id"] in ids:
                    out[rec["id"]] = rec["text"]
    return out


def missed(removed: set[str], clusters: list[list[str]], corpus: Path, limit: int = 20) -> list[dict]:
    """The copies a tool left where all but one of a cluster should go (at most ``limit``, by cluster order):
    each with its cluster's base id, its word count and its true Jaccard to the base over Winnow's
    default shingles (:class:`udfs.minhash.ShingleSpec`: word 5-grams after Winnow's normalisation), so
    a miss can be told apart from a copy whose edit took it under the threshold."""
    import pyarrow as pa

    from udfs.minhash import ShingleSpec, shingle_strings

    short = [c for c in clusters if len(removed & set(c)) < len(c) - 1][:limit]
    texts = _texts(corpus, {i for c in short for i in c})
    rows = []
    for c in short:
        kept = [i for i in c if i not in removed]
        sets = dict(zip(kept, map(set, shingle_strings(pa.array([texts[i] for i in kept]), ShingleSpec())),
                        strict=True))
        base = c[0] if c[0] in sets else kept[0]
        for i in kept:
            if i != base:
                a, b = sets[base], sets[i]
                rows.append({"base": base, "copy": i, "words": len(texts[i].split()),
                             "jaccard": round(len(a & b) / max(len(a | b), 1), 3)})
    return rows


def _winnow_child(corpus: Path, root: Path, workers: int, out: Path, scheme: str | None = None,
                  threshold: str | None = None) -> None:
    from pipelines.core.config import load_config
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    sets = [f"run.root={root}", f"ingest.inputs=['{corpus}/*.jsonl']", f"spark.master=local[{workers}]",
            f"spark.shuffle_partitions={2 * workers}"] + ([f"dedup.scheme={scheme}"] if scheme else []) + (
                [f"dedup.threshold={threshold}"] if threshold else [])
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


TEXT_DEDUP_VERSION = "0.3.1"
"""The text-dedup release whose ``minhash_spark`` job runs on plain Spark (see the module docstring)."""
TEXT_DEDUP_DEFAULT_THRESHOLD = "0.7"
"""text-dedup's ``--threshold`` default (``text_dedup/minhash_spark.py``, 0.3.1)."""
WINNOW_DEFAULT_THRESHOLD = "0.8"
"""``dedup.threshold`` in ``conf/default.yaml``."""
TOOLS = ("datatrove", "winnow", "text_dedup")


def text_dedup_missing() -> str | None:
    """Why text-dedup's Spark job cannot run here, or ``None`` when it can.

    Returns:
        ``None`` when ``text_dedup.minhash_spark`` of release :data:`TEXT_DEDUP_VERSION` imports;
        otherwise a one-line reason with the command that installs it.
    """
    from importlib import metadata

    hint = f"pip install --no-deps text-dedup=={TEXT_DEDUP_VERSION}"
    try:
        version = metadata.version("text-dedup")
    except metadata.PackageNotFoundError:
        return f"text-dedup is not installed ({hint})"
    if version != TEXT_DEDUP_VERSION:
        return f"text-dedup {version} is installed; this benchmark runs {TEXT_DEDUP_VERSION}'s Spark job ({hint})"
    try:
        import text_dedup.minhash_spark  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means the job cannot run; say which
        return f"text_dedup.minhash_spark does not import: {type(exc).__name__}: {exc}"
    return None


def _text_dedup_child(corpus: Path, work: Path, workers: int, out: Path, threshold: str | None = None) -> None:
    """text-dedup's ``minhash_spark`` ``__main__`` with its defaults; only its BigQuery read becomes a JSONL read."""
    import runpy

    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--master local[{workers}] pyspark-shell"
    from pyspark.sql import DataFrameReader, SparkSession

    plain_format, plain_option, plain_load = DataFrameReader.format, DataFrameReader.option, DataFrameReader.load

    def format_(self, source):
        self._bench_bigquery = source == "bigquery"
        return self if self._bench_bigquery else plain_format(self, source)

    def option(self, key, value):
        if getattr(self, "_bench_bigquery", False) and key == "table":
            self._bench_table = value
            return self
        return plain_option(self, key, value)

    def load(self, *args, **kwargs):
        if getattr(self, "_bench_bigquery", False):
            return self.schema("id STRING, text STRING").json(self._bench_table)
        return plain_load(self, *args, **kwargs)

    DataFrameReader.format, DataFrameReader.option, DataFrameReader.load = format_, option, load
    output = work / "kept"
    sys.argv = ["minhash_spark", "--table", f"{corpus}/*.jsonl", "--output", str(output), "--column", "text",
                *(["--threshold", threshold] if threshold else [])]
    try:
        runpy.run_module("text_dedup.minhash_spark", run_name="__main__", alter_sys=True)
    except SystemExit as exc:  # its job exits 0 when it finds no duplicate component
        if exc.code not in (0, None):
            raise
    finally:
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    out.write_text(json.dumps({"kept_dir": str(output)}))


def _ids(paths: list[Path]) -> set[str]:
    ids: set[str] = set()
    for p in paths:
        with open(p) as f:
            ids.update(json.loads(line)["id"] for line in f if line.strip())
    return ids


def _removed(result: dict, corpus: Path) -> set[str]:
    """A child's removed ids: as it listed them, or all corpus ids less those in its ``kept_dir`` JSON files."""
    if "kept_dir" not in result:
        return set(result["removed"])
    return _ids(sorted(corpus.glob("*.jsonl"))) - _ids(sorted(Path(result["kept_dir"]).glob("part-*.json")))


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
            "load1_mean": summary["load1_mean"], "removed": _removed(json.loads(out.read_text()), corpus)}


def _tools(schemes: list[str], thresholds: list[str], chosen: list[str]) -> list[str]:
    """The runs, in order: ``tool``, ``winnow_<scheme>``, ``<tool>@<threshold>`` (only thresholds that are not its default)."""
    unknown = sorted(set(chosen) - set(TOOLS))
    if unknown:
        raise ValueError(f"BENCH_NEARDUP_TOOLS: unknown {unknown}; allowed: {', '.join(TOOLS)}")
    for t in thresholds:
        try:
            ok = 0.0 < float(t) <= 1.0
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"BENCH_NEARDUP_THRESHOLDS: {t!r} is not a number in (0, 1]")
    runs = [t for t in TOOLS if t in chosen]
    runs += [f"winnow_{x}" for x in schemes if "winnow" in chosen]
    for tool, default in (("winnow", WINNOW_DEFAULT_THRESHOLD), ("text_dedup", TEXT_DEDUP_DEFAULT_THRESHOLD)):
        runs += [f"{tool}@{t}" for t in thresholds if tool in chosen and float(t) != float(default)]
    return runs


def run(n_docs: int, seed: int = 0, workers: int = 2) -> dict:
    """Each tool on one corpus of about ``1.12 * n_docs`` documents (``BENCH_NEARDUP_DOCS`` overrides
    ``n_docs``); figures as a JSON-ready dict. text-dedup is skipped, with the reason under
    ``text_dedup.skipped``, when :func:`text_dedup_missing` gives one; a text-dedup run that fails is
    reported under ``failed`` (with its log's last lines) instead of failing the part."""
    n_docs = int(os.environ.get("BENCH_NEARDUP_DOCS", n_docs))
    schemes = [x for x in os.environ.get("BENCH_NEARDUP_SCHEMES", "").split(",") if x]
    thresholds = [x for x in os.environ.get("BENCH_NEARDUP_THRESHOLDS", "").split(",") if x]
    chosen = [x for x in os.environ.get("BENCH_NEARDUP_TOOLS", ",".join(TOOLS)).split(",") if x]
    runs = _tools(schemes, thresholds, chosen)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="winnow-neardup-"))
    try:
        facts = write_corpus(work / "corpus", n_docs, seed)
        res = {"n_docs": facts["docs"], "mb": round(facts["bytes"] / 1e6, 1), "workers": workers,
               "duplicate_clusters": len(facts["clusters"])}
        missing = text_dedup_missing() if any(t.startswith("text_dedup") for t in runs) else None
        for tool in runs:
            if missing and tool.startswith("text_dedup"):
                res[tool] = {"skipped": missing}
                continue
            try:
                m = _measure(tool, work / "corpus", work, workers)
            except RuntimeError as exc:  # a peer's failure leaves the other tools' figures standing
                if not tool.startswith("text_dedup"):
                    raise
                log = work / f"{tool}.log"
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
                res[tool] = {"failed": str(exc).partition(";")[0], "log_tail": tail}
                continue
            res[tool] = {**{k: v for k, v in m.items() if k != "removed"}, **score(m["removed"], facts["clusters"]),
                         "cpu_ms_per_doc": round(1000 * m["cpu_s"] / facts["docs"], 3),
                         "missed": missed(m["removed"], facts["clusters"], work / "corpus")}
        res["goals"] = {}
        w = res.get("winnow")
        for peer in ("datatrove", "text_dedup"):
            p = res.get(peer)
            if not w or not p or "cpu_s" not in p:
                continue
            res["goals"][f"neardup_cpu_vs_{peer}"] = round(p["cpu_s"] / w["cpu_s"], 2)
            for x in schemes:
                res["goals"][f"neardup_cpu_vs_{peer}_{x}"] = round(p["cpu_s"] / res[f"winnow_{x}"]["cpu_s"], 2)
            res[f"quality_at_least_{peer}"] = ((w["recall"] or 0) >= (p["recall"] or 0)
                                               and (w["precision"] or 0) >= (p["precision"] or 0))
    except Exception:
        print(f"kept {work} for its logs", file=sys.stderr)
        raise
    shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        tool, corpus, work, workers, out = argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), Path(argv[5])
        name, _, threshold = tool.partition("@")
        if name == "datatrove":
            _datatrove_child(corpus, work, workers, out)
        elif name == "text_dedup":
            _text_dedup_child(corpus, work, workers, out, threshold or None)
        else:
            _winnow_child(corpus, work, workers, out, name.partition("_")[2] or None, threshold or None)
        return
    n = int(argv[0]) if argv else 20_000
    workers = int(argv[1]) if len(argv) > 1 else 2
    print(json.dumps(run(n, workers=workers), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
