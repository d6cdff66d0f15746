"""The gate's outputs: ``<gate root>/gate.json`` (every figure) and ``gate.html`` (loss curves of every
variant and seed, the verdict table), in the run report's look (:mod:`pipelines.core.html`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pipelines.core import html as rh

VERDICT_TEXT = {
    "better": "better",
    "worse": "worse",
    "no_difference": "no difference detectable at this budget",
    "mixed": "better on some sets, worse on others",
}


def _finite(obj: Any) -> Any:
    """JSON has no infinity: unbounded interval ends become None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def write(result: dict[str, Any], root: str, plot_format: str = "svg") -> dict[str, str]:
    """Write ``gate.json`` and ``gate.html`` under ``root`` (created).

    Returns:
        ``{"json": path, "html": path}``.
    """
    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gate.json").write_text(json.dumps(_finite(result), indent=2, sort_keys=True) + "\n", "utf-8")
    (out / "gate.html").write_text(render(result, plot_format), "utf-8")
    return {"json": str(out / "gate.json"), "html": str(out / "gate.html")}


def verdict_rows(result: dict[str, Any], key: str = "comparisons") -> list[dict[str, Any]]:
    """One row per (variant, evaluation set): mean paired difference, interval, verdict, detectable size."""
    rows = []
    for variant, per_set in result[key].items():
        for s, c in per_set.items():
            lo, hi = c["ci95"]
            rows.append(
                {
                    "variant": variant,
                    "set": s,
                    "mean_diff_bpb": c["mean"],
                    "ci95": f"[{lo:+.4f}, {hi:+.4f}]" if math.isfinite(lo) else "unbounded",
                    "verdict": VERDICT_TEXT[c["verdict"]]
                    if c.get("ranked", True)
                    else f"{VERDICT_TEXT[c['verdict']]} (own validation: not ranked)",
                    "min_detectable_bpb": c["min_detectable"] if math.isfinite(c["min_detectable"]) else None,
                }
            )
    return rows


def agreement_sentence(agreement: dict[str, Any]) -> str:
    """The agreement of the proxy tier with the transformer tier (:func:`pipelines.gate.scoring.agreement`)
    in words.

    >>> agreement_sentence({"pairs": 4, "same_sign": 3, "same_verdict": 4})[-77:]
    'difference in 3 of 4 comparisons (75 %) and on the verdict in 4 of 4 (100 %).'
    >>> agreement_sentence({"pairs": 0, "same_sign": 0, "same_verdict": 0})
    'The proxy tier was not run (gate.ngram: false): nothing to compare.'
    """
    n = agreement.get("pairs") or 0
    if not n:
        return "The proxy tier was not run (gate.ngram: false): nothing to compare."
    sign, verdict = agreement["same_sign"], agreement["same_verdict"]
    return (
        f"The bigram proxy agreed with the transformer tier on the sign of the difference in {sign} of {n} "
        f"comparisons ({100 * sign / n:.0f} %) and on the verdict in {verdict} of {n} "
        f"({100 * verdict / n:.0f} %)."
    )


