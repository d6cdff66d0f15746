"""The tokenizer audit's section of the run report (HTML in the report's look) and its ``stats.json`` part.

The report stage asks the audit's hooks (:mod:`pipelines.audit.hooks`) for its part: :func:`report_stats`
puts the audit into ``stats.json`` (``stats["audit"]``) and :func:`render_section` draws it: the findings
first (errors, warnings, then notes, each with its fix), then the cost per source and language, round
trip, prompts, coverage, and whitespace and digits per source. Every value goes through
:func:`pipelines.core.html.esc` (tables escape their cells).
"""

from __future__ import annotations

import json
from typing import Any

from pipelines.core.html import esc, table
from pipelines.core.words import plural

SECTION_TITLE = "Tokenizer audit"

_COLOURS = {"error": "#b00020", "warn": "#a15c00", "info": "#555"}


def read_audit(spark: Any, cfg: Any) -> dict[str, Any] | None:
    """``<run.root>/audit/audit.json`` as written by the audit job, or None when it was never run."""
    from pipelines.audit.job import audit_path
    from pipelines.core import tables

    raw = tables.read_bytes(spark, audit_path(cfg), cfg)
    return None if raw is None else json.loads(raw)


def report_stats(audit: dict[str, Any]) -> dict[str, Any]:
    """The part of the audit that goes into ``stats.json``: findings, flag count, cost, round trip, prompts,
    coverage counts (without the token listings, which stay in ``audit.json``), engines, whitespace and
    digit runs; everything :func:`render_section` draws."""
    cov = {k: v for k, v in audit["coverage"].items() if not k.endswith("_tokens")}
    return {
        "flags": audit["flags"],
        "findings": audit["findings"],
        "tokenizer": audit["tokenizer"],
        "cost": audit["cost"],
        "roundtrip": audit["roundtrip"],
        "prompts": audit["prompts"],
        "coverage": cov,
        "engines": audit["engines"],
        "whitespace_digits": audit.get("whitespace_digits") or {},
    }


def _findings_html(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return "<p>No findings: the tokenizer and the data fit on every check.</p>"
    items = []
    for f in findings:
        colour = _COLOURS.get(f["severity"], "#555")
        examples = ", ".join(esc(json.dumps(e, ensure_ascii=False)) for e in f["examples"][:5])
        items.append(
            f'<li><b style="color:{colour}">{esc(f["severity"])}</b> <code>{esc(f["id"])}</code> '
            f"<b>{esc(f['title'])}</b><br>{esc(f['detail'])}<br><i>fix:</i> {esc(f['fix'])}"
            + (f'<br><span class="muted">examples: {examples}</span>' if examples else "")
            + "</li>"
        )
    return "<ol>" + "".join(items) + "</ol>"


def _cost_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **r,
            "tokens/word p10-p50-p90": " / ".join(
                "–" if q is None else f"{q:.2f}" for q in r["tokens_per_word_p10_p50_p90"]
            ),
            "unknown %": 100 * r["unknown_share"],
            "byte fallback %": 100 * r["byte_fallback_share"],
        }
        for r in rows
    ]


def render_section(audit: dict[str, Any]) -> str:
    """The report section of an audit document (:func:`pipelines.audit.findings.summarize` output).

    Returns:
        HTML: an ``<h2>`` and its body, every value escaped.
    """
    tok = audit["tokenizer"]
    by = {s: sum(f["severity"] == s for f in audit["findings"]) for s in ("error", "warn", "info")}
    out = [
        f"<h2>{esc(SECTION_TITLE)}</h2>",
        f"<p>tokenizer <code>{esc(tok['spec'])}</code> · {tok['vocab_size']:,} ids · shard dtype "
        f"{esc(tok['shard_dtype'])} · {plural(by['error'], 'error')}, {plural(by['warn'], 'warning')}, "
        f"{plural(by['info'], 'note')}</p>",
        _findings_html(audit["findings"]),
    ]
    cols = [
        "group",
        "docs",
        "words",
        "tokens",
        "tokens_per_word",
        "tokens/word p10-p50-p90",
        "bytes_per_token",
        "unknown %",
        "byte fallback %",
    ]
    for dim in ("source", "lang"):
        if audit["cost"].get(dim):
            out.append(
                f"<h3>Cost per {esc(dim)}</h3>" + table(_cost_rows(audit["cost"][dim]), cols, left=("group",))
            )
    rt = audit["roundtrip"]
    out.append(
        "<h3>Round trip</h3>"
        + table(
            [
                {
                    k: rt.get(k)
                    for k in (
                        "checked",
                        "ok",
                        "lost_bytes",
                        "whitespace",
                        "normalisation",
                        "other",
                        "invalid_utf8",
                    )
                }
            ],
            ["checked", "ok", "lost_bytes", "whitespace", "normalisation", "other", "invalid_utf8"],
        )
    )
    if audit["prompts"]:
        rows = [
            {**r, "last tokens": ", ".join(f"{t} ({n})" for t, n in r["endings"]) if "endings" in r
             else ", ".join(f"{t!r} ({n})" for t, n in r["last_tokens"])}
            for r in audit["prompts"]
        ]
        out.append(
            "<h3>Prompt boundaries</h3>"
            + table(
                rows,
                ["set", "prompts", "ending_in_whitespace", "affected", "last tokens", "fix"],
                left=("set", "last tokens", "fix"),
            )
        )
    cov = audit["coverage"]
    out.append(
        "<h3>Vocabulary coverage</h3>"
        + table(
            [
                {
                    "tokens": cov["tokens"],
                    "vocab_size": cov["vocab_size"],
                    "never seen": cov["never_seen"],
                    f"seen < {cov['min_count']}": cov["rare"],
                    "judged": str(cov["judged"]),
                }
            ],
            ["tokens", "vocab_size", "never seen", f"seen < {cov['min_count']}", "judged"],
            left=("judged",),
        )
    )
    eng = audit["engines"]
    if eng.get("checked"):
        out.append(
            f"<p>engines: {eng['differ']:,} of {eng['checked']:,} sampled documents differ between hf and "
            "tiktoken</p>"
        )
    wd = audit.get("whitespace_digits") or {}
    if wd:
        buckets = next(iter(wd.values()))["runs_buckets"]
        rows = [
            {"source": s, "kind": k, **dict(zip(buckets, v[k], strict=True))}
            for s, v in wd.items()
            for k in ("spaces", "tabs", "newlines", "digit_runs")
        ]
        out.append(
            "<h3>Whitespace and digit runs per source (characters per run)</h3>"
            + table(rows, ["source", "kind", *buckets], left=("source", "kind"))
        )
        drows = [{"source": s, **v["digit_tokens"]} for s, v in wd.items()]
        out.append(
            "<h4>Digits per all-digit token</h4>"
            + table(drows, ["source", *next(iter(wd.values()))["digit_tokens"]], left=("source",))
        )
    return "\n".join(out) + "\n"
