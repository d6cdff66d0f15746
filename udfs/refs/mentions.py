"""Mentions in a document (keyword + labels, ordinals, numeric and author-year citations, footnotes),
each marked dangling when no target of the document resolves it (see :mod:`udfs.refs`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from udfs.refs.matcher import (
    _MONTHS,
    MAX_RANGE,
    MAX_SECTION_NUMBER,
    PLACEHOLDERS,
    Matcher,
    _leading_int,
    matcher,
    normalise_label,
)
from udfs.refs.targets import _kind, _Targets
from udfs.refs.vocab import DEFAULT_VOCAB

# ------------------------------------------------------------------------------------------ mentions
_NUMERIC_CITE = re.compile(
    r"\[(?P<c>[ \t]*\d{1,4}(?:[ \t]*[-–,;][ \t]*\d{1,4})*[ \t]*)\](?![(:\[\d]|[-–]\d)"
)
_PLACEHOLDER_CITE = re.compile(r"(?<![\w\]])\[[ \t]*\?{1,3}[ \t]*\]|\[[ \t]*(?:ref|cite)[ \t]*\?[ \t]*\]", re.IGNORECASE)
"""BibTeX's and LaTeX's ``[?]`` / ``[ref?]``: the key was not in the bibliography."""
_MARKER_CITE = re.compile(
    r"<cit\.>"  # older arXiv converters
    r"|\{\{cite:[^{}\n]{1,80}\}\}"  # unarXive
    r"|(?<![\w])BIBREF\d{1,4}\b"  # S2ORC-style text
    r"|(?<![\w])@xcite\b"  # the arXiv / PubMed summarisation sets
)
"""Citation markers a converter left in place of a citation whose key it did not render."""
_MARKER_GATE = ("<cit.>", "{{cite:", "BIBREF", "@xcite")
_ID_REF = re.compile(r"(?<![\w])(?P<k>FIG|TAB|SEC|EQ)REF\d{1,4}\b")
"""S2ORC-style ids that stand for the object they point at ("shown in Table TABREF3", "see SECREF2")."""
_ID_KINDS = {"FIG": "figure", "TAB": "table", "SEC": "section", "EQ": "equation"}
CONVERTER_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "LaTeX / BibTeX": ("Table ??", "Fig. ??", "(??)", "[?]"),
    "LaTeXML / unarXive": ("Table REF", "Section REF", "(REF)", "{{cite:<id>}}"),
    "S2ORC / GROBID-style text": ("BIBREF3", "TABREF0", "FIGREF2", "SECREF1", "EQREF4"),
    "older arXiv converters": ("Section <ref>", "Table <ref>", "(<ref>)", "<cit.>"),
    "arXiv / PubMed summarisation sets": ("@xcite",),
}
"""What converters leave where a reference's number or key was lost, by converter; each one is read as a
mention of its kind (``{{cite:..}}``, ``BIBREF``, ``<cit.>``, ``@xcite``, ``[?]``: citation; a bare
``(REF)`` / ``(<ref>)``: equation). A lost number is always dangling; a citation marker (label ``REF``)
resolves on any bibliography the document holds, like an author-year citation, while BibTeX's ``[?]``
(label ``?``: the key was not in the bibliography) is always dangling. The float markers unarXive leaves in place of
the floats themselves (``{{table:<id>}}``, ``{{figure:<id>}}``, ``{{formula:<id>}}``) are no mentions."""
_FOOTNOTE_REF = re.compile(r"\[\^(?P<n>[\w-]{1,20})\](?!:)")
_NAME = r"(?-i:[A-Z])[\w'’\-]*\w"
_YEAR = r"(?:19|20)\d{2}[a-z]?"
_AUTHOR_YEAR = re.compile(
    rf"\((?:(?:see|e\.g\.|cf\.|i\.e\.)[ ,]+)?(?P<a>{_NAME})(?:(?P<many>\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME}),?|,)"
    rf"\s+(?P<y>{_YEAR})(?:\s*[;,]\s*[^()\n]{{0,80}}?{_YEAR})*\)"
    rf"|(?P<na>{_NAME})(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME})\s*\((?P<ny>{_YEAR})\)"
)
_PAGINATION = re.compile(r"\[\d{1,4}\](?:[ \t|]+\[\d{1,4}\]){2,}")
"""Three or more bracketed numbers separated by spaces: page navigation ("[1] [2] [3] Next"), not citations."""
_EQ_TAG_AFTER = re.compile(r"[ \t]*(?:\\end\{|\\\\)")
_CITE_RANGE = re.compile(r"(\d+)[ \t]*[-–][ \t]*(\d+)|(\d+)")
_MORE_LABELS = re.compile(r"(?:[ \t]*(?:,|and|or|&|[-–—]|to)[ \t]*\(?(?-i:[A-Z])?\d[\w.]*\)?)*", re.IGNORECASE)
_PAGE_BEFORE = re.compile(r"\bpp?\.[ \t]*$")
_ABBR = r"(?-i:[A-Z][A-Za-z]{0,6}\.|(?:[A-Z]\.){2,4})"
_STATUTE_BEFORE = re.compile(
    rf"(?:(?<![\w.])(?:\d{{1,4}}|{_ABBR})[ \t]+{_ABBR}|\b(?-i:Code|Stat|Stats|Laws|Ann|Regs|U\.S\.C|C\.F\.R)\.?)[ \t]*\Z"
)
"""A law reporter or a statute right before the keyword: a volume number or an abbreviation, then an
abbreviation ("45 Cal. App. 3d 1234", "96 U.S. App. D.C. 14", "Wis. Stat. § 19.35"), or a code name
("Penal Code § 12", "42 U.S.C. § 83"); not the document's own part. A lone abbreviation is not enough:
"... the MLT. Figure 3A" ends a sentence. Source: the reporter and code abbreviations of The Bluebook
(tables T1, T6)."""
_BARE_REF = re.compile(r"\([ \t\u00a0]*(?:REF|\?\?|<ref>)[ \t\u00a0]*\)")
"""``(REF)`` / ``(??)`` / ``(<ref>)``: an ``\\eqref`` whose number the converter lost (unarXive, LaTeX,
older arXiv converters)."""
_EXCLUDED = re.compile(
    r"^[ \t]*```.*?(?:^[ \t]*```|\Z)"
    r"|\\begin\{(?P<env>verbatim|lstlisting|minted|thebibliography)\}.*?(?:\\end\{(?P=env)\}|\Z)"
    r"|^[ \t]*\\bibitem\b[^\n]*"
    r"|<ref\b[^>]*/>|<ref\b[^>]*>(?:[^<]|<(?!/?ref\b))*</ref>"
    r"|\{\{[ \t]*(?:cite|citation|harvnb|sfn)\b(?!:)[^{}]*(?:\{\{[^{}]*\}\}[^{}]*)*\}\}"
    r"|\[https?://[^\s\]]+[ \t][^\]\n]*\]"
    r"|`[^`\n]+`",
    re.DOTALL | re.MULTILINE | re.IGNORECASE,
)
"""Where a mention is an example or an entry, not a reference: code blocks and inline code, verbatim and
listing environments, ``thebibliography`` and ``\\bibitem`` lines, wiki ``<ref>`` notes, citation
templates and external-link labels (a cited work's "Table 3" is that work's)."""
_PAPER_KINDS = frozenset({"table", "figure", "equation", "appendix", "algorithm", "listing", "theorem"})
"""Mentions that show a document is structured like a paper or a report (it cites its own floats,
equations, statements or appendices), so that a "Section 3" without a numbered heading is its own lost
section; citations and footnotes do not count (web and wiki pages carry them too)."""
_MIN_PAPER_MENTIONS = 2
"""A blog post's one "Figure 6 of this paper" (a linked paper's figure) does not make it a paper; two
mentions of floats, equations, statements or appendices do."""
_SCHOLARLY_SECTION = re.compile(r"\bsub-?sec(?:tion)?s?\b|\b(?:secs?|sect)\.[ \t~\u00a0]*\d", re.IGNORECASE)
""""Subsection 3.2", "Sec. 4", "Sect. 2": the forms papers use for their own sections (statutes say
"Section" or "§"), evidence enough that the document had numbered sections."""
_EXCLUDED_GATE = ("```", "\\begin{", "\\bibitem", "<ref", "{{", "[http", "`")
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’"}


_MATH = re.compile(
    r"(?<![\\$])\$\$(?!\$).{1,20000}?(?:(?<=\\\\)|(?<!\\))\$\$"
    r"|(?<![\\$\w])\$(?=[^\s$])(?:[^$\\\n]++|\\.|\n(?![ \t]*\n)){1,2000}?(?:(?<=\\\\)|(?<![\s\\]))\$(?![\d$])",
    re.DOTALL,
)
"""TeX math: ``$$...$$`` (display, may span lines; at most 20,000 characters) and ``$...$`` (inline, within
a paragraph). Pandoc's rule tells math from money: an opening ``$`` has a non-space character right after
it, a closing one a non-space character right before it and no digit after it ("$5 and $10" is no
formula); ``\\$`` is an escaped dollar, ``\\\\$`` a line break that ends a formula. A formula's
``\\cite[Theorem 14.16]`` or ``(1)`` is TeX, not a mention of the document's parts.
Source: Pandoc User's Guide, extension ``tex_math_dollars``."""
_ENTRY_START = re.compile(
    r"[ \t]*(?:\[\d{1,4}\]|\d{1,4}[.)][ \t]|[\^↑*•\-–][ \t]?"
    r"|(?-i:[A-Z])[\w'’\-]+,[ \t]+(?-i:[A-Z])\.)"
)
"""How a line of a reference list starts: ``[12]``, ``12.``, a wiki back-link or a bullet, or an author
("Smith, J.")."""


