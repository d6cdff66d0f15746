"""Cost per source and language: the figures and the findings on unknown tokens, byte fallback and fertility.

A group's fertility (tokens per word, bytes per token) is compared with the corpus median document's; a
group further than ``audit.max_fertility_ratio`` either way is flagged. Words come from the text sample
(:mod:`udfs.tokenizer_text`), bytes and tokens from every document.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipelines.audit.config import AuditConfig
from pipelines.audit.finding import finding, share
from udfs import tokenizer_audit as ta


def cost_rows(part: ta.Partial, dim: str) -> list[dict[str, Any]]:
    """Per group of dimension ``dim`` (``source`` or ``lang``): totals, pooled and quantile fertility.

    Returns:
        Rows sorted by group name: ``group``, the :data:`udfs.tokenizer_audit.TOTALS` counts,
        ``tokens_per_word`` (pooled over the text sample; None when it holds no word) and
        ``bytes_per_token`` (pooled over every document), their per-document
        ``p10``/``p50``/``p90``, ``unknown_share`` and ``byte_fallback_share`` (per token).
    """
    rows = []
    for (d, name), g in sorted(part.groups.items()):
        if d != dim:
            continue
        t = {k: g.total(k) for k in ta.TOTALS}
        tpw = ta.fertility_quantiles(g.tokens_per_word)
        bpt = ta.fertility_quantiles(g.bytes_per_token)
        rows.append(
            {
                "group": name,
                **t,
                "tokens_per_word": round(t["text_tokens"] / t["words"], 4) if t["words"] else None,
                "bytes_per_token": round(share(t["bytes"], t["tokens"]), 4),
                "tokens_per_word_p10_p50_p90": [None if q is None else round(q, 3) for q in tpw],
                "bytes_per_token_p10_p50_p90": [None if q is None else round(q, 3) for q in bpt],
                "unknown_share": share(t["unknown"], t["tokens"]),
                "byte_fallback_share": share(t["byte_fallback"], t["tokens"]),
            }
        )
    return rows


def corpus_medians(part: ta.Partial) -> tuple[float | None, float | None]:
    """Median document's tokens per word and bytes per token over the whole corpus (source groups)."""
    tpw = sum(
        (g.tokens_per_word for (d, _), g in part.groups.items() if d == "source"),
        np.zeros(len(ta.FERTILITY_EDGES) + 1, np.int64),
    )
    bpt = sum(
        (g.bytes_per_token for (d, _), g in part.groups.items() if d == "source"),
        np.zeros(len(ta.FERTILITY_EDGES) + 1, np.int64),
    )
    return ta.fertility_quantiles(tpw, (0.5,))[0], ta.fertility_quantiles(bpt, (0.5,))[0]


def cost_findings(part: ta.Partial, acfg: AuditConfig) -> list[dict[str, Any]]:
    """``audit.unknown_tokens``, ``audit.byte_fallback`` and ``audit.fertility`` findings of every source and
    language, each weighted by its share of the corpus's tokens."""
    out = []
    med_tpw, med_bpt = corpus_medians(part)
    corpus = max(sum(g.total("tokens") for (d, _), g in part.groups.items() if d == "source"), 1)
    for dim in ("source", "lang"):
        for r in cost_rows(part, dim):
            label = f"{dim} {r['group']!r}"
            if acfg.max_unknown_share is not None and r["unknown_share"] > acfg.max_unknown_share:
                out.append(
                    finding(
                        "audit.unknown_tokens",
                        "error",
                        f"unknown tokens in {label}",
                        f"{r['unknown']:,} of {r['tokens']:,} tokens ({r['unknown_share']:.2%}) are the "
                        f"unknown token: that text is lost (max_unknown_share={acfg.max_unknown_share})",
                        "use a tokenizer with byte fallback or a byte-level BPE, or one trained on this "
                        "language",
                        r["unknown"] / corpus,
                        [r["group"]],
                    )
                )
            if (
                acfg.max_byte_fallback_share is not None
                and r["byte_fallback_share"] > acfg.max_byte_fallback_share
            ):
                out.append(
                    finding(
                        "audit.byte_fallback",
                        "warn",
                        f"byte fallback in {label}",
                        f"{r['byte_fallback_share']:.2%} of its tokens are byte-fallback pieces "
                        f"(max_byte_fallback_share={acfg.max_byte_fallback_share}): its text is spelled in "
                        "bytes",
                        "extend the vocabulary for this script or language, or accept the cost",
                        r["byte_fallback"] / corpus,
                        [r["group"]],
                    )
                )
            out += _fertility(r, label, med_tpw, med_bpt, acfg, r["tokens"] / corpus)
    return out


def _fertility(
    r: dict[str, Any],
    label: str,
    med_tpw: float | None,
    med_bpt: float | None,
    acfg: AuditConfig,
    weight: float,
) -> list[dict[str, Any]]:
    limit = acfg.max_fertility_ratio
    if limit is None or r["words"] < acfg.min_group_words or not med_tpw or not med_bpt:
        return []
    tpw_ratio = r["tokens_per_word"] / med_tpw
    bpt_ratio = r["bytes_per_token"] / med_bpt
    far = []
    if not 1 / limit <= tpw_ratio <= limit:
        far.append(
            f"tokens per word {r['tokens_per_word']:.2f} is {tpw_ratio:.2f}x the corpus median {med_tpw:.2f}"
        )
    if not 1 / limit <= bpt_ratio <= limit:
        far.append(
            f"bytes per token {r['bytes_per_token']:.2f} is {bpt_ratio:.2f}x the corpus median {med_bpt:.2f}"
        )
    if not far:
        return []
    return [
        finding(
            "audit.fertility",
            "warn",
            f"fertility outlier: {label}",
            "; ".join(far) + f" (max_fertility_ratio={limit}): it costs that many more (or fewer) "
            "tokens per unit of text; mojibake, a script the tokenizer splits into bytes, or markup",
            "inspect its documents (winnow inspect); repair encoding, drop it, or choose a tokenizer "
            "that covers it",
            weight,
            [r["group"]],
        )
    ]


def whitespace_digits(part: ta.Partial) -> dict[str, Any]:
    """Per source: whitespace runs by kind and length, digit runs in the text, digits per all-digit token."""
    out = {}
    for (d, name), g in sorted(part.groups.items()):
        if d != "source":
            continue
        out[name] = {
            "runs_buckets": list(ta.RUN_BUCKETS),
            **{k: g.ws_runs[i].tolist() for i, k in enumerate(ta.WS_KINDS)},
            "digit_runs": g.digit_runs.tolist(),
            "digit_tokens": dict(zip(ta.DIGIT_TOKEN_BUCKETS, g.digit_tokens.tolist(), strict=True)),
        }
    return out
