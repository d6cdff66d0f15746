"""The compiled mention matcher of one vocabulary, and label normalisation (``IV`` -> ``4``, ``one`` -> ``1``).

Constants: placeholders a converter leaves for a lost number, the limits that separate document
sections from statute sections, words that mark legal and calendar text (see :mod:`udfs.refs`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from udfs.refs.vocab import KEYWORD_KINDS

OPTIONAL_KINDS = frozenset({"theorem"})
"""Keyword kinds a vocabulary may leave empty (kinds added after vocabularies were written)."""

PLACEHOLDERS = frozenset({"REF", "??", "?"})
"""Normalised labels that mean "the converter lost the label": always dangling. ``REF`` also stands for
the ``<ref>`` of older arXiv converters ("Section <ref>") and for the ``TABREF3`` / ``FIGREF0`` ids of
S2ORC-style text (see :data:`udfs.refs.mentions.CONVERTER_PLACEHOLDERS`)."""

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
    r"Agreement|Contract|Lease|Ordinance|Bill|Treaty|Protocol|Bylaws|Articles?|License|Licence|Title|Terms|"
    r"Policy|Schedule|Standard|Specification|Guidelines|"
    r"U\.S\.C\.?|C\.F\.R\.?|USC|CFR|GDPR|Gesetz|Grundgesetz|BGB|StGB|Loi|Ley)"
)
_ACRONYM = r"(?-i:[A-Z]{2,}[A-Za-z0-9\-]*)\b(?!{_SP}[\d(])".replace("{_SP}", _SP)
"""An acronym after "of/in": "section 3 of the GPL", "Section 4 of RFC 2119" name another document
(but "Table 2 in ANOVA 3"-like label runs are left alone)."""
_CITED = r"(?:original|cited|above|aforementioned|companion|earlier|previous|same|following|revised|published)"
"""Adjectives of "the cited paper": "Eq. (5) of the original paper" is that paper's equation."""
_LAW_NOUNS = (r"(?:acts?|laws?|statutes?|treaty|treaties|codes?|constitutions?|conventions?|regulations?|directives?|"
              r"bills?|ordinances?|rules)\b")
"""Lower-case names of legislation: "section 1 of both acts" is a section of those acts."""
_SELF_PARTS = (r"(?-i:Results|Methods|Materials|Discussion|Introduction|Conclusions?|Background|Appendix|Appendices|"
               r"Supplement\w*|Main|Text|Paper|Article|Section|Chapter|Table|Figure|Abstract|Summary|Proof|Preliminaries)\b")
"""Capitalised words after "of the" / "in the" that name a part of the document itself ("Table 2 in the
Results"); any other capitalised name ("Section 1.3 of the Restatement") is another document."""
_LEGAL_NOUNS = r"(?:bankruptcy|housing|vouchers?|visas?|benefits?|status|protection|filing|tenants?)\b"
"""Words after "Chapter 11" / "Section 8" that make it a statute's chapter, not the document's."""


_CITED_HEADER = r"[ \t]*\[[^\[\]\n]{1,80}\][ \t]*(?:[:.]|$|(?-i:[ \t]+[A-Z]))"
"""A statement's header with the works it comes from: "Proposition A.1 [41, 40, 13]" on its own line,
"Theorem 3 [Smith 2019]. Let ..." (amsthm prints an optional note in brackets after the number): the
document's own statement, a target, not a mention."""


_CJK_CAPTION = r"(?:[\u2e80-\u9fff\uac00-\ud7af][^\n。.!?]{0,60}?[ \t])?"
"""A caption in Chinese, Japanese or Korean before the English one on the same line ("图 1 转子截面 Fig. 1
Rotor section"), as bilingual journals print them."""


# ------------------------------------------------------------------------------------------ matcher
def _term_regex(term: str) -> str:
    t = term.strip().lower()
    if t.endswith(".") and len(t) > 1:
        return re.escape(t[:-1]) + r"(?:\.|\b)"
    if t[-1:].isalnum():
        return re.escape(t) + r"\b"
    return re.escape(t)


def _trie_regex(terms: Sequence[str]) -> str:
    """One regex matching what ``|``-joined :func:`_term_regex` terms match, with common prefixes
    factored out: Python's ``re`` tries every branch of an alternation at every position, so a prefix
    tree of 80 keywords scans several times faster than their flat alternation."""
    root: dict = {}
    for t in {t.strip().lower() for t in terms}:
        if t.endswith(".") and len(t) > 1:
            stem, end = t[:-1], r"(?:\.|\b)"
        else:
            stem, end = t, (r"\b" if t[-1:].isalnum() else "")
        node = root
        for ch in stem:
            node = node.setdefault(ch, {})
        node.setdefault("", set()).add(end)

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted((k, v) for k, v in node.items() if k)]
        alts += sorted(node.get("", ()), key=len, reverse=True)
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return emit(root)


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
    external_cue: re.Pattern[str]
    cue_before: re.Pattern[str]
    cue_names: re.Pattern[str]
    gate: str
    numbers: dict[str, int]
    ordinals: dict[str, int]
    conjunction_range: frozenset[str]
    abbreviations: frozenset[str]


