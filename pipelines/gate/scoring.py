"""Scoring of a gate's models and the comparison of its two tiers: bits per byte and accuracy of a model
on every evaluation text, the bigram proxy tier, the agreement of the tiers, overall verdicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pipelines.gate import evals, ngram
from pipelines.gate.vocab import CompactVocab


class Scorer:
    """Scores a model (transformer or bigram) on every evaluation text; windows are built once."""

    def __init__(self, sets: list[evals.TextSet], vocab: CompactVocab, eos: int, seq_len: int):
        self.sets, self.vocab = sets, vocab
        self.win = {s.name: evals.windows(s.docs, eos, seq_len) for s in sets}
        self.mc = {s.name: evals.choice_windows(s.mc, eos, seq_len) for s in sets if s.mc}

    def score(
        self, nll_fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Bits per byte and multiple-choice accuracy per set of ``nll_fn(inputs, targets) -> nats``."""
        bpb, acc = {}, {}
        for s in self.sets:
            x, y, m = self.win[s.name]
            bits = (
                evals.total_bits(nll_fn(self.vocab.map(x), self.vocab.map(y)), y, m, self.vocab)
                if len(x)
                else 0.0
            )
            bpb[s.name] = bits / max(1, s.n_bytes)
            if s.name in self.mc:
                x, y, m = self.mc[s.name]
                per = np.array(
                    [
                        evals.total_bits(n[None], t[None], k[None], self.vocab)
                        for n, t, k in zip(nll_fn(self.vocab.map(x), self.vocab.map(y)), y, m, strict=True)
                    ]
                )
                acc[s.name] = evals.accuracy(per, s.mc)
        return bpb, acc


def proxy_tier(
    samples: dict[str, list[np.ndarray]], vocab: CompactVocab, scorer: Scorer
) -> dict[str, dict[str, list]]:
    """Bits per byte of the bigram model of each variant and seed: variant -> set -> [per seed]."""
    out: dict[str, dict[str, list]] = {}
    for name, per_seed in samples.items():
        for d in per_seed:
            model = ngram.Bigram(vocab.map(d), vocab.size)
            bpb, _ = scorer.score(model.nll)
            for s, b in bpb.items():
                out.setdefault(name, {}).setdefault(s, []).append(b)
    return out


def agreement(proxy: dict[str, dict[str, dict]], full: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """How often the proxy tier's mean difference has the transformer tier's sign, and its verdict."""
    pairs = [(proxy[v][s], full[v][s]) for v in full for s in full[v] if s in proxy.get(v, {})]
    sign = sum(1 for p, f in pairs if (p["mean"] < 0) == (f["mean"] < 0))
    verdict = sum(1 for p, f in pairs if p["verdict"] == f["verdict"])
    n = len(pairs)
    return {
        "pairs": n,
        "same_sign": sign,
        "same_verdict": verdict,
        "same_sign_share": sign / n if n else None,
        "same_verdict_share": verdict / n if n else None,
    }


def overall(comp: dict[str, dict]) -> str:
    """A variant's verdict over its ranked sets: better, worse, mixed or no_difference."""
    v = {c["verdict"] for c in comp.values() if c.get("ranked", True)}
    if "better" in v and "worse" in v:
        return "mixed"
    return "better" if "better" in v else "worse" if "worse" in v else "no_difference"


def mark_ranked(comp: dict[str, dict[str, dict]], sets: list[evals.TextSet], base: str) -> None:
    """A variant's own validation split (or the baseline's) is reported, never used to rank the pair."""
    owner = {s.name: s.owner for s in sets}
    for name, per_set in comp.items():
        for s, c in per_set.items():
            c["ranked"] = owner.get(s) not in (name, base)
