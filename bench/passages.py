"""Passage-level dedup, Winnow's passages stage against datatrove's sentence dedup, on one generated
corpus with known repeated paragraphs and reused passages: character-level recall and precision, CPU
seconds per document of each whole process tree.

``python -m bench.passages [n_docs] [workers]``; :func:`run` is the ``make bench`` part ``passages``.

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
* dolma's paragraph dedup (PyPI ``dolma``) is not measured: the package is not installed in this
  environment (it ships a Rust extension built per platform).
* CPU seconds: every process of each tool's tree, sampled from ``/proc`` plus what was reaped.
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
from pathlib import Path

import numpy as np

from bench.common import TreeSampler
from bench.corpus import iter_texts

N_FILES = 4
MEAN_WORDS = 300


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


def build_corpus(n_docs: int, seed: int = 0) -> tuple[list[tuple[str, str]], dict[str, list[tuple[int, int]]]]:
    """``([(doc_id, text)], {doc_id: truth spans})``: documents in ``doc_id`` order, spans in code points."""
    rng = np.random.default_rng(seed + 7)
    base = [t.split("\n\n") for t in iter_texts(n_docs, seed, MEAN_WORDS)]
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


def score(docs: list[tuple[str, str]], truth: dict[str, list[tuple[int, int]]], outputs: dict[str, str]) -> dict:
    """Character-level recall and precision of a tool's output texts (a missing doc_id = dropped whole)."""
    hit = removed = should = 0
    for doc_id, text in docs:
        pred = removed_mask(text, outputs.get(doc_id))
        t = np.zeros(len(text), dtype=bool)
        for s, e in truth[doc_id]:
            t[s:e] = True
        t &= np.array([not c.isspace() for c in text], dtype=bool) if text else t
        hit += int((pred & t).sum())
        removed += int(pred.sum())
        should += int(t.sum())
    return {"truth_chars": should, "removed_chars": removed, "correct_chars": hit,
            "recall": round(hit / should, 4) if should else None,
            "precision": round(hit / removed, 4) if removed else None}


def write_jsonl(folder: Path, docs: list[tuple[str, str]]) -> None:
    """``N_FILES`` JSONL files of contiguous ``doc_id`` ranges (so every tool's "first" is the smallest id)."""
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // N_FILES)
    for i in range(N_FILES):
        with open(folder / f"part-{i}.jsonl", "w") as f:
            for doc_id, text in docs[i * per:(i + 1) * per]:
                f.write(json.dumps({"id": doc_id, "text": text}) + "\n")


def _cfg(root: Path, workers: int, spans: bool):
    from pipelines.core.config import load_config

    return load_config([], [f"run.root={root}", f"spark.master=local[{workers}]", f"spark.shuffle_partitions={2 * workers}",
                            "spark.log_level=ERROR", "passages.enabled=true", f"passages.spans={str(spans).lower()}"])


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
            "peak_rss_mb": summary["peak_rss_mb"], "load1_mean": summary["load1_mean"], **result}


def run(n_docs: int, seed: int = 0, workers: int = 2) -> dict:
    """Both tools on one corpus of ``min(n_docs, 20000)`` documents (``BENCH_PASSAGES_DOCS`` overrides it)."""
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
        for name, args in runs.items():
            m = _measure(args, work, name)
            outputs = m.pop("outputs")
            res[name] = {**m, **score(docs, truth, outputs), "docs_out": len(outputs),
                         "docs_per_cpu_s": round(len(docs) / m["cpu_s"], 1)}
        d = res["datatrove_sentence"]
        res["goals"] = {f"{w}_per_core_vs_datatrove": round(d["cpu_s"] / res[w]["cpu_s"], 2) for w in ("winnow", "winnow_spans")}
        shutil.rmtree(work, ignore_errors=True)
        return res
    except Exception:
        print(f"kept {work} for its logs", file=sys.stderr)
        raise


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        kind, rest = argv[1], argv[2:]
        if kind == "prepare":
            _prepare_child(Path(rest[0]), Path(rest[1]), int(rest[2]))
        elif kind == "winnow":
            _winnow_child(Path(rest[0]), int(rest[1]), rest[2] == "true", Path(rest[3]))
        else:
            _datatrove_child(Path(rest[0]), Path(rest[1]), int(rest[2]), Path(rest[3]))
        return
    n = int(argv[0]) if argv else 4000
    workers = int(argv[1]) if len(argv) > 1 else 2
    print(json.dumps(run(n, workers=workers), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
