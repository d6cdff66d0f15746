"""Passage-level dedup, Winnow's passages stage against datatrove's sentence dedup, on one generated
corpus with known repeated paragraphs and reused passages: character-level recall and precision, CPU
seconds per document of each whole process tree.

``python -m bench.passages [n_docs] [workers]``; :func:`run` is the ``make bench`` part ``passages``;
``python -m bench.passages --real [workers]`` measures real text only (:func:`run_real`, below) and
``python -m bench.passages --real-tables FILE`` prints its figures (or a whole part's) as Markdown tables;
``python -m bench.passages --million [n_docs] [workers] [driver_memory] [shuffle_partitions]`` measures
the stage alone at a million short documents (:func:`run_million`: memory per task, spill, CPU).

* **Corpus** (seeded): ``n_docs`` documents of :mod:`bench.corpus` prose (Zipf words, sentences of 8-24
  words, paragraphs of 3-6 sentences on their own lines). Inserted into them:

  - ``n_docs / 40`` *paragraphs* (1 to 4 sentences, 8 to 80 words) as paragraphs of their own, each in
    2 to 40 documents (skewed: a few banners are everywhere, most repeat a few times); a third of the
    copies lightly edited (lowercased, final full stop replaced; those of 30 words or more also get a
    word replaced near their end);
  - ``n_docs / 100`` *passages* of 50 to 120 words, each inside an existing paragraph (after one of its
    sentences) of 2 to 4 documents.

  Ground truth: every occurrence of an inserted text after its first (documents in ``doc_id`` order)
  should go; the first and all original text should stay.
* **Scoring** (the same for both tools): the input and output text of each document are compared word
  by word (``difflib`` on whitespace-separated tokens); the non-space characters of input tokens absent
  from the output are "removed" (all of them for a document dropped whole). Recall = removed truth
  characters / truth characters; precision = removed truth characters / removed characters.
* **Winnow**: the ``passages`` stage alone (``run_stage``), default settings plus ``passages.spans``
  on or off, reading a ``deduped`` Delta table written beforehand (not timed) and writing
  ``passages_deduped`` and ``removed``; ``local[workers]``.
* **datatrove** (its ``examples/sentence_deduplication.py``): ``SentenceDedupSignature``,
  ``SentenceFindDedups``, ``SentenceDedupFilter`` with its default ``SentDedupConfig`` (3-sentence
  spans, C4's rule), ``LocalPipelineExecutor(workers=workers)``, JSONL in and out.
* **dolma** (PyPI ``dolma``, when its CLI is at ``$BENCH_DOLMA``: a throwaway virtualenv, not a
  dependency of the project): ``dolma dedupe`` paragraph dedup with its defaults, one process
  (:func:`_dolma_child`).
* CPU seconds: every process of each tool's tree, sampled from ``/proc`` plus what was reaped.

Real text (``$WINNOW_SHARED_DATA``, :func:`run_real`):

* **Clough & Stevenson** short-answer plagiarism corpus (5 Wikipedia source texts, 95 answers labelled
  ``cut``, ``light``, ``heavy`` revision of the source or ``non``: written independently). Sources come
  first in ``doc_id`` order. Reused text is judged per word (:func:`reuse_spans`: a word in a run of
  :data:`REUSE_WORDS` words that also occurs in the answer's source); recall per label, precision over all
  removed characters.
* **Dolma Common Crawl sample** (697 pages of one WARC file, no labels): characters and documents each tool
  removes, character agreement with Winnow's defaults, the stage's most repeated units.
* Tools: Winnow with :data:`REAL_VARIANTS`, datatrove's sentence dedup as above, dolma's paragraph dedup
  (``dolma dedupe``, its defaults) when its CLI is at ``$BENCH_DOLMA``.
  ``$BENCH_PASSAGES_OUTPUTS`` names a file for every tool's output texts (to read the removals).
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.common import TreeSampler
from bench.corpus import iter_texts

N_FILES = 4
MEAN_WORDS = 300
BANNER_WORDS = 30
"""Words of the banner :func:`build_corpus` repeats with ``banner_every``."""


def _words(rng: np.random.Generator, vocab: list[str], n: int) -> list[str]:
    return [vocab[int(i)] for i in rng.integers(0, len(vocab), size=n)]


def _sentences(rng: np.random.Generator, vocab: list[str], n_words: int, n_sentences: int) -> str:
    words = _words(rng, vocab, n_words)
    cuts = sorted(set(rng.choice(np.arange(1, n_words), size=n_sentences - 1, replace=False).tolist())) if n_sentences > 1 else []
    parts = [" ".join(p) for p in np.split(np.array(words, dtype=object), cuts) if len(p)]
    return " ".join(p[0].upper() + p[1:] + "." for p in parts)


def _light_edit(rng: np.random.Generator, text: str, vocab: list[str]) -> str:
    words = text.lower().rstrip(".").split(" ")
    if len(words) >= 30:
        words[-2] = vocab[int(rng.integers(len(vocab)))]
    return " ".join(words) + "!"


def build_corpus(n_docs: int, seed: int = 0, mean_words: int = MEAN_WORDS,
                 banner_every: int | None = None) -> tuple[list[tuple[str, str]], dict[str, list[tuple[int, int]]]]:
    """``([(doc_id, text)], {doc_id: truth spans})``: documents in ``doc_id`` order, spans in code points.

    Args:
        n_docs: documents.
        seed: seed of the text and of the inserts.
        mean_words: mean words of a document before the inserts (:func:`bench.corpus.iter_texts`).
        banner_every: when set, one fixed paragraph of :data:`BANNER_WORDS` words (a consent banner) is
            also appended as the last paragraph of every ``banner_every``-th document (the skew case: one
            unit held ``n_docs / banner_every`` times); None adds none and leaves the corpus as without it.
    """
    rng = np.random.default_rng(seed + 7)
    base = [t.split("\n\n") for t in iter_texts(n_docs, seed, mean_words)]
    vocab = sorted({w.rstrip(".") for paras in base[:50] for p in paras for w in p.lower().split(" ")})
    # inserts[d] = [(paragraph index, position: None = own paragraph / k = after sentence k, text, item)]
    inserts: list[list[tuple[int, int | None, str, int]]] = [[] for _ in range(n_docs)]
    item = 0
    for _ in range(max(5, n_docs // 40)):
        n_words = int(rng.choice([8, 12, 20, 30, 45, 80]))
        text = _sentences(rng, vocab, n_words, int(rng.integers(1, min(4, n_words // 6) + 1)))
        copies = int(min(40, 2 + rng.zipf(1.6)))
        for d in sorted(rng.choice(n_docs, size=min(copies, n_docs), replace=False).tolist()):
            copy = _light_edit(rng, text, vocab) if rng.random() < 1 / 3 else text
            inserts[d].append((int(rng.integers(0, len(base[d]) + 1)), None, copy, item))
        item += 1
    for _ in range(max(3, n_docs // 100)):
        text = _sentences(rng, vocab, int(rng.integers(50, 121)), 1).rstrip(".")
        for d in sorted(rng.choice(n_docs, size=int(rng.integers(2, 5)), replace=False).tolist()):
            p = int(rng.integers(0, len(base[d])))
            inserts[d].append((p, int(rng.integers(1, 3)), text, item))
        item += 1
    if banner_every:
        banner = _sentences(np.random.default_rng(seed + 11), vocab, BANNER_WORDS, 2)
        for d in range(0, n_docs, banner_every):
            inserts[d].append((len(base[d]) + 1, None, banner, item))  # after every other insert
        item += 1
    seen: set[int] = set()
    docs, truth = [], {}
    for d in range(n_docs):
        paras: list[list[tuple[str, bool]]] = [[(p, False)] for p in base[d]]
        own = []
        for p, pos, text, it in sorted(inserts[d], key=lambda x: x[3]):
            mark = it in seen
            seen.add(it)
            if pos is None:
                own.append((p, text, mark))
                continue
            target = paras[min(p, len(paras) - 1)]
            sents = target[-1][0].split(". ")
            k = min(pos, len(sents) - 1)
            head = ". ".join(sents[:k]) + ". " if k else ""
            target[-1:] = [(head, False), (text, mark), (" " + ". ".join(sents[k:]), False)]
        for p, text, mark in sorted(own, key=lambda x: -x[0]):
            paras.insert(p, [(text, mark)])
        out, spans, at = [], [], 0
        for i, pieces in enumerate(paras):
            if i:
                out.append("\n\n")
                at += 2
            for piece, mark in pieces:
                if mark:
                    spans.append((at, at + len(piece)))
                out.append(piece)
                at += len(piece)
        docs.append((f"d{d:07d}", "".join(out)))
        truth[f"d{d:07d}"] = spans
    return docs, truth


def _tokens(text: str) -> list[tuple[str, int, int]]:
    import re

    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def removed_mask(before: str, after: str | None) -> np.ndarray:
    """Bool per code point of ``before``: True for non-space characters of tokens missing from ``after``."""
    mask = np.zeros(len(before), dtype=bool)
    a = _tokens(before)
    if after is None:
        for _, s, e in a:
            mask[s:e] = True
        return mask
    b = [t for t, _, _ in _tokens(after)]
    keep = np.zeros(len(a), dtype=bool)
    for block in difflib.SequenceMatcher(None, [t for t, _, _ in a], b, autojunk=False).get_matching_blocks():
        keep[block.a:block.a + block.size] = True
    for (_, s, e), k in zip(a, keep, strict=True):
        if not k:
            mask[s:e] = True
    return mask


def _doc_counts(text: str, spans: list[tuple[int, int]], after: str | None) -> tuple[np.ndarray, np.ndarray]:
    """``(removed, truth)`` bool masks over the code points of ``text`` (truth: non-space characters only)."""
    pred = removed_mask(text, after)
    t = np.zeros(len(text), dtype=bool)
    for s, e in spans:
        t[s:e] = True
    t &= np.array([not c.isspace() for c in text], dtype=bool) if text else t
    return pred, t


def _ratios(hit: int, removed: int, should: int) -> dict:
    return {"truth_chars": should, "removed_chars": removed, "correct_chars": hit,
            "recall": round(hit / should, 4) if should else None,
            "precision": round(hit / removed, 4) if removed else None}


def score(docs: list[tuple[str, str]], truth: dict[str, list[tuple[int, int]]], outputs: dict[str, str]) -> dict:
    """Character-level recall and precision of a tool's output texts (a missing doc_id = dropped whole)."""
    hit = removed = should = 0
    for doc_id, text in docs:
        pred, t = _doc_counts(text, truth[doc_id], outputs.get(doc_id))
        hit += int((pred & t).sum())
        removed += int(pred.sum())
        should += int(t.sum())
    return _ratios(hit, removed, should)


