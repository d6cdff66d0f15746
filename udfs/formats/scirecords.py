"""Structured scientific records (S2ORC, unarXive): one readable text with every span resolved.

Scientific corpora ship papers as records whose ``body_text`` is a list of paragraphs ``{section,
sec_number | sec_num, text, cite_spans, ref_spans, eq_spans?}`` beside the targets those spans point at:
``ref_entries`` (``{id: {type: formula | figure | table, latex | caption | text, content?, num?}}``),
``bib_entries`` (``{id: {bib_entry_raw}}`` or ``{id: {title, authors, year, venue, ...}}``), an
``abstract`` and ``metadata``. Read as ``body_text[].text`` they lose what the spans stand for: unarXive
paragraphs hold converter markers (``{{formula:<uuid>}}``, ``{{cite:<id>}}``, ``{{figure:<uuid>}}``,
``{{table:<uuid>}}``) in place of the formula, the citation and the float, and the bibliography sits in
another field, so the refs stage sees citations without a reference list. :func:`render` writes the
paper the way a reader sees it:

* the title, then ``Abstract`` and the abstract, then the body; a heading line wherever the section
  changes, its number joined (``3 Method``, ``3.1 Data``; a subsection numbered ``1`` under section 3
  is ``3.1``, as LaTeX numbers it; a section lettered ``A`` is ``Appendix A: ...``, as LaTeX's
  ``\\appendix`` letters it; ``-1`` or no number: the title alone); S2ORC ``back_matter`` after the body;
* a formula marker becomes its LaTeX: ``$...$`` inline (two markers that touch: ``$a$ $b$``),
  ``$$...$$`` on a line of its own when the marker stood alone on its line (a display formula);
  S2ORC ``eq_spans`` become their ``latex`` (or ``raw_str``) and equation number;
* citations become ``[n]`` (adjacent ones ``[1, 2]``), numbered in the order they are first cited;
  S2ORC cite spans whose text is a number (``[7]``, ``7``) are renumbered the same way, author-year
  ones (``Smith et al. (2019)``) stay as written; after the body a ``References`` heading and one
  ``[n] ...`` line per bibliography entry (cited ones first, in citation order, then the others);
* a float marker (where the figure or table stood) becomes its caption line, ``Figure 2: ...`` /
  ``Table 1: ...`` (numbered in order of appearance per kind; unarXive's ``NO_CAPTION`` placeholder
  leaves the label alone, ``Figure 2``), then the table's content if the record has it; floats no
  marker placed (every S2ORC float) come after the body, labelled with their ``num``, the number of
  the first ``Figure 3`` / ``Table 2`` span pointing at them, or their order;
* a marker without a target (an id missing from its entries, an empty formula) is removed with the
  punctuation that framed only it, and counted as ``unresolved``: no ``{{kind:id}}`` marker is left
  in the text.

The newer S2ORC shape (the Semantic Scholar datasets API, 2023 on) holds the whole paper as one string,
``content.text``, and lists what each part is in ``content.annotations``: per kind a JSON-encoded list
(or a list) of spans ``{start, end, attributes?}`` over that string (``title``, ``abstract``,
``paragraph``, ``sectionheader`` with its number ``n``, ``bibentry`` with its ``id``, ``bibref`` /
``figureref`` / ``tableref`` with the ``ref_id`` they point at, ``figure`` / ``table`` with their ``id``,
``figurecaption``, ``formula``; ``section_header``, ``bib_ref``... are read the same). It is turned
into the paragraph shape above (:func:`from_annotations`) and rendered the same way, as ``s2orc``:
paragraphs under their numbered headings, display formulas (those outside a paragraph) as paragraphs
of their own, numeric citations ``[n]`` with the References built from the bibliography entries, and
the figures and tables as caption lines after the body. A record whose annotations hold no paragraph
keeps its whole text as it is.

Which shape a record has is read from its keys (:func:`detect`); the per-kind counts of what was
resolved are returned beside the text (the ``documents`` columns ``record_format`` and ``markers_resolved``).

Source: S2ORC (Lo et al., ACL 2020) and its ``doc2json`` output schema (allenai/s2orc-doc2json: paragraph,
span, ``ref_entries`` and ``bib_entries`` keys); unarXive 2022 (Saier, Krause & Faerber, JCDL 2023:
markers and ``ref_entries`` of types formula / figure / table, ``bib_entry_raw``); the Semantic Scholar
datasets API's ``s2orc`` dataset (Kinney et al., arXiv:2301.10140, 2023: ``content.text`` and
``content.annotations`` as JSON-encoded span lists with ``attributes``). peS2o ships plain
``text`` records: they are read as any JSONL text, no structure is needed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from udfs.formats.records import MISSING, lookup
from udfs.formats.wikitemplates import HOLE, repair_holes

RECORD_FORMATS = ("auto", "flat", "s2orc", "unarxive")
"""``ingest.fields.record_format``: ``auto`` recognises the shape from the record's keys
(:func:`detect`), ``flat`` reads the text field as it is, ``s2orc`` / ``unarxive`` force the
structured reader on every record (a record without a ``body_text`` list is quarantined)."""

STRUCTURED = ("s2orc", "unarxive")
"""The record formats :func:`render` reads."""

COLUMNS = ("body_text", "abstract", "metadata", "title", "bib_entries", "ref_entries", "back_matter",
           "pdf_parse", "latex_parse", "content")
"""Top-level fields :func:`render` may read (a columnar reader loads these columns)."""

MARKER = re.compile(r"\{\{(\w+):([^{}\s]*)\}\}")
"""A converter marker ``{{kind:id}}`` (unarXive)."""
_CITE_RUN = re.compile(r"\{\{cite:[^{}\s]*\}\}(?:[ \t]*[,;]?[ \t]*\{\{cite:[^{}\s]*\}\})*")
_CITE_ID = re.compile(r"\{\{cite:([^{}\s]*)\}\}")
_NUMERIC_CITE = re.compile(r"[\[(]?\s*\d{1,4}\s*[\])]?")
_YEAR = re.compile(r"\D*(?:1[89]|20)\d\d\D*")  # "(2019)": the year of an author-year citation, not a number
_FLOAT_LABEL = re.compile(r"(?i)\b(?:fig(?:ure)?s?|tab(?:le)?s?)\.?\s*([0-9]+[a-z]?|[IVXLC]+)\b")
_CAPTIONED = re.compile(r"(?i)\s*(?:fig(?:ure)?|tab(?:le)?)\.?\s*[0-9IVXLC]+[a-z]?\b")
_WS = re.compile(r"\s+")
_TOUCHING_MATH = re.compile(r"(?<=[^\s$])\$\$(?=[^\s$])")  # "$a$$b$": two inline formulas, not a display one
_BLANKS = re.compile(r"[ \t]*\n[ \t]*(?:\n[ \t]*)+")
_UNNUMBERED = {"", "-1", "none", "null"}
_APPENDIX = re.compile(r"[A-Z]")
_FLOAT_KINDS = {"figure": "Figure", "table": "Table"}
_NO_CAPTION = "NO_CAPTION"  # what unarXive writes as the caption of a float that has none
_SUBLEVEL = {"subsection": "section", "subsubsection": "subsection", "paragraph": "subsubsection"}
_STRUCTURED_TOPS = ("body_text", "pdf_parse", "latex_parse", "content")


def container(obj: Any) -> dict[str, Any] | None:
    """The object that holds the paper's ``body_text`` list: the record itself, or its ``pdf_parse`` /
    ``latex_parse`` object (S2ORC ``doc2json`` output), or the paragraph shape built from an annotated
    record (:func:`from_annotations`); ``None`` when there is none."""
    if not isinstance(obj, dict):
        return None
    if _annotated(obj):
        return from_annotations(obj["content"])
    for c in (obj, obj.get("pdf_parse"), obj.get("latex_parse")):
        if isinstance(c, dict) and isinstance(c.get("body_text"), list):
            return c
    return None


def body_text_problem(obj: Any) -> str | None:
    """What is wrong with a record's ``body_text`` when it holds something other than a list (the record,
    or its ``pdf_parse`` / ``latex_parse`` object); ``None`` when it is a list or absent.

    >>> print(body_text_problem({"body_text": "Intro. We study rivers."}))  # doctest: +NORMALIZE_WHITESPACE
    body_text holds str ('Intro. We study rivers.'), not a list of paragraphs (ingest.fields.text:
    body_text reads it as the text)
    >>> body_text_problem({"pdf_parse": {"body_text": None}})
    'pdf_parse.body_text holds null, not a list of paragraphs'
    >>> body_text_problem({"body_text": [{"text": "x"}]}) is None
    True
    """
    if not isinstance(obj, dict):
        return None
    for where in ("", "pdf_parse.", "latex_parse."):
        c = obj.get(where[:-1]) if where else obj
        if not isinstance(c, dict) or "body_text" not in c or isinstance(c["body_text"], list):
            continue
        v = c["body_text"]
        held = "null" if v is None else f"{type(v).__name__} ({_excerpt(v)})"
        hint = f" (ingest.fields.text: {where}body_text reads it as the text)" if isinstance(v, str) else ""
        return f"{where}body_text holds {held}, not a list of paragraphs{hint}"
    return None


def _excerpt(v: Any, n: int = 60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def detect(obj: Any, text_field: str = "text") -> str | None:
    """The structured shape of a record, from its keys: ``unarxive``, ``s2orc`` or ``None`` (read flat).

    A record is structured when it holds a ``body_text`` list of paragraph objects (``text`` plus
    ``cite_spans`` or ``ref_spans``), or a ``content`` object with a ``text`` string and an
    ``annotations`` object (the newer S2ORC shape), and the configured text field is absent from it or
    points into ``body_text`` / ``content`` (a record with its own ``text``, such as peS2o, stays
    flat). It is ``unarxive`` when the record has a ``_source_hash`` (of its LaTeX source), a paragraph
    holds a converter marker, an entry of ``ref_entries`` has a ``caption`` or one of ``bib_entries`` a
    ``bib_entry_raw``; ``s2orc`` otherwise (the annotated shape always).

    Args:
        obj: the parsed record.
        text_field: ``ingest.fields.text``.

    Returns:
        ``"unarxive"``, ``"s2orc"`` or ``None``.
    """
    top = re.split(r"[.\[]", text_field, maxsplit=1)[0]
    if top not in _STRUCTURED_TOPS and lookup(obj, text_field) is not MISSING:
        return None
    if _annotated(obj):
        return "s2orc"
    c = container(obj)
    if c is None:
        return None
    paras = [p for p in c["body_text"][:8] if isinstance(p, dict)]
    if not paras or not all("text" in p and ("cite_spans" in p or "ref_spans" in p) for p in paras):
        return None
    if "_source_hash" in obj or any(
        isinstance(p, dict) and isinstance(p.get("text"), str) and MARKER.search(p["text"])
        for p in c["body_text"]
    ):
        return "unarxive"
    for entries, keys in ((c.get("ref_entries"), ("caption",)), (c.get("bib_entries"), ("bib_entry_raw",))):
        if isinstance(entries, dict):
            for e in list(entries.values())[:16]:
                if isinstance(e, dict) and any(k in e for k in keys):
                    return "unarxive"
    return "s2orc"


def render(obj: Any) -> tuple[str, dict[str, int]] | None:
    """A structured record as one text, every marker and span resolved (module docstring).

    Args:
        obj: the parsed record (S2ORC or unarXive shape).

    Returns:
        ``(text, counts)``: the text (paragraphs separated by blank lines) and the number of markers
        or spans resolved per kind (``cite``, ``formula``, ``figure``, ``table``; ``unresolved`` for
        markers removed without a target), only kinds seen; ``None`` when the record holds no
        ``body_text`` list.
    """
    c = container(obj)
    if c is None:
        return None
    return _Paper(obj, c).text()


# ---------------------------------------------------------------------- annotated S2ORC (2023 shape)
_SPAN_KEY = re.compile(r"[_\s-]")
_BIB_LABEL = re.compile(r"^\s*\[\d{1,4}\]\s*")
_SAME_LENGTH_WS = re.compile(r"\s")
_Span = tuple[int, int, dict[str, Any]]
_ABSTRACT_WORD = re.compile(r"(?i)^\s*abstract\b[\s.:\-\u2014]*")  # a PDF abstract span may open with it


def _annotated(obj: dict[str, Any]) -> bool:
    """True when ``obj`` is the annotated S2ORC shape: ``content.text`` and ``content.annotations``."""
    content = obj.get("content")
    return isinstance(content, dict) and isinstance(content.get("text"), str) \
        and isinstance(content.get("annotations"), dict)


def _span_lists(annotations: dict[str, Any], n: int) -> dict[str, list[_Span]]:
    """Per kind (key lower-cased, ``_`` removed: ``bib_ref`` is ``bibref``) the spans ``(start, end,
    attributes)`` that lie inside a text of ``n`` characters, sorted by start; a value that is not a list
    or a JSON-encoded list, and a span without integer bounds, are left out."""
    out: dict[str, list[_Span]] = {}
    for key, value in annotations.items():
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                continue
        spans = []
        for sp in _dicts(value if isinstance(value, list) else []):
            st, en = sp.get("start"), sp.get("end")
            if isinstance(st, int) and isinstance(en, int) and 0 <= st < en <= n:
                attrs = sp.get("attributes")
                spans.append((st, en, attrs if isinstance(attrs, dict) else {}))
        out.setdefault(_SPAN_KEY.sub("", str(key).lower()), []).extend(spans)
    return {k: sorted(v, key=lambda x: (x[0], x[1])) for k, v in out.items()}


def _inside(spans: list[_Span], st: int, en: int) -> list[_Span]:
    return [x for x in spans if st <= x[0] and x[1] <= en]


def _joined(spans: list[_Span], cut: Any) -> str:
    return " ".join(cut(x[0], x[1]).strip() for x in spans)


def _attr(attrs: dict[str, Any], key: str) -> str | None:
    v = attrs.get(key)
    return str(v) if isinstance(v, str | int) and str(v) else None


def from_annotations(content: dict[str, Any]) -> dict[str, Any]:
    """The annotated S2ORC shape (``content.text`` + ``content.annotations``) as the paragraph shape.

    Args:
        content: the record's ``content`` object: ``text`` (string) and ``annotations`` (kind -> spans,
            a list or a JSON-encoded list; offsets in characters of ``text``).

    Returns:
        An object with ``title``, ``abstract`` (paragraph list), ``body_text`` (paragraphs with
        ``section``, ``sec_num``, ``cite_spans``, ``ref_spans``, ``eq_spans``; offsets relative to the
        paragraph), ``bib_entries`` (id -> ``{raw_text}``) and ``ref_entries`` (id -> ``{type, text,
        content?, num?}``), as :func:`render` reads them. Spans outside the text are ignored; a text
        with no paragraph span is one paragraph, as it is (nothing else is taken from its spans).

    Source: Semantic Scholar datasets API, ``s2orc`` dataset (Kinney et al., arXiv:2301.10140, 2023).
    """
    text = content["text"]
    a = _span_lists(content["annotations"], len(text))
    if not a.get("paragraph"):  # nothing says where the body is: the text as it is, nothing added
        return {"body_text": [{"text": text, "cite_spans": [], "ref_spans": []}]}

    def cut(st: int, en: int) -> str:
        return _SAME_LENGTH_WS.sub(" ", text[st:en])  # offsets inside stay valid

    bib: dict[str, dict[str, str]] = {}
    for i, (st, en, at) in enumerate(a.get("bibentry", [])):
        bib[_attr(at, "id") or f"b{i}"] = {"raw_text": _BIB_LABEL.sub("", cut(st, en))}
    refs = _float_entries(a, cut)
    abstract_spans = a.get("abstract", [])[:1]
    in_abstract = [p for p in a.get("paragraph", []) if abstract_spans
                   and abstract_spans[0][0] <= p[0] and p[1] <= abstract_spans[0][1]]
    after = abstract_spans[0][1] if abstract_spans else 0
    headers = [h for h in a.get("sectionheader", []) if h[0] >= after]  # not an "Abstract" header
    blocks = [p for p in a.get("paragraph", []) if p not in in_abstract]
    in_para = {f[:2] for p in blocks for f in _inside(a.get("formula", []), p[0], p[1])}
    blocks += [("formula", f) for f in a.get("formula", []) if f[:2] not in in_para]  # display formulas
    body = []
    for b in sorted(blocks, key=lambda x: x[1][0] if x[0] == "formula" else x[0]):
        is_formula = b[0] == "formula"
        st, en, _ = b[1] if is_formula else b
        head = next((h for h in reversed(headers) if h[1] <= st), None)
        para: dict[str, Any] = {"text": cut(st, en), "cite_spans": [], "ref_spans": [], "eq_spans": [],
                                "section": cut(head[0], head[1]) if head else "",
                                "sec_num": _attr(head[2], "n") if head else None}
        if is_formula:
            para["eq_spans"].append({"start": 0, "end": en - st, "latex": para["text"].strip()})
        for kind, key in (("bibref", "cite_spans"), ("figureref", "ref_spans"), ("tableref", "ref_spans")):
            for s0, e0, at in _inside(a.get(kind, []), st, en):
                para[key].append({"start": s0 - st, "end": e0 - st, "text": cut(s0, e0),
                                  "ref_id": _attr(at, "ref_id")})
        body.append(para)
    title = a.get("title", [])
    abstract = [{"text": _ABSTRACT_WORD.sub("", cut(st, en))} for st, en, _ in in_abstract or abstract_spans]
    return {"title": cut(title[0][0], title[0][1]) if title else "",
            "abstract": abstract,
            "body_text": body, "bib_entries": bib, "ref_entries": refs}


def _float_entries(a: dict[str, list[_Span]], cut: Any) -> dict[str, dict[str, Any]]:
    """``ref_entries`` from the ``figure`` and ``table`` spans: a figure span whose id or ``type`` says
    table is a table; its caption is the span's text when that starts with its label (``Table 2 ...``),
    else its ``figurecaption`` / ``tablecaption`` span; a ``table`` span inside it is its content."""
    refs: dict[str, dict[str, Any]] = {}
    tables = a.get("table", [])
    captions = a.get("figurecaption", []) + a.get("tablecaption", [])
    placed = set()
    for i, (st, en, at) in enumerate(a.get("figure", [])):
        rid = _attr(at, "id") or f"fig_{i}"
        kind = "table" if rid.lower().startswith("tab") or _attr(at, "type") == "table" else "figure"
        inner = _inside(tables, st, en)
        placed.update(t[:2] for t in inner)
        whole = cut(st, inner[0][0] if inner else en).strip()
        cap = _inside(captions, st, en)
        caption = whole if _CAPTIONED.match(whole) or not cap else _joined(cap, cut)
        e: dict[str, Any] = {"type": kind, "text": caption}
        if m := _FLOAT_LABEL.match(whole):
            e["num"] = m.group(1)
        if inner:
            e["content"] = "\n".join(cut(t[0], t[1]).strip() for t in inner)
        refs[rid] = e
    for i, (st, en, at) in enumerate(t for t in tables if t[:2] not in placed):
        caption = _joined(_inside(captions, st, en), cut)
        refs[_attr(at, "id") or f"tab_{i}"] = {"type": "table", "text": caption,
                                             "content": cut(st, en).strip()}
    return refs


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _dicts(v: Any) -> list[dict[str, Any]]:
    if isinstance(v, dict):
        return [v]
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _bib_text(e: Any) -> str:
    """One bibliography entry as a line: unarXive's raw string, S2ORC's ``raw_text``, or its parts."""
    if isinstance(e, str):
        return _WS.sub(" ", e).strip()
    if not isinstance(e, dict):
        return ""
    for k in ("bib_entry_raw", "raw_text", "raw"):
        if _s(e.get(k)).strip():
            return _WS.sub(" ", e[k]).strip()
    names = []
    for a in e.get("authors") or []:
        if isinstance(a, dict):
            middle = " ".join(m for m in a.get("middle") or [] if isinstance(m, str))
            whole = (_s(a.get("first")), middle, _s(a.get("last")), _s(a.get("suffix")))
            names.append(" ".join(x for x in whole if x))
        elif isinstance(a, str):
            names.append(a)
    parts = [", ".join(n for n in names if n), _s(e.get("title")), _s(e.get("venue"))]
    for k in ("volume", "pages"):
        if e.get(k):
            parts.append(str(e[k]))
    if e.get("year"):
        parts.append(str(e["year"]))
    return _WS.sub(" ", ". ".join(p.strip() for p in parts if p and p.strip())).strip()


class _Paper:
    """Rendering state of one record: citation numbers, float numbers, counts."""

    def __init__(self, obj: dict[str, Any], c: dict[str, Any]):
        self.obj, self.c = obj, c
        self.bib = c.get("bib_entries") if isinstance(c.get("bib_entries"), dict) else {}
        self.refs = c.get("ref_entries") if isinstance(c.get("ref_entries"), dict) else {}
        self.cite_no: dict[str, int] = {}
        self.float_no: dict[str, str] = {}
        self.per_kind: Counter = Counter()
        self.counts: Counter = Counter()
        self.out: list[str] = []
        self.heading: tuple[str, str] | None = None
        self.levels: dict[str, str] = {}
        self.span_labels = self._span_labels()

    # ------------------------------------------------------------------ document
    def text(self) -> tuple[str, dict[str, int]]:
        o, c = self.obj, self.c
        meta = o.get("metadata") if isinstance(o.get("metadata"), dict) else {}
        title = _s(o.get("title")) or _s(meta.get("title")) or _s(c.get("title"))
        if title.strip():
            self.out.append(self._resolve(_WS.sub(" ", title).strip(), inline_only=True))
        abstract = c.get("abstract") if c.get("abstract") else o.get("abstract")
        if isinstance(abstract, str) and abstract.strip():
            abstract = [{"text": abstract}]
        paras = _dicts(abstract)
        if not paras and _s(meta.get("abstract")).strip():
            paras = [{"text": meta["abstract"]}]
        for p in paras:
            self._paragraph({**p, "section": p.get("section") or "Abstract"})
        self.heading, self.levels = None, {}
        for p in _dicts(c.get("body_text")) + _dicts(c.get("back_matter")):
            self._paragraph(p)
        self._unplaced_floats()
        self._references()
        text = "\n\n".join(x for x in (_BLANKS.sub("\n\n", s).strip() for s in self.out) if x)
        return text, dict(sorted(self.counts.items()))

    def _paragraph(self, p: dict[str, Any]) -> None:
        self._heading(p)
        text = _s(p.get("text"))
        if not text.strip():
            return
        self.out.append(self._resolve(self._spans(p, text)))

    def _heading(self, p: dict[str, Any]) -> None:
        section = _WS.sub(" ", _s(p.get("section"))).strip()
        raw = p.get("sec_number", p.get("sec_num"))
        num = str(raw).strip().rstrip(".") if raw is not None else ""
        kind = _s(p.get("sec_type")).lower()
        if num.lower() in _UNNUMBERED:
            num = ""
        elif kind in _SUBLEVEL and "." not in num and num.isdigit():
            parent = self.levels.get(_SUBLEVEL[kind])
            num = f"{parent}.{num}" if parent else num
        key = (section, num)
        if key == self.heading or not section:
            self.heading = key if section else self.heading
            return
        self.heading = key
        if num and kind:
            self.levels[kind] = num
        appendix = _APPENDIX.fullmatch(num) and kind in ("", "section")
        if appendix and not section.lower().startswith("appendix"):
            section = f"Appendix {num}: {section}"  # LaTeX's \appendix letters: "Appendix A" finds it
        elif num and not section.startswith(num):
            section = f"{num} {section}"
        self.out.append(self._resolve(section, inline_only=True))

    # ------------------------------------------------------------------ spans (S2ORC)
    def _span_labels(self) -> dict[str, str]:
        """ref_id -> the label of the first ``Figure 3`` / ``Table 2`` span pointing at it."""
        labels: dict[str, str] = {}
        for p in _dicts(self.c.get("body_text")):
            for s in _dicts(p.get("ref_spans")):
                rid, t = s.get("ref_id"), _s(s.get("text"))
                if isinstance(rid, str) and rid not in labels and (m := _FLOAT_LABEL.search(t)):
                    labels[rid] = m.group(1)
        return labels

    def _spans(self, p: dict[str, Any], text: str) -> str:
        """Resolve the paragraph's S2ORC-style spans (those whose text is not a marker): numeric
        citations renumbered, equation spans replaced by their LaTeX."""
        edits: list[tuple[int, int, str]] = []
        for s in sorted(_dicts(p.get("cite_spans")), key=lambda s: s.get("start") or 0):
            st, en, rid = s.get("start"), s.get("end"), s.get("ref_id")
            if not (isinstance(st, int) and isinstance(en, int) and 0 <= st < en <= len(text)):
                continue
            surface = text[st:en]
            if MARKER.fullmatch(surface) or not isinstance(rid, str) or rid not in self.bib:
                continue
            n = self._cite(rid)
            if _NUMERIC_CITE.fullmatch(surface) and not _YEAR.fullmatch(surface):
                edits.append((st, en, re.sub(r"\d+", str(n), surface, count=1)))
        for s in _dicts(p.get("eq_spans")):
            st, en = s.get("start"), s.get("end")
            if not (isinstance(st, int) and isinstance(en, int) and 0 <= st < en <= len(text)):
                continue
            tex = _s(s.get("latex")).strip() or _s(s.get("raw_str")).strip()
            if not tex:
                continue
            num = _s(s.get("eq_num")).strip()
            self.counts["formula"] += 1
            edits.append((st, en, f"{tex} {num}".strip()))
        for st, en, new in sorted(edits, reverse=True):
            text = text[:st] + new + text[en:]
        return text

    # ------------------------------------------------------------------ markers (unarXive)
    def _cite(self, rid: str) -> int:
        if rid not in self.cite_no:
            self.cite_no[rid] = len(self.cite_no) + 1
        self.counts["cite"] += 1
        return self.cite_no[rid]

    def _resolve(self, text: str, inline_only: bool = False) -> str:
        """``text`` with every ``{{kind:id}}`` marker replaced by what it stands for, or removed with
        the punctuation that framed only it (``data [2] and {{cite:gone}}.`` -> ``data [2] and.``,
        :func:`udfs.formats.wikitemplates.repair_holes`)."""
        if "{{" not in text:
            return text
        text = _CITE_RUN.sub(self._cite_run, text.replace(HOLE, ""))
        text = MARKER.sub(lambda m: self._marker(m, inline_only), text)
        if HOLE in text:
            text = repair_holes(text)
        return _TOUCHING_MATH.sub("$ $", text)

    def _cite_run(self, m: re.Match[str]) -> str:
        nums = []
        for rid in _CITE_ID.findall(m.group()):
            if rid in self.bib:
                n = self._cite(rid)
                if n not in nums:
                    nums.append(n)
            else:
                self.counts["unresolved"] += 1
        return f"[{', '.join(map(str, nums))}]" if nums else HOLE

    def _marker(self, m: re.Match[str], inline_only: bool) -> str:
        kind, rid = m.group(1), m.group(2)
        e = self.refs.get(rid)
        if not isinstance(e, dict):
            self.counts["unresolved"] += 1
            return HOLE
        if kind == "formula":
            tex = _WS.sub(" ", _s(e.get("latex"))).strip()
            if not tex:
                self.counts["unresolved"] += 1
                return HOLE
            self.counts["formula"] += 1
            s = m.string
            line_start = s.rfind("\n", 0, m.start()) + 1
            line_end = s.find("\n", m.end())
            after = s[m.end() : None if line_end < 0 else line_end]
            alone = not s[line_start : m.start()].strip() and not after.strip()
            return f"$${tex}$$" if alone and not inline_only else f"${tex}$"
        if kind in _FLOAT_KINDS and rid in self.float_no:  # the same float placed again: once is enough
            return ""
        if kind in _FLOAT_KINDS and not inline_only:
            return f"\n\n{self._float(rid, e, kind)}\n\n"
        self.counts["unresolved"] += 1
        return HOLE

    # ------------------------------------------------------------------ floats and references
    def _float(self, rid: str, e: dict[str, Any], kind: str) -> str:
        self.per_kind[kind] += 1
        num = e.get("num")
        num = str(num).strip() if isinstance(num, (str, int)) and not isinstance(num, bool) else ""
        label = num or self.span_labels.get(rid, str(self.per_kind[kind]))
        self.float_no[rid] = label
        self.counts[kind] += 1
        raw = _WS.sub(" ", _s(e.get("caption")) or _s(e.get("text"))).strip()
        if raw == _NO_CAPTION:
            raw = ""
        caption = self._resolve(raw, inline_only=True)
        line = caption if _CAPTIONED.match(caption) else f"{_FLOAT_KINDS[kind]} {label}: {caption}"
        line = line.rstrip(": ")
        content = _s(e.get("content")).strip()
        return f"{line}\n{content}" if content else line

    def _unplaced_floats(self) -> None:
        for rid, e in self.refs.items():
            if isinstance(e, dict) and e.get("type") in _FLOAT_KINDS and rid not in self.float_no:
                self.out.append(self._float(rid, e, e["type"]))

    def _references(self) -> None:
        lines = []
        for rid in [*self.cite_no, *(k for k in self.bib if k not in self.cite_no)]:
            body = self._resolve(_bib_text(self.bib[rid]), inline_only=True)
            if body:
                lines.append(f"[{self.cite_no.get(rid) or self._cite_no_count(rid)}] {body}")
        if lines:
            self.out.append("References")
            self.out.append("\n".join(lines))

    def _cite_no_count(self, rid: str) -> int:
        """The next number for an entry never cited (not counted as a resolved citation)."""
        self.cite_no[rid] = len(self.cite_no) + 1
        return self.cite_no[rid]
