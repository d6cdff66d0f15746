"""Seeded synthetic corpus for benchmarks: English-like documents of controllable size.

Words are drawn from a Zipf distribution (exponent 1.1) over a fixed vocabulary of common English
function words plus generated pseudo-words, so word-length, stop-word and repetition statistics look
like prose to the quality heuristics, and documents share few 5-gram shingles unless made to.
Deterministic for a given ``seed``; no text from outside the project is used.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

CACHE_ENV = "WINNOW_BENCH_CACHE"
"""Environment variable naming a folder of cached corpora (see :func:`cache_corpus`)."""

FUNCTION_WORDS = (
    "the of and to a in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will more can "
    "said what about out up its into than them only other new some time could these two may then first"
).split()


def _vocabulary(rng: np.random.Generator, size: int = 20_000) -> list[str]:
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    probs = np.array([12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9,
                      1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1])
    probs = probs / probs.sum()
    lengths = np.clip(rng.poisson(5.0, size) + 2, 2, 14)
    words = ["".join(rng.choice(letters, n, p=probs)) for n in lengths]
    return FUNCTION_WORDS + words


def iter_texts(n_docs: int, seed: int = 0, mean_words: int = 550) -> Iterator[str]:
    """Yield the documents of :func:`generate_texts` one at a time (bounded memory for large corpora).

    The stream for ``(n_docs, seed)`` is a prefix of the stream for any larger ``n_docs`` with the
    same seed, so the first N documents of a 4N corpus are the N corpus.
    """
    rng = np.random.default_rng(seed)
    # An object array keeps the words as Python str, so " ".join needs no per-word conversion.
    vocab = np.array(_vocabulary(rng), dtype=object)
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.1
    p /= p.sum()
    # Generator.choice(len, n, p=p) draws exactly cdf.searchsorted(rng.random(n), side="right") with
    # this normalised cdf; computing the cdf once instead of per document keeps the same stream.
    cdf = p.cumsum()
    cdf /= cdf[-1]
    for _ in range(n_docs):
        n = max(20, int(rng.normal(mean_words, mean_words * 0.3)))
        words = vocab[cdf.searchsorted(rng.random(n), side="right")]
        sent_lens = rng.integers(8, 25, size=n // 8 + 2)
        cuts = np.cumsum(sent_lens)
        cuts = cuts[cuts < n]
        sentences = [" ".join(s) for s in np.split(words, cuts) if len(s)]
        sentences = [s[0].upper() + s[1:] + "." for s in sentences]
        paras, i = [], 0
        while i < len(sentences):
            k = int(rng.integers(3, 7))
            paras.append(" ".join(sentences[i : i + k]))
            i += k
        yield "\n\n".join(paras)


def generate_texts(n_docs: int, seed: int = 0, mean_words: int = 550) -> list[str]:
    """Return ``n_docs`` documents of about ``mean_words`` words (~3.5 KB each at the default).

    Each document is paragraphs of sentences; sentences end with a period, paragraphs are separated
    by a blank line. When ``$WINNOW_BENCH_CACHE`` names a folder holding the corpus written by
    :func:`cache_corpus` for the same arguments, it is read from there instead of regenerated (the
    benchmark harness does this so that every stage module gets the same documents without paying
    for generation again).
    """
    cached = _cache_file(n_docs, seed, mean_words)
    if cached is not None and cached.is_file():
        with pa.memory_map(str(cached)) as src:
            return pa.ipc.open_file(src).read_all().column("text").to_pylist()
    return list(iter_texts(n_docs, seed, mean_words))


def _cache_file(n_docs: int, seed: int, mean_words: int) -> Path | None:
    folder = os.environ.get(CACHE_ENV)
    return Path(folder) / f"corpus-{n_docs}-{seed}-{mean_words}.arrow" if folder else None


def cache_corpus(n_docs: int, seed: int = 0, mean_words: int = 550) -> Path:
    """Write the corpus of :func:`generate_texts` to ``$WINNOW_BENCH_CACHE`` (Arrow IPC) and return its path.

    Raises:
        RuntimeError: ``$WINNOW_BENCH_CACHE`` is not set.
    """
    path = _cache_file(n_docs, seed, mean_words)
    if path is None:
        raise RuntimeError(f"set ${CACHE_ENV} to a folder before caching the benchmark corpus")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.table({"text": pa.array(list(iter_texts(n_docs, seed, mean_words)), pa.large_string())})
        tmp = path.with_name(path.name + ".tmp")
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        tmp.replace(path)
    return path


def write_jsonl_gz(
    folder: str | Path,
    n_docs: int,
    seed: int = 0,
    *,
    n_files: int = 8,
    dup_rate: float = 0.05,
    mean_words: int = 550,
) -> list[Path]:
    """Write the corpus as ``n_files`` JSONL.gz files (``id``, ``text``, ``source``, ``url``) for ingest.

    A seeded ``dup_rate`` share of documents is replaced by a copy of an earlier document (half
    exact, half with ~3% of words replaced), so the dedup stage has real work; the stream of
    documents is otherwise :func:`iter_texts`. Documents go to files in order, ``n_docs // n_files``
    per file (the last takes the rest), so the first k files of a 4N corpus written with 4x the files
    hold the same documents as the N corpus.

    Returns:
        The file paths, in order.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dup_rng = np.random.default_rng([seed, 1])
    per_file = max(1, n_docs // n_files)
    recent: list[str] = []
    paths: list[Path] = []
    out = None
    for i, text in enumerate(iter_texts(n_docs, seed, mean_words)):
        if i % per_file == 0 and len(paths) < n_files:
            if out is not None:
                out.close()
            paths.append(folder / f"bench-{seed}-{len(paths):04d}.jsonl.gz")
            # mtime=0: the same corpus gives byte-identical files.
            out = gzip.GzipFile(paths[-1], "wb", compresslevel=1, mtime=0)
        if recent and dup_rng.random() < dup_rate:
            src = recent[int(dup_rng.integers(len(recent)))]
            if dup_rng.random() < 0.5:
                words = src.split(" ")
                idx = dup_rng.integers(len(words), size=max(1, len(words) // 33))
                for j in idx:
                    words[j] = "zqx"
                src = " ".join(words)
            text = src
        recent.append(text)
        if len(recent) > 2000:
            recent.pop(0)
        rec = {"id": f"bench-{seed}-{i:08d}", "text": text, "source": "bench_a" if i % 2 else "bench_b",
               "url": f"https://bench.example/{seed}/{i}"}
        out.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))  # type: ignore[union-attr]
    if out is not None:
        out.close()
    return paths


def generate_batch(n_docs: int, seed: int = 0, mean_words: int = 550) -> pa.RecordBatch:
    """The corpus as an Arrow batch in the ``documents`` schema subset (``doc_id``, ``text``, ``source``)."""
    texts = generate_texts(n_docs, seed, mean_words)
    ids = [f"bench-{seed}-{i:08d}" for i in range(n_docs)]
    sources = ["bench_a" if i % 2 else "bench_b" for i in range(n_docs)]
    return pa.record_batch({"doc_id": ids, "text": texts, "source": sources})
