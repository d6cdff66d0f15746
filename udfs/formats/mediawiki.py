"""MediaWiki XML dumps (``pages-articles*.xml[.bz2]``): one document per article, wikitext to text;
the XML is streamed with lxml ``iterparse``, a ``<page>`` at a time.

Skipped, and counted in the file's summary (``skipped.mediawiki_redirect``,
``skipped.mediawiki_namespace_<n>``): redirects, and pages outside the article namespaces
(``ParseOptions.mediawiki_namespaces``, default ``0``: talk, user, template, file, category... pages
are not articles).

Wikitext: section headings become their own paragraphs; links become their text; ``[[File:..]]``,
``[[Category:..]]`` (and their names in the dump's own language, read from its ``<siteinfo>``) and
interlanguage links are removed; bold and italic marks are removed as MediaWiki reads them.
Templates that carry text (convert, dates, coordinates, language and pronunciation templates,
citations...: :mod:`udfs.formats.wikitemplates`) are rendered to it; the others are removed, or keep
their parameter values (``mediawiki_templates = "params"``), and the punctuation that framed only a
removed template is repaired (no empty ``()`` left). ``meta["templates_rendered"]`` and
``meta["templates_dropped"]`` count them per article (templates nested in a rendered one count too).
``<ref>`` footnotes (and footnote templates) are removed or kept inline in parentheses; tables are
removed or kept as a caption line and one line per row, cells separated by tabs. What was removed
is recorded in ``meta["dropped_structures"]`` (``reference``, ``table``), as for JATS. Comments,
templates and tables that are never closed are handled before either reader sees the page
(:mod:`udfs.formats.wikirepair`); a date template whose date cannot exist (month 13, day 32) is
dropped (:class:`udfs.formats.wikivalues.InvalidDate`). Both are counted in ``meta["markup_repaired"]``
(``unclosed_template=2,invalid_date=1``).

Two readers give the same text: :mod:`udfs.formats.wikifast` reads the common constructs with
regular expressions; a page it cannot read exactly is parsed with mwparserfromhell and walked here.

Source: MediaWiki export format (https://www.mediawiki.org/xml/export-0.11.xsd), mwparserfromhell
0.7 (https://mwparserfromhell.readthedocs.io).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from udfs.formats.chunkfile import ChunkFile
from udfs.formats.collector import Collector
from udfs.formats.wikifast import fast_render, strip_quotes
from udfs.formats.wikirepair import close_unclosed
from udfs.formats.wikitemplates import (
    HOLE,
    REFERENCE_TEMPLATES,
    Params,
    normalize_name,
    repair_holes,
)
from udfs.formats.wikitemplates import render as render_template
from udfs.formats.wikivalues import LANGUAGES, InvalidDate
from udfs.formats.xmlstream import free, iterparse, local_name

_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_SPACES = re.compile(r"[ \t]{2,}")
_CELLS = ("td", "th")
_MEDIA_NS = {"file", "image", "category", "media"}  # English names, always valid in every wiki's links
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_SWITCHES = re.compile(r"__[A-Z]{3,}__")
_STRAY_TAGS = re.compile(r"</?(?:ref|references|span|div|small|big|sup|sub|center|blockquote|poem|font|u|s|"
                         r"del|ins|abbr|cite|tt|em|strong)(?:\s[^<>\n]*)?/?>", re.I)
_HOLE_TAGS = {"math", "chem", "ce", "hiero", "score", "graph"}  # inline values a reader sees: a hole
_HIDDEN_TAGS = {"references", "gallery", "categorytree", "imagemap", "inputbox", "section", "templatedata",
                "timeline", "hr"}  # from mwparserfromhell's invisible tags, and lists of footnotes


def _cell(tag: Any) -> str:
    return _SPACES.sub(" ", tag.contents.strip_code().strip()) if tag.contents is not None else ""


def _table_text(tag: Any) -> str:
    """Caption line, then one line per row, cells tab-separated. Cells before the first ``|-`` sit
    directly in the table (an implicit first row); mwparserfromhell 0.7 reads ``|+ caption`` as a
    cell whose text starts with ``+``."""
    lines: list[str] = []
    first: list[str] = []
    for node in tag.contents.nodes:
        name = str(getattr(node, "tag", "")).lower()
        if name in ("td", "th"):
            t = _cell(node)
            if t.startswith("+"):
                lines.append(t[1:].strip())
            else:
                first.append(t)
        elif name == "caption":
            lines.append(_cell(node))
        elif name == "tr":
            if first:
                lines.append("\t".join(first))
                first = []
            cells = [_cell(c) for c in node.contents.nodes if str(getattr(c, "tag", "")).lower() in _CELLS]
            if any(cells):
                lines.append("\t".join(cells))
    if first:
        lines.append("\t".join(first))
    return "\n\n" + "\n".join(x for x in lines if x) + "\n\n"


class _Page:
    """What one page's rendering needs and counts: options, media namespaces, dropped structures and
    the templates rendered and dropped (nested templates count only inside a rendered one), and the
    date templates dropped for a date that cannot exist."""

    def __init__(self, opts: Any, media: set[str]) -> None:
        self.opts, self.media = opts, media
        self.keep_refs = opts.mediawiki_references == "keep"
        self.params = opts.mediawiki_templates == "params"
        self.dropped: set[str] = set()
        self.rendered = self.dropped_templates = self.invalid_dates = 0

    def link_dropped(self, title: str) -> bool:
        """Whether ``[[title]]`` is a media, category or interlanguage link (not part of the text)."""
        if ":" not in title or title.startswith(":"):
            return False
        ns = title.split(":", 1)[0].strip().lower()
        return ns in self.media or ns in LANGUAGES

    def reference(self, text: str) -> str:
        """A footnote's text as ``keep`` writes it, or ``""`` (recorded as a dropped reference)."""
        text = text.strip()
        if self.keep_refs and text:
            return f" ({text})"
        self.dropped.add("reference")
        return ""

    def template(self, name: str, raw: dict[str, Any], render: Any) -> str:
        """The text for one template (``name`` without comments, ``raw`` parameter values, ``render``
        turning a raw value into text); :data:`HOLE` where it is dropped."""
        n = normalize_name(name)
        p = Params(raw, render)
        if n in REFERENCE_TEMPLATES or n.startswith("#tag:ref"):
            self.dropped_templates += 1
            if n.startswith("sfn"):
                return self.reference((render_template("harvnb", p) or "") if self.keep_refs else "")
            return self.reference(p.get("1") if self.keep_refs else "")
        before = (self.rendered, self.dropped_templates, self.invalid_dates)
        try:
            out = None if n.startswith("#") else render_template(name, p)
        except InvalidDate:  # MediaWiki prints an error; the value is dropped, whatever the mode
            self.rendered, self.dropped_templates, self.invalid_dates = before
            self.dropped_templates += 1
            self.invalid_dates += 1
            return HOLE
        if out is not None:
            self.rendered += 1
            return out
        self.rendered, self.dropped_templates, self.invalid_dates = before
        self.dropped_templates += 1
        if self.params:
            kept = " ".join(v for v in (p.get(k) for k in raw) if v)
            return kept or HOLE
        return HOLE


