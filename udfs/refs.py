"""Broken-reference detection: mentions of tables, figures, equations, sections, ... whose target is gone.

Preprocessing strips tables, figures, equations and reference lists but keeps the sentences that point
at them ("as shown in table one", "see Fig. 3b", "Eq. (4) gives", "as reported in [12]"). This module
finds every such *mention* in a document, finds the *targets* the document still holds (captions,
tabular structure, numbered display equations, headings, reference-list entries, a bibliography), and
marks a mention *dangling* when nothing in the document resolves it.

Rules (each one tested in ``tests/test_refs_udf.py``):

* A mention is a keyword of a kind (vocabulary per language, :mod:`udfs.refs_vocab`) followed by one
  or more labels: arabic (``1``, ``2.3``, ``4a``, ``S1``), roman (``IV``, ``iv``), spelled (``one`` ..
  ``twenty``), letters (``Appendix A``), parenthesised (``Eq. (3)``), lists and ranges (``Tables 1 and
  2``, ``Figures 3-5``, ``Eqs. (2)-(4)``); or an ordinal before the keyword ("in the second figure");
  or a numeric citation (``[12]``, ``[3, 7]``, ``[2-5]``); or an author-year citation ("(Smith et al.,
  2019)", "Smith and Lee (2020)"; a lone "(Smith, 2019)" only in text that also says "et al", because
  on the web "(Island, 1976)" is a record label); or a markdown footnote reference (``[^3]``).
* A converter placeholder as label (``Table REF``, ``Fig. ??``, ``[?]``) is always dangling: the number
  it stood for is lost whatever the document still holds.
* External material is never dangling: labels ``S<n>`` that the document does not hold (supplementary
  tables by convention), a supplementary / online cue in the same sentence, or "of/in/from" followed by
  a citation, an author or a named law ("Table 2 of [5]", "Section 230 of the Communications Decency
  Act"). Section numbers >= 100 are statute sections, not document sections, and are not mentions.
* Not mentions at all: "one table", "Figure skating", "[citation needed]", years in brackets
  ("[2019]"), array indices (``a[1]``), markdown links (``[1](url)``) and link definitions (``[1]: url``),
  page navigation ("[1] [2] [3] Next"), "Chapter 11 bankruptcy" / "Section 8 housing".
* A mention resolves when the document holds a caption line (``Table 1:``, ``TABLE I.``, ``Figure
  2.``), a heading with that label (``## 3 Methods``, ``3.2 Results``, ``Appendix A``), a numbered
  display equation (a math line ending in ``(3)``, ``\\tag{3}``), a reference-list entry (``[12] ...``
  or ``12. ...`` under a bibliography heading), any bibliography (author-year citations), a LaTeX
  ``\\label`` for a ``\\ref``, or -- when the document has no labelled target of that kind -- enough
  unlabelled structures of the kind: markdown pipe tables, LaTeX ``tabular``/``table``, runs of >= 3
  lines with a consistent tab / multi-space column count, images, LaTeX equation environments.

Offsets are 0-based code-point offsets into the text, end exclusive (Python ``str`` indices; Spark's
``substring`` is 1-based over the same code points).

Source: the mention and caption conventions of the ACM, IEEE and Springer author guides and of LaTeX
(``\\ref``, ``\\label``, ``\\tag``, ``tabular``); placeholders as left by LaTeXML / unarXive (``REF``)
and LaTeX itself (``??``) and BibTeX (``[?]``). No reference implementation exists; the rules were
written against ``tests/data/refs/`` (labelled set) and checked on PMC and unarXive papers.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from udfs.refs_vocab import DEFAULT_VOCAB, KEYWORD_KINDS, KINDS

PLACEHOLDERS = frozenset({"REF", "??", "?"})
"""Normalised labels that mean "the converter lost the label": always dangling."""

MAX_SECTION_NUMBER = 99
"""Section labels above this are statute or code sections ("Section 230", "§ 1983"), not headings."""

MAX_RANGE = 50
"""A range ``3-5`` expands to its labels only up to this many; longer ones are read as two labels."""

_SP = r"[ \t~\u00a0\u202f]*"
_ROMAN = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_MONTHS = frozenset(
    "january february march april may june july august september october november december spring summer "
    "autumn fall winter januar februar märz juni juli oktober dezember janvier février mars avril mai juin "
    "juillet août septembre octobre novembre décembre enero febrero marzo abril mayo junio julio agosto "
    "septiembre octubre noviembre diciembre".split()
)
_ABBREVIATIONS = frozenset(
    "al e.g i.e cf vs dr mr mrs ms prof no nos vol pp approx resp ref refs ca st fig figs eq eqs eqn sec "
    "secs sect tab tabs app alg algo lst fn ch abb gl abschn kap anh éq chap ec ecs secc cap z.b d.h u.a".split()
)
_LAW_WORDS = (
    r"(?-i:Act|Code|Constitution|Treaty|Convention|Regulation|Directive|Statute|Charter|Amendment|Rules|"
    r"Agreement|Contract|Lease|Ordinance|Bill|Treaty|Protocol|Bylaws|Articles|"
    r"U\.S\.C\.?|C\.F\.R\.?|USC|CFR|GDPR|Gesetz|Grundgesetz|BGB|StGB|Loi|Ley)"
)
_LEGAL_NOUNS = r"(?:bankruptcy|housing|vouchers?|visas?|benefits?|status|protection|filing|tenants?)\b"
"""Words after "Chapter 11" / "Section 8" that make it a statute's chapter, not the document's."""


# ------------------------------------------------------------------------------------------ matcher
def _term_regex(term: str) -> str:
    t = term.strip().lower()
    if t.endswith(".") and len(t) > 1:
        return re.escape(t[:-1]) + r"(?:\.|\b)"
    if t[-1:].isalnum():
        return re.escape(t) + r"\b"
    return re.escape(t)


def _alternation(terms: Sequence[str]) -> str:
    return "|".join(_term_regex(t) for t in sorted(set(terms), key=lambda s: (-len(s), s)))


def _words(terms: Sequence[str]) -> str:
    return "|".join(re.escape(t.lower()) for t in sorted(set(terms), key=lambda s: (-len(s), s)))


@dataclass(frozen=True)
class Matcher:
    """The compiled regexes of one language's vocabulary (built once per process by :func:`matcher`)."""

    mention: re.Pattern[str]
    scan: re.Pattern[str]
    label: re.Pattern[str]
    ordinal: re.Pattern[str]
    ordinal_before: re.Pattern[str]
    caption: re.Pattern[str]
    heading: re.Pattern[str]
    bib_heading: re.Pattern[str]
    external_after: re.Pattern[str]
    external_before: re.Pattern[str]
    gate: str
    numbers: dict[str, int]
    ordinals: dict[str, int]
    conjunction_range: frozenset[str]
    abbreviations: frozenset[str]