def _bibliography_entries(text: str, m: Matcher, heads: Sequence[re.Match[str]]) -> list[tuple[int, int]]:
    """The entry lines of every reference list: after a bibliography heading ("References",
    "Bibliography", ...), the lines that start like an entry (:data:`_ENTRY_START`) and the lines that
    continue one (no blank line between, not a heading or caption), up to the first other line; a
    numbered heading ("1. Introduction" after a table of contents ending in "References") ends the list.
    A cited work's "Table 3" or "optimization algorithm (2014)" in an entry is not a mention."""
    out: list[tuple[int, int]] = []
    for head in heads:
        pos, entry, prev_blank = head.end(), False, True
        while pos < len(text):
            nl = text.find("\n", pos + 1)
            line_start = pos + 1 if text[pos : pos + 1] == "\n" else pos
            line_end = len(text) if nl < 0 else nl
            line = text[line_start:line_end]
            if not line.strip():
                prev_blank = True
            elif _ENTRY_START.match(line) and not m.heading.match(line):
                out.append((line_start, line_end))
                entry, prev_blank = True, False
            elif entry and not prev_blank and not m.heading.match(line) and not m.caption.match(line):
                out.append((line_start, line_end))
            else:
                break
            pos = line_end
    return out


def _inside(spans: list[tuple[int, int]]):
    """A test ``pos -> bool``: ``pos`` lies in one of ``spans`` (``[start, end)``), by binary search over the
    merged spans (a paper has thousands of formulas and hundreds of mentions)."""
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [a for a, _ in merged]

    def test(pos: int) -> bool:
        i = bisect_right(starts, pos) - 1
        return i >= 0 and pos < merged[i][1]

    return test


