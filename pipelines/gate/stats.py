"""Paired statistics of a gate: each variant against the first, one pair per seed.

For an evaluation set and a variant, ``d_k = metric(variant, seed k) - metric(first variant, seed k)``
(both models start from the same initialisation and see the same draw positions, so the pair cancels
the seed's own effect). The mean of the ``d_k``, its two-sided 95 % Student t interval, and:

* verdict (bits per byte, lower is better): ``better`` when the whole interval is below 0, ``worse``
  when it is above 0, else ``no_difference`` (not detectable at this budget);
* the minimum detectable difference: the true mean difference this many seeds would find with 80 %
  power at the 5 % level, ``(t_{0.975, n-1} + t_{0.80, n-1}) * sd / sqrt(n)`` (the standard paired-t
  power approximation, e.g. Cohen 1988, ch. 2).

Student t quantiles come from a table (df 1..30, then the normal quantile with a Cornish-Fisher term),
so the base install needs no SciPy.
"""

from __future__ import annotations

import math

T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]
"""Two-sided 95 % Student t quantiles ``t_{0.975, df}`` for df = 1..30 (standard tables)."""
T80 = [
    1.376,
    1.061,
    0.978,
    0.941,
    0.920,
    0.906,
    0.896,
    0.889,
    0.883,
    0.879,
    0.876,
    0.873,
    0.870,
    0.868,
    0.866,
    0.865,
    0.863,
    0.862,
    0.861,
    0.860,
    0.859,
    0.858,
    0.858,
    0.857,
    0.856,
    0.856,
    0.855,
    0.855,
    0.854,
    0.854,
]
"""One-sided Student t quantiles ``t_{0.80, df}`` for df = 1..30 (80 % power)."""
Z = {0.975: 1.959964, 0.80: 0.841621}


def t_quantile(p: float, df: int) -> float:
    """Student t quantile for p in {0.975, 0.80}.

    >>> t_quantile(0.975, 2), round(t_quantile(0.975, 1000), 3)
    (4.303, 1.962)

    Raises:
        ValueError: another p, or df < 1.
    """
    if p not in Z or df < 1:
        raise ValueError(f"t_quantile: p must be one of {sorted(Z)} and df >= 1; got p={p}, df={df}")
    if df <= 30:
        return (T975 if p == 0.975 else T80)[df - 1]
    z = Z[p]
    return z + (z**3 + z) / (4 * df)  # Cornish-Fisher, first term


def paired(diffs: list[float]) -> dict:
    """Summary of paired differences (variant minus first, bits per byte).

    Args:
        diffs: one difference per seed.

    Returns:
        ``{"n", "diffs", "mean", "sd", "ci95": [lo, hi], "verdict", "min_detectable"}``; with one seed the
        interval is unbounded and the verdict ``no_difference``.

    >>> r = paired([-0.10, -0.12, -0.08])
    >>> r["verdict"], round(r["mean"], 3), [round(x, 3) for x in r["ci95"]], round(r["min_detectable"], 3)
    ('better', -0.1, [-0.15, -0.05], 0.062)
    >>> paired([0.01, -0.01, 0.0])["verdict"]
    'no_difference'
    """
    n = len(diffs)
    mean = sum(diffs) / n if n else 0.0
    if n < 2:
        return {
            "n": n,
            "diffs": list(diffs),
            "mean": mean,
            "sd": None,
            "ci95": [-math.inf, math.inf],
            "verdict": "no_difference",
            "min_detectable": math.inf,
        }
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    half = t_quantile(0.975, n - 1) * se
    lo, hi = mean - half, mean + half
    verdict = "better" if hi < 0 else "worse" if lo > 0 else "no_difference"
    mdd = (t_quantile(0.975, n - 1) + t_quantile(0.80, n - 1)) * se
    return {
        "n": n,
        "diffs": list(diffs),
        "mean": mean,
        "sd": sd,
        "ci95": [lo, hi],
        "verdict": verdict,
        "min_detectable": mdd,
    }


def compare(results: dict[str, dict[str, list[float]]], names: list[str]) -> dict[str, dict[str, dict]]:
    """Every variant after the first against the first, per evaluation set.

    Args:
        results: variant name -> evaluation set -> metric per seed (seed order).
        names: variant names, the first is the baseline.

    Returns:
        variant -> set -> :func:`paired` summary (sets the baseline lacks are left out).
    """
    base = results[names[0]]
    out: dict[str, dict[str, dict]] = {}
    for name in names[1:]:
        out[name] = {
            s: paired([a - b for a, b in zip(vals, base[s], strict=True)])
            for s, vals in sorted(results[name].items())
            if s in base
        }
    return out