_MATCHERS: dict[str, Matcher] = {}


def matcher(vocab: Mapping[str, Sequence[str]]) -> Matcher:
    """Compile (once per process, cached by content) the regexes of one vocabulary.

    Args:
        vocab: one language of :data:`udfs.refs_vocab.DEFAULT_VOCAB` (same fields).

    Returns:
        The :class:`Matcher`.

    Raises:
        ValueError: a keyword kind or word list is missing or empty.
    """
    key = json.dumps({k: list(v) for k, v in vocab.items()}, sort_keys=True, ensure_ascii=False)
    m = _MATCHERS.get(key)
    if m is None:
        m = _MATCHERS[key] = _compile(vocab)
    return m


def _compile(vocab: Mapping[str, Sequence[str]]) -> Matcher:
    for k in (*KEYWORD_KINDS, "numbers", "ordinals", "conjunctions", "prepositions"):
        if not vocab.get(k):
            raise ValueError(f"refs vocabulary field {k!r} is missing or empty; got {vocab.get(k)!r}")
    kw = "|".join(f"(?P<k_{kind}>{_alternation(vocab[kind])})" for kind in KEYWORD_KINDS)
    numbers = {w.lower(): i + 1 for i, w in enumerate(vocab["numbers"])}
    ordinals = {w.lower(): i + 1 for i, w in enumerate(vocab["ordinals"])}
    spelled = _words(list(numbers))
    single = (
        r"(?:REF\b|\?\?"
        r"|(?-i:[A-Z])?\d{1,4}(?:\.\d{1,3})*(?:[a-z](?![\w]))?(?:\((?-i:[a-z])\))?(?![\w]|\.\d)"
        r"|(?-i:[IVXLC]{1,6}|[A-Z])(?:\.\d{1,3})*(?![\w])"
        r"|(?-i:[ivx]{1,5})(?![\w])"
        rf"|(?:{spelled})(?![\w-])"
        r"|\\(?:eq)?ref\{[^{}\n]{1,80}\})"
    )
    item = rf"(?:\({_SP}{single}{_SP}\)|{single})"
    cont_item = r"(?:\(\s*(?:REF\b|\d{1,3}(?:\.\d{1,3})*[a-z]?)\s*\)|(?:REF\b|\d{1,3}(?:\.\d{1,3})*[a-z]?|(?-i:[A-Z]))(?![\w]))"
    conj = _words(vocab["conjunctions"])
    cont = rf"(?:{_SP}(?:,{_SP}(?:(?:{conj})\b{_SP})?|&{_SP}|[-–—]{_SP}|(?:{conj})\b{_SP}){cont_item})"
    mention = re.compile(rf"(?:{kw})\.?{_SP}(?P<labels>{item}{cont}*)", re.IGNORECASE)
    # Case-insensitive alternations are ~7x slower in `re` than case-sensitive ones, so keyword and
    # ordinal candidates are found on the lower-cased text and only then matched in full, anchored.
    words = [t.lower() for k in KEYWORD_KINDS for t in vocab[k]] + list(ordinals)
    scan = re.compile(r"\b(?:" + "|".join(_term_regex(t) for t in sorted(set(words), key=lambda w: (-len(w), w)))
                      + r")|§")
    label = re.compile(rf"{item}|{cont_item}", re.IGNORECASE)
    preps = _words(vocab["prepositions"])
    ordinal = re.compile(
        rf"(?P<ord>{_words(list(ordinals))})\s+(?:{kw})(?![\w])(?!{_SP}\d)",
        re.IGNORECASE,
    )
    caption = re.compile(
        rf"^[ \t>*_#|]*(?:{kw})\.?{_SP}(?P<label>{item})[ \t]*(?:\*\*|__|\*|_)?[ \t]*(?:[:.|](?!\d)|[—–\-][ \t]|$|(?-i:[ \t]+[A-Z(]))",
        re.IGNORECASE | re.MULTILINE,
    )
    heading = re.compile(
        r"^(?:#{1,6}[ \t]+(?:(?:" + f"(?:{kw})" + r")\.?" + _SP + r")?(?P<md>(?-i:[A-Z])?\d{1,2}(?:\.\d{1,2})*|(?-i:[IVX]{1,5}|[A-Z])(?:\.\d{1,2})*)\.?(?:[ \t]|$)"
        r"|[ \t]*(?P<num>\d{1,2}(?:\.\d{1,2})*)\.?[ \t]+(?-i:[A-Z])[^\n]{0,100}?[^.\n:;,]$"
        r"|[ \t]*(?P<rom>(?-i:[IVX]{1,5}|[A-Z](?:\.\d{1,2})*))\.[ \t]+(?-i:[A-Z])[^\n]{0,100}?[^.\n:;,]$"
        r"|[ \t]*(?P<let>(?-i:[A-Z])(?:\.\d{1,2})+)[ \t]+(?-i:[A-Z])[^\n]{0,100}$)",
        re.IGNORECASE | re.MULTILINE,
    )
    bib_heading = re.compile(
        rf"^[ \t#*_]*(?:\d{{1,2}}\.?[ \t]+|(?-i:[IVX]{{1,5}})\.[ \t]+)?(?:{_words(vocab.get('bibliography') or ['references'])})[ \t*_:]*$",
        re.IGNORECASE | re.MULTILINE,
    )
    ext = _words(vocab.get("external") or [])
    ext_before = _words([t for t in vocab.get("external") or [] if "et al" not in t])
    cite_like = r"(?:\[|\((?-i:[A-Z])|(?-i:[A-Z])[\w'’\-]+(?:\s+et\s+al|'s|’s|\s+and\s+(?-i:[A-Z])|\s+&|,?\s+\(?(?:19|20)\d{2}))"
    external_after = re.compile(
        rf"[^.!?\n]{{0,80}}?(?:{ext})"
        rf"|{_SP}\)?,?{_SP}(?:{preps})\s+(?:(?:the|this|that|their|ref\.?|reference|refs?\.)\s+)?{cite_like}"
        rf"|{_SP}\)?,?{_SP}(?:{preps})\s+(?:the\s+)?(?:(?-i:[A-Z])[\w.'’\-]*\s+){{0,6}}{_LAW_WORDS}"
        rf"|{_SP}(?:{_LAW_WORDS}|{_LEGAL_NOUNS})",
        re.IGNORECASE,
    ) if ext else re.compile(r"(?!x)x")
    external_before = re.compile(rf"(?:{ext_before})[^.!?\n]{{0,60}}$", re.IGNORECASE) if ext_before else re.compile(r"(?!x)x")
    stems = sorted({t.lower().rstrip(".") for k in KEYWORD_KINDS for t in vocab[k]}, key=len)
    gate = "(?:" + "|".join(re.escape(s) for s in stems) + r"|\[|\\ref|(?:19|20)\d\d[a-z]?\s*[);,])"
    abbreviations = _ABBREVIATIONS | {t.lower().rstrip(".") for k in KEYWORD_KINDS for t in vocab[k] if t.endswith(".")}
    ranges = frozenset(w.lower() for w in vocab["conjunctions"][2:]) | {"-", "–", "—"}
    ordinal_before = re.compile(rf"(?<![\w])(?:{preps}|see)\s+(?:\w{{1,4}}\s+)?$", re.IGNORECASE)
    return Matcher(mention, scan, label, ordinal, ordinal_before, caption, heading, bib_heading, external_after, external_before, gate,
                   numbers, ordinals, ranges, frozenset(abbreviations))