def _excluded_spans(text: str, m: Matcher, bib_heads: Sequence[re.Match[str]]) -> list[tuple[int, int]]:
    """Spans whose mentions are examples, entries or TeX, not references (see :data:`_EXCLUDED`,
    :data:`_MATH`, :func:`_bibliography_entries` after the headings ``bib_heads``)."""
    spans = [(mt.start(), mt.end()) for mt in _EXCLUDED.finditer(text)] if any(g in text for g in _EXCLUDED_GATE) else []
    if "$" in text:
        spans += [(mt.start(), mt.end()) for mt in _MATH.finditer(text)]
    return spans + _bibliography_entries(text, m, bib_heads)


def _quoted(text: str, start: int, end: int) -> bool:
    """'"[1]"', "“Table 2”": a mention that is itself quoted is an example string."""
    close = _QUOTES.get(text[start - 1 : start]) if start else None
    return close is not None and text[end : end + 1] == close


@dataclass(frozen=True)
class Mention:
    """One mention: ``kind``, normalised ``label``, ``[start, end)`` code-point span, ``dangling``."""

    kind: str
    label: str
    start: int
    end: int
    dangling: bool


class Candidate(NamedTuple):
    """A mention as found, before it is resolved: ``kind``, normalised ``label``, ``[start, end)``
    code-point span, and ``ordinal``: written as an ordinal before the keyword ("the second figure")."""

    kind: str
    label: str
    start: int
    end: int
    ordinal: bool


def _lower(text: str) -> str:
    low = text.lower()
    # a few characters change length when lower-cased ("İ"); keep offsets by lowering ASCII only then
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _candidates(text: str, m: Matcher) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """Full keyword-mention and ordinal matches, tried only where the lower-cased scan found a word."""
    mentions, ordinals, last_end = [], [], -1
    for c in m.scan.finditer(_lower(text)):
        pos = c.start()
        if pos < last_end:
            continue
        mt = m.mention.match(text, pos)
        if mt:
            mentions.append(mt)
            last_end = mt.end()
            continue
        mt = m.ordinal.match(text, pos)
        if mt:
            ordinals.append(mt)
    return mentions, ordinals


