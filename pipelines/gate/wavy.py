"""Wavy-loss check: how much of the training loss's wobble comes from the order of the shards.

Two models start from the same initialisation and train on the same documents: one in shard order (as a
trainer reading the shards in order sees them), one with the documents in a uniformly random order,
packed the same way (a document longer than a sample still fills consecutive samples in both, so the
batch-to-batch noise of packing is the same and only the order of the documents differs). Each loss curve is
split into a trend (centred moving average over ``smooth_steps`` steps) and a residual. A shuffle that
mixes sources well leaves residuals of the same size in both orders (batch-to-batch noise only); data
written in blocks (one source after another) adds slow swings in shard order. The share of the
shard-order residual variance due to the order is ``max(0, 1 - var_random / var_shard)``.

Swings slower than the smoothing window (sources written in blocks longer than a few steps) end up in
the trend, not the residual, so that share misses them. The paired share does not smooth: the two runs
share the trend (same documents, initialisation and schedule), so the step-by-step difference
``shard - random`` holds the order's effect plus the batch noise of both runs, ``2 s2``, where ``s2`` is the
random-order run's residual variance scaled back to the noise's (a centred moving average over ``w``
steps keeps ``(w - 1) / w`` of white noise's variance). The order's variance is ``max(0, var(diff) -
2 s2)`` and its share of the shard-order run's wobble ``order / (order + s2)``. The set is flagged when
the residual share reaches ``gate.wavy_max_order_share``; the paired share is reported beside it, not
flagged on: the noise estimate assumes batch noise independent from step to step, and a long document
(many consecutive samples) makes slow noise in either order: on real web text (64 x 2 model, 32 steps,
two seeds each) a shuffled set reached paired shares of 0.49 and 0.00, source blocks 0.00 and 0.35.

Source: the "wavy" loss curves of poorly shuffled data are a known pre-training failure (e.g. the
BLOOM and OLMo training logs); the measure here is a plain variance decomposition, not from a paper.
"""

from __future__ import annotations

import numpy as np


def residuals(loss: np.ndarray, smooth_steps: int) -> np.ndarray:
    """Loss minus its centred moving average, over the steps where the window fits.

    Args:
        loss: float [steps], training loss per step.
        smooth_steps: window of the moving average (steps, made odd).

    Returns:
        float64 [steps - window + 1]; empty when the curve is shorter than the window.

    >>> np.round(residuals(np.array([0.0, 3.0, 0.0, 3.0, 0.0]), 3), 3).tolist()
    [2.0, -2.0, 2.0]
    """
    w = smooth_steps | 1
    x = np.asarray(loss, dtype=np.float64)
    if x.size < w:
        return np.zeros(0)
    trend = np.convolve(x, np.ones(w) / w, mode="valid")
    return x[w // 2 : w // 2 + trend.size] - trend


def check(
    shard_loss: list[float], random_loss: list[float], smooth_steps: int, max_order_share: float
) -> dict:
    """Compare the two loss curves.

    Args:
        shard_loss: loss per step in shard order.
        random_loss: loss per step of the same samples in a uniformly random order.
        smooth_steps: moving-average window (steps).
        max_order_share: flag threshold on the order's share of residual variance (0..1).

    Returns:
        ``{"residual_var_shard_order", "residual_var_random_order", "order_share", "flagged", "steps",
        "smooth_steps"}``; ``order_share`` is None (not flagged) when the curves are shorter than the window.
    """
    rs, rr = residuals(np.array(shard_loss), smooth_steps), residuals(np.array(random_loss), smooth_steps)
    out = {"steps": len(shard_loss), "smooth_steps": smooth_steps | 1, "max_order_share": max_order_share}
    if rs.size < 2 or rr.size < 2:
        return {
            **out,
            "residual_var_shard_order": None,
            "residual_var_random_order": None,
            "order_share": None,
            "flagged": False,
        }
    vs, vr = float(rs.var()), float(rr.var())
    share = max(0.0, 1.0 - vr / vs) if vs > 0 else 0.0
    paired = paired_share(shard_loss, random_loss, vr, out["smooth_steps"])
    return {
        **out,
        "residual_var_shard_order": vs,
        "residual_var_random_order": vr,
        "order_share": share,
        "paired_order_share": paired,
        "flagged": share >= max_order_share,
    }


def paired_share(
    shard_loss: list[float], random_loss: list[float], residual_var: float, window: int
) -> float:
    """The order's share of the shard-order run's wobble, from the step-by-step difference of the two runs
    (module docstring).

    Args:
        shard_loss: loss per step in shard order.
        random_loss: loss per step of the same samples in a uniformly random order.
        residual_var: the random-order run's variance around its moving average.
        window: the moving average's window (steps, odd).

    Returns:
        The share, 0..1 (0 when the runs differ by no more than their batch noise).

    >>> flat = [1.0, 1.2] * 20
    >>> paired_share([1.0] * 20 + [2.0] * 20, [1.5] * 40, 0.0, 9)  # two blocks, no batch noise
    1.0
    >>> round(paired_share(flat, flat, 0.01, 9), 3)
    0.0
    """
    n = min(len(shard_loss), len(random_loss))
    diff = np.asarray(shard_loss[:n], dtype=np.float64) - np.asarray(random_loss[:n], dtype=np.float64)
    noise = residual_var * window / (window - 1)
    order = max(0.0, float(diff.var()) - 2.0 * noise)
    return order / (order + noise) if order > 0 else 0.0