# ------------------------------------------------------------------------------------------ labels
def _roman_value(s: str) -> int | None:
    u = s.upper()
    if not u or not _ROMAN.match(u):
        return None
    total = 0
    for a, b in zip(u, u[1:] + " ", strict=True):
        v = _ROMAN_VALUES[a]
        total += -v if b != " " and _ROMAN_VALUES[b] > v else v
    return total


def normalise_label(raw: str, kind: str, numbers: Mapping[str, int]) -> str | None:
    """Canonical form of a label so mentions and targets compare equal.

    Args:
        raw: the label text (``"(3)"``, ``"IV"``, ``"one"``, ``"4a"``, ``"S1"``, ``"A.2"``, ``"REF"``).
        kind: mention kind; single letters stay letters for ``appendix`` and ``section``, else are roman.
        numbers: spelled cardinals -> value.

    Returns:
        ``"3"``, ``"4"``, ``"1"``, ``"4a"``, ``"S1"``, ``"A.2"``, ``"REF"`` / ``"??"`` / ``"?"``;
        None when ``raw`` is not a label (an invalid roman numeral such as ``"IIII"``).
    """
    s = raw.strip().strip("()").strip(" \t~\u00a0\u202f")
    if s.upper() in PLACEHOLDERS:
        return s.upper()
    if s.startswith("\\"):
        return s
    low = s.lower()
    if low in numbers:
        return str(numbers[low])
    if s[:1].isdigit():
        return low.replace("(", "").replace(")", "")
    head, dot, tail = s.partition(".")
    if len(head) == 1 and head.isupper() and (kind in ("appendix", "section") or dot):
        return s
    if len(head) >= 2 and head[0].isupper() and head[1].isdigit():
        return head[0] + s[1:].lower()
    value = _roman_value(head)
    if value is None:
        return s if len(head) == 1 and head.isupper() else None
    return str(value) + (dot + tail if dot else "")