def write_jsonl(folder: Path, docs: list[tuple[str, str]]) -> None:
    """``N_FILES`` JSONL files of contiguous ``doc_id`` ranges (so every tool's "first" is the smallest id)."""
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // N_FILES)
    for i in range(N_FILES):
        with open(folder / f"part-{i}.jsonl", "w") as f:
            for doc_id, text in docs[i * per:(i + 1) * per]:
                f.write(json.dumps({"id": doc_id, "text": text}) + "\n")


def _cfg(root: Path, workers: int, spans: bool, extra: tuple[str, ...] = ()):
    from pipelines.core.config import load_config

    return load_config([], [f"run.root={root}", f"spark.master=local[{workers}]", f"spark.shuffle_partitions={2 * workers}",
                            "spark.log_level=ERROR", "passages.enabled=true", f"passages.spans={str(spans).lower()}",
                            *extra])


def _prepare_child(corpus: Path, root: Path, workers: int) -> None:
    from pyspark.sql import functions as F

    from pipelines.core import tables
    from pipelines.core.session import get_spark

    cfg = _cfg(root, workers, False)
    spark = get_spark("winnow-bench-passages-prep", cfg.spark)
    docs = spark.read.json(str(corpus / "*.jsonl")).select(F.col("id").alias("doc_id"), "text", F.lit("bench").alias("source"))
    tables.write_table(docs, cfg, "deduped")
    spark.stop()


