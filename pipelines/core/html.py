"""Small HTML helpers shared by the run report and the sections other packages add to it.

Document text is untrusted: every value that reaches a page goes through :func:`esc`
(:func:`html.escape`, quotes included), and :func:`table` escapes every cell.
"""

from __future__ import annotations

import html
from typing import Any


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