def _major(label: str) -> str:
    m = re.match(r"[A-Z]?\d+", label)
    return m.group() if m else label


def _leading_int(label: str) -> int | None:
    m = re.match(r"\d+", label)
    return int(m.group()) if m else None


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
_TAG = re.compile(r"\\tag\{(?P<label>[^{}\n]{1,20})\}")
_LATEX_LABEL = re.compile(r"\\label\{(?P<key>[^{}\n]{1,80})\}")
_ALGORITHM_STRUCT = re.compile(r"\\begin\{algorithm\*?\}|\\begin\{algorithmic\}")
_LISTING_STRUCT = re.compile(r"\\begin\{(?:lstlisting|listing|minted|verbatim)\}|^[ \t]*```", re.MULTILINE)
_REF_ENTRY = re.compile(r"^[ \t]*\[(?P<n>\d{1,4})\](?![(])", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^[ \t]*(?P<n>\d{1,4})[.)][ \t]+\S", re.MULTILINE)
_FOOTNOTE_DEF = re.compile(r"^[ \t]*\[\^(?P<n>[^\]\s]{1,20})\]:", re.MULTILINE)
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
            if mt.group("label").strip("() \t~\u00a0").upper() not in PLACEHOLDERS
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
            for mt in _EQ_LINE.finditer(self.text):
                labels["equation"].add(mt.group("label").lower())
            for mt in _TAG.finditer(self.text):
                labels["equation"].add(mt.group("label").strip().lower())
            for mt in _FOOTNOTE_DEF.finditer(self.text):
                labels["footnote"].add(mt.group("n").lower())
            self._labels = labels
        return self._labels

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
            "equation": len(_EQ_ENV.findall(t)),
            "algorithm": len(_ALGORITHM_STRUCT.findall(t)),
            "listing": len(_LISTING_STRUCT.findall(t)) // 2 if "```" in t else len(_LISTING_STRUCT.findall(t)),
        }

    @cached_property
    def bibliography(self) -> tuple[bool, set[int], int]:
        """(has a bibliography, numbered entries, non-empty lines after the bibliography heading)."""
        entries = {int(mt.group("n")) for mt in _REF_ENTRY.finditer(self.text)}
        heads = list(self.m.bib_heading.finditer(self.text))
        after = 0
        if heads:
            tail = self.text[heads[-1].end():]
            entries |= {int(mt.group("n")) for mt in _NUMBERED_LINE.finditer(tail)}
            after = sum(1 for line in tail.split("\n") if line.strip())
        has_bib = bool(heads) or len(entries) >= 2 or len(_BIB_ENTRY.findall(self.text)) >= 3
        return has_bib, entries, after

    def resolves(self, kind: str, label: str, ordinal: bool = False) -> bool:
        if label.startswith("\\"):
            key = label[label.index("{") + 1 : -1]
            return key in self.latex_labels
        if kind == "citation":
            has_bib, entries, after = self.bibliography
            n = _leading_int(label)
            if n is None:  # author-year: any bibliography will do
                return has_bib
            return n in entries or (has_bib and not entries and n <= after)
        labels = self.labels[kind]
        if kind in ("section", "appendix"):
            labels = self.labels["section"] | self.labels["appendix"]
            if label in labels or any(x.startswith(label + ".") for x in labels):
                return True
            return kind == "section" and "." in label and label.split(".")[0] in labels
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
    for kind in KEYWORD_KINDS:
        if mt.group(f"k_{kind}") is not None:
            return kind
    raise AssertionError("a keyword group matched without a kind")  # pragma: no cover