_MATCHERS: dict[str, Matcher] = {}


def matcher(vocab: Mapping[str, Sequence[str]]) -> Matcher:
    """Compile (once per process, cached by content) the regexes of one vocabulary.

    Args:
        vocab: one language of :data:`udfs.refs.vocab.DEFAULT_VOCAB` (same fields).

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
        if not vocab.get(k) and k not in OPTIONAL_KINDS:
            raise ValueError(f"refs vocabulary field {k!r} is missing or empty; got {vocab.get(k)!r}")
    kinds = [kind for kind in KEYWORD_KINDS if vocab.get(kind)]
    kw = "|".join(f"(?P<k_{kind}>{_alternation(vocab[kind])})" for kind in kinds)
    numbers = {w.lower(): i + 1 for i, w in enumerate(vocab["numbers"])}
    ordinals = {w.lower(): i + 1 for i, w in enumerate(vocab["ordinals"])}
    spelled = _words(list(numbers))
    single = (
        r"(?:REF\b|<ref>|\?\?"
        r"|(?-i:[A-Z])?\d{1,4}(?:\.\d{1,3})*(?:[a-z](?![\w]))?(?:\((?-i:[a-z])\))?(?![\w]|\.\d)"
        r"|(?-i:[IVXLC]{1,6}|[A-Z])(?:\.\d{1,3})*(?![\w])"
        r"|(?-i:[ivx]{1,5})(?![\w])"
        rf"|(?:{spelled})(?![\w-])"
        r"|\\(?:eq)?ref\{[^{}\n]{1,80}\})"
    )
    item = rf"(?:\({_SP}{single}{_SP}\)|{single})"
    cont_item = r"(?:\(\s*(?:REF\b|<ref>|\d{1,3}(?:\.\d{1,3})*[a-z]?)\s*\)|(?:REF\b|<ref>|\d{1,3}(?:\.\d{1,3})*[a-z]?|(?-i:[A-Z]))(?![\w]))"
    conj = _words(vocab["conjunctions"])
    cont = rf"(?:{_SP}(?:,{_SP}(?:(?:{conj})\b{_SP})?|&{_SP}|[-–—]{_SP}|(?:{conj})\b{_SP}){cont_item})"
    mention = re.compile(rf"(?:{kw})\.?{_SP}(?P<labels>{item}{cont}*)", re.IGNORECASE)
    # Case-insensitive alternations are ~7x slower in `re` than case-sensitive ones, so keyword and
    # ordinal candidates are found on the lower-cased text and only then matched in full, anchored.
    words = [t.lower() for k in kinds for t in vocab[k]] + list(ordinals)
    scan = re.compile(r"\b" + _trie_regex(words) + r"|§")
    label = re.compile(rf"{item}|{cont_item}", re.IGNORECASE)
    preps = _words(vocab["prepositions"])
    ordinal = re.compile(
        rf"(?P<ord>{_words(list(ordinals))})\s+(?:{kw})(?![\w])(?!{_SP}\d)",
        re.IGNORECASE,
    )
    caption = re.compile(
        rf"^[ \t>*_#|•\-–]*{_CJK_CAPTION}(?:{kw})\.?{_SP}(?P<label>{item})[ \t]*(?:\*\*|__|\*|_)?[ \t]*(?:[:.|](?!\d)|[—–\-][ \t]|$|(?-i:[ \t]+[A-Z(])|{_CITED_HEADER})",
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
        rf"^[ \t#*_=]*(?:\d{{1,2}}\.?[ \t]+|(?-i:[IVX]{{1,5}})\.[ \t]+)?(?:{_words(vocab.get('bibliography') or ['references'])})[ \t*_:=]*"
        r"(?:\[[^\]\n]{1,40}\][ \t]*)?$"  # "References[edit]": a wiki page's heading with its edit link
        r"|\\begin\{thebibliography\}",
        re.IGNORECASE | re.MULTILINE,
    )
    ext = _words(vocab.get("external") or [])
    ext_before = _words([t for t in vocab.get("external") or [] if "et al" not in t])
    cite_like = (r"(?:\[|\{\{cite|\((?-i:[A-Z])|(?-i:[A-Z])[\w'’\-]+(?:\s+et\s+al|'s|’s|\s+and\s+(?-i:[A-Z])|\s+&"
                 r"|,?\s+\(?(?:19|20)\d{2}))")
    lead = rf"{_SP}\)?,?{_SP}(?:{preps})\s+"
    external_after = re.compile(
        rf"{lead}(?:(?:the|this|that|their|ref\.?|reference|refs?\.)\s+)?{cite_like}"
        rf"|{lead}(?:the\s+)?(?:(?-i:[A-Z])[\w.'’\-]*\s+){{0,6}}{_LAW_WORDS}"
        rf"|{lead}(?:the\s+)?{_ACRONYM}"
        rf"|{lead}(?:(?:his|her|their|its)\s+|the\s+{_CITED}\s+)[\w\-]+"
        rf"|{lead}(?:the|both|each|either|that|those|these|all)\s+{_LAW_NOUNS}"
        rf"|{lead}the\s+(?!{_SELF_PARTS})(?-i:[A-Z][a-z]{{2,}})\b"
        rf"|{lead}(?:the\s+)?main\s+(?:text|paper|article|manuscript|document)\b"
        rf"|{_SP}(?:{_LAW_WORDS}|{_LEGAL_NOUNS})"
        rf"|{_SP}\)?[,;]{_SP}(?:pp?\.|pages?){_SP}\d",
        re.IGNORECASE,
    )
    never = r"(?!x)x"
    external_cue = re.compile(rf"(?:{ext})", re.IGNORECASE) if ext else re.compile(never)
    cue_before = re.compile(rf"(?:{ext_before})", re.IGNORECASE) if ext_before else re.compile(never)
    cue_names = re.compile(rf"[ \t]*(?:(?:material|information|data|file)\b[ \t,]*)?(?:{kw})", re.IGNORECASE)
    external_before = re.compile(
        r"\[[^\[\]\n]{1,60},[ \t]*$"  # "[12, Theorem 3]": a place in the cited work
        r"|\b(?:chap(?:ter)?|ch|vol(?:ume)?|book|part|pt)\.?[ \t]*[\dIVXivx]+[a-z]?,[ \t]*$"  # "chap. 2, sect. 22"
        r"|(?:\b(?:test|unit|lesson|module|paper|exam|form|question|problem|level|grade|season|episode|issue|"
        r"article|title|act|rule|no\.?)|\#)[ \t]*\d{1,3}[a-z]?,[ \t]*$"  # "Test 6, Section 9", "(#1, section 1"
        r"|[\"”],[ \t]*$"  # '"The Making of a Book", Appendix B': a part of the quoted work
        r"|\\cite[a-z]*\*?[ \t]*\[[ \t]*$",  # "\cite[Theorem 14.16]{key}": a place in the cited work
        re.IGNORECASE,
    )
    stems = sorted({t.lower().rstrip(".") for k in kinds for t in vocab[k]}, key=len)
    gate = "(?:" + "|".join(re.escape(s) for s in stems) + r"|\[|\\ref|<ref>|<cit\.>|\{\{cite:|bibref\d|@xcite|(?:19|20)\d\d[a-z]?\s*[);,])"
    abbreviations = _ABBREVIATIONS | {t.lower().rstrip(".") for k in kinds for t in vocab[k] if t.endswith(".")}
    ranges = frozenset(w.lower() for w in vocab["conjunctions"][2:]) | {"-", "–", "—"}
    ordinal_before = re.compile(rf"(?<![\w])(?:{preps}|see)\s+(?:\w{{1,4}}\s+)?$", re.IGNORECASE)
    return Matcher(mention, scan, label, ordinal, ordinal_before, caption, heading, bib_heading, external_after, external_before,
                   external_cue, cue_before, cue_names, gate, numbers, ordinals, ranges, frozenset(abbreviations))


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
        raw: the label text (``"(3)"``, ``"IV"``, ``"one"``, ``"4a"``, ``"S1"``, ``"A.2"``, ``"REF"``,
            ``"<ref>"``).
        kind: mention kind; single letters stay letters for ``appendix`` and ``section``, else are roman.
        numbers: spelled cardinals -> value.

    Returns:
        ``"3"``, ``"4"``, ``"1"``, ``"4a"``, ``"S1"``, ``"A.2"``, ``"REF"`` / ``"??"`` / ``"?"``;
        None when ``raw`` is not a label (an invalid roman numeral such as ``"IIII"``).
    """
    s = raw.strip().strip("()").strip(" \t~\u00a0\u202f")
    if s.lower() == "<ref>":
        return "REF"
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