def _keyword_mentions(text: str, m: Matcher, matches: list[re.Match[str]]) -> list[Candidate]:
    out: list[Candidate] = []
    for mt in matches:
        kw_start = mt.start()
        kind = _kind(mt)
        kw_text = text[kw_start : mt.start("labels")]
        if _not_a_keyword(text, kw_start, kind, kw_text):
            continue
        prev = text[max(0, kw_start - 12) : kw_start].split()
        refish = kw_text[:1].isupper() or (prev and prev[-1].lower() in {"in", "see", "of", "and", "the", "to", "by", "from", "per"})
        labels_start = mt.start("labels")
        last_n: int | None = None
        pending_range = False
        first = True
        for lt in m.label.finditer(text, labels_start, mt.end("labels")):
            raw = lt.group()
            gap = text[labels_start : lt.start()].strip(" \t~\u00a0\u202f,&").lower()
            labels_start = lt.end()
            if not first:
                pending_range = gap in m.conjunction_range
            lab = normalise_label(raw, kind, m.numbers)
            if lab is None:
                break
            core = raw.strip("() \t")
            if not first and len(core) == 1 and core.isalpha() and kind not in ("appendix", "section"):
                continue  # "Figure 3A-C": panel letters of the previous label
            if first and _not_a_first_label(text, m, kw_text, core, lab, bool(refish), lt.end(), mt.end()):
                break
            if kind == "section" and (_leading_int(lab) or 0) > MAX_SECTION_NUMBER:
                break
            n = _leading_int(lab)
            start = kw_start if first else lt.start()
            if pending_range and last_n is not None and n is not None and 0 < n - last_n <= MAX_RANGE and lab.isdigit():
                for k in range(last_n + 1, n):
                    out.append(Candidate(kind, str(k), lt.start(), lt.end(), False))
            out.append(Candidate(kind, lab, start, lt.end(), False))
            last_n = n if lab.isdigit() else None
            first = False
    return out


_TITLE_WORD = re.compile(r"[ \t]+(?-i:[A-Z][a-z]+)\b")


def _not_a_keyword(text: str, kw_start: int, kind: str, kw_text: str) -> bool:
    """The keyword match at ``kw_start`` is no reference keyword (its mentions are skipped)."""
    if kw_start and (text[kw_start - 1].isalnum() or text[kw_start - 1] in "_§\\"):
        return True  # inside a word ("timetable 2") or a LaTeX command
    if kind == "theorem" and not kw_text[:1].isupper():
        return True  # "a lemma 3 ..." is not how mathematical text cites a statement
    # "Cal. App. 3d 1234" (a law reporter), "Wis. Stat. § 19.35" (a statute)
    return bool(_STATUTE_BEFORE.search(text, max(0, kw_start - 24), kw_start))


def _not_a_first_label(text: str, m: Matcher, kw_text: str, core: str, lab: str, refish: bool, label_end: int,
                       match_end: int) -> bool:
    """The first label after a keyword is prose, not a label (the keyword then yields no mention)."""
    if _is_year(core) and text[label_end - 1 : label_end] == ")":
        return True  # "an optimization algorithm (2014)": a year in parentheses, not a label
    if not core[:1].isdigit() and lab not in PLACEHOLDERS and not core.startswith("\\") and not refish:
        return True  # "I figure I can", "figure one out": non-numeric labels need a capitalised keyword
    if not core[:1].isdigit() and lab not in PLACEHOLDERS and _sentence_end(kw_text, m):
        return True  # "... Thermodynamic Properties. J Chem Phys.": a word ending a sentence, then a letter
    if core.lower() in m.numbers and _TITLE_WORD.match(text, label_end):
        return True  # "Figure Two Packs": a product name in title case
    if core.isalpha() and core.islower() and core not in m.numbers and not kw_text[:1].isupper():
        return True  # "the section x is", "the equation x": a lower-case roman label needs "Section"
    plural = kw_text.rstrip(" .~\u00a0").lower().endswith("s")
    # "the algorithms one wants": a plural keyword before a lone spelled number
    return core.lower() in m.numbers and plural and label_end == match_end