# ------------------------------------------------------------------------------------------ mentions
_NUMERIC_CITE = re.compile(
    r"\[(?P<c>[ \t]*\d{1,4}(?:[ \t]*[-–,;][ \t]*\d{1,4})*[ \t]*)\](?![(:\[])"
)
_PLACEHOLDER_CITE = re.compile(r"(?<![\w\]])\[[ \t]*\?{1,3}[ \t]*\]|\[[ \t]*(?:ref|cite)[ \t]*\?[ \t]*\]", re.IGNORECASE)
_FOOTNOTE_REF = re.compile(r"\[\^(?P<n>[\w-]{1,20})\](?!:)")
_NAME = r"(?-i:[A-Z])[\w'’\-]+"
_YEAR = r"(?:19|20)\d{2}[a-z]?"
_AUTHOR_YEAR = re.compile(
    rf"\((?:(?:see|e\.g\.|cf\.|i\.e\.)[ ,]+)?(?P<a>{_NAME})(?:(?P<many>\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME}),?|,)"
    rf"\s+(?P<y>{_YEAR})(?:\s*[;,]\s*[^()\n]{{0,80}}?{_YEAR})*\)"
    rf"|(?P<na>{_NAME})(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME})\s*\((?P<ny>{_YEAR})\)"
)
_PAGINATION = re.compile(r"\[\d{1,4}\](?:[ \t|]+\[\d{1,4}\]){2,}")
"""Three or more bracketed numbers separated by spaces: page navigation ("[1] [2] [3] Next"), not citations."""
_CITE_RANGE = re.compile(r"(\d+)[ \t]*[-–][ \t]*(\d+)|(\d+)")


@dataclass(frozen=True)
class Mention:
    """One mention: ``kind``, normalised ``label``, ``[start, end)`` code-point span, ``dangling``."""

    kind: str
    label: str
    start: int
    end: int
    dangling: bool


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


