"""The whole gate: open and check the variants, draw, build the vocabulary and evaluations, run the proxy
and transformer tiers for every seed, the wavy check, the statistics; :func:`run_gate` returns ``gate.json``'s
content (written by :mod:`pipelines.gate.output`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.core.config import WinnowConfig
from pipelines.gate import evals, shards, stats, wavy
from pipelines.gate.config import ACCELERATOR_MODEL, CPU_MODEL, GateConfig
from pipelines.gate.model import ModelShape
from pipelines.gate.scoring import Scorer, agreement, mark_ranked, overall, proxy_tier
from pipelines.gate.shards import GateInputError, GateUsageError, Variant
from pipelines.gate.vocab import CompactVocab, build

Log = Callable[[str], None]


def open_variants(paths: list[str]) -> list[Variant]:
    """Open every variant (labels made unique) and check they make a gate: two or more shard sets, each
    given once, none of a run in progress, one tokenizer.

    Raises:
        GateUsageError: fewer than two variants, or one shard set given twice (under any path).
        pipelines.core.lock.RunLockedError: a variant whose run is in progress (a live run lock).
        GateInputError: any variant that cannot be used.
    """
    if len(paths) < 2:
        raise GateUsageError(
            f"gate.variants: give two or more variants (--variant PATH, repeatable); got {paths}"
        )
    out: list[Variant] = []
    seen: dict[Path, str] = {}
    for p in paths:
        v = shards.open_variant(p)
        root = v.root.resolve()
        if root in seen:
            raise GateUsageError(
                f"gate.variants: {seen[root]!r} and {p!r} are the same shard set ({root}); give each "
                "variant once (the same data twice trains identical models)"
            )
        seen[root] = p
        shards.check_not_in_progress(v)
        names = {x.name for x in out}
        v.name = v.name if v.name not in names else f"{v.name}_{len(out)}"
        out.append(v)
    shards.check_same_tokenizer(out)
    return out


def model_shape(g: GateConfig, vocab: int, backend: str) -> ModelShape:
    """The model sizes: ``gate.model`` where set, else the backend's defaults."""
    base = CPU_MODEL if backend == "cpu" else ACCELERATOR_MODEL
    d = g.model.d_model or base["d_model"]
    heads = g.model.n_heads or base["n_heads"]
    if d % heads:
        raise GateInputError(f"gate.model: d_model {d} must divide by n_heads {heads}; set both")
    return ModelShape(vocab, g.seq_len, d, g.model.n_layers or base["n_layers"], heads)


def matmul_rate(n: int = 1024, reps: int = 10) -> float:
    """The measured float32 matmul rate, FLOP/s (a jitted ``n x n`` matmul, best of ``reps``)."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f(a).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best


def eval_sets(cfg: WinnowConfig, variants: list[Variant], tokenizer: Any, eos: int) -> list[evals.TextSet]:
    """Every held-out text of the gate, fixed before training."""
    g = cfg.gate
    sets = [
        evals.eval_set(es, i, "gate.eval_sets", tokenizer, g.eval_max_tokens)
        for i, es in enumerate(g.eval_sets)
    ]
    if g.use_decontam_sets:
        named = {s.name for s in sets}
        sets += [
            evals.eval_set(es, i, "decontam.eval_sets", tokenizer, g.eval_max_tokens)
            for i, es in enumerate(cfg.decontam.eval_sets)
            if f"eval:{es.name}" not in named and es.table is None
        ]
    if g.validation:
        sets += [s for s in (evals.validation(v, tokenizer, eos, g.eval_max_tokens) for v in variants) if s]
    if g.reference:
        sets.append(evals.reference(g.reference, tokenizer, g.eval_max_tokens))
    return sets


def draws(g: GateConfig, variants: list[Variant], seeds: list[int]) -> dict[str, list[np.ndarray]]:
    """Every variant's samples per seed (full ids), in shard order or shuffled per ``gate.order``."""
    out: dict[str, list[np.ndarray]] = {}
    for v in variants:
        out[v.name] = []
        for s in seeds:
            d = shards.draw(v, g.tokens, g.seq_len, s)
            if g.order == "shuffled":
                d = d[np.random.default_rng(s).permutation(len(d))]
            out[v.name].append(d)
    return out


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def _progress(
    log: Log, label: str, tokens_per_step: int, later: int
) -> Callable[[int, int, float, float], None]:
    def say(step: int, steps: int, loss: float, step_s: float) -> None:
        tps = tokens_per_step / step_s if step_s > 0 else 0.0
        left = step_s * (steps - step + steps * later)
        log(
            f"[gate] {label}: step {step}/{steps}, loss {loss:.3f}, {tps:,.0f} tokens/s, "
            f"about {left / 60:.1f} min left"
        )

    return say