def _is_year(core: str) -> bool:
    """``core`` is a year (1800..2100): no document numbers its parts that high."""
    return len(core) == 4 and core.isdigit() and 1800 <= int(core) <= 2100


def _sentence_end(kw_text: str, m: Matcher) -> bool:
    """The keyword is a whole word followed by a full stop ("Properties."), not an abbreviation ("Fig.")."""
    kw = kw_text.rstrip(" \t~\u00a0\u202f")
    return kw.endswith(".") and kw[:-1].lower() not in m.abbreviations


def _ordinal_mentions(text: str, m: Matcher, matches: list[re.Match[str]]) -> list[Candidate]:
    return [
        Candidate(_kind(mt), str(m.ordinals[mt.group("ord").lower()]), mt.start("ord"), mt.end(), True)
        for mt in matches
        if _kind(mt) != "theorem"  # "in the first example" is prose, not "Example 1"
        and not (mt.start() and text[mt.start() - 1].isalnum())
        and m.ordinal_before.search(text, max(0, mt.start() - 16), mt.start())
    ]


def _citation_mentions(text: str) -> list[Candidate]:
    out: list[Candidate] = []
    if any(g in text for g in _MARKER_GATE):
        out.extend(Candidate("citation", "REF", mt.start(), mt.end(), False) for mt in _MARKER_CITE.finditer(text))
    if "REF" in text:
        out.extend(Candidate(_ID_KINDS[mt.group("k")], "REF", mt.start(), mt.end(), False)
                   for mt in _ID_REF.finditer(text))
    navigation = [(p.start(), p.end()) for p in _PAGINATION.finditer(text)] if "] [" in text else []
    if "[" not in text:
        return _author_year_mentions(text, out)
    for mt in _NUMERIC_CITE.finditer(text):
        if mt.start() and (text[mt.start() - 1].isalnum() or text[mt.start() - 1] in "_[]\\^}"):
            continue  # x[1], a[1][2], \cite[1], \newcommand{\x}[1]
        if any(a <= mt.start() < b for a, b in navigation) or _PAGE_BEFORE.search(text, max(0, mt.start() - 6), mt.start()):
            continue  # "[1] [2] [3] Next"; "p. [231]-233" (a page number supplied by a cataloguer)
        if _EQ_TAG_AFTER.match(text, mt.end()):
            continue  # "... \ [1] \end{equation}": an equation's number written in brackets
        line_start = text.rfind("\n", 0, mt.start()) + 1
        if not text[line_start : mt.start()].strip():
            continue  # "[12] Author, Title" at line start is a reference-list entry
        values: list[int] = []
        for r in _CITE_RANGE.finditer(mt.group("c")):
            if r.group(3):
                values.append(int(r.group(3)))
            else:
                a, b = int(r.group(1)), int(r.group(2))
                values.extend(range(a, b + 1) if 0 < b - a <= MAX_RANGE else (a, b))
        if not values or any(v == 0 for v in values) or all(1800 <= v <= 2100 for v in values):
            continue  # "[0]" indices, "[2019]" years
        out.extend(Candidate("citation", str(v), mt.start(), mt.end(), False) for v in dict.fromkeys(values))
    if "?" in text:
        out.extend(Candidate("citation", "?", mt.start(), mt.end(), False) for mt in _PLACEHOLDER_CITE.finditer(text))
    if "[^" in text:
        for mt in _FOOTNOTE_REF.finditer(text):
            out.append(Candidate("footnote", mt.group("n").lower(), mt.start(), mt.end(), False))
    return _author_year_mentions(text, out)


_YEAR_HINT = re.compile(r"(?:19|20)\d\d[a-z]?\s*[);,]")


def _author_year_mentions(text: str, out: list[Candidate]) -> list[Candidate]:
    if not _YEAR_HINT.search(text):
        return out
    scholarly = "et al" in text
    for mt in _AUTHOR_YEAR.finditer(text):
        name, year = (mt.group("a"), mt.group("y")) if mt.group("a") else (mt.group("na"), mt.group("ny"))
        if name.lower() in _MONTHS:
            continue
        if mt.group("a") and not mt.group("many") and not (name[1:].islower() and scholarly):
            continue  # "(Island, 1976)", "(EG, 1974)": a lone "(Name, year)" counts only in scholarly text
        out.append(Candidate("citation", f"{name} {year}", mt.start(), mt.end(), False))
    return out


