"""Small HTML helpers shared by the run report, the sections other packages add to it and the pages of
the jobs beside the chain (the gate): escaping, tables, sections, the style sheet and embedded plots.

Document text is untrusted: every value that reaches a page goes through :func:`esc`
(:func:`html.escape`, quotes included), and :func:`table` escapes every cell.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'none'"
"""No script of any origin, images only from ``data:`` URIs, inline CSS only."""

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.muted{color:#777}
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;border:1px solid #e4e4e4;\
padding:.6em;max-height:18em;overflow:auto}
.sample{margin:1em 0 1.5em}.plots img{max-width:49%;vertical-align:top}
"""


def esc(value: Any) -> str:
    """HTML-escape ``value`` (quotes included); None becomes an empty string.

    >>> esc('<a href="x">'), esc(None)
    ('&lt;a href=&quot;x&quot;&gt;', '')
    """
    return "" if value is None else html.escape(str(value), quote=True)


def num(v: Any) -> str:
    """A table cell's value: ints with thousands separators, floats to 4 significant digits, None as a dash.

    >>> num(1234567), num(0.123456), num(None)
    ('1,234,567', '0.1235', '<span class="muted">–</span>')
    """
    if v is None:
        return '<span class="muted">–</span>'
    if isinstance(v, float):
        return esc(f"{v:,.4g}")
    if isinstance(v, int):
        return esc(f"{v:,}")
    return esc(v)


def table(rows: list[dict[str, Any]], columns: list[str], left: tuple[str, ...] = ()) -> str:
    """An HTML table of ``rows`` with the given ``columns``; every cell escaped.

    Args:
        rows: one mapping per row; a missing key is an empty (dash) cell.
        columns: the keys shown, in order, also the header.
        left: columns aligned left and shown as text (the others are numbers, aligned right).

    Returns:
        ``<table>`` HTML, or a muted "nothing to show" paragraph when ``rows`` is empty.
    """
    if not rows:
        return '<p class="muted">nothing to show</p>'
    head = "".join(f'<th class="{"l" if c in left else ""}">{esc(c)}</th>' for c in columns)
    def cell(r: dict[str, Any], c: str) -> str:
        return f'<td class="l">{esc(r.get(c))}</td>' if c in left else f"<td>{num(r.get(c))}</td>"

    body = "".join("<tr>" + "".join(cell(r, c) for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def section(title: str, body: str) -> str:
    """A page section: an ``<h2>`` of ``title`` (escaped) over ``body`` (HTML, not escaped)."""
    return f"<h2>{esc(title)}</h2>\n{body}\n"


# ------------------------------------------------------------------------------------------- plots
SVG_SALT = "winnow-report"
"""matplotlib's ``svg.hashsalt``: the ids inside an SVG are hashes of their content salted with it
(unset, matplotlib salts them with a random UUID, and the same stats gave another page each time)."""


FIGSIZE = (5.2, 2.8)
"""Size of every plot, inches (572 x 308 px at the PNG resolution of 110 dpi)."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display), imported on first use: only pages that
    draw plots need it, and importing it costs about a second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(margins: dict[str, float] | None = None) -> tuple[Any, Any]:
    """A figure of :data:`FIGSIZE` with one axes: at fixed ``margins`` (inches) when given, else laid
    out by the constrained layout engine.

    Either way :func:`figure_uri` saves without ``bbox_inches="tight"``, which drew every figure twice
    (once to measure, once to save). A layout engine costs the same measuring draw, so it is kept for
    the bar charts only, whose rotated category labels have any length; a histogram's texts have a
    known size, and fixed margins draw it once.
    """
    plt = pyplot()
    if margins is None:
        return plt.subplots(figsize=FIGSIZE, layout="constrained")
    w, h = FIGSIZE
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fig.subplots_adjust(left=margins["left"] / w, right=1 - margins["right"] / w,
                        bottom=margins["bottom"] / h, top=1 - margins["top"] / h)
    return fig, ax


def figure_uri(fig: Any, fmt: str) -> str:
    """``fig`` saved as ``fmt`` (``svg`` or ``png``) in a ``data:`` URI, the same bytes for the same figure;
    the figure is closed."""
    import matplotlib

    buf = io.BytesIO()
    # metadata Date=None keeps the SVG free of a timestamp and a fixed salt its ids random-free, so the
    # same stats give the same page.
    with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
        fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else None, dpi=110)
    pyplot().close(fig)
    mime = "image/svg+xml" if fmt == "svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode()}"


def img(uri: str, alt: str) -> str:
    """An ``<img>`` of a ``data:`` URI (:func:`figure_uri`) with its alt text, both escaped."""
    return f'<img src="{esc(uri)}" alt="{esc(alt)}">'
