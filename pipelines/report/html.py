"""Render the run report's statistics (:func:`pipelines.report.stage.collect_stats`) as one static HTML page.

The page opens from disk with no network: plots are matplotlib figures embedded as ``data:`` images
(SVG or PNG, ``report.plot_format``), the style sheet is inline. Document text is untrusted, so every
value that reaches the page goes through :func:`pipelines.core.html.esc`, and a Content-Security-Policy
forbids scripts, remote loads and inline event handlers, should anything ever slip through.
"""

from __future__ import annotations

import json
from typing import Any

from pipelines.core import hooks
from pipelines.core.chain import PACKAGES
from pipelines.core.config import WinnowConfig
from pipelines.core.html import CSP, STYLE, esc, figure_uri, img, new_figure, section, table
from pipelines.report.sections import MIX_COLUMNS

HIST_MARGINS = {"left": 0.68, "right": 0.12, "bottom": 0.42, "top": 0.27}
"""Fixed margins of a histogram, inches: room for y tick labels of up to 6 digits (counts up to
``report.hist_sample_rows`` = 100,000) or log-scale powers of ten at 7 pt, the 8 pt y label, one row of
7 pt x tick labels with the offset text below them (``1e8``) and the 9 pt title."""


KEPT_COLOR = "#0072B2"
REMOVED_COLOR = "#E69F00"
"""Kept and removed documents: blue and orange of the Okabe-Ito palette (Okabe & Ito, "Color Universal
Design", 2008), told apart by readers with any of the common colour-vision deficiencies; the removed
part is also hatched, and the two differ in lightness, so a grey print tells them apart too."""

THRESHOLD_COLOR = "#000000"
"""Threshold lines and arrows: black, apart from both data colours."""


def histogram(values: list[float] | dict[str, list[float]], title: str, fmt: str, bins: int,
              lines: list[dict[str, Any]] = (), log_y: bool = False) -> str:
    """An ``<img>`` of a histogram of ``values``, the x-axis spanning the data, with the thresholds in ``lines``.

    Args:
        values: one series, or ``{"kept": [...], "removed": [...]}``: the two stacked over the same bins,
            kept in :data:`KEPT_COLOR`, removed on top in :data:`REMOVED_COLOR`, hatched.
        title: the plot's title (also its alt text).
        fmt: ``svg`` or ``png``.
        bins: bins over ``[min, max]`` of all values.
        lines: thresholds ``{key, keeps, value}``: a dashed vertical line where the value lies within the
            data, else an arrow at that edge of the axes pointing to it, labelled with the value (a line
            at 100,000 drew the data of a 0-2,000 signal into one bar).
        log_y: a log-scaled count axis (token lengths).

    Returns:
        The ``<img>`` element (``data:`` URI). The count axis has integer ticks.
    """
    import numpy as np
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    series = values if isinstance(values, dict) else {"": values}
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in series.items()}
    edges = np.histogram_bin_edges(np.concatenate(list(arrays.values())), bins=bins)
    fig, ax = new_figure(HIST_MARGINS)
    # One filled step outline per series instead of ax.hist's one Rectangle per bin. On a log axis an area
    # down to 0 has no finite bottom: it starts at 0.5 documents, below a bin of one document.
    bottom = np.full(len(edges) - 1, 0.5 if log_y else 0.0)
    handles = []
    for name, arr in arrays.items():
        counts = np.histogram(arr, bins=edges)[0] + bottom
        removed = name == "removed"
        ax.stairs(counts, edges, baseline=bottom, fill=True, facecolor=REMOVED_COLOR if removed else KEPT_COLOR,
                  edgecolor="#333333" if removed else KEPT_COLOR, hatch="///" if removed else None, linewidth=0.6)
        if name:
            handles.append(Patch(facecolor=REMOVED_COLOR if removed else KEPT_COLOR, hatch="///" if removed else None,
                                 edgecolor="#333333" if removed else KEPT_COLOR, label=f"{name} ({len(arr)})"))
        bottom = counts
    lo, hi = float(edges[0]), float(edges[-1])
    pad = (hi - lo) * 0.02 or 0.5
    ax.set_xlim(lo - pad, hi + pad)
    _thresholds(ax, lines, lo - pad, hi + pad, handles)
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="best", frameon=True, framealpha=0.85)
    if log_y:
        ax.set_yscale("log")
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("documents", fontsize=8)
    ax.tick_params(labelsize=7)
    return img(figure_uri(fig, fmt), title)


