"""Unclosed wikitext constructs closed or removed before a page is read (:mod:`udfs.formats.mediawiki`).

A comment, template or table that is never closed would otherwise reach the text as raw markup
(``{{Infobox``, ``| name = ...``, ``{|``, ``<!--``). Each is handled as a training corpus wants it,
close to what MediaWiki shows a reader:

* ``<!--`` without ``-->``: MediaWiki hides everything after it, and so does this: the page ends there.
* ``{{`` without ``}}``: MediaWiki shows the braces and parameters as literal text. That is markup,
  not prose, and where the author meant the template to end cannot be known, so the template is
  removed: from ``{{`` to the end of its line, and the parameter lines (``| key = value``) right after
  it (or up to a closing tag on its line, such as the ``</ref>`` of the footnote it sits in). Prose on
  the same line after an unclosed ``{{`` is lost with it.
* ``{|`` without ``|}``: MediaWiki closes the table at the end of the page, making everything after
  it table cells. Here it is closed before the first blank line or heading after its rows, then read
  as any table (removed, or kept as rows with ``ingest.mediawiki.tables: keep``).

Comments, ``<nowiki>``, ``<pre>``, ``<math>``, source listings and the like are read as they are
(braces inside them are not templates). Braces pair before tables, as in MediaWiki's preprocessor: a
line ``|}}`` closes a template, not a table. A page holding template arguments (``{{{1}}}``) keeps its
templates as they are: its braces do not pair the way article templates do.

Source: MediaWiki preprocessor behaviour (https://www.mediawiki.org/wiki/Markup_spec: comments,
templates, tables).
"""

from __future__ import annotations

import re

UNCLOSED_KINDS: tuple[str, ...] = ("comment", "template", "table")
"""Kinds :func:`close_unclosed` counts, in this order (``meta["markup_repaired"]`` names them
``unclosed_<kind>``)."""

_TOKENS = re.compile(
    r"<!--|<(nowiki|pre|math|source|syntaxhighlight|chem|ce|hiero|score|timeline|graph)\b[^>]*?(/?)>"
    r"|\{\{|\}\}|^[ \t]*(\{\||\|\}(?!\}))",
    re.I | re.M,
)
_PARAM_LINE = re.compile(r"[ \t]*\|")
_CLOSING_TAG = re.compile(r"</[a-zA-Z]")
_TABLE_END = re.compile(r"\n[ \t]*\n|\n=")


def close_unclosed(source: str) -> tuple[str, dict[str, int]]:
    """The page's wikitext with unclosed comments, templates and tables handled (module docstring).

    Args:
        source: one page's wikitext.

    Returns:
        ``(wikitext, counts)``: the repaired wikitext (``source`` itself when nothing is unclosed) and
        the number of unclosed constructs per kind of :data:`UNCLOSED_KINDS` (only kinds found).

    >>> close_unclosed("Rye is a town.<!-- draft: more")
    ('Rye is a town.', {'comment': 1})
    >>> close_unclosed("{{Infobox town\\n| name = Rye\\nRye is a town.")
    ('\\nRye is a town.', {'template': 1})
    """
    if "{{" not in source and "{|" not in source and "<!--" not in source:
        return source, {}
    counts: dict[str, int] = {}
    templates: list[int] = []
    tables: list[int] = []
    pos = 0
    while (m := _TOKENS.search(source, pos)) is not None:
        t, pos = m.group(), m.end()
        if t == "<!--":
            end = source.find("-->", pos)
            if end < 0:
                source, counts["comment"] = source[: m.start()], 1
                break
            pos = end + 3
        elif m.group(1):  # a literal tag: skip to its closing tag (one never closed is text)
            close = None if m.group(2) else re.compile(rf"</{m.group(1)}\s*>", re.I).search(source, pos)
            pos = close.end() if close else pos
        elif t == "{{":
            templates.append(m.start())
        elif t == "}}":
            if templates:
                templates.pop()
        elif m.group(3) == "{|":
            tables.append(m.start(3))
        elif tables:
            tables.pop()
    cuts = [(a, _template_end(source, a)) for a in templates] if "{{{" not in source else []
    closes = [_table_end(source, a) for a in tables]
    if cuts:
        counts["template"] = len(cuts)
    if closes:
        counts["table"] = len(closes)
    return _apply(source, cuts, closes), {k: counts[k] for k in UNCLOSED_KINDS if k in counts}


def _apply(source: str, cuts: list[tuple[int, int]], closes: list[int]) -> str:
    """``source`` without the ``cuts`` spans (overlapping ones merged) and with ``|}`` inserted at each
    of ``closes`` outside them; positions are of ``source``."""
    out, pos = [], 0
    edits = sorted([(a, z) for a, z in cuts] + [(z, -1) for z in closes])
    for a, z in edits:
        if z < 0:  # a table close
            if a >= pos:
                out += [source[pos:a], "\n|}"]
                pos = a
        elif z > pos:
            out.append(source[pos:max(a, pos)])
            pos = z
    out.append(source[pos:])
    return "".join(out)


def _template_end(source: str, start: int) -> int:
    """End of an unclosed template opened at ``start``: its line, and the parameter lines after it; or
    a closing tag on its line (``</ref>``: the template was inside the element)."""
    end = source.find("\n", start)
    tag = _CLOSING_TAG.search(source, start, len(source) if end < 0 else end)
    if tag:
        return tag.start()
    while end >= 0 and _PARAM_LINE.match(source, end + 1):
        end = source.find("\n", end + 1)
    return len(source) if end < 0 else end


def _table_end(source: str, start: int) -> int:
    """Where an unclosed table opened at ``start`` is closed: before the first blank line or heading."""
    m = _TABLE_END.search(source, start)
    return m.start() if m else len(source)
