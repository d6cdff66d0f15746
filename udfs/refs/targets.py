"""Targets a document still holds: captions, headings, tabular structures, numbered equations,
reference-list entries, a bibliography (see :mod:`udfs.refs` for the rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from udfs.refs.matcher import MAX_RANGE, PLACEHOLDERS, Matcher, _leading_int, _major, normalise_label
from udfs.refs.vocab import KEYWORD_KINDS, KINDS

# ------------------------------------------------------------------------------------------ targets
_PIPE_SEP = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$", re.MULTILINE)
_LATEX_TABLE = re.compile(r"\\begin\{(?:table|longtable)\*?\}|<table\b", re.IGNORECASE)
_LATEX_TABULAR = re.compile(r"\\begin\{tabular[x*]?\}")
_FIGURE_STRUCT = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|\\begin\{(?:sub)?figure\*?\}|<img\b|<figure\b", re.IGNORECASE)
_INCLUDEGRAPHICS = re.compile(r"\\includegraphics")
_EQ_ENV = re.compile(r"\\begin\{(?:equation|align|eqnarray|gather|multline)\}")
_EQ_LINE = re.compile(
    r"^(?=[^\n]*[=<>≤≥±∑∫√∂∇≈≠∈\\^_])[^\n]*?[^\w\n ][^\n]*?\((?P<label>\d{1,3}(?:\.\d{1,3})*[a-z]?)\)[ \t]*$",
    re.MULTILINE,
)
_DISPLAY_MATH = re.compile(r"^[ \t]*\$\$(?!\$).{1,20000}?\$\$", re.MULTILINE | re.DOTALL)
"""A display formula on its own line (``$$...$$``, as TeX and ingest's record readers write it): an equation
whose number the text does not show, counted like an unlabelled table."""
_TAG = re.compile(r"\\tag\{(?P<label>[^{}\n]{1,20})\}")
_LATEX_LABEL = re.compile(r"\\label\{(?P<key>[^{}\n]{1,80})\}")
_ALGORITHM_STRUCT = re.compile(r"\\begin\{algorithm\*?\}|\\begin\{algorithmic\}")
_LISTING_STRUCT = re.compile(r"\\begin\{(?:lstlisting|listing|minted|verbatim)\}|^[ \t]*```", re.MULTILINE)
_REF_ENTRY = re.compile(r"^[ \t]*\[(?P<n>\d{1,4})\](?![(])", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^[ \t]*(?P<n>\d{1,4})[.)][ \t]+\S", re.MULTILINE)
_CLAUSE = re.compile(
    r"^[ \t]*(?:(?:section|sec\.|§|article|art\.|clause)[ \t]*)?(?P<n>\d{1,2}(?:\.\d{1,2})*)[.)][ \t]+[\"“(]?(?-i:[A-Z])",
    re.MULTILINE | re.IGNORECASE,
)
"""A numbered clause: "10. Automatic Licensing." or "3. Grant of Licence. Subject to ..." opens section 10 / 3
of a licence or a contract, whether or not its title ends the line (GPL, Apache, MPL and contract style)."""
_THEOREM_ENV = re.compile(
    r"\\begin\{(?:theorem|lemma|proposition|corollary|definition|example|remark|property|conjecture|thm|lem|prop"
    r"|cor|defn|rem)\*?\}"
)
_BIBITEM = re.compile(r"\\bibitem\b")
_FOOTNOTE_DEF = re.compile(r"^[ \t]*\[\^(?P<n>[^\]\s]{1,20})\]:", re.MULTILINE)
_NOTE_LINE = re.compile(r"^[ \t]*(?P<n>\d{1,3})[.)][ \t]+(?P<rest>[^\n]*)", re.MULTILINE)
_NOTE_CUE = re.compile(r"[\^↑]|https?://|www\.|\bISBN\b|\bdoi\b|\b(?:1[89]|20)\d\d\b", re.IGNORECASE)


def _note_lists(text: str) -> set[int]:
    """Numbers of the notes lists a document holds under any heading (or none): a run of numbered lines
    1, 2, 3, ... that is a wiki's notes list (an entry opens with the "^" / "↑" back-link, or a heading
    with an edit link such as "Note[modifica]" stands right above it), ends the document, or has at least
    3 entries of which 2 read like references (a year, a URL, an ISBN or DOI). Such a list under "Note",
    "Referencias" or an untranslated heading is the target of "[2]" whatever the heading's language."""
    out: set[int] = set()
    run: list[int] = []
    cues = 0
    wiki = False
    last_end = 0

    def accept() -> None:
        if run and (wiki or not text[last_end:].strip() or (len(run) >= 3 and cues >= 2)):
            out.update(run)

    for mt in _NOTE_LINE.finditer(text):
        n = int(mt.group("n"))
        if run and n == run[-1] + 1:
            run.append(n)
        else:
            accept()
            if n != 1:
                run = []
                continue
            run, cues = [1], 0
            before = text[: mt.start()].rstrip()
            wiki = bool(_EDIT_HEADING.search(before, max(0, len(before) - 120)))
        rest = mt.group("rest")
        wiki = wiki or rest[:1] in "^↑"
        cues += bool(_NOTE_CUE.search(rest))
        last_end = mt.end()
    accept()
    return out