def _thresholds(ax: Any, lines: Any, lo: float, hi: float, handles: list[Any]) -> None:
    """Each threshold of ``lines`` as a dashed line within ``[lo, hi]`` (added to ``handles``), else as an
    arrow at the left or right edge pointing towards it, labelled with its value."""
    from matplotlib.lines import Line2D

    stacked = {"left": 0, "right": 0}
    for t in lines:
        label = f"{t['key'].rsplit('.', 1)[-1]}: {t['keeps']} {t['value']:g} kept"
        if lo <= t["value"] <= hi:
            # A legend, not text along the line: rotated labels ran over the bars and off the axes.
            ax.axvline(t["value"], color=THRESHOLD_COLOR, linestyle="--", linewidth=1.1)
            handles.append(Line2D([], [], color=THRESHOLD_COLOR, linestyle="--", linewidth=1.1, label=label))
            continue
        side = "right" if t["value"] > hi else "left"
        y = 0.9 - 0.12 * stacked[side]
        stacked[side] += 1
        tip, tail = (0.995, 0.93) if side == "right" else (0.005, 0.07)
        ax.annotate("", xy=(tip, y), xytext=(tail, y), xycoords="axes fraction",
                    arrowprops={"arrowstyle": "-|>", "color": THRESHOLD_COLOR, "linewidth": 1.1})
        ax.annotate(f"{label} (off the axis)", xy=(tail, y),
                    xycoords="axes fraction", ha="right" if side == "right" else "left", va="center",
                    fontsize=6.5, xytext=(-3 if side == "right" else 3, 0), textcoords="offset points",
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})


