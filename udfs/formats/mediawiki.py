"""MediaWiki XML dumps (``pages-articles*.xml[.bz2]``): one document per article, wikitext to text
with mwparserfromhell; the XML is streamed with lxml ``iterparse``, a ``<page>`` at a time.

Skipped, and counted in the file's summary (``skipped.mediawiki_redirect``,
``skipped.mediawiki_namespace_<n>``): redirects, and pages outside the article namespaces
(``ParseOptions.mediawiki_namespaces``, default ``0``: talk, user, template, file, category... pages
are not articles).

Wikitext: section headings become their own paragraphs; links become their text; ``[[File:..]]``
and ``[[Category:..]]`` links (and their names in the dump's own language, read from its
``<siteinfo>``) are removed; templates are removed, or keep their parameter values
(``mediawiki_templates = "params"``); ``<ref>`` footnotes are removed or kept inline in parentheses;
tables are removed or kept as a caption line and one line per row, cells separated by tabs. What was
removed is recorded in ``meta["dropped_structures"]`` (``reference``, ``table``), as for JATS.

Source: MediaWiki export format (https://www.mediawiki.org/xml/export-0.11.xsd), mwparserfromhell
0.7 (https://mwparserfromhell.readthedocs.io).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from udfs.formats.collector import Collector
from udfs.formats.tabular import ChunkFile
from udfs.formats.xmlstream import free, iterparse, local_name

_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_SPACES = re.compile(r"[ \t]{2,}")
_CELLS = ("td", "th")
_MEDIA_NS = {"file", "image", "category", "media"}  # English names, always valid in every wiki's links


def _remove(code: Any, node: Any) -> None:
    try:
        code.remove(node)
    except ValueError:  # inside a node removed already
        pass


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


def wikitext_to_text(source: str, opts: Any, media_ns: set[str] = frozenset()) -> tuple[str, set[str]]:
    """``(text, dropped kinds)`` of one page's wikitext (see the module docstring).

    Args:
        source: the wikitext.
        opts: :class:`ParseOptions` (``mediawiki_templates``, ``mediawiki_references``,
            ``mediawiki_tables``).
        media_ns: lower-cased local names of the File and Category namespaces.
    """
    import mwparserfromhell as mw

    code = mw.parse(source)
    dropped: set[str] = set()
    media = _MEDIA_NS | set(media_ns)
    for link in code.filter_wikilinks():
        ns = str(link.title).split(":", 1)[0].strip().lower() if ":" in str(link.title) else ""
        if ns in media:
            _remove(code, link)
    for tag in code.filter_tags():
        name = str(tag.tag).lower()
        if name == "ref":
            t = tag.contents.strip_code().strip() if tag.contents is not None else ""
            if opts.mediawiki_references == "keep" and t:
                code.replace(tag, f" ({t})")
            else:
                _remove(code, tag)
                dropped.add("reference")
        elif name == "references":
            _remove(code, tag)
    for tag in code.filter_tags(recursive=False, matches=lambda n: str(n.tag).lower() == "table"):
        if opts.mediawiki_tables == "keep":
            code.replace(tag, _table_text(tag))
        else:
            _remove(code, tag)
            dropped.add("table")
    for h in code.filter_headings():
        code.replace(h, f"\n\n{h.title.strip_code().strip()}\n\n")
    params = opts.mediawiki_templates == "params"
    text = code.strip_code(normalize=True, collapse=True, keep_template_params=params)
    text = "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip(), dropped


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
        text, dropped = wikitext_to_text(source, c.opts, media_ns)
    except Exception as e:  # a parser bug on odd wikitext: this page is quarantined, the rest is read
        c.quarantine(n, "invalid_record", source, f"wikitext of {title!r}: {type(e).__name__}: {e}")
        return
    meta = {"title": title, "namespace": str(ns)}
    if dropped:
        meta["dropped_structures"] = ",".join(sorted(dropped))
    url = base + title.replace(" ", "_") if base and title else None
    body = f"{title}\n\n{text}" if title else text
    src_id = id_el.text.strip() if id_el is not None and id_el.text else None
    c.doc(n, body, 0, src_id=src_id, url=url, meta=meta)