def _bare_refs(text: str, keyword: list[Candidate]) -> list[Candidate]:
    """``(REF)`` outside a keyword mention ("substituting (REF) into (REF)"): a lost equation number."""
    if "REF" not in text and "??" not in text and "<ref>" not in text:
        return []
    spans = [(c.start, c.end) for c in keyword]
    return [Candidate("equation", "??" if "??" in mt.group() else "REF", mt.start(), mt.end(), False)
            for mt in _BARE_REF.finditer(text) if not any(a <= mt.start() < b for a, b in spans)]


def _external(text: str, kind: str, start: int, end: int, m: Matcher) -> bool:
    rest = _MORE_LABELS.match(text, end).end()  # "equations (1) and (2) in the main text": the whole list
    if m.external_after.match(text, rest) or m.external_before.search(text, max(0, start - 60), start):
        return True
    # a supplementary / online cue in the same sentence (60 characters before, 80 after), unless the cue
    # names an object of another kind: "Fig. 2 (Supplementary Table S3)" keeps Fig. 2 in the document
    lo = max(0, start - 60)
    before = text[lo:start]
    lo += max(before.rfind(c) for c in ".!?\n") + 1
    hi = end + 80
    after = text[end:hi]
    stops = [i for i in (after.find(c) for c in ".!?\n") if i >= 0]
    hi = end + min(stops) if stops else min(hi, len(text))
    for cues, a, b in ((m.cue_before, lo, start), (m.external_cue, end, hi)):
        for cue in cues.finditer(text, a, b):
            named = m.cue_names.match(text, cue.end())
            if named is None or _kind(named) == kind:
                return True
    return False


def find_mentions(text: str, vocab: Mapping[str, Sequence[str]] | None = None,
                  held: Collection[str] = ()) -> list[Mention]:
    """All mentions of one document, in text order, each marked dangling or not.

    Args:
        text: the document text.
        vocab: one language's vocabulary (default: English from :data:`udfs.refs.vocab.DEFAULT_VOCAB`).
        held: mention kinds whose targets the document held before ingest dropped them (``citation`` for a
            dropped reference list, ``table``, ``figure``): with ``citation`` held, an author-year
            citation without a bibliography is dangling, as in a paper (sections are not affected: a
            wiki page whose notes were dropped still has no numbered sections of its own).

    Returns:
        :class:`Mention` objects sorted by ``(start, end, kind, label)``; a range or list ("Figures 3-5")
        gives one mention per label. Empty for empty or whitespace-only text.

    Source: the rules in this module's docstring.
    """
    return _analyse(text, matcher(vocab or DEFAULT_VOCAB["en"]), held)


def _analyse(text: str, m: Matcher, held: Collection[str] = ()) -> list[Mention]:
    kw_matches, ord_matches = _candidates(text, m)
    keyword = _keyword_mentions(text, m, kw_matches)
    raw = keyword + _ordinal_mentions(text, m, ord_matches) + _citation_mentions(text) + _bare_refs(text, keyword)
    if not raw:
        return []
    targets = _Targets(text, m)
    inside = _inside(_excluded_spans(text, m, targets.bib_heads))
    raw = [r for r in raw if not _quoted(text, r.start, r.end) and not inside(r.start)]
    out: list[Mention] = []
    seen: set[tuple[str, str, int]] = set()
    captions = targets.caption_starts
    paper_kinds = sum(r.kind in _PAPER_KINDS for r in raw) >= _MIN_PAPER_MENTIONS

    def paper_like() -> bool:  # asked only for unresolved sections and author-year citations
        return paper_kinds or bool(captions) or bool(_SCHOLARLY_SECTION.search(text))

    for kind, label, start, end, is_ordinal in sorted(raw, key=lambda r: (r.start, r.end, r.kind, r.label)):
        if (kind, label, start) in seen or start in captions:
            continue
        seen.add((kind, label, start))
        if kind == "citation" and label == "REF":
            dangling = not targets.bibliography[0]  # a citation marker: its entry is any of the bibliography
        elif label in PLACEHOLDERS:
            dangling = True
        elif targets.resolves(kind, label, is_ordinal):
            dangling = False
        elif kind == "citation":
            # author-year without any bibliography: dangling in a paper, or where ingest dropped the list
            dangling = label[:1].isdigit() or "citation" in held or paper_like()
        elif kind == "section" and not targets.has_sections and not paper_like():
            dangling = False  # no numbered part and no float of its own: a section of another document
        else:
            dangling = not (label[:1] == "S" and label[1:2].isdigit()) and not _external(text, kind, start, end, m)
        out.append(Mention(kind, label, start, end, dangling))
    return out
