"""Seeded synthetic corpus for benchmarks: English-like documents of controllable size.

Words are drawn from a Zipf distribution (exponent 1.1) over a fixed vocabulary of common English
function words plus generated pseudo-words, so word-length, stop-word and repetition statistics look
like prose to the quality heuristics, and documents share few 5-gram shingles unless made to.
Deterministic for a given ``seed``; no text from outside the project is used.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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


def generate_texts(n_docs: int, seed: int = 0, mean_words: int = 550) -> list[str]:
    """Return ``n_docs`` documents of about ``mean_words`` words (~3.5 KB each at the default).

    Each document is paragraphs of sentences; sentences end with a period, paragraphs are separated
    by a blank line.
    """
    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(rng))
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.1
    p /= p.sum()
    out: list[str] = []
    for _ in range(n_docs):
        n = max(20, int(rng.normal(mean_words, mean_words * 0.3)))
        words = vocab[rng.choice(len(vocab), n, p=p)]
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
        out.append("\n\n".join(paras))
    return out


def generate_batch(n_docs: int, seed: int = 0, mean_words: int = 550) -> pa.RecordBatch:
    """The corpus as an Arrow batch in the ``documents`` schema subset (``doc_id``, ``text``, ``source``)."""
    texts = generate_texts(n_docs, seed, mean_words)
    ids = [f"bench-{seed}-{i:08d}" for i in range(n_docs)]
    sources = ["bench_a" if i % 2 else "bench_b" for i in range(n_docs)]
    return pa.record_batch({"doc_id": ids, "text": texts, "source": sources})
