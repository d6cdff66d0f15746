"""LSH banding of MinHash signatures: choosing bands x rows, the S-curve, and band keys.

A pair with Jaccard ``J`` shares at least one of ``b`` bands of ``r`` rows with probability
``P(J) = 1 - (1 - J^r)^b`` (Leskovec, Rajaraman, Ullman, *Mining of Massive Datasets*, §3.4.2).
Given a threshold ``t``, ``(b, r)`` with ``b * r <= num_perm`` minimises the weighted false-positive
area ``∫_0^t P`` plus false-negative area ``∫_t^1 (1 - P)``, the method of datasketch's
``MinHashLSH`` (``datasketch.lsh._optimal_param``); the integrals here are computed with numpy
(Simpson's rule) instead of scipy, so the chosen pair matches datasketch's.
"""

from __future__ import annotations

import numpy as np

S_CURVE_POINTS = (0.5, 0.7, 0.8, 0.9)
"""Jaccard values at which the candidate probability is printed and recorded."""

_M64A, _M64B = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_ROW_MULT = (np.arange(1, 1025, dtype=np.uint64) * np.uint64(0xD6E8FEB86659FD93)) | np.uint64(1)


def candidate_probability(jaccard: float | np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``1 - (1 - J^r)^b``: probability that a pair of Jaccard ``J`` becomes a candidate."""
    j = np.asarray(jaccard, dtype=np.float64)
    return 1.0 - (1.0 - j**rows) ** bands


def _simpson(f: np.ndarray, x: np.ndarray) -> float:
    h = (x[-1] - x[0]) / (len(x) - 1)
    return float(h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()))


def optimal_bands_rows(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """``(bands, rows)`` minimising ``fp_weight * FP area + fn_weight * FN area`` (see module docstring).

    Args:
        threshold: Jaccard threshold, 0 < t < 1.
        num_perm: signature length; ``bands * rows <= num_perm``.
        fp_weight, fn_weight: weights of the two areas (datasketch's default is 0.5 / 0.5).

    Returns:
        ``(bands, rows)``; e.g. ``(9, 13)`` for t = 0.8 and 128 permutations.

    Raises:
        ValueError: threshold outside (0, 1) or num_perm < 1.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold {threshold!r} out of range; allowed: 0 < threshold < 1")
    if num_perm < 1:
        raise ValueError(f"num_perm {num_perm!r} out of range; allowed: >= 1")
    x_fp = np.linspace(0.0, threshold, 1001)
    x_fn = np.linspace(threshold, 1.0, 1001)
    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = _simpson(candidate_probability(x_fp, b, r), x_fp)
            fn = _simpson(1.0 - candidate_probability(x_fn, b, r), x_fn)
            err = fp * fp_weight + fn * fn_weight
            if err < best:
                best, opt = err, (b, r)
    return opt


def s_curve(bands: int, rows: int, points: tuple[float, ...] = S_CURVE_POINTS) -> dict[str, float]:
    """Candidate probability at each Jaccard in ``points``, keyed ``"J=0.80"``, rounded to 4 digits."""
    return {f"J={p:.2f}": round(float(candidate_probability(p, bands, rows)), 4) for p in points}


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per band: the ``rows`` values of the band mixed into one integer.

    Two signatures share a key when their band values are equal (and, with probability 2^-64 per
    pair, by accident; the false-positive check removes such pairs).

    Args:
        sig: uint32 signatures (n_docs, num_perm), ``bands * rows <= num_perm``.

    Returns:
        int64 array (n_docs, bands) (signed, as Spark's ``bigint``).

    Raises:
        ValueError: ``bands * rows`` exceeds the signature length.
    """
    n, num_perm = sig.shape
    if bands * rows > num_perm or rows > len(_ROW_MULT):
        raise ValueError(f"bands*rows = {bands}*{rows} exceeds num_perm = {num_perm}")
    block = sig[:, : bands * rows].reshape(n, bands, rows).astype(np.uint64)
    acc = (block * _ROW_MULT[:rows]).sum(axis=2, dtype=np.uint64) + np.arange(bands, dtype=np.uint64)
    acc ^= acc >> np.uint64(33)
    acc *= _M64A
    acc ^= acc >> np.uint64(33)
    acc *= _M64B
    acc ^= acc >> np.uint64(33)
    return acc.view(np.int64)