def run_gate(cfg: WinnowConfig, log: Log = print, variants: list[Variant] | None = None) -> dict[str, Any]:
    """Run the gate described by ``cfg.gate`` (variants, budget, model, evaluations, seeds).

    Args:
        cfg: the whole config (``gate``, ``decontam.eval_sets``, ``run.seed``: seed k is ``run.seed + k``).
        log: receives progress lines.
        variants: ``gate.variants`` already opened and checked (:func:`open_variants`); None opens them.

    Returns:
        The content of ``gate.json`` (see :mod:`pipelines.gate.output`), loss curves included.

    Raises:
        GateInputError: a variant or evaluation input that cannot be used (names the key or path); the
            budget error names every variant that holds too few tokens.
    """
    import jax

    from pipelines.gate import train as tr
    from udfs.tokenize import load_tokenizer

    g = cfg.gate
    variants = variants if variants is not None else open_variants(g.variants)
    shards.check_budget(variants, g.tokens, g.seq_len)
    tk = variants[0].tokenizer
    eos, full = int(tk["eos_id"]), int(tk["vocab_size"])
    tokenizer = load_tokenizer(tk["spec"]).tokenizer
    seeds = [cfg.run.seed + k for k in range(g.seeds)]
    sets = eval_sets(cfg, variants, tokenizer, eos)
    samples = draws(g, variants, seeds)
    vocab = build([d for per in samples.values() for d in per], full, g.vocab_size)
    shape = model_shape(g, vocab.size, jax.default_backend())
    scorer = Scorer(sets, vocab, eos, g.seq_len)
    t0 = time.perf_counter()
    proxy = proxy_tier(samples, vocab, scorer) if g.ngram else {}
    proxy_s = time.perf_counter() - t0
    n_samples = len(next(iter(samples.values()))[0])
    sched = tr.Schedule(g.lr, g.min_lr_ratio, g.warmup, g.weight_decay, tr.steps_for(n_samples, g.batch_size))
    rate = matmul_rate()
    bpb: dict[str, dict[str, list]] = {v.name: {} for v in variants}
    acc: dict[str, dict[str, list]] = {v.name: {} for v in variants}
    curves: dict[str, list[list[float]]] = {v.name: [] for v in variants}
    speed: list[float] = []
    models = len(seeds) * len(variants)
    done = 0
    for k, seed in enumerate(seeds):
        for v in variants:
            done += 1
            say = _progress(
                log, f"{v.name} seed {k + 1}/{len(seeds)}", g.batch_size * g.seq_len, models - done
            )
            m = tr.train(vocab.map(samples[v.name][k]), shape, sched, g.batch_size, seed, say, g.progress_s)
            curves[v.name].append(m.losses)
            speed.append(m.tokens_per_s)
            b, a = scorer.score(lambda x, y, m=m: tr.nll(m.params, shape, x, y))
            for s, val in b.items():
                bpb[v.name].setdefault(s, []).append(val)
            for s, val in a.items():
                acc[v.name].setdefault(s, []).append(val)
    names = [v.name for v in variants]
    comp = stats.compare(bpb, names)
    proxy_comp = stats.compare(proxy, names) if proxy else {}
    for c in (comp, proxy_comp):
        mark_ranked(c, sets, names[0])
    acc_comp = stats.compare(acc, names) if any(acc.values()) else {}
    wavy_out = _wavy(g, variants, samples, vocab, shape, sched, seeds[0], curves, log) if g.wavy else {}
    tps = float(np.median(speed))
    return {
        "variants": [
            {
                "name": v.name,
                "path": v.path,
                "shard_root": str(v.root),
                "train_tokens": v.tokens("train"),
                "validation_tokens": v.tokens("validation"),
                "config_fingerprint": v.manifest.get("config_fingerprint"),
            }
            for v in variants
        ],
        "baseline": names[0],
        "tokenizer": {k: tk.get(k) for k in ("spec", "fingerprint", "vocab_size", "eos_id")},
        "vocab": vocab.describe(np.concatenate([d.ravel() for per in samples.values() for d in per])),
        "model": {
            "backend": jax.default_backend(),
            "d_model": shape.d_model,
            "n_layers": shape.n_layers,
            "n_heads": shape.n_heads,
            "vocab": shape.vocab,
            "seq_len": shape.seq_len,
            "params": shape.params(),
            "flops_per_token": shape.flops_per_token(),
        },
        "budget": {
            "tokens_per_model": sched.steps * g.batch_size * g.seq_len,
            "steps": sched.steps,
            "batch_size": g.batch_size,
            "order": g.order,
            "seeds": seeds,
            "lr": g.lr,
            "warmup": g.warmup,
            "min_lr_ratio": g.min_lr_ratio,
            "weight_decay": g.weight_decay,
        },
        "eval_sets": [
            {
                "name": s.name,
                "tokens": s.tokens,
                "bytes": s.n_bytes,
                "documents": len(s.docs),
                "choice_items": len(s.mc),
                "owner": s.owner,
            }
            for s in sets
        ],
        "bits_per_byte": bpb,
        "accuracy": acc,
        "proxy_bits_per_byte": proxy,
        "comparisons": comp,
        "accuracy_comparisons": acc_comp,
        "proxy_comparisons": proxy_comp,
        "verdicts": {n: overall(c) for n, c in comp.items()},
        "proxy_verdicts": {n: overall(c) for n, c in proxy_comp.items()},
        "agreement": agreement(proxy_comp, comp),
        "wavy": wavy_out,
        "loss_curves": curves,
        "speed": {
            "tokens_per_s": tps,
            "cores": cores(),
            "tokens_per_s_per_core": tps / cores(),
            "matmul_flops_per_s": rate,
            "model_flops_per_s": tps * shape.flops_per_token(),
            "mfu": tps * shape.flops_per_token() / rate,
            "proxy_seconds": proxy_s,
        },
    }