def bars(labels: list[str], values: list[float], title: str, fmt: str, ylabel: str = "documents") -> str:
    """An ``<img>`` of a bar chart (one bar per label, in the given order); the count axis has integer ticks."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = new_figure()
    ax.bar(range(len(values)), values, color=KEPT_COLOR)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xticks(range(len(values)), [str(x)[:24] for x in labels], rotation=60, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    return img(figure_uri(fig, fmt), title)


# ---------------------------------------------------------------------------------------- sections
def _samples_html(samples: list[dict[str, Any]]) -> str:
    if not samples:
        return '<p class="muted">no removed documents</p>'
    parts, current = [], None
    for s in samples:
        key = (s["stage"], s["reason"])
        if key != current:
            parts.append(f"<h3>{esc(s['stage'])} · {esc(s['reason'])}</h3>")
            current = key
        signals = ", ".join(f"{esc(k)}={esc(_fmt(v))}" for k, v in sorted(s["signals"].items()))
        dup = f" · duplicate of <code>{esc(s['duplicate_of'])}</code>" if s.get("duplicate_of") else ""
        parts.append(
            f'<div class="sample"><div><code>{esc(s["doc_id"])}</code> · {esc(s.get("source"))} · '
            f'{esc(s["n_chars"])} chars{dup}</div><div class="muted">{signals}</div>'
            f"<pre>{esc(s['text'])}</pre></div>"
        )
    return "\n".join(parts)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _contamination_html(c: dict[str, Any]) -> str:
    rows = [{**s, "skipped": sum(s["skipped"].values()),
             "top items (documents)": ", ".join(f"{t['item_id']} ({t['docs']})" for t in s["top_items"])} for s in c["sets"]]
    body = table(rows, ["set", "items", "indexed", "skipped", "items_found", "docs_matched", "ngrams_matched",
                        "top items (documents)"], left=("set", "top items (documents)"))
    actions = ", ".join(f"{k}: {v}" for k, v in c["actions"].items())
    return body + (f'<p class="muted">documents by action: {esc(actions)}; join: {esc(c["join"] or "-")}. '
                   "n-grams matched counts (document, n-gram) pairs.</p>")


def _header(stats: dict[str, Any]) -> list[str]:
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
        f"<title>Winnow run report: {esc(stats['run']['root'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Winnow run report</h1><p>root <code>{esc(stats['run']['root'])}</code> · seed {esc(stats['run']['seed'])}"
        f" · config <code>{esc(stats['run']['config_fingerprint'][:12])}</code></p>",
    ]


def _funnel(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    funnel = stats["funnel"]
    body = table(funnel, ["step", "table", "documents", "bytes", "tokens", "shard_bytes"], left=("step", "table"))
    body += '<p class="muted">bytes: UTF-8 text; shard_bytes: token files on disk.</p>'
    if funnel:
        body += '<div class="plots">' + bars([r["step"] for r in funnel], [r["documents"] or 0 for r in funnel],
                                             "documents after each stage", fmt) + "</div>"
    return section("Funnel", body)


def _stages(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    return section("Stages", table(
        [{**r, "removed": sum(r["removed"].values()), "quarantined": sum(r["quarantined"].values())} for r in stats["stages"]],
        ["stage", "rows_in", "rows_out", "removed", "quarantined", "elapsed_s", "finished_at"], left=("stage", "finished_at")))


def _removals(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    return section("Removals by stage and reason", table(stats["removals"], ["stage", "reason", "documents", "bytes"], left=("stage", "reason"))
                    + '<p class="muted">A document failing several rules counts under each of them here, so the rows'
                    " can add up to more than the stage removed (Stages: removed).</p>")


def _filter_breakdown(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    fb = stats.get("filter_breakdown")
    if not fb:
        return None
    from pipelines.filter.report import breakdown_rows

    cols = ["name", "in", "kept", "removed", "reasons"]
    body = (f"<p>filter removals: language {fb['removed_language']}, quality rules {fb['removed_quality']}"
            f" · documents with replacement characters (U+FFFD in the ingested text): {fb['replacement_char_documents']}</p>"
            + "<h3>per source</h3>" + table(breakdown_rows(fb, "by_source"), cols, left=("name", "reasons"))
            + "<h3>per profile</h3>" + table(breakdown_rows(fb, "by_profile"), cols, left=("name", "reasons"))
            + '<p class="muted">Each removed document counts once: under its language reason if it has one,'
            " else its first failing rule.</p>")
    return section("Filter by source and profile", body)


def signals_section(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    """The quality-signal histograms' section of the page from ``stats["signal_values"]`` and
    ``stats["signals"]`` alone (the report stage draws it while its Spark queries run), or None."""
    if not stats["signal_values"]:
        return None
    from pipelines.filter.report import constant_signals

    both = {c: v["kept"] + v["removed"] for c, v in stats["signal_values"].items()}
    const = constant_signals(both)
    plots = [histogram(v, c, fmt, bins, stats["signals"][c]["thresholds"]) for c, v in sorted(stats["signal_values"].items())
             if both[c] and c not in const]
    notes = "".join(f"<li><code>{esc(c)}</code> = {esc(_fmt(v))} for every sampled document</li>" for c, v in sorted(const.items()))
    return section("Quality signals (kept and filter-removed, seeded sample; dashed or arrow: thresholds)",
                    '<div class="plots">' + "".join(plots) + "</div>" + (f"<ul>{notes}</ul>" if notes else ""))


def _language_mix(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    mix = stats["language_mix"]
    if not (mix["kept"] or mix["removed"]):
        return None
    body = "".join(
        f"<h3>{esc(k)}</h3>" + table(v, ["value", "documents"], left=("value",))
        + ('<div class="plots">' + bars([r["value"] for r in v], [r["documents"] for r in v], f"language mix ({k})", fmt) + "</div>" if v else "")
        for k, v in mix.items()
    )
    return section("Language mix", body)


def _clusters(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    cs = stats["cluster_sizes"]
    if not cs:
        return None
    return section("Duplicate clusters by size", table(cs, ["kind", "size", "clusters"], left=("kind",))
                    + '<div class="plots">' + bars([f"{r['kind']}:{r['size']}" for r in cs], [r["clusters"] for r in cs],
                                                   "clusters per size", fmt, "clusters") + "</div>")


def _refs(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    if not stats["broken_refs"]:
        return None
    return section("Broken references by kind", table(stats["broken_refs"], ["kind", "dangling_mentions"], left=("kind",)))


def _contamination(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    if not stats.get("contamination"):
        return None
    return section("Contamination (evaluation overlap, decontam stage)", _contamination_html(stats["contamination"]))


def _pii(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    pii = stats.get("pii")
    if not pii:
        return None
    docs = pii["documents"]
    body = table([{"documents with findings": sum(v for k, v in docs.items() if k not in ("none", "skipped")),
                   "redacted": docs.get("redact", 0), "flagged": docs.get("flag", 0), "dropped": docs.get("drop", 0)}],
                 ["documents with findings", "redacted", "flagged", "dropped"])
    body += table(pii["by_kind"], ["kind", "findings", "documents"], left=("kind",))
    if pii["dropped"]:
        body += table(pii["dropped"], ["reason", "documents"], left=("reason",))
    return section("Personal data and secrets (pii; values are never stored, only hashed)", body)


def _token_lengths(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    if not stats["token_lengths"]:
        return None
    return section("Token length per document (seeded sample)",
                    '<div class="plots">' + histogram(stats["token_lengths"], "tokens per document", fmt, bins, log_y=True) + "</div>")


def _round_trip(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    if not stats["tokenizer_round_trip"]:
        return None
    return section("Tokenizer round trip", f"<pre>{esc(json.dumps(stats['tokenizer_round_trip'], indent=1, sort_keys=True, default=str))}</pre>")


def _shards(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    sh = stats["shards"]
    if not sh:
        return None
    body = table([{"shards": sh["n_shards"], "dtype": sh["dtype"], "formats": ", ".join(sh["formats"]),
                   "max/mean tokens": sh["max_over_mean"]}], ["shards", "dtype", "formats", "max/mean tokens"], left=("dtype", "formats"))
    if sh["tokens_per_shard"]:
        body += '<div class="plots">' + bars([str(i) for i in range(sh["n_shards"])], sh["tokens_per_shard"],
                                             "tokens per shard", fmt, "tokens") + "</div>"
    if sh.get("splits"):
        body += "<h3>Train / validation split</h3>" + table(
            [{"set": k, **v} for k, v in sh["splits"].items()], ["set", "shards", "documents", "tokens", "mds_samples"], left=("set",))
        split = sh.get("split") or {}
        body += f"<p>held out: {esc(str(split.get('validation')))} ({esc(str(split.get('unit')))}), by sha256(seed:validation:doc_id)</p>"
    if sh.get("mix"):
        body += "<h3>Data mix of train (shard.mix): asked vs realised</h3>" + table(sh["mix"], list(MIX_COLUMNS), left=("source",))
    for title, key in (("Balance", "balance"), ("Shuffle quality", "shuffle_quality"), ("Token share by source", "token_share_by_source")):
        body += f"<h3>{title}</h3><pre>{esc(json.dumps(sh[key], indent=1, sort_keys=True, default=str))}</pre>"
    return section("Shards", body)


def _figures(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    figures = {r["stage"]: r["extra"] for r in stats["stages"] if r["extra"]}
    if not figures:
        return None
    return section("Stage figures", f"<pre>{esc(json.dumps(figures, indent=1, sort_keys=True, default=str))}</pre>")


def _warnings(stats: dict[str, Any], fmt: str, bins: int) -> str | None:
    lines = [w["line"] for w in (stats.get("filter_breakdown") or {}).get("source_warnings") or []]
    if not lines:
        return None
    return section("Warnings", "<ul>" + "".join(f"<li>filter: {esc(x)}</li>" for x in lines) + "</ul>")


_PARTS = (_warnings, _funnel, _stages, _removals, _filter_breakdown, signals_section, _language_mix, _clusters, _refs, _contamination,
          _pii, _token_lengths, _round_trip, _shards, _figures)
"""The page's sections in order; each returns its HTML, or None when the run has nothing for it."""


def render_html(stats: dict[str, Any], cfg: WinnowConfig, drawn: dict[str, str | None] | None = None) -> str:
    """The report page for ``stats``: one self-contained HTML document (UTF-8 text).

    Args:
        drawn: sections already drawn from the same ``stats``, by the name of the function that draws
            them (``{"signals_section": html}``), used as they are.
    """
    fmt, bins = cfg.report.plot_format, cfg.report.hist_bins
    drawn = drawn or {}
    out = _header(stats)
    parts = (drawn[part.__name__] if part.__name__ in drawn else part(stats, fmt, bins) for part in _PARTS)
    out += [html for html in parts if html is not None]
    out += [render(stats[name]) for name, render in hooks.each("report_section", PACKAGES) if name in stats]
    out.append(section(f"Sampled removed documents (seed {stats['run']['seed']}, up to {cfg.report.samples_per_reason} per reason)",
                        _samples_html(stats["samples"])))
    out.append("</body></html>\n")
    return "\n".join(out)