def agreement_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (variant, evaluation set) scored by both tiers: each tier's mean difference and verdict."""
    rows = []
    for variant, per_set in result["comparisons"].items():
        for s, full in per_set.items():
            proxy = result["proxy_comparisons"].get(variant, {}).get(s)
            if proxy is None:
                continue
            rows.append(
                {
                    "variant": variant,
                    "set": s,
                    "proxy_diff_bpb": proxy["mean"],
                    "proxy_verdict": proxy["verdict"],
                    "transformer_diff_bpb": full["mean"],
                    "transformer_verdict": full["verdict"],
                    "same_sign": "yes" if (proxy["mean"] < 0) == (full["mean"] < 0) else "no",
                    "same_verdict": "yes" if proxy["verdict"] == full["verdict"] else "no",
                }
            )
    return rows


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The console summary: one line per variant against the baseline."""
    lines = []
    for variant, verdict in result["verdicts"].items():
        ranked = [c for c in result["comparisons"][variant].values() if c.get("ranked", True)]
        mdd = max((c["min_detectable"] for c in ranked), default=math.nan)
        proxy = result["proxy_verdicts"].get(variant)
        if ranked and all(d == 0 for c in ranked for d in c["diffs"]):
            lines.append(f"[gate] {variant} vs {result['baseline']}: identical models (the variants gave the "
                         "same training samples): no difference")
            continue
        lines.append(
            f"[gate] {variant} vs {result['baseline']}: {VERDICT_TEXT[verdict]} "
            f"(smallest detectable difference {mdd:.4f} bits/byte; proxy tier: "
            f"{VERDICT_TEXT[proxy] if proxy else 'off'})"
        )
    if result.get("agreement", {}).get("pairs"):
        lines.append(f"[gate] {agreement_sentence(result['agreement'])}")
    for variant, w in result.get("wavy", {}).items():
        share = w["order_share"]
        if share is None:  # the curves were shorter than the smoothing window: nothing was measured
            lines.append(f"[gate] {variant} loss curve: wavy check not measured ({w['steps']} steps, fewer "
                         f"than gate.wavy_smooth_steps={w['smooth_steps']}; raise gate.tokens)")
            continue
        state = "no order-driven oscillation"
        if w["flagged"]:
            state = "WAVY: shard order makes the loss oscillate"
        paired = w.get("paired_order_share")
        lines.append(f"[gate] {variant} loss curve: {state} (order share of residual variance {share:.2f}"
                     + (f", paired with the random order {paired:.2f})" if paired is not None else ")"))
    return lines


def _curves(result: dict[str, Any], fmt: str) -> str:
    fig, ax = rh.new_figure()
    for name, runs in result["loss_curves"].items():
        for k, losses in enumerate(runs):
            ax.plot(
                range(1, len(losses) + 1), losses, lw=0.8, label=f"{name} seed {result['budget']['seeds'][k]}"
            )
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.set_title("training loss, every variant and seed", fontsize=9)
    ax.legend(fontsize=6)
    plots = [rh.img(rh.figure_uri(fig, fmt), "training loss curves")]
    for name, w in result.get("wavy", {}).items():
        fig, ax = rh.new_figure()
        ax.plot(w["shard_order_loss"], lw=0.8, label="shard order")
        ax.plot(w["random_order_loss"], lw=0.8, label="random order")
        ax.set_title(f"{name}: same samples, two orders", fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=6)
        plots.append(rh.img(rh.figure_uri(fig, fmt), f"{name} wavy check"))
    return '<div class="plots">' + "".join(plots) + "</div>"


def render(result: dict[str, Any], fmt: str = "svg") -> str:
    """The gate page: one self-contained HTML document."""
    cols = ["variant", "set", "mean_diff_bpb", "ci95", "verdict", "min_detectable_bpb"]
    m, b = result["model"], result["budget"]
    head = (
        f"<p>baseline <code>{rh.esc(result['baseline'])}</code> · model {m['n_layers']} layers "
        f"x {m['d_model']} ({m['params']:,} parameters, {rh.esc(m['backend'])}) · "
        f"{b['tokens_per_model']:,} tokens per model · "
        f"seeds {rh.esc(b['seeds'])} · vocabulary {result['vocab']['compact_size']:,} ids</p>"
    )
    sets = rh.table(
        result["eval_sets"],
        ["name", "documents", "tokens", "bytes", "choice_items", "owner"],
        left=("name", "owner"),
    )
    wavy = [
        {
            "variant": k,
            **{
                c: v.get(c)
                for c in ("order_share", "paired_order_share", "flagged", "residual_var_shard_order",
                          "residual_var_random_order")
            },
        }
        for k, v in result.get("wavy", {}).items()
    ]
    return "".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{rh.esc(rh.CSP)}">',
            f"<title>Winnow gate</title><style>{rh.STYLE}</style></head><body><h1>Winnow gate</h1>",
            head,
            rh.section(
                "Verdicts (transformer tier)",
                rh.table(verdict_rows(result), cols, left=("variant", "set", "ci95", "verdict"))
                + '<p class="muted">mean_diff_bpb: variant minus baseline, bits per byte, paired by seed '
                "(negative = the variant's models predict the text better).</p>",
            ),
            rh.section(
                "Proxy tier (bigram)",
                rh.table(
                    verdict_rows(result, "proxy_comparisons"),
                    cols,
                    left=("variant", "set", "ci95", "verdict"),
                )
                + f"<p>{rh.esc(agreement_sentence(result['agreement']))}</p>"
                + rh.table(
                    agreement_rows(result),
                    ["variant", "set", "proxy_diff_bpb", "proxy_verdict", "transformer_diff_bpb",
                     "transformer_verdict", "same_sign", "same_verdict"],
                    left=("variant", "set", "proxy_verdict", "transformer_verdict", "same_sign",
                          "same_verdict"),
                ),
            ),
            rh.section("Evaluation sets", sets),
            rh.section("Loss curves", _curves(result, fmt)),
            rh.section(
                "Wavy-loss check",
                rh.table(
                    wavy,
                    [
                        "variant",
                        "order_share",
                        "paired_order_share",
                        "flagged",
                        "residual_var_shard_order",
                        "residual_var_random_order",
                    ],
                    left=("variant",),
                ),
            ),
            rh.section("Speed", rh.table([result["speed"]], list(result["speed"]))),
            "</body></html>\n",
        ]
    )