def _wavy(
    g: GateConfig,
    variants: list[Variant],
    samples: dict[str, list[np.ndarray]],
    vocab: CompactVocab,
    shape: ModelShape,
    sched: Any,
    seed: int,
    curves: dict[str, list[list[float]]],
    log: Log,
) -> dict[str, Any]:
    """Per variant: the first seed's window of documents in shard order against the same documents in a
    uniformly random order (packed the same way, so batches hold as many documents in both)."""
    from pipelines.gate import train as tr

    out: dict[str, Any] = {}
    for i, v in enumerate(variants):
        shard = samples[v.name][0] if g.order == "shard" else shards.draw(v, g.tokens, g.seq_len, seed)
        control = shards.draw(v, g.tokens, g.seq_len, seed, doc_order_seed=seed)
        say = _progress(log, f"{v.name} wavy check", g.batch_size * g.seq_len, len(variants) - 1 - i)
        trained = tr.train(vocab.map(control), shape, sched, g.batch_size, seed, say, g.progress_s).losses
        shard_loss = curves[v.name][0] if g.order == "shard" else trained
        random_loss = trained
        if g.order == "shuffled":  # the main run was not in shard order: train the shard-order one here
            shard_loss = tr.train(
                vocab.map(shard), shape, sched, g.batch_size, seed, say, g.progress_s
            ).losses
        out[v.name] = {
            **wavy.check(shard_loss, random_loss, g.wavy_smooth_steps, g.wavy_max_order_share),
            "shard_order_loss": shard_loss,
            "random_order_loss": random_loss,
        }
    return out
