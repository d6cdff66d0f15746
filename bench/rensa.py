"""Winnow's MinHash kernel against rensa's (Rust, PyPI ``rensa``), per core, on the same shingles.

``python -m bench.rensa [n_docs]`` prints the figures; :func:`run` is the ``make bench`` part ``rensa``.

Both sides get the generated corpus of :mod:`bench.corpus` in Arrow batches of ``spark.arrow_batch_rows``
rows (as the dedup stage calls the kernel), 128 permutations, seed 42. CPU seconds of this process
(``time.process_time``, every thread counted; rensa's Rayon pool is held to one thread), best of
``ROUNDS`` runs per side, the sides alternating, so the ratios do not depend on the machine's speed.
Three comparisons, each ``rensa CPU s / Winnow CPU s`` (above 1: Winnow is faster):

* ``text_to_signature``: texts in, signatures out. Winnow: :func:`udfs.minhash.signatures` (shingling
  in Arrow/numpy included). rensa, as its users call it: shingles built in Python (lowercase,
  punctuation stripped, word 5-grams joined by one space, UTF-8) then
  ``RMinHash.digest_matrix_from_token_byte_sets``.
* ``same_shingles``: rensa is handed Winnow's own shingles (:func:`udfs.minhash.shingle_strings`,
  built before the clock starts) and hashes them itself; Winnow still builds its shingles from the text
  inside its time. The kernel comparison the goal names.
* ``same_hashes``: the sketch step alone on identical 64-bit shingle hashes
  (:func:`udfs.minhash.shingle_hashes`, computed once): Winnow's fold to 32 bits + ``num_perm``
  affine permutations + per-document minimum, against ``RMinHash.digest_matrix_from_flat_token_hashes``.
* ``oph_*``: the same three with Winnow's ``oph`` scheme (:func:`udfs.minhash.one_permutation`: one
  hash per shingle, like rensa's sketch), whose accuracy ``accuracy`` reports as ``oph_rmse``.

The two do not compute the same sketch. Winnow's ``fast`` scheme is classic MinHash: ``num_perm``
hash evaluations per shingle (``a*h + b mod 2^32`` after an ``fmix32`` pre-mix, datasketch's
``affine32``), so its cost grows as shingles x permutations. rensa 0.5's R-MinHash hashes each token
once (FxHash, 64-bit) and places it into slots by up to three seeded bucket rounds (Fast Similarity
Sketching, Dahlgaard, Knudsen and Thorup 2017, arXiv:1704.04370), with a per-slot fallback hash only
for slots left empty: about one hash per shingle, whatever ``num_perm``. Both estimate the Jaccard
similarity of the shingle sets as the fraction of equal slots; ``accuracy`` compares the two estimates
with the exact Jaccard (:func:`udfs.minhash.exact_jaccard`) on known pairs: a document and a copy with a
given fraction of its words replaced (the edit of :mod:`bench.neardup`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # per core: rensa's batch APIs would spread over a pool

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from bench.corpus import generate_batch  # noqa: E402

NUM_PERM = 128
SEED = 42
ROUNDS = 5
"""Runs per side, alternating; the best of each side counts."""
EDIT_FRACTIONS = (0.005, 0.02, 0.05, 0.1, 0.2, 0.3)
"""Fractions of words replaced in the known pairs (true 5-gram Jaccard from ~0.95 down to ~0.05)."""
PAIRS_PER_FRACTION = 40


def _cpu(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def best_of(sides: dict[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, float]:
    """Best CPU seconds of each side over ``rounds`` alternating runs (after one warm-up run each)."""
    for fn in sides.values():
        fn()
    best = dict.fromkeys(sides, float("inf"))
    for _ in range(rounds):
        for name, fn in sides.items():
            best[name] = min(best[name], _cpu(fn))
    return best


def python_shingles(texts: list[str]) -> list[list[bytes]]:
    """Word 5-gram shingles as a rensa (or datasketch) user builds them in Python, UTF-8 bytes."""
    punct = re.compile(r"[^\w\s]+")
    out = []
    for t in texts:
        w = punct.sub(" ", t.lower()).split()
        out.append([" ".join(w[i : i + 5]).encode("utf-8") for i in range(max(1, len(w) - 4))])
    return out


def _slices(column: pa.Array, rows: int) -> list[pa.Array]:
    return [column.slice(s, rows) for s in range(0, len(column), rows)]


def speed(batch: pa.RecordBatch, rows: int, settings, rounds: int = ROUNDS) -> dict:
    """The three CPU-second comparisons of the module docstring on ``batch``, ``rows`` rows per call."""
    from rensa import RMinHash

    from udfs import minhash

    minhash.load_compiled()  # as a dedup worker runs after its first 16 MB of text
    spec, perm = settings.shingle, settings.num_perm
    slices = _slices(batch.column("text"), rows)
    texts = [s.to_pylist() for s in slices]
    shingles = [minhash.shingle_strings(s, spec) for s in slices]
    hashed = [minhash.shingle_hashes(s, spec) for s in slices]
    a, b = minhash.permutations(perm, settings.seed, settings.scheme)

    def winnow_text() -> None:
        for s in slices:
            minhash.signatures(s, spec, perm, settings.seed, settings.scheme)

    def rensa_text() -> None:
        for t in texts:
            RMinHash.digest_matrix_from_token_byte_sets(python_shingles(t), perm, settings.seed)

    def rensa_shingles() -> None:
        for sh in shingles:
            RMinHash.digest_matrix_from_token_byte_sets(sh, perm, settings.seed)

    def winnow_hashes() -> None:
        for h64, off in hashed:
            minhash.affine_sketch(h64, off, a, b)

    def oph_text() -> None:
        for s in slices:
            minhash.signatures(s, spec, perm, settings.seed, "oph")

    def oph_hashes() -> None:
        for h64, off in hashed:
            minhash.one_permutation(h64, off, perm, settings.seed)

    def rensa_hashes() -> None:
        for h64, off in hashed:
            RMinHash.digest_matrix_from_flat_token_hashes(h64, off.astype(np.uint64), perm, settings.seed)

    t = best_of({"winnow_text": winnow_text, "rensa_text": rensa_text, "rensa_shingles": rensa_shingles,
                 "winnow_hashes": winnow_hashes, "rensa_hashes": rensa_hashes,
                 "oph_text": oph_text, "oph_hashes": oph_hashes}, rounds)
    mb = sum(len(x.encode()) for tt in texts for x in tt) / 1e6
    n_shingles = sum(len(h) for h, _ in hashed)
    return {
        "cpu_s": {k: round(v, 4) for k, v in t.items()},
        "mb_per_cpu_s": {k: round(mb / v, 2) for k, v in t.items() if not k.endswith("_hashes")},
        "shingles": n_shingles,
        "ratio": {
            "text_to_signature": round(t["rensa_text"] / t["winnow_text"], 3),
            "same_shingles": round(t["rensa_shingles"] / t["winnow_text"], 3),
            "same_hashes": round(t["rensa_hashes"] / t["winnow_hashes"], 3),
            "oph_text_to_signature": round(t["rensa_text"] / t["oph_text"], 3),
            "oph_same_shingles": round(t["rensa_shingles"] / t["oph_text"], 3),
            "oph_same_hashes": round(t["rensa_hashes"] / t["oph_hashes"], 3),
        },
    }


def known_pairs(texts: list[str], seed: int = 0) -> tuple[list[str], list[str], list[float]]:
    """Pairs (document, edited copy) for every fraction of :data:`EDIT_FRACTIONS`; returns (a, b, fraction)."""
    from bench.neardup import _edit

    rng = np.random.default_rng(seed + 7)
    vocab = [w for t in texts[:100] for w in t.split(" ")[:50]]
    a, b, frac = [], [], []
    k = 0
    for f in EDIT_FRACTIONS:
        for _ in range(PAIRS_PER_FRACTION):
            t = texts[k % len(texts)]
            k += 1
            a.append(t)
            b.append(_edit(t, f, rng, vocab))
            frac.append(f)
    return a, b, frac


def accuracy(texts: list[str], settings, seed: int = 0) -> dict:
    """Estimated vs exact Jaccard on known pairs: Winnow's signatures and rensa's on the same shingles.

    Returns:
        per edit fraction (``by_edit_fraction.edit_<f>``): mean exact Jaccard, mean absolute error of each estimate; overall RMSE of
        each; and the binomial standard error of a ``num_perm``-slot estimate at the mean Jaccard.
    """
    from rensa import RMinHash

    from udfs import minhash

    minhash.load_compiled()  # as a dedup worker runs after its first 16 MB of text
    spec, perm = settings.shingle, settings.num_perm
    a, b, frac = known_pairs(texts, seed)
    pa_a, pa_b = pa.array(a), pa.array(b)
    exact = minhash.exact_jaccard(pa_a, pa_b, spec)
    est_w = minhash.estimated_jaccard(minhash.signatures(pa_a, spec, perm, settings.seed, settings.scheme),
                                      minhash.signatures(pa_b, spec, perm, settings.seed, settings.scheme))

    def rensa_sig(arr: pa.Array) -> np.ndarray:
        m = RMinHash.digest_matrix_from_token_byte_sets(minhash.shingle_strings(arr, spec), perm, settings.seed)
        return np.asarray(m.to_rows(), dtype=np.uint32)

    est_r = minhash.estimated_jaccard(rensa_sig(pa_a), rensa_sig(pa_b))
    est_o = minhash.estimated_jaccard(minhash.signatures(pa_a, spec, perm, settings.seed, "oph"),
                                      minhash.signatures(pa_b, spec, perm, settings.seed, "oph"))
    frac = np.asarray(frac)
    rows = {}
    for f in EDIT_FRACTIONS:
        m = frac == f
        j = float(exact[m].mean())
        rows[f"edit_{f:g}"] = {"exact_jaccard": round(j, 4),
                     "winnow_mae": round(float(np.abs(est_w[m] - exact[m]).mean()), 4),
                     "rensa_mae": round(float(np.abs(est_r[m] - exact[m]).mean()), 4),
                     "binomial_se": round(float(np.sqrt(j * (1 - j) / perm)), 4)}
    return {
        "pairs": len(a),
        "by_edit_fraction": rows,
        "winnow_rmse": round(float(np.sqrt(((est_w - exact) ** 2).mean())), 4),
        "rensa_rmse": round(float(np.sqrt(((est_r - exact) ** 2).mean())), 4),
        "oph_rmse": round(float(np.sqrt(((est_o - exact) ** 2).mean())), 4),
    }


def run(n_docs: int, seed: int = 0, rounds: int = ROUNDS) -> dict:
    """Measure speed and accuracy on ``min(n_docs, 4096)`` generated documents (~3.5 KB each).

    Returns:
        ``speed`` (:func:`speed`), ``accuracy`` (:func:`accuracy`), ``goals.minhash_vs_rensa`` (the
        ``same_shingles`` ratio), versions and the load average.
    """
    import rensa

    from pipelines.core.section import SparkConfig
    from pipelines.dedup.config import DedupConfig
    from pipelines.dedup.stage import SignatureSettings

    n = min(n_docs, 4096)
    batch = generate_batch(n, seed)
    settings = SignatureSettings.from_config(DedupConfig(), SEED)
    if settings.num_perm != NUM_PERM:
        raise RuntimeError(f"dedup num_perm is {settings.num_perm}, this benchmark assumes {NUM_PERM}")
    sp = speed(batch, SparkConfig().arrow_batch_rows, settings, rounds)
    acc = accuracy(batch.column("text").to_pylist()[:200], settings, seed)
    return {
        "n_docs": n,
        "num_perm": settings.num_perm,
        "rensa_version": getattr(rensa, "__version__", None) or _version("rensa"),
        "speed": sp,
        "accuracy": acc,
        "goals": {"minhash_vs_rensa": sp["ratio"]["same_shingles"]},
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def main(argv: list[str]) -> None:
    """Print the figures of :func:`run` as JSON (``argv``: optional document count)."""
    print(json.dumps(run(int(argv[0]) if argv else 4096), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