def _keyword_mentions(text: str, m: Matcher, matches: list[re.Match[str]]) -> list[tuple[str, str, int, int, bool]]:
    out: list[tuple[str, str, int, int, bool]] = []
    for mt in matches:
        kw_start = mt.start()
        if kw_start and (text[kw_start - 1].isalnum() or text[kw_start - 1] in "_§\\"):
            continue  # inside a word ("timetable 2") or a LaTeX command
        kind = _kind(mt)
        kw_text = text[kw_start : mt.start("labels")]
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
            if first and not core[:1].isdigit() and lab not in PLACEHOLDERS and not core.startswith("\\") and not refish:
                break  # "I figure I can", "figure one out": non-numeric labels need a capitalised keyword
            if kind == "section" and (_leading_int(lab) or 0) > MAX_SECTION_NUMBER:
                break
            n = _leading_int(lab)
            start = kw_start if first else lt.start()
            if pending_range and last_n is not None and n is not None and 0 < n - last_n <= MAX_RANGE and lab.isdigit():
                for k in range(last_n + 1, n):
                    out.append((kind, str(k), lt.start(), lt.end(), False))
            out.append((kind, lab, start, lt.end(), False))
            last_n = n if lab.isdigit() else None
            first = False
    return out


def _ordinal_mentions(text: str, m: Matcher, matches: list[re.Match[str]]) -> list[tuple[str, str, int, int, bool]]:
    return [
        (_kind(mt), str(m.ordinals[mt.group("ord").lower()]), mt.start("ord"), mt.end(), True)
        for mt in matches
        if not (mt.start() and text[mt.start() - 1].isalnum())
        and m.ordinal_before.search(text, max(0, mt.start() - 16), mt.start())
    ]


def _citation_mentions(text: str) -> list[tuple[str, str, int, int, bool]]:
    out: list[tuple[str, str, int, int, bool]] = []
    navigation = [(p.start(), p.end()) for p in _PAGINATION.finditer(text)] if "] [" in text else []
    if "[" not in text:
        return _author_year_mentions(text, out)
    for mt in _NUMERIC_CITE.finditer(text):
        if mt.start() and (text[mt.start() - 1].isalnum() or text[mt.start() - 1] in "_[]\\^"):
            continue  # x[1], a[1][2], \cite[1]
        if any(a <= mt.start() < b for a, b in navigation):
            continue
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
        out.extend(("citation", str(v), mt.start(), mt.end(), False) for v in dict.fromkeys(values))
    for mt in _PLACEHOLDER_CITE.finditer(text):
        out.append(("citation", "?", mt.start(), mt.end(), False))
    if "[^" in text:
        for mt in _FOOTNOTE_REF.finditer(text):
            out.append(("footnote", mt.group("n").lower(), mt.start(), mt.end(), False))
    return _author_year_mentions(text, out)


_YEAR_HINT = re.compile(r"(?:19|20)\d\d[a-z]?\s*[);,]")


def _author_year_mentions(text: str, out: list[tuple[str, str, int, int, bool]]) -> list[tuple[str, str, int, int, bool]]:
    if not _YEAR_HINT.search(text):
        return out
    scholarly = "et al" in text
    for mt in _AUTHOR_YEAR.finditer(text):
        name, year = (mt.group("a"), mt.group("y")) if mt.group("a") else (mt.group("na"), mt.group("ny"))
        if name.lower() in _MONTHS:
            continue
        if mt.group("a") and not mt.group("many") and not (name[1:].islower() and scholarly):
            continue  # "(Island, 1976)", "(EG, 1974)": a lone "(Name, year)" counts only in scholarly text
        out.append(("citation", f"{name} {year}", mt.start(), mt.end(), False))
    return out


def _external(text: str, start: int, end: int, m: Matcher) -> bool:
    if m.external_after.match(text, end):
        return True
    return bool(m.external_before.search(text, max(0, start - 60), start))


def find_mentions(text: str, vocab: Mapping[str, Sequence[str]] | None = None) -> list[Mention]:
    """All mentions of one document, in text order, each marked dangling or not.

    Args:
        text: the document text.
        vocab: one language's vocabulary (default: English from :data:`udfs.refs_vocab.DEFAULT_VOCAB`).

    Returns:
        :class:`Mention` objects sorted by ``(start, end, kind, label)``; a range or list ("Figures 3-5")
        gives one mention per label. Empty for empty or whitespace-only text.

    Source: the rules in this module's docstring.
    """
    return _analyse(text, matcher(vocab or DEFAULT_VOCAB["en"]))