_EDIT_HEADING = re.compile(r"(?:^|\n)[^\n\[\].!?]{1,60}\[[^\]\n\d]{1,40}\][ \t]*\Z")
"""A wiki mirror's section heading with its edit link at the end of the text before a list
("Referencias[editar]", "Note[modifica | modifica wikitesto]")."""


_BIB_ENTRY = re.compile(
    r"^[^\n]{0,40}?(?-i:[A-Z])[\w'’\-]+,[ \t]+(?-i:[A-Z])\.[^\n]*?(?:19|20)\d{2}", re.MULTILINE
)


_CELL = re.compile(r"[^\t ]+(?: [^\t ]+)*")


def _row_shape(line: str) -> tuple | None:
    """A line's column shape: ("tab", n cells) or ("space", cell start offsets); None if not a row."""
    if not line.strip() or len(line) > 200:
        return None
    if "\t" in line.strip():
        cells = [c for c in line.strip().split("\t") if c.strip()]
        return ("tab", len(cells)) if len(cells) >= 2 and all(len(c) <= 40 for c in cells) else None
    cells = list(_CELL.finditer(line))
    if len(cells) < 2 or any(len(c.group()) > 40 for c in cells) or "  " not in line.strip():
        return None
    if len(cells) == 2 and not any(ch.isdigit() for ch in line):
        return None  # two text cells split by a double space: more likely prose than a table row
    return ("space", tuple(c.start() for c in cells))