def _winnow_child(root: Path, workers: int, spans: bool, out: Path) -> None:
    from pipelines.core import tables
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    cfg = _cfg(root, workers, spans)
    spark = get_spark("winnow-bench-passages", cfg.spark)
    report = run_stage(spark, cfg, "passages")
    kept = {r["doc_id"]: r["text"] for r in tables.read_table(spark, cfg, "passages_deduped").select("doc_id", "text").collect()}
    out.write_text(json.dumps({"outputs": kept, "removed": report.removed}))
    spark.stop()


def spark_memory_figures(spark) -> dict:
    """Spill and JVM memory of a session's finished work, from its UI's REST API (Spark's own metrics):
    bytes spilled from memory and to disk summed over stages, the largest stage's spill, and the
    executors' peak heap, execution and storage memory. ``{}`` when the UI is off."""
    import urllib.request

    url = spark.sparkContext.uiWebUrl
    if not url:
        return {}
    app = f"{url}/api/v1/applications/{spark.sparkContext.applicationId}"

    def get(path: str) -> list:
        with urllib.request.urlopen(f"{app}/{path}", timeout=60) as r:  # noqa: S310 (the local UI)
            return json.loads(r.read())

    stages = get("stages?status=complete")
    peaks: dict[str, int] = {}
    for ex in get("allexecutors"):
        for k, v in (ex.get("peakMemoryMetrics") or {}).items():
            peaks[k] = max(peaks.get(k, 0), int(v))
    mb = 1e6
    return {"stages": len(stages), "tasks": sum(s["numCompleteTasks"] for s in stages),
            "memory_spilled_mb": round(sum(s["memoryBytesSpilled"] for s in stages) / mb, 1),
            "disk_spilled_mb": round(sum(s["diskBytesSpilled"] for s in stages) / mb, 1),
            "largest_stage_disk_spill_mb": round(max((s["diskBytesSpilled"] for s in stages), default=0) / mb, 1),
            "shuffle_write_mb": round(sum(s["shuffleWriteBytes"] for s in stages) / mb, 1),
            "peak_jvm_heap_mb": round(peaks.get("JVMHeapMemory", 0) / mb, 1),
            "peak_execution_memory_mb": round(peaks.get("OnHeapExecutionMemory", 0) / mb, 1),
            "peak_storage_memory_mb": round(peaks.get("OnHeapStorageMemory", 0) / mb, 1)}


def _winnow_million_child(root: Path, workers: int, driver_memory: str, partitions: str, out: Path) -> None:
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    extra = (f"spark.conf={{spark.driver.memory: {driver_memory}}}",) if driver_memory != "default" else ()
    extra += (f"spark.shuffle_partitions={partitions}",) if partitions != "bench" else ()
    cfg = _cfg(root, workers, False, extra)
    spark = get_spark("winnow-bench-passages-million", cfg.spark)
    report = run_stage(spark, cfg, "passages")
    out.write_text(json.dumps({"rows_in": report.rows_in, "rows_out": report.rows_out, "removed": report.removed,
                               "cut": report.notes.get("cut"), "stage_wall_s": round(report.elapsed_s, 1),
                               "top_units": [{k: u[k] for k in ("occurrences", "first_seen_in")}
                                             for u in report.extra["top_units"][:3]],
                               "spark": spark_memory_figures(spark)}))
    spark.stop()