def _walk(code: Any, page: _Page) -> str:
    """The text of a parsed wikicode (mwparserfromhell nodes), as :mod:`udfs.formats.wikifast` writes it."""
    from mwparserfromhell import nodes as N

    out: list[str] = []
    for node in code.nodes:
        if isinstance(node, N.Text):
            out.append(node.value)
        elif isinstance(node, N.Template):
            name = _COMMENT.sub("", str(node.name)).strip()
            raw = {str(x.name).strip(): x.value for x in node.params}
            out.append(page.template(name, raw, lambda v: _walk(v, page)))
        elif isinstance(node, N.Wikilink):
            title = str(node.title)
            if page.link_dropped(title):
                continue
            shown = node.text if node.text is not None else node.title
            out.append(_walk(shown, page) if node.text is not None else _walk(shown, page).lstrip(":"))
        elif isinstance(node, N.Tag):
            out.append(_tag(node, page))
        elif isinstance(node, N.HTMLEntity):
            out.append(node.normalize())
        elif isinstance(node, N.Heading):
            out.append(f"\n\n{_walk(node.title, page).strip()}\n\n")
        elif isinstance(node, N.ExternalLink):
            if not node.brackets:
                out.append(_walk(node.url, page))
            elif node.title is not None:
                out.append(_walk(node.title, page))
        elif isinstance(node, N.Argument) and node.default is not None:
            out.append(_walk(node.default, page))
    return "".join(out)