def _same_columns(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    if a[0] == "tab":
        return a[1] == b[1]
    return len(a[1]) == len(b[1]) and all(abs(x - y) <= 2 for x, y in zip(a[1], b[1], strict=True))


def _whitespace_tables(text: str) -> int:
    """Runs of >= 3 consecutive lines with the same tab-separated cell count, or the same space-aligned
    column offsets (+-2 characters); cells are at most 40 characters, so hard-wrapped prose is no table."""
    blocks = run = 0
    prev: tuple | None = None
    for line in text.split("\n"):
        shape = _row_shape(line)
        if _same_columns(prev, shape):
            run += 1
        else:
            blocks += run >= 3
            run = 1 if shape else 0
        prev = shape
    return blocks + (run >= 3)


_ROMAN_LETTERS = {"I": 1, "V": 5, "X": 10}
"""Section labels that are both a letter (kept as written: "Section A" may be an appendix) and a roman
number: "Section V" names section 5 where the document numbers its headings in arabic (a converter
renumbers, the author wrote the number by hand)."""


def _split_range(label: str, entries: set[int]) -> bool:
    """"[1113]" in a list of 20 entries is "[11-13]" whose dash the HTML extraction lost: the label read as
    two entry numbers a < b (at most :data:`MAX_RANGE` apart) that both exist."""
    if not entries or not label.isdigit() or int(label) <= max(entries):
        return False
    for i in range(1, len(label)):
        if label[i] == "0":
            continue
        a, b = int(label[:i]), int(label[i:])
        if a < b <= a + MAX_RANGE and a in entries and b in entries:
            return True
    return False


@dataclass
class _Targets:
    """What a document still holds, computed lazily: most documents only need one or two of these."""

    text: str
    m: Matcher
    _labels: dict[str, set[str]] | None = field(default=None, repr=False)

    @cached_property
    def caption_starts(self) -> set[int]:
        """Keyword offsets of caption lines: "Table 1: Results" is a target, not a mention."""
        return {
            mt.start(f"k_{_kind(mt)}") for mt in self._captions
            if normalise_label(mt.group("label"), _kind(mt), self.m.numbers) not in PLACEHOLDERS
        }

    @cached_property
    def _captions(self) -> list[re.Match[str]]:
        return list(self.m.caption.finditer(self.text))

    @property
    def labels(self) -> dict[str, set[str]]:
        if self._labels is None:
            labels: dict[str, set[str]] = {k: set() for k in KINDS}
            for mt in self._captions:
                kind = _kind(mt)
                lab = normalise_label(mt.group("label"), kind, self.m.numbers)
                if lab and lab not in PLACEHOLDERS:
                    labels[kind].add(lab)
            for mt in self.m.heading.finditer(self.text):
                raw = mt.group("md") or mt.group("num") or mt.group("rom") or mt.group("let")
                lab = normalise_label(raw, "section", self.m.numbers)
                if lab:
                    labels["section"].add(lab)
            bib = self.bib_heads[0] if self.bib_heads else None
            for mt in _CLAUSE.finditer(self.text, 0, bib.start() if bib else len(self.text)):
                labels["section"].add(mt.group("n"))
            for mt in _EQ_LINE.finditer(self.text):
                labels["equation"].add(mt.group("label").lower())
            for mt in _TAG.finditer(self.text):
                labels["equation"].add(mt.group("label").strip().lower())
            for mt in _FOOTNOTE_DEF.finditer(self.text):
                labels["footnote"].add(mt.group("n").lower())
            self._labels = labels
        return self._labels

    @cached_property
    def bib_heads(self) -> list[re.Match[str]]:
        """The bibliography headings ("References", "Bibliography", ...) in text order."""
        return list(self.m.bib_heading.finditer(self.text))

    @cached_property
    def latex_labels(self) -> set[str]:
        return {mt.group("key") for mt in _LATEX_LABEL.finditer(self.text)}

    @cached_property
    def structures(self) -> dict[str, int]:
        t = self.text
        tables = len(_PIPE_SEP.findall(t)) + (len(_LATEX_TABLE.findall(t)) or len(_LATEX_TABULAR.findall(t)))
        figures = len(_FIGURE_STRUCT.findall(t)) or len(_INCLUDEGRAPHICS.findall(t))
        return {
            "table": tables + (_whitespace_tables(t) if "  " in t or "\t" in t else 0),
            "figure": figures,
            "equation": len(_EQ_ENV.findall(t)) + (len(_DISPLAY_MATH.findall(t)) if "$$" in t else 0),
            "algorithm": len(_ALGORITHM_STRUCT.findall(t)),
            "listing": len(_LISTING_STRUCT.findall(t)) // 2 if "```" in t else len(_LISTING_STRUCT.findall(t)),
            "theorem": len(_THEOREM_ENV.findall(t)),
        }

    @cached_property
    def bibliography(self) -> tuple[bool, set[int], int]:
        """(has a bibliography, numbered entries, non-empty lines after the bibliography heading)."""
        entries = {int(mt.group("n")) for mt in _REF_ENTRY.finditer(self.text)}
        heads = self.bib_heads
        after = 0
        if heads:
            tail = self.text[heads[-1].end():]
            entries |= {int(mt.group("n")) for mt in _NUMBERED_LINE.finditer(tail)}
            after = sum(1 for line in tail.split("\n") if line.strip())
        entries |= _note_lists(self.text)
        bibitems = len(_BIBITEM.findall(self.text)) if "\\bibitem" in self.text else 0
        entries |= set(range(1, bibitems + 1))  # \bibitem entries are numbered in order
        has_bib = bool(heads) or len(entries) >= 2 or bibitems > 0 or len(_BIB_ENTRY.findall(self.text)) >= 3
        return has_bib, entries, after

    @property
    def has_sections(self) -> bool:
        """The document has numbered parts of its own (numbered headings, clauses or appendices): without
        them a "Section 4" names a part of another document (a contract, a statute, a cited book)."""
        return bool(self.labels["section"] or self.labels["appendix"])

    def resolves(self, kind: str, label: str, ordinal: bool = False) -> bool:
        if label.startswith("\\"):
            key = label[label.index("{") + 1 : -1]
            return key in self.latex_labels
        if kind == "citation":
            has_bib, entries, after = self.bibliography
            n = _leading_int(label)
            if n is None:  # author-year: any bibliography will do
                return has_bib
            return n in entries or (has_bib and not entries and n <= after) or _split_range(label, entries)
        labels = self.labels[kind]
        if kind in ("section", "appendix"):
            labels = self.labels["section"] | self.labels["appendix"]
            if label in labels or any(x.startswith(label + ".") for x in labels):
                return True
            if kind == "section" and label in _ROMAN_LETTERS and label not in labels and str(_ROMAN_LETTERS[label]) in labels:
                return True  # "Section V" (a roman number the author wrote) on the heading "5 Results"
            major = re.match(r"\d+", label)  # "2.3" under heading 2, "2a" / "2(a)" a sub-clause of clause 2
            return kind == "section" and major is not None and major.group() != label and major.group() in labels
        if label in labels:
            return True
        n = _leading_int(label)
        if n is None:
            return False
        if ordinal and any((_leading_int(x) or 0) >= n for x in labels):
            return True
        if labels:  # labelled targets exist: a missing number is missing, do not count structures
            return _major(label) in {_major(x) for x in labels}  # "Figure 2A" resolves on "Figure 2:"
        return self.structures.get(kind, 0) >= n


def _kind(mt: re.Match[str]) -> str:
    groups = mt.groupdict()
    for kind in KEYWORD_KINDS:
        if groups.get(f"k_{kind}") is not None:
            return kind
    raise AssertionError("a keyword group matched without a kind")  # pragma: no cover