def _datatrove_child(corpus: Path, work: Path, workers: int, out: Path) -> None:
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup.sentence_dedup import (
        SentDedupConfig,
        SentenceDedupFilter,
        SentenceDedupSignature,
        SentenceFindDedups,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = SentDedupConfig()
    reader = dict(data_folder=str(corpus), glob_pattern="*.jsonl", id_key="id", text_key="text")
    logs = str(work / "logs")
    from bench.neardup import xxhash64_text

    signer = SentenceDedupSignature(output_folder=str(work / "sigs"), config=config)
    signer.hash_fc = xxhash64_text  # datatrove's xxhash64 is given str, which xxhash >= 4 refuses
    LocalPipelineExecutor([JsonlReader(**reader), signer],
                          tasks=N_FILES, workers=workers, logging_dir=f"{logs}/1").run()
    LocalPipelineExecutor([SentenceFindDedups(data_folder=str(work / "sigs"), output_folder=str(work / "dups"), config=config)],
                          tasks=1, workers=1, logging_dir=f"{logs}/2").run()
    LocalPipelineExecutor([JsonlReader(**reader), SentenceDedupFilter(data_folder=str(work / "dups"), config=config),
                           JsonlWriter(str(work / "out"))], tasks=N_FILES, workers=workers, logging_dir=f"{logs}/3").run()
    kept = {}
    for p in sorted((work / "out").glob("*.jsonl.gz")):
        with gzip.open(p, "rt") as f:
            for line in f:
                d = json.loads(line)
                kept[d["id"]] = d["text"]
    out.write_text(json.dumps({"outputs": kept}))


def _measure(args: list[str], work: Path, name: str) -> dict:
    out = work / f"{name}.json"
    cmd = [sys.executable, "-m", "bench.passages", "--child", *args, str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL,
                            stderr=open(work / f"{name}.log", "w"))  # noqa: SIM115
    with TreeSampler(root=proc.pid, interval=0.5) as sampler:
        rc = proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = sampler.summary()
    if rc != 0:
        raise RuntimeError(f"{name} failed (rc {rc}); see {work / f'{name}.log'}")
    result = json.loads(out.read_text()) if out.exists() else {}
    return {"wall_s": round(wall, 1), "cpu_s": round(max(summary["cpu_s"], reaped), 1),
            "peak_rss_mb": summary["peak_rss_mb"], "peak_python_worker_rss_mb": summary["peak_python_worker_rss_mb"],
            "max_python_workers": summary["max_python_workers"], "load1_mean": summary["load1_mean"], **result}


def run(n_docs: int, seed: int = 0, workers: int = 2) -> dict:
    """Both tools on one corpus of ``min(n_docs, 20000)`` documents (``BENCH_PASSAGES_DOCS`` overrides it),
    then :func:`run_real` (key ``real``) when the shared samples are there."""
    n_docs = int(os.environ.get("BENCH_PASSAGES_DOCS", min(n_docs, 20_000)))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="winnow-passages-"))
    try:
        docs, truth = build_corpus(n_docs, seed)
        write_jsonl(work / "corpus", docs)
        res: dict = {"n_docs": len(docs), "mb": round(sum(len(t.encode()) for _, t in docs) / 1e6, 1), "workers": workers,
                     "truth_spans": sum(len(v) for v in truth.values())}
        _measure(["prepare", str(work / "corpus"), str(work / "run"), str(workers)], work, "prepare")
        runs = {"datatrove_sentence": ["datatrove", str(work / "corpus"), str(work / "dt"), str(workers)],
                "winnow": ["winnow", str(work / "run"), str(workers), "false"],
                "winnow_spans": ["winnow", str(work / "run"), str(workers), "true"]}
        if DOLMA.is_file():
            runs["dolma_paragraph"] = ["dolma", str(work / "corpus"), str(work / "dolma")]
        for name, args in runs.items():
            m = _measure(args, work, name)
            outputs = m.pop("outputs")
            res[name] = {**m, **score(docs, truth, outputs), "docs_out": len(outputs),
                         "docs_per_cpu_s": round(len(docs) / m["cpu_s"], 1)}
        d = res["datatrove_sentence"]
        res["goals"] = {f"{w}_per_core_vs_datatrove": round(d["cpu_s"] / res[w]["cpu_s"], 2) for w in ("winnow", "winnow_spans")}
        shutil.rmtree(work, ignore_errors=True)
        if (_shared() / "near_duplicates").is_dir():
            res["real"] = run_real(workers)
        return res
    except Exception:
        print(f"kept {work} for its logs", file=sys.stderr)
        raise


# ------------------------------------------------------------------------------------------- scale
MILLION_DOCS = int(os.environ.get("BENCH_PASSAGES_N", 1_000_000))
"""Documents of :func:`run_million`'s corpus (``$BENCH_PASSAGES_N`` overrides it)."""
MILLION_WORDS = 80
"""Mean words of a document of :func:`run_million`'s corpus before the inserts: short documents keep a
run of a million within ~20 minutes of two shared cores."""
MILLION_BANNER_EVERY = 2
""":func:`run_million` puts one banner in every second document (the skew case: 500,000 copies of one
unit at a million documents)."""