def _tag(tag: Any, page: _Page) -> str:
    name = str(tag.tag).strip().lower()
    if name == "ref":
        kept = page.keep_refs and tag.contents is not None
        return page.reference(_walk(tag.contents, page) if kept else "")
    if name == "table":
        if page.opts.mediawiki_tables == "keep":
            return _table_text(tag)
        page.dropped.add("table")
        return "\n\n"
    if name == "br":
        return "\n"
    if name in _HOLE_TAGS:
        return HOLE
    if name in _HIDDEN_TAGS or tag.contents is None:
        return ""
    return _walk(tag.contents, page)


def wikitext_to_text(source: str, opts: Any, media_ns: set[str] = frozenset()) -> tuple[str, set[str]]:
    """``(text, dropped kinds)`` of one page's wikitext (see the module docstring); the template
    counts are in :func:`wikitext_to_document`."""
    text, dropped, _, _ = wikitext_to_document(source, opts, media_ns)
    return text, dropped


def wikitext_to_document(
    source: str, opts: Any, media_ns: set[str] = frozenset()
) -> tuple[str, set[str], tuple[int, int], dict[str, int]]:
    """One page's wikitext to text: the fast reader (:mod:`udfs.formats.wikifast`) when it can read
    the page, else mwparserfromhell; both give the same text for what the fast reader reads.

    Args:
        source: the wikitext.
        opts: :class:`ParseOptions` (``mediawiki_templates``, ``mediawiki_references``,
            ``mediawiki_tables``).
        media_ns: lower-cased local names of the File and Category namespaces.

    Returns:
        ``(text, dropped structure kinds, (templates rendered, templates dropped), repaired)``;
        ``repaired`` counts malformed markup per kind, only kinds found: ``unclosed_comment``,
        ``unclosed_template``, ``unclosed_table`` (:func:`udfs.formats.wikirepair.close_unclosed`)
        and ``invalid_date`` (date templates dropped for a date that cannot exist).
    """
    source = source.replace(HOLE, "")
    page = _Page(opts, _MEDIA_NS | set(media_ns))
    raw = fast_render(strip_quotes(source), page)
    unclosed: dict[str, int] = {}
    if raw is None:  # the fast reader refuses every unclosed construct it would have to render
        source, unclosed = close_unclosed(source)
        source = strip_quotes(source)
        raw = fast_render(source, page) if unclosed else None
        if raw is None:
            raw = mw_render(source, page)
    repaired = {f"unclosed_{k}": n for k, n in unclosed.items()}
    if page.invalid_dates:
        repaired["invalid_date"] = page.invalid_dates
    return finish(raw), page.dropped, (page.rendered, page.dropped_templates), repaired


def page_meta(dropped: set[str], counts: tuple[int, int], repaired: dict[str, int]) -> dict[str, str]:
    """The ``meta`` entries of one rendered page: ``templates_rendered``, ``templates_dropped``, and
    ``dropped_structures`` / ``markup_repaired`` when there are any (from :func:`wikitext_to_document`).

    >>> page_meta({"table"}, (2, 1), {"unclosed_template": 1, "invalid_date": 2})["markup_repaired"]
    'unclosed_template=1,invalid_date=2'
    >>> page_meta(set(), (0, 0), {})
    {'templates_rendered': '0', 'templates_dropped': '0'}
    """
    meta = {"templates_rendered": str(counts[0]), "templates_dropped": str(counts[1])}
    if dropped:
        meta["dropped_structures"] = ",".join(sorted(dropped))
    if repaired:
        meta["markup_repaired"] = ",".join(f"{k}={n}" for k, n in repaired.items())
    return meta


