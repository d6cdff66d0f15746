"""Test helpers: the ``documents`` schema and a labelled near-duplicate generator with exact Jaccard.

The generator starts from seeded synthetic base documents (``bench/corpus.py``) and makes copies with
controlled edits (word substitutions, insertions, deletions, paragraph shuffles, appended
boilerplate); the true Jaccard of each pair is computed exactly over Python sets of shingle strings
(``udfs.minhash.shingle_strings``), independently of any hashing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bench.corpus import generate_texts
from udfs.minhash import ShingleSpec, shingle_strings

DOCUMENTS_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)


def documents_rows(items: list[tuple[str, str]], source: str = "test") -> list[tuple]:
    """(doc_id, text) pairs as rows of the ``documents`` schema."""
    return [
        (i, t, source, f"https://example.org/{i}", {}, "mem.jsonl", len(t), len(t.encode()), 0) for i, t in items
    ]


def documents_df(spark, items: list[tuple[str, str]], source: str = "test"):
    return spark.createDataFrame(documents_rows(items, source), DOCUMENTS_SCHEMA)


def jaccard(a: str, b: str, spec: ShingleSpec | None = None) -> float:
    """Exact Jaccard of the shingle-string sets of two texts."""
    sa, sb = (set(x) for x in shingle_strings(pa.array([a, b]), spec or ShingleSpec()))
    return len(sa & sb) / len(sa | sb)


BOILERPLATE = (
    "Subscribe to our newsletter for weekly updates. Terms of use. Privacy policy. Cookie settings. "
    "All rights reserved. Contact us at the address below for any questions about this site."
)


@dataclass
class Pair:
    base: str
    copy: str
    edit: str
    jaccard: float


def edit_copy(text: str, kind: str, strength: float, rng: np.random.Generator, vocab: list[str]) -> str:
    """One edited copy of ``text``; ``strength`` is the fraction of words (or paragraphs) touched."""
    if kind == "shuffle":
        paras = text.split("\n\n")
        k = max(2, int(round(len(paras) * strength)))
        idx = rng.choice(len(paras), size=min(k, len(paras)), replace=False)
        moved = [paras[i] for i in idx]
        rng.shuffle(moved)
        for i, p in zip(sorted(idx), moved, strict=True):
            paras[i] = p
        return "\n\n".join(paras)
    if kind == "boilerplate":
        reps = max(1, int(round(strength * 10)))
        return text + "\n\n" + "\n".join([BOILERPLATE] * 1) + "".join(f" Section {i} links." for i in range(reps))
    words = text.split(" ")
    n = max(1, int(round(len(words) * strength)))
    pos = rng.choice(len(words), size=min(n, len(words)), replace=False)
    if kind == "substitute":
        for p in pos:
            words[p] = str(rng.choice(vocab))
    elif kind == "insert":
        for p in sorted(pos, reverse=True):
            words.insert(p, str(rng.choice(vocab)))
    elif kind == "delete":
        keep = np.ones(len(words), bool)
        keep[pos] = False
        words = [w for w, k in zip(words, keep, strict=True) if k]
    return " ".join(words)


def labelled_pairs(n_base: int, seed: int = 0, mean_words: int = 400) -> tuple[list[str], list[Pair]]:
    """Base documents and one edited copy of each, with edits and strengths spread so that true
    Jaccard covers ~0.3-1.0.

    Returns:
        (base texts, pairs) where pair i is (base i, its copy).
    """
    rng = np.random.default_rng(seed)
    bases = generate_texts(n_base, seed=seed, mean_words=mean_words)
    vocab = generate_texts(1, seed=seed + 1, mean_words=3000)[0].replace(".", "").replace("\n", " ").split()
    kinds = ("substitute", "insert", "delete", "shuffle", "boilerplate")
    pairs = []
    for i, base in enumerate(bases):
        kind = kinds[i % len(kinds)]
        strength = float(rng.uniform(0.005, 0.08)) if kind in ("substitute", "insert", "delete") else float(rng.uniform(0.2, 1.0))
        copy = edit_copy(base, kind, strength, rng, vocab)
        pairs.append(Pair(base, copy, kind, jaccard(base, copy)))
    return bases, pairs