def run_million(n_docs: int = MILLION_DOCS, workers: int = 2, seed: int = 0, driver_memory: str | None = None,
                shuffle_partitions: int | None = None) -> dict:
    """Memory and CPU of the passages stage alone at ``n_docs`` documents, Spark's default memory settings
    (``driver_memory``, e.g. ``"2g"``, sets ``spark.driver.memory`` instead: the heap of the one local JVM).
    Shuffle partitions: ``2 * workers`` as in :func:`run` (the largest tasks), or ``shuffle_partitions``.

    Corpus: :func:`build_corpus` with ``mean_words`` :data:`MILLION_WORDS` and a banner in every
    :data:`MILLION_BANNER_EVERY`-th document. The ``deduped`` table is written once (not measured), then
    the stage runs alone on ``local[workers]`` (defaults, ``passages.spans`` off) under
    :class:`bench.common.TreeSampler`. Outputs are not scored (the scoring diff is the slow part).

    Returns:
        ``n_docs``, ``mb`` (UTF-8 MB of text), ``truth_spans``, ``winnow``: the child's process tree
        (``cpu_s``, ``wall_s``, ``peak_rss_mb`` by role: ``jvm``, ``python_worker`` summed over workers;
        ``peak_python_worker_rss_mb`` the largest single worker), the stage's report (rows, removed,
        ``top_units``: the skew case's count first) and Spark's own spill and memory figures
        (:func:`spark_memory_figures`); ``mb_per_cpu_s`` and ``docs_per_cpu_s`` of the tree.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="winnow-passages-million-"))
    try:
        t0 = time.perf_counter()
        docs, truth = build_corpus(n_docs, seed, MILLION_WORDS, MILLION_BANNER_EVERY)
        write_jsonl(work / "corpus", docs)
        res: dict = {"n_docs": len(docs), "mb": round(sum(len(t.encode()) for _, t in docs) / 1e6, 1),
                     "workers": workers, "mean_words": MILLION_WORDS, "banner_every": MILLION_BANNER_EVERY,
                     "truth_spans": sum(len(v) for v in truth.values()),
                     "generate_s": round(time.perf_counter() - t0, 1)}
        del docs, truth
        prep = _measure(["prepare", str(work / "corpus"), str(work / "run"), str(workers)], work, "prepare")
        res["prepare_wall_s"] = prep["wall_s"]
        m = _measure(["winnow-million", str(work / "run"), str(workers), driver_memory or "default",
                      str(shuffle_partitions or "bench")], work, "winnow")
        res["driver_memory"] = driver_memory or "default"
        res["shuffle_partitions"] = shuffle_partitions or 2 * workers
        res["winnow"] = {**m, "mb_per_cpu_s": round(res["mb"] / m["cpu_s"], 3),
                         "docs_per_cpu_s": round(res["n_docs"] / m["cpu_s"], 1)}
        shutil.rmtree(work, ignore_errors=True)
        return res
    except Exception:
        print(f"kept {work} for its logs", file=sys.stderr)
        raise


# ------------------------------------------------------------------------------------------- real text
REUSE_WORDS = 8
"""A word of a Clough & Stevenson answer is reused text when it lies in a run of at least this many
consecutive normalised words that also occurs in the answer's source text (the corpus labels reuse per
answer, not per character; 8 words is well above chance phrase overlap between answers on one topic)."""
LEVELS = ("cut", "light", "heavy", "non")
"""The corpus's labels of how an answer reuses its source, from near copy to independently written."""
REAL_VARIANTS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "winnow_line": (False, ()),
    "winnow_blank_line": (False, ("passages.unit=blank_line",)),
    "winnow_sentence": (False, ("passages.unit=sentence",)),
    "winnow_blank_line_spans": (True, ("passages.unit=blank_line",)),
    "winnow_blank_line_spans_20": (True, ("passages.unit=blank_line", "passages.min_span_words=20")),
}
"""Winnow settings measured on real text: ``(passages.spans, other overrides)`` on top of the defaults."""
TOP_SHOWN = 15
"""Most repeated units of the web sample kept in the figures."""
DOLMA = Path(os.environ.get("BENCH_DOLMA", "/tmp/dolma-venv/bin/dolma"))
"""dolma's CLI (PyPI ``dolma``, installed in a throwaway virtualenv, not the project's)."""


def _shared() -> Path:
    from bench.references import SHARED

    return SHARED


def _norm_tokens(text: str) -> list[tuple[str, int, int]]:
    """Whitespace tokens of ``text`` lowercased with everything but letters and digits dropped (empty ones skipped)."""
    import re

    out = []
    for tok, s, e in _tokens(text):
        w = re.sub(r"[\W_]+", "", tok.lower())
        if w:
            out.append((w, s, e))
    return out


def reuse_spans(answer: str, source: str, k: int = REUSE_WORDS) -> list[tuple[int, int]]:
    """Code-point spans of the tokens of ``answer`` inside a run of ``k`` or more normalised words that also
    occurs in ``source`` (one span per token)."""
    src = [w for w, _, _ in _norm_tokens(source)]
    grams = {tuple(src[i:i + k]) for i in range(len(src) - k + 1)}
    toks = _norm_tokens(answer)
    words = [w for w, _, _ in toks]
    mark = np.zeros(len(toks), dtype=bool)
    for i in range(len(words) - k + 1):
        if tuple(words[i:i + k]) in grams:
            mark[i:i + k] = True
    return [(s, e) for (_, s, e), m in zip(toks, mark, strict=True) if m]


def load_clough(path: Path) -> tuple[list[tuple[str, str]], dict[str, list[tuple[int, int]]], dict[str, str]]:
    """The Clough & Stevenson corpus as ``(docs, truth, level)``.

    ``doc_id`` puts the 5 source texts first (``0-orig_task*``, then ``1-<answer>``), so every tool's "first"
    occurrence of source text is the source. ``truth``: the reused-text spans of each answer
    (:func:`reuse_spans` against its task's source; none in sources). ``level``: the corpus label
    (``orig``, ``cut``, ``light``, ``heavy``, ``non``).
    """
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sources = {r["id"]: r["text"] for r in rows if r["category"] == "orig"}
    docs, truth, level = [], {}, {}
    for r in rows:
        orig = r["category"] == "orig"
        doc_id = ("0-" if orig else "1-") + r["id"]
        docs.append((doc_id, r["text"]))
        truth[doc_id] = [] if orig else reuse_spans(r["text"], sources[r["source_id"]])
        level[doc_id] = r["category"]
    return sorted(docs), truth, level


