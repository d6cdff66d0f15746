"""JATS / PMC NXML reader: one document per ``<article>``, streamed with lxml ``iterparse``.

The text is the article title, the abstract, the body, the floats kept apart from the body
(``<floats-group>``, where many PMC articles hold every figure and table) and the back matter, each
``<sec>`` title as its own line
(with its ``<label>``: ``2.1 Methods``), paragraphs separated by blank lines. Inline cross references
(``<xref>``) stay as their text, so "see Table 1" is still there for the refs stage. What happens to
the targets of such mentions is the user's choice (``ParseOptions.jats_*``), the same for floats in
the body and in ``<floats-group>``:

* tables (``<table-wrap>``): ``keep`` = the caption line ``Table 1: ...`` then the rows, cells
  separated by tabs (a structure the refs stage resolves); ``caption`` = the caption line only;
  ``drop`` = nothing;
* figures (``<fig>``): ``keep`` = the caption line ``Figure 1: ...``; ``drop`` = nothing;
* the reference list (``<ref-list>``): ``keep`` = a ``References`` heading and one ``[n] ...`` line
  per entry; ``drop`` = nothing.

What was dropped is recorded in the document's ``meta`` as ``dropped_structures`` (comma-separated
kinds: ``table``, ``figure``, ``reference``) so that later stages can tell "the table was removed by
ingest" from "the table never was there". Display formulas keep their TeX (``<tex-math>``) when the
file has one, with their label as ``(n)``; MathML alone is dropped (its text is not readable).

Source: JATS 1.3 tag library (NISO Z39.96-2021), PMC tagging guidelines; elements are matched by
local name, so namespaced and DTD-less files read the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from udfs.formats.chunkfile import ChunkFile
from udfs.formats.collector import Collector
from udfs.formats.xmlstream import free, iterparse, local_name

_WS = re.compile(r"[ \t\r\n]+")
_BLOCKS = {"p", "title", "label", "list-item", "caption", "mixed-citation", "element-citation"}
_SKIP_INLINE = {"table-wrap", "fig", "disp-formula", "ref-list", "fn-group", "supplementary-material"}


def _inline(el: Any) -> str:
    """The text of an element, children included, except block structures nested in it."""
    parts = [el.text or ""]
    for ch in el:
        name = local_name(ch)
        if name in _BLOCKS:  # a caption's <title> then <p>: words of two blocks must not run together
            parts.append(f" {_inline(ch)} ")
        elif name and name not in _SKIP_INLINE:
            parts.append(_inline(ch))
        parts.append(ch.tail or "")
    return _WS.sub(" ", "".join(parts)).strip()


def _child(el: Any, name: str) -> Any:
    for ch in el:
        if local_name(ch) == name:
            return ch
    return None


def _caption_line(el: Any, kind: str) -> str:
    label = _child(el, "label")
    lab = _inline(label) if label is not None else ""
    if lab and not lab.lower().startswith(kind.lower()[:3]):
        lab = f"{kind} {lab}"  # PMC often labels "1", the kind is implied by the element
    cap = _child(el, "caption")
    text = _inline(cap) if cap is not None else ""
    return f"{lab}: {text}" if lab and text else (lab or text)


class _Writer:
    def __init__(self, opts: Any):
        self.o = opts
        self.out: list[str] = []
        self.dropped: set[str] = set()

    def block(self, el: Any) -> None:
        name = local_name(el)
        if name in ("sec", "abstract", "body", "app", "app-group", "boxed-text", "list", "list-item", "back",
                    "floats-group", "fig-group", "table-wrap-group"):
            for ch in el:
                self.block(ch)
        elif name == "title":
            if t := _inline(el):
                parent = el.getparent()
                label = _child(parent, "label") if parent is not None else None
                lab = _inline(label) if label is not None and local_name(parent) == "sec" else ""
                self.out.append(f"{lab} {t}".strip())
        elif name == "p":
            if t := _inline(el):
                self.out.append(t)
            for ch in el:  # tables, figures and formulas nested in a paragraph come after it
                if local_name(ch) in ("table-wrap", "fig", "disp-formula"):
                    self.block(ch)
        elif name == "table-wrap":
            self.table(el)
        elif name == "fig":
            if self.o.jats_figures == "keep":
                if line := _caption_line(el, "Figure"):
                    self.out.append(line)
            else:
                self.dropped.add("figure")
        elif name == "disp-formula":
            self.formula(el)
        elif name == "ref-list":
            self.references(el)

    def table(self, el: Any) -> None:
        if self.o.jats_tables == "drop":
            self.dropped.add("table")
            return
        if line := _caption_line(el, "Table"):
            self.out.append(line)
        if self.o.jats_tables == "caption":
            self.dropped.add("table")
            return
        rows = ["\t".join(_inline(c) for c in tr if local_name(c) in ("td", "th")) for tr in el.iter("{*}tr")]
        if rows := [r for r in rows if r.strip()]:
            self.out.append("\n".join(rows))

    def formula(self, el: Any) -> None:
        tex = next((t for t in el.iter("{*}tex-math", "tex-math")), None)
        label = _child(el, "label")
        lab = _inline(label) if label is not None else ""
        if lab and not lab.startswith("("):
            lab = f"({lab})"
        if tex is not None and (t := _WS.sub(" ", "".join(tex.itertext())).strip()):
            self.out.append(f"{t} {lab}".strip())
        elif lab:
            self.dropped.add("equation")

    def references(self, el: Any) -> None:
        if self.o.jats_references == "drop":
            self.dropped.add("reference")
            return
        title = _child(el, "title")
        self.out.append(_inline(title) if title is not None else "References")
        for i, ref in enumerate((r for r in el if local_name(r) == "ref"), 1):
            label = _child(ref, "label")
            lab = _inline(label).strip("[]. ") if label is not None else str(i)
            body = " ".join(_citation(ch) for ch in ref if local_name(ch) not in ("label", ""))
            self.out.append(f"[{lab}] {body}".strip())


def _citation(el: Any) -> str:
    # <element-citation> is all markup, no punctuation in its text: its leaves are joined with spaces.
    if local_name(el) == "element-citation":
        return " ".join(t.strip() for t in el.itertext() if t.strip())
    return _inline(el)


def article_text(article: Any, opts: Any) -> tuple[str, dict[str, str], str | None]:
    """``(text, meta, id)`` of one ``<article>`` element (see the module docstring)."""
    w = _Writer(opts)
    meta: dict[str, str] = {}
    ids: dict[str, str] = {}
    front = _child(article, "front")
    am = _child(front, "article-meta") if front is not None else None
    if am is not None:
        for aid in am:
            if local_name(aid) == "article-id" and aid.text:
                ids[aid.get("pub-id-type", "")] = aid.text.strip()
        tg = _child(am, "title-group")
        title = _child(tg, "article-title") if tg is not None else None
        if title is not None and (t := _inline(title)):
            w.out.append(t)
            meta["title"] = t
        for ab in am:
            if local_name(ab) == "abstract" and ab.get("abstract-type") is None:
                if _child(ab, "title") is None:
                    w.out.append("Abstract")
                w.block(ab)
    for part in ("body", "floats-group", "back"):  # floats before the reference list, which closes the text
        el = _child(article, part)
        if el is not None:
            w.block(el)
    if "doi" in ids:
        meta["doi"] = ids["doi"]
    if "pmc" in ids or "pmcid" in ids:
        meta["pmcid"] = ids.get("pmc") or ids["pmcid"]
    meta["dropped_structures"] = ",".join(sorted(w.dropped))
    if not meta["dropped_structures"]:
        del meta["dropped_structures"]
    src_id = ids.get("pmc") or ids.get("pmcid") or ids.get("pmid") or ids.get("doi")
    return "\n\n".join(x for x in w.out if x), meta, src_id


def read_jats(c: Collector, chunks: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    """Parse every ``<article>`` of a JATS file (a single article, or a ``<pmc-articleset>``) into
    ``c``; each article is freed once read, so a bulk file is never held whole. A parse error keeps
    the articles before it and quarantines the rest (``malformed_xml``)."""
    from lxml import etree

    f = ChunkFile(chunks, 1 << 62)
    n = 0
    try:
        for el in iterparse(f, tag=("{*}article", "article")):
            if el.getparent() is not None and local_name(el.getparent()) in ("sub-article", "response"):
                continue
            n += 1
            text, meta, src_id = article_text(el, c.opts)
            url = f"https://doi.org/{meta['doi']}" if "doi" in meta else None
            c.doc(n, text, 0, src_id=src_id, url=url, meta=meta)
            free(el)
            if c.full():
                yield from c.flush()
    except etree.XMLSyntaxError as e:
        c.quarantine(n + 1, "malformed_xml", f.last, f"article {n + 1}: {e}; the {n} before it were kept")
    yield from c.flush()