def _analyse(text: str, m: Matcher) -> list[Mention]:
    kw_matches, ord_matches = _candidates(text, m)
    raw = _keyword_mentions(text, m, kw_matches) + _ordinal_mentions(text, m, ord_matches) + _citation_mentions(text)
    if not raw:
        return []
    targets = _Targets(text, m)
    out: list[Mention] = []
    seen: set[tuple[str, str, int]] = set()
    captions = targets.caption_starts
    for kind, label, start, end, is_ordinal in sorted(raw, key=lambda r: (r[2], r[3], r[0], r[1])):
        if (kind, label, start) in seen or start in captions:
            continue
        seen.add((kind, label, start))
        if label in PLACEHOLDERS:
            dangling = True
        elif targets.resolves(kind, label, is_ordinal):
            dangling = False
        elif kind == "citation":
            dangling = True
        else:
            dangling = not (label[:1] == "S" and label[1:2].isdigit()) and not _external(text, start, end, m)
        out.append(Mention(kind, label, start, end, dangling))
    return out


# ------------------------------------------------------------------------------------------ repair
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*[ \t]+|[ \t]*\n+")


def sentence_spans(text: str, abbreviations: frozenset[str] = _ABBREVIATIONS) -> list[tuple[int, int]]:
    """Sentence spans ``[start, end)`` covering ``text``; a span keeps its trailing spaces, not newlines.

    A sentence ends at ``.``, ``!``, ``?`` followed by whitespace and a character that is not lower case,
    unless the word before the dot is an abbreviation ("Fig.", "et al.", "e.g.") or a single letter (an
    initial); a line break always ends a sentence (headings, list items, captions).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for mt in _SENTENCE_END.finditer(text):
        seg = mt.group()
        if "\n" not in seg:
            nxt = text[mt.end() : mt.end() + 1]
            word = re.search(r"([\w.]+)[.!?…]*[\"'”’)\]]*[ \t]+$", text[max(start, mt.start() - 30) : mt.end()])
            w = word.group(1).rstrip(".").lower() if word else ""
            if nxt.islower() or w in abbreviations or (len(w) == 1 and w.isalpha()):
                continue
            spans.append((start, mt.end()))
        else:
            spans.append((start, mt.start() + seg.index("\n")))
        start = mt.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def repair(text: str, mentions: Sequence[Mention], abbreviations: frozenset[str] = _ABBREVIATIONS) -> tuple[str, list[tuple[int, int, str]]]:
    """Remove the sentences that hold dangling mentions.

    Args:
        text: the document text.
        mentions: its mentions (:func:`find_mentions`).

    Returns:
        ``(repaired_text, removed)`` where ``removed`` is a list of ``(start, end, removed_text)`` in the
        coordinates of ``text``, sorted and disjoint; :func:`undo_repair` restores ``text`` exactly.
    """
    points = sorted({mt.start for mt in mentions if mt.dangling})
    if not points:
        return text, []
    spans = sentence_spans(text, abbreviations)
    starts = [a for a, _ in spans]
    chosen: dict[int, tuple[int, int]] = {}
    for p in points:
        i = max(0, bisect.bisect_right(starts, p) - 1)
        chosen[i] = spans[i]
    removed = [(a, b, text[a:b]) for _, (a, b) in sorted(chosen.items())]
    pieces, pos = [], 0
    for a, b, _ in removed:
        pieces.append(text[pos:a])
        pos = b
    pieces.append(text[pos:])
    return "".join(pieces), removed


def undo_repair(repaired: str, removed: Sequence[tuple[int, int, str]]) -> str:
    """Inverse of :func:`repair`: re-insert each removed span at its original offset."""
    out, pos, shift = [], 0, 0
    for start, end, piece in sorted(removed):
        at = start - shift
        out.append(repaired[pos:at])
        out.append(piece)
        pos = at
        shift += end - start
    out.append(repaired[pos:])
    return "".join(out)


# ------------------------------------------------------------------------------------------ batches
MENTION_TYPE = pa.struct([("kind", pa.string()), ("label", pa.string()), ("start", pa.int32()),
                          ("end", pa.int32()), ("dangling", pa.bool_())])
REPAIR_TYPE = pa.struct([("start", pa.int32()), ("end", pa.int32()), ("text", pa.string())])
SIGNAL_SCHEMA = pa.schema([
    ("ref_mentions", pa.list_(MENTION_TYPE)),
    ("n_mentions", pa.int32()),
    ("n_dangling", pa.int32()),
    ("dangling_ratio", pa.float64()),
    ("mentions_by_kind", pa.map_(pa.string(), pa.int32())),
    ("dangling_by_kind", pa.map_(pa.string(), pa.int32())),
    ("repaired_text", pa.string()),
    ("refs_repairs", pa.list_(REPAIR_TYPE)),
])
"""Columns :func:`refs_signals` returns. ``repaired_text`` / ``refs_repairs`` are null unless ``repair``
is on and the document has a dangling mention; ``dangling_ratio`` = n_dangling / n_mentions (0.0 when
there are no mentions)."""


def refs_signals(
    texts: pa.Array | pa.ChunkedArray,
    langs: pa.Array | pa.ChunkedArray | None = None,
    vocabs: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    default_lang: str = "en",
    repair_sentences: bool = False,
) -> pa.RecordBatch:
    """Reference signals of a batch of documents.

    Args:
        texts: string array, one document per row; null counts as empty text.
        langs: optional language codes per row (ISO 639-1, the filter stage's ``lang``); rows whose
            language has no vocabulary use ``default_lang``.
        vocabs: language -> vocabulary (default :data:`udfs.refs_vocab.DEFAULT_VOCAB`).
        default_lang: the vocabulary for rows without one of their own.
        repair_sentences: also compute ``repaired_text`` and ``refs_repairs``.

    Returns:
        A record batch with :data:`SIGNAL_SCHEMA`, one row per input row. Empty and whitespace-only
        text: no mentions, ``n_* = 0``, ratio 0.0, empty maps.

    Raises:
        ValueError: ``default_lang`` has no vocabulary.
    """
    vocabs = vocabs or DEFAULT_VOCAB
    if default_lang not in vocabs:
        raise ValueError(f"refs default language {default_lang!r} has no vocabulary; allowed: {sorted(vocabs)}")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    n = len(texts)
    lang_list = langs.to_pylist() if langs is not None else [None] * n
    py_texts = texts.to_pylist()
    results: list[list[Mention]] = [[] for _ in range(n)]
    groups: dict[str, list[int]] = {}
    for i, lang in enumerate(lang_list):
        groups.setdefault(lang if lang in vocabs else default_lang, []).append(i)
    for lang, idx in groups.items():
        m = matcher(vocabs[lang])
        sub = texts if len(idx) == n else texts.take(pa.array(idx, pa.int64()))
        hit = pc.fill_null(pc.match_substring_regex(sub, m.gate, ignore_case=True), False).to_pylist()
        for j, i in enumerate(idx):
            if hit[j]:
                results[i] = _analyse(py_texts[i], m)
    cols: dict[str, list] = {f.name: [] for f in SIGNAL_SCHEMA}
    for i, ms in enumerate(results):
        nd = sum(mt.dangling for mt in ms)
        cols["ref_mentions"].append([(mt.kind, mt.label, mt.start, mt.end, mt.dangling) for mt in ms])
        cols["n_mentions"].append(len(ms))
        cols["n_dangling"].append(nd)
        cols["dangling_ratio"].append(nd / len(ms) if ms else 0.0)
        by_kind: dict[str, int] = {}
        dang_kind: dict[str, int] = {}
        for mt in ms:
            by_kind[mt.kind] = by_kind.get(mt.kind, 0) + 1
            if mt.dangling:
                dang_kind[mt.kind] = dang_kind.get(mt.kind, 0) + 1
        cols["mentions_by_kind"].append(sorted(by_kind.items(), key=lambda kv: KINDS.index(kv[0])))
        cols["dangling_by_kind"].append(sorted(dang_kind.items(), key=lambda kv: KINDS.index(kv[0])))
        if repair_sentences and nd:
            lang = lang_list[i] if lang_list[i] in vocabs else default_lang
            new_text, removed = repair(py_texts[i] or "", ms, matcher(vocabs[lang]).abbreviations)
            cols["repaired_text"].append(new_text)
            cols["refs_repairs"].append(removed)
        else:
            cols["repaired_text"].append(None)
            cols["refs_repairs"].append(None)
    cols["ref_mentions"] = [[dict(zip(MENTION_TYPE.names, r, strict=True)) for r in row] for row in cols["ref_mentions"]]
    cols["refs_repairs"] = [
        None if row is None else [dict(zip(REPAIR_TYPE.names, r, strict=True)) for r in row] for row in cols["refs_repairs"]
    ]
    return pa.record_batch([pa.array(cols[f.name], f.type) for f in SIGNAL_SCHEMA], schema=SIGNAL_SCHEMA)