def load_web(path: Path) -> list[tuple[str, str]]:
    """The Dolma Common Crawl sample as ``[(id, text)]`` in ``id`` order."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sorted((d["id"], d["text"]) for d in map(json.loads, f))


def score_levels(docs: list[tuple[str, str]], truth: dict[str, list[tuple[int, int]]], level: dict[str, str],
                 outputs: dict[str, str]) -> dict:
    """Per corpus label: recall of reused characters, share of all characters removed, documents dropped
    whole; and ``all``: recall and precision over every document (removed characters that are not reused
    text, in sources or answers, count against precision)."""
    acc: dict[str, list[int]] = {}
    for doc_id, text in docs:
        pred, t = _doc_counts(text, truth[doc_id], outputs.get(doc_id))
        nonspace = sum(1 for c in text if not c.isspace())
        row = acc.setdefault(level[doc_id], [0, 0, 0, 0, 0, 0])
        for i, v in enumerate((int((pred & t).sum()), int(pred.sum()), int(t.sum()), nonspace,
                               int(doc_id not in outputs), 1)):
            row[i] += v
    out: dict = {}
    for name in ("orig", *LEVELS):
        hit, removed, should, chars, dropped, n = acc.get(name, [0] * 6)
        out[name] = {"documents": n, "reuse_share": round(should / chars, 3) if chars else None,
                     "recall": round(hit / should, 3) if should else None,
                     "removed_share": round(removed / chars, 3) if chars else None, "dropped_whole": dropped}
    tot = [sum(v[i] for v in acc.values()) for i in range(3)]
    out["all"] = _ratios(*tot)
    return out


def compact_levels(levels: dict) -> dict:
    """The figures of :func:`score_levels` that the tables show: recall per reuse label, share of characters
    removed from sources and from independent answers, overall recall and precision, answers dropped whole."""
    return {**{f"recall_{lv}": levels[lv]["recall"] for lv in LEVELS[:3]},
            "removed_share_orig": levels["orig"]["removed_share"], "removed_share_non": levels["non"]["removed_share"],
            "recall": levels["all"]["recall"], "precision": levels["all"]["precision"],
            "dropped_whole": sum(levels[lv]["dropped_whole"] for lv in LEVELS)}


def removal_figures(docs: list[tuple[str, str]], outputs: dict[str, str]) -> tuple[dict, dict[str, np.ndarray]]:
    """What a tool removed from an unlabelled corpus: characters (non-space) and documents cut or dropped;
    and the removed mask of each document (for agreement between tools)."""
    masks, removed, chars, cut, dropped = {}, 0, 0, 0, 0
    for doc_id, text in docs:
        after = outputs.get(doc_id)
        masks[doc_id] = m = removed_mask(text, after)
        removed += int(m.sum())
        chars += sum(1 for c in text if not c.isspace())
        dropped += after is None
        cut += after is not None and bool(m.any())
    return {"chars": chars, "removed_chars": removed, "removed_share": round(removed / chars, 4),
            "docs_cut": cut, "docs_dropped": dropped}, masks


def removed_line_origin(docs: list[tuple[str, str]], masks: dict[str, np.ndarray]) -> dict:
    """Where the removed lines of an unlabelled corpus were seen before, in characters: ``other_page`` (the
    line, whitespace collapsed, is in an earlier document), ``same_page`` (held twice or more by its own
    document and by no earlier one: which copy a word diff calls removed is arbitrary), ``other`` (removed characters of lines not removed to 80 % or more, and lines seen nowhere
    before: near repeats and spans)."""
    first: dict[str, int] = {}
    for i, (_, text) in enumerate(docs):
        for line in text.split("\n"):
            first.setdefault(" ".join(line.split()), i)
    out = {"other_page": 0, "same_page": 0, "other": 0}
    for i, (doc_id, text) in enumerate(docs):
        m, pos = masks[doc_id], 0
        lines = text.split("\n")
        count = Counter(" ".join(line.split()) for line in lines)
        for line in lines:
            key, n = " ".join(line.split()), int(m[pos:pos + len(line)].sum())
            pos += len(line) + 1
            if not n:
                continue
            whole = n >= 0.8 * sum(1 for c in line if not c.isspace())
            kind = ("other_page" if first[key] < i else "same_page" if count[key] > 1 else "other") if whole else "other"
            out[kind] += n
    return out


def _agreement(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict:
    both = sum(int((a[k] & b[k]).sum()) for k in a)
    either = sum(int((a[k] | b[k]).sum()) for k in a)
    only_a = sum(int((a[k] & ~b[k]).sum()) for k in a)
    only_b = sum(int((b[k] & ~a[k]).sum()) for k in a)
    return {"both_chars": both, "only_first_chars": only_a, "only_second_chars": only_b,
            "jaccard": round(both / either, 3) if either else None}


def _write_deduped(spark, corpus: Path, cfg) -> None:
    from pyspark.sql import functions as F

    from pipelines.core import tables

    docs = spark.read.json(str(corpus / "*.jsonl")).select(F.col("id").alias("doc_id"), "text", F.lit("bench").alias("source"))
    tables.write_table(docs, cfg, "deduped")


def _winnow_real_child(work: Path, workers: int, out: Path) -> None:
    from pipelines.core import tables
    from pipelines.core.runner import run_stage
    from pipelines.core.session import get_spark

    spark = None
    res: dict = {}
    for corpus in ("clough", "web"):
        for name, (spans, extra) in REAL_VARIANTS.items():
            cfg = _cfg(work / f"run-{corpus}-{name}", workers, spans, extra)
            spark = spark or get_spark("winnow-bench-passages-real", cfg.spark)
            _write_deduped(spark, work / corpus, cfg)
            report = run_stage(spark, cfg, "passages")
            kept = {r["doc_id"]: r["text"] for r in tables.read_table(spark, cfg, "passages_deduped").select("doc_id", "text").collect()}
            res.setdefault(corpus, {})[name] = {"outputs": kept, "removed": report.removed,
                                                "top_units": report.extra["top_units"][:TOP_SHOWN]}
    out.write_text(json.dumps(res))
    if spark is not None:
        spark.stop()


def cut_byte_spans(text: str, spans: list[list[float]]) -> str:
    """``text`` without dolma's ``[start, end, score]`` spans, which are UTF-8 byte offsets."""
    raw = text.encode("utf-8")
    for s, e, _ in sorted(spans, reverse=True):
        raw = raw[:int(s)] + raw[int(e):]
    return raw.decode("utf-8", errors="replace")


