"""Train one small model on packed samples and score it: AdamW, linear warmup then cosine decay.

Deterministic for a seed on a machine: the initialisation comes from the seed, the samples come in the
given order, and XLA's CPU kernels are run single-program (one jitted step). Losses are fetched from
the device only when progress is reported, so the loop adds next to nothing to the step time.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pipelines.gate.model import ModelShape, init_params, token_nll


@dataclass(frozen=True)
class Schedule:
    """Optimiser settings (``gate.lr``, ``gate.min_lr_ratio``, ``gate.warmup`` as a share of the steps,
    ``gate.weight_decay``) and the number of steps."""

    lr: float
    min_lr_ratio: float
    warmup: float
    weight_decay: float
    steps: int


@dataclass
class Trained:
    """One trained model.

    Attributes:
        params: the final parameters.
        losses: training loss per step (nats per token, compact vocabulary).
        seconds: wall time of the training loop (compilation included).
        tokens: training tokens seen.
    """

    params: dict
    losses: list[float]
    seconds: float
    tokens: int

    @property
    def tokens_per_s(self) -> float:
        """Training tokens per second of wall time."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def optimizer(s: Schedule) -> optax.GradientTransformation:
    """AdamW (beta2 0.95, as GPT-3), gradient clipping at 1.0, warmup + cosine decay to ``min_lr_ratio``."""
    warm = max(1, int(s.warmup * s.steps))
    sched = optax.warmup_cosine_decay_schedule(0.0, s.lr, warm, max(s.steps, warm + 1), s.lr * s.min_lr_ratio)
    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(sched, b1=0.9, b2=0.95, weight_decay=s.weight_decay)
    )


@functools.lru_cache(maxsize=8)
def step_fn(shape: ModelShape, s: Schedule) -> tuple[Callable, optax.GradientTransformation]:
    """The jitted step ``(params, opt_state, batch[B, T+1]) -> (params, opt_state, loss)``, one per shape."""
    opt = optimizer(s)

    def loss_fn(params, batch):
        return token_nll(params, batch[:, :-1], batch[:, 1:], shape.n_heads).mean()

    # params and optimiser state are donated: the step updates them in place instead of allocating
    # a second copy every step
    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(params, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return step, opt


def train(
    samples: np.ndarray,
    shape: ModelShape,
    s: Schedule,
    batch_size: int,
    seed: int,
    progress: Callable[[int, int, float, float], None] | None = None,
    every_s: float = 10.0,
) -> Trained:
    """Train from the seed's initialisation over ``samples`` in the order given (one pass).

    Args:
        samples: int32 [n, seq_len + 1] compact ids; ``s.steps * batch_size`` of them are used.
        shape: the model sizes.
        s: the optimiser settings.
        batch_size: samples per step.
        seed: initialisation seed.
        progress: called as ``progress(step, steps, loss, step_s)`` every ``every_s`` seconds and at the end;
            ``step_s`` is the wall time per step after the first (which compiles), or the first's alone.
        every_s: seconds between progress calls (0 = every step).

    Returns:
        The :class:`Trained` model.
    """
    step, opt = step_fn(shape, s)
    params = init_params(shape, seed)
    state = opt.init(params)
    data = jnp.asarray(samples[: s.steps * batch_size].reshape(s.steps, batch_size, -1))
    pending: list[jax.Array] = []
    losses: list[float] = []
    start = last = time.perf_counter()
    first = 0.0  # end of the first step (compilation included)
    for i in range(s.steps):
        params, state, loss = step(params, state, data[i])
        pending.append(loss)
        if i == 0:
            jax.block_until_ready(loss)
            first = time.perf_counter()
        if progress is not None and (time.perf_counter() - last >= every_s or i == s.steps - 1):
            losses += [float(x) for x in jax.device_get(pending)]  # waits for the steps queued so far
            pending, last = [], time.perf_counter()
            progress(i + 1, s.steps, losses[-1], (last - first) / i if i else first - start)
    losses += [float(x) for x in jax.device_get(pending)]
    jax.block_until_ready(params)
    return Trained(params, losses, time.perf_counter() - start, s.steps * batch_size * shape.seq_len)


@functools.lru_cache(maxsize=8)
def _nll_fn(shape: ModelShape) -> Callable:
    return jax.jit(lambda params, inputs, targets: token_nll(params, inputs, targets, shape.n_heads))


def nll(
    params: dict, shape: ModelShape, inputs: np.ndarray, targets: np.ndarray, batch: int = 32
) -> np.ndarray:
    """Per-token negative log-likelihood (nats) of ``targets`` after ``inputs``, in fixed-size batches.

    Args:
        inputs: int32 [n, seq_len] compact ids (padding anywhere, masked by the caller).
        targets: int32 [n, seq_len].
        batch: windows per call (the last batch is padded, so one compiled program serves all).

    Returns:
        float64 [n, seq_len].
    """
    fn = _nll_fn(shape)
    n = inputs.shape[0]
    out = np.zeros(inputs.shape, dtype=np.float64)
    for lo in range(0, n, batch):
        x, y = inputs[lo : lo + batch], targets[lo : lo + batch]
        pad = batch - x.shape[0]
        if pad:
            x, y = np.pad(x, ((0, pad), (0, 0))), np.pad(y, ((0, pad), (0, 0)))
        out[lo : lo + batch] = np.asarray(fn(params, jnp.asarray(x), jnp.asarray(y)))[: batch - pad]
    return out


def steps_for(n_samples: int, batch_size: int) -> int:
    """Whole steps in a pass over ``n_samples`` (at least 1)."""
    return max(1, math.floor(n_samples / batch_size))