def mw_render(source: str, page: _Page) -> str:
    """The page's text before :func:`finish`, through mwparserfromhell."""
    import mwparserfromhell as mw

    return _walk(mw.parse(source), page)


def finish(raw: str) -> str:
    """Holes repaired, behaviour switches (``__TOC__``) and stray tags (a ``</ref>`` with no opening
    one) removed, spaces collapsed, each line stripped, blank lines collapsed to one."""
    text = _SWITCHES.sub("", repair_holes(raw))
    if "<" in text:
        text = _STRAY_TAGS.sub("", text)
    text = "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip()


def _field(page: Any, *path: str) -> Any:
    el = page
    for name in path:
        el = next((ch for ch in el if local_name(ch) == name), None)
        if el is None:
            return None
    return el


def read_mediawiki(c: Collector, chunks: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    """Parse the ``<page>`` elements of a MediaWiki dump into ``c`` (record = page number in the
    file, skipped pages included), freeing each page once read."""
    from lxml import etree

    f = ChunkFile(chunks, 1 << 62)
    n = 0
    media_ns: set[str] = set()
    base = None
    wanted = {int(x) for x in c.opts.mediawiki_namespaces}
    try:
        for el in iterparse(f):
            name = local_name(el)
            if name == "namespace" and el.get("key") in ("6", "14") and el.text:
                media_ns.add(el.text.strip().lower())
            elif name == "base" and el.text:
                base = el.text.strip().rsplit("/", 1)[0] + "/"
            if name != "page":
                continue
            n += 1
            _page(c, n, el, media_ns, base, wanted)
            free(el)
            if c.full():
                yield from c.flush()
    except etree.XMLSyntaxError as e:
        c.quarantine(n + 1, "malformed_xml", f.last, f"page {n + 1}: {e}; the {n} pages before it were kept")
    yield from c.flush()


def _page(c: Collector, n: int, page: Any, media_ns: set[str], base: str | None, wanted: set[int]) -> None:
    ns_el = _field(page, "ns")
    ns = int(ns_el.text) if ns_el is not None and (ns_el.text or "").strip().lstrip("-").isdigit() else 0
    if _field(page, "redirect") is not None:
        c.skipped["mediawiki_redirect"] += 1
        return
    if ns not in wanted:
        c.skipped[f"mediawiki_namespace_{ns}"] += 1
        return
    title_el, id_el, text_el = _field(page, "title"), _field(page, "id"), _field(page, "revision", "text")
    title = (title_el.text or "").strip() if title_el is not None else ""
    source = text_el.text if text_el is not None else None
    if source is None:
        c.quarantine(n, "text_missing", title, f"page {title!r} has no revision text")
        return
    if source.lstrip().lower().startswith("#redirect"):
        c.skipped["mediawiki_redirect"] += 1
        return
    try:
        text, dropped, counts, repaired = wikitext_to_document(source, c.opts, media_ns)
    except Exception as e:  # a parser bug on odd wikitext: this page is quarantined, the rest is read
        c.quarantine(n, "invalid_record", source, f"wikitext of {title!r}: {type(e).__name__}: {e}")
        return
    meta = {"title": title, "namespace": str(ns), **page_meta(dropped, counts, repaired)}
    url = base + title.replace(" ", "_") if base and title else None
    body = f"{title}\n\n{text}" if title else text
    src_id = id_el.text.strip() if id_el is not None and id_el.text else None
    c.doc(n, body, 0, src_id=src_id, url=url, meta=meta)