def _dolma_child(corpus: Path, work: Path, out: Path) -> None:
    """dolma's paragraph dedup with its defaults (exact paragraphs = lines, any length, Bloom filter, first
    occurrence kept), one process over one file in ``id`` order; the duplicate spans it reports are cut from
    the text."""
    docs = [json.loads(line) for p in sorted(corpus.glob("*.jsonl")) for line in p.read_text(encoding="utf-8").splitlines()]
    src = work / "documents"
    src.mkdir(parents=True)
    with gzip.open(src / "part-0.jsonl.gz", "wt", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": d["id"], "text": d["text"], "source": "bench"}) + "\n")
    subprocess.run([str(DOLMA), "dedupe", "--documents", str(src / "*.jsonl.gz"), "--dedupe.name", "dups",
                    "--dedupe.paragraphs.attribute_name", "dup_paragraphs", "--dedupe.skip_empty",
                    "--bloom_filter.file", str(work / "bloom.bin"), "--no-bloom_filter.read_only",
                    "--bloom_filter.estimated_doc_count", str(10 * sum(d["text"].count("\n") + 1 for d in docs)),
                    "--bloom_filter.desired_false_positive_rate", "1e-9", "--processes", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    spans: dict[str, list] = {}
    for p in (work / "attributes" / "dups").rglob("*.jsonl.gz"):
        with gzip.open(p, "rt", encoding="utf-8") as f:
            for d in map(json.loads, f):
                spans[d["id"]] = d["attributes"].get("dup_paragraphs") or []
    kept = {}
    for d in docs:
        kept[d["id"]] = cut_byte_spans(d["text"], spans.get(d["id"], []))
    out.write_text(json.dumps({"outputs": kept}))


def run_real(workers: int = 2) -> dict:
    """Winnow (:data:`REAL_VARIANTS`), datatrove's sentence dedup and dolma's paragraph dedup (when
    :data:`DOLMA` exists) on the Clough & Stevenson corpus (scored by label, :func:`score_levels`) and on
    the Dolma Common Crawl sample (what each removes, agreement with Winnow's defaults, the most repeated
    units). Needs ``$WINNOW_SHARED_DATA``.

    Returns:
        ``{"clough": {tool: figures}, "web": {tool: figures, "top_units": [...]}, "dolma": status}``.

    Raises:
        FileNotFoundError: the shared samples are missing.
    """
    shared = _shared()
    clough_path = shared / "near_duplicates" / "clough_stevenson_short_answer_plagiarism.jsonl"
    web_path = shared / "web_crawl" / "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
    for p in (clough_path, web_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: set WINNOW_SHARED_DATA to the shared data folder")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="winnow-passages-real-"))
    clough, truth, level = load_clough(clough_path)
    corpora = {"clough": clough, "web": load_web(web_path)}
    for name, docs in corpora.items():
        write_jsonl(work / name, docs)
    res: dict = {"reuse_words": REUSE_WORDS, "clough": {}, "web": {}}
    res["clough"]["documents"] = {lv: sum(1 for v in level.values() if v == lv) for lv in ("orig", *LEVELS)}
    res["web"]["documents"] = len(corpora["web"])
    outputs: dict[str, dict[str, dict[str, str]]] = {c: {} for c in corpora}
    m = _measure(["winnow-real", str(work), str(workers)], work, "winnow_real")
    for corpus in corpora:
        for name in REAL_VARIANTS:
            r = m[corpus][name]
            outputs[corpus][name] = r["outputs"]
            res[corpus][name] = {"removed": r["removed"]}
        res[corpus]["top_units"] = m[corpus]["winnow_line"]["top_units"]
    res["winnow_cpu_s_all_runs"] = m["cpu_s"]
    tools = ["datatrove_sentence"]
    for corpus in corpora:
        d = _measure(["datatrove", str(work / corpus), str(work / f"dt-{corpus}"), str(workers)], work, f"dt_{corpus}")
        outputs[corpus]["datatrove_sentence"] = d["outputs"]
        res[corpus]["datatrove_sentence"] = {"cpu_s": d["cpu_s"]}
    res["dolma"] = f"not measured: {DOLMA} not found (BENCH_DOLMA names dolma's CLI)"
    if DOLMA.is_file():
        try:
            for corpus in corpora:
                d = _measure(["dolma", str(work / corpus), str(work / f"dolma-{corpus}")], work, f"dolma_{corpus}")
                outputs[corpus]["dolma_paragraph"] = d["outputs"]
                res[corpus]["dolma_paragraph"] = {"cpu_s": d["cpu_s"]}
            tools.append("dolma_paragraph")
            res["dolma"] = "measured"
        except RuntimeError as e:
            res["dolma"] = f"not measured: {e}"
    for name in (*REAL_VARIANTS, *tools):
        levels = score_levels(clough, truth, level, outputs["clough"][name])
        res["clough"]["reuse_share"] = {lv: levels[lv]["reuse_share"] for lv in ("orig", *LEVELS)}
        res["clough"][name].update(compact_levels(levels))
    masks = {}
    for name in (*REAL_VARIANTS, *tools):
        figs, masks[name] = removal_figures(corpora["web"], outputs["web"][name])
        res["web"][name].update(figs, removed_chars_seen_in=removed_line_origin(corpora["web"], masks[name]))
    for name in (*REAL_VARIANTS, *tools):
        if name != "winnow_line":
            res["web"][name]["agreement_with_winnow_line"] = _agreement(masks["winnow_line"], masks[name])
    if os.environ.get("BENCH_PASSAGES_OUTPUTS"):  # every tool's output texts, to read removals by eye
        Path(os.environ["BENCH_PASSAGES_OUTPUTS"]).write_text(json.dumps(outputs))
    shutil.rmtree(work, ignore_errors=True)
    return res


def real_markdown(res: dict) -> str:
    """Markdown tables of :func:`run_real`'s figures: Clough & Stevenson scores per label, what each tool
    removes from the web sample, the web sample's most repeated units."""
    tools = [k for k in (*REAL_VARIANTS, "datatrove_sentence", "dolma_paragraph") if k in res["clough"]]
    share = res["clough"]["reuse_share"]
    lines = [f"| tool | recall cut ({share['cut']}) | recall light ({share['light']}) | recall heavy "
             f"({share['heavy']}) | recall all | precision | removed share of non | answers dropped whole |",
             "|---|---|---|---|---|---|---|---|"]
    for t in tools:
        c = res["clough"][t]
        lines.append(f"| {t} | {c['recall_cut']} | {c['recall_light']} | {c['recall_heavy']} | {c['recall']} | "
                     f"{c['precision']} | {c['removed_share_non']} | {c['dropped_whole']} |")
    lines += ["", "| tool | characters removed | share | pages cut | pages dropped whole | whole lines seen on an "
              "earlier page / elsewhere on the same page / other | agreement with winnow_line (Jaccard) |",
              "|---|---|---|---|---|---|---|"]
    for t in tools:
        w = res["web"][t]
        agree = w.get("agreement_with_winnow_line", {}).get("jaccard", "–")
        seen = w.get("removed_chars_seen_in")
        where = " / ".join(f"{seen[k]:,}" for k in ("other_page", "same_page", "other")) if seen else "–"
        lines.append(f"| {t} | {w['removed_chars']:,} | {w['removed_share']} | {w['docs_cut']} | "
                     f"{w['docs_dropped']} | {where} | {agree} |")
    lines += ["", "| occurrences | first seen in | unit |", "|---|---|---|"]
    for u in res["web"]["top_units"]:
        text = " ".join(u["excerpt"].split())[:90].replace("|", "\\|")
        lines.append(f"| {u['occurrences']} | {u['first_seen_in']} | {text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        kind, rest = argv[1], argv[2:]
        if kind == "prepare":
            _prepare_child(Path(rest[0]), Path(rest[1]), int(rest[2]))
        elif kind == "winnow":
            _winnow_child(Path(rest[0]), int(rest[1]), rest[2] == "true", Path(rest[3]))
        elif kind == "winnow-million":
            _winnow_million_child(Path(rest[0]), int(rest[1]), rest[2], rest[3], Path(rest[4]))
        elif kind == "winnow-real":
            _winnow_real_child(Path(rest[0]), int(rest[1]), Path(rest[2]))
        elif kind == "dolma":
            _dolma_child(Path(rest[0]), Path(rest[1]), Path(rest[2]))
        else:
            _datatrove_child(Path(rest[0]), Path(rest[1]), int(rest[2]), Path(rest[3]))
        return
    if argv and argv[0] == "--real":
        print(json.dumps(run_real(int(argv[1]) if len(argv) > 1 else 2), indent=1))
        return
    if argv and argv[0] == "--million":
        print(json.dumps(run_million(int(argv[1]) if len(argv) > 1 else MILLION_DOCS,
                                     int(argv[2]) if len(argv) > 2 else 2,
                                     driver_memory=argv[3] if len(argv) > 3 else None,
                                     shuffle_partitions=int(argv[4]) if len(argv) > 4 else None), indent=1))
        return
    if argv and argv[0] == "--real-tables":
        res = json.loads(Path(argv[1]).read_text())
        print(real_markdown(res.get("real", res)))
        return
    n = int(argv[0]) if argv else 4000
    workers = int(argv[1]) if len(argv) > 1 else 2
    print(json.dumps(run(n, workers=workers), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
