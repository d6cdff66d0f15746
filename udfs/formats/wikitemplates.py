"""Wiki templates that carry text, rendered to that text; every other template removed, and the
punctuation around what was removed repaired.

A template is rendered when it stands for words or values a reader sees in the sentence
(``{{convert|5|mi|km}}`` -> ``5 miles (8.0 km)``); maintenance tags, navigation boxes, infoboxes,
icons and hatnotes are dropped. Where a template is dropped, the wikitext readers leave
:data:`HOLE`; :func:`repair_holes` then removes the punctuation that only framed the dropped value
(``Snowdon (HOLE) which`` -> ``Snowdon which``, ``(HOLE; born 1941)`` -> ``(born 1941)``,
``area of HOLE, all`` -> ``area of, all``) and deletes the marks. Only punctuation next to a mark is
touched: the article's own text stays as written.

Rendered families (names compared case-insensitively, ``_`` as space): convert / cvt, dates (start
date, end date, birth date, death date, their "and age" forms, birth/death year and age, dts,
formatdate, film date, as of, circa / c.), coord, lang, lang-xx, langx, transl, native name,
nihongo, IPA, IPA-xx, IPAc-xx, respell, nowrap / nobr, formatnum, frac / sfrac, abbr / abbrlink,
ISBN / ISSN / OCLC, EC number, quote / cquote, small / big / sub / sup / math / mvar and other
wrappers, dash and space templates, flag / flagcountry, sortname / sort, hlist and list templates,
URL, height, val, US$, interlanguage links, lifeboat classes (lbb / lbc), LSJ, Harvard citations,
and the citation templates (cite book / web / journal / news..., citation) as one bibliographic line.
Footnote templates (efn, refn, sfn, ``#tag:ref``) follow the ``<ref>`` setting. Units are rendered
in :mod:`udfs.formats.wikiunits`; dates, coordinates, languages, pronunciation and citations in
:mod:`udfs.formats.wikivalues` (nothing there depends on the day the text is read); the simple
families here.

Source: the template documentation pages of the English Wikipedia (Template:Abbr, Template:Formatnum,
Template:Sfrac, Template:Nowrap, Template:Hlist, Template:ISBN), read 2026-12.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from udfs.formats.wikiunits import UNIT_RENDERERS, group_digits
from udfs.formats.wikivalues import VALUE_RENDERERS, cite, ipa_lang, ipac, lang_prefix

HOLE = "\ufdd0"
"""Marks where a dropped template stood (a Unicode noncharacter: never text a reader sees)."""


@dataclass
class Params:
    """A template's parameters, rendered to text on demand.

    Attributes:
        raw: parameter name -> raw value (positional parameters are named ``"1"``, ``"2"``...; a named
            parameter given twice keeps its last value, as MediaWiki does).
        render: raw value -> its text (links, markup and nested templates rendered by the reader).
    """

    raw: dict[str, object]
    render: Callable[[object], str]
    _cache: dict[str, str] = field(default_factory=dict)

    def get(self, key: str | int, default: str = "") -> str:
        """The text of parameter ``key`` (a name or a 1-based position), stripped; ``default`` if absent."""
        k = str(key)
        if k not in self._cache:
            self._cache[k] = self.render(self.raw[k]).strip() if k in self.raw else None
        v = self._cache[k]
        return default if v is None else v

    def positional(self) -> list[str]:
        """The texts of parameters ``1``, ``2``... up to the last one given (gaps as ``""``)."""
        nums = [int(k) for k in self.raw if k.isdigit() and k != "0"]
        return [self.get(i) for i in range(1, max(nums) + 1)] if nums else []

    def has(self, key: str | int) -> bool:
        """Whether parameter ``key`` was given (even empty)."""
        return str(key) in self.raw

    def yes(self, key: str) -> bool:
        """Whether parameter ``key`` is set to a yes-like value (``y``, ``yes``, ``on``, ``true``, ``1``)."""
        return self.get(key).lower() in ("y", "yes", "on", "true", "1")


def normalize_name(name: str) -> str:
    """A template's name as compared here: ``_`` as space, spaces collapsed, lower case, stripped."""
    return " ".join(name.replace("_", " ").split()).lower()


# ------------------------------------------------------------------------------------------ table
_CONST = {
    "mdash": "—",
    "ndash": "–",
    "mdashb": "—",
    "snd": " – ",
    "spaced ndash": " – ",
    "spnd": " – ",
    "nbsp": "\u00a0",
    "·": " · ",
    "dot": " · ",
    "middot": "·",
    "!": "|",
    "=": "=",
    "'": "'",
    "'s": "'s",
    "en dash": "–",
    "endash": "–",
    "emdash": "—",
    "em dash": "—",
    "sndash": " – ",
    "pipe": "|",
    "bull": " • ",
    "spaces": " ",
}
_FIRST = {
    "nowrap",
    "nobr",
    "nobreak",
    "nowraplinks",
    "small",
    "smaller",
    "big",
    "larger",
    "midsize",
    "sub",
    "sup",
    "sc",
    "smallcaps",
    "small caps",
    "visible anchor",
    "em",
    "strong",
    "mvar",
    "math",
    "var",
    "code",
    "kbd",
    "samp",
    "abbr",
    "abbrlink",
    "tooltip",
    "nastaliq",
    "nq",
    "script",
    "lbb",
    "ill",
    "interlanguage link",
    "interlanguage link multi",
    "illm",
    "sic",
    "keypress",
    "flag",
    "flagcountry",
    "flagu",
    "flag country",
    "nowrap begin",
    "serif",
    "transliteration",
    "not a typo",
    "proper name",
    "linktext",
    "lang-en",
    "wikt-lang",
    "ipa",
    "ipa link",
    "ipaslink",
    "ipa-all",
    "smallsup",
    "resize",
    "center",
    "centre",
    "right",
    "left",
    "plainlist",
    "bulleted list",
    "quotation",
    "blockquote",
    "poem quote",
    "vanchor",
    "nihongo2",
}
_LIST = {
    "hlist": " · ",
    "flatlist": " · ",
    "ubl": "\n",
    "ublist": "\n",
    "unbulleted list": "\n",
    "plainlist": "\n",
    "bulleted list": "\n",
    "ordered list": "\n",
    "collapsible list": "\n",
}
REFERENCE_TEMPLATES = {"efn", "refn", "sfn", "sfnp", "efn-ua", "efn-lr", "notetag", "r", "rp"}
"""Footnote templates: their text is a footnote, kept or dropped as ``<ref>`` is."""


def _last_pos(p: Params) -> str | None:
    pos = [x for x in p.positional() if x]
    return pos[-1] if pos else None


def _frac(p: Params) -> str | None:
    pos = p.positional()
    if len(pos) == 1:
        return f"1/{pos[0]}" if pos[0] else None
    if len(pos) == 2:
        return f"{pos[0]}/{pos[1]}"
    if len(pos) >= 3:
        return f"{pos[0]} {pos[1]}/{pos[2]}"
    return None


def _val(p: Params) -> str | None:
    pos = p.positional()
    if not pos:
        return None
    v = group_digits(pos[0])
    if len(pos) > 1 and pos[1]:
        v += f"±{pos[1]}"
    if p.get("e"):
        v += f"×10^{p.get('e')}"
    u = p.get("u") or p.get("ul")
    return f"{v} {u}" if u else v


def _quote(p: Params) -> str | None:
    return p.get("text") or p.get("quote") or p.get(1) or None


def _url(p: Params) -> str | None:
    if p.get(2):
        return p.get(2)
    u = p.get(1)
    return re.sub(r"^[a-z]+://(www\.)?", "", u).rstrip("/") or None


def _ids(prefix: str) -> Callable[[Params], str | None]:
    def render(p: Params) -> str | None:
        ids = [x for x in p.positional() if x]
        return f"{prefix} {', '.join(ids)}" if ids else None

    return render


def _formatnum(arg: str) -> str | None:
    return group_digits(arg) if arg.strip() else None


_RENDER: dict[str, Callable[[Params], str | None]] = {
    **UNIT_RENDERERS,
    **VALUE_RENDERERS,
    "val": _val,
    "transl": _last_pos,
    "transliteration": _last_pos,
    "respell": lambda p: "-".join(x for x in p.positional() if x) or None,
    "sfrac": _frac,
    "frac": _frac,
    "fraction": _frac,
    "isbn": _ids("ISBN"),
    "issn": _ids("ISSN"),
    "oclc": _ids("OCLC"),
    "ec number": _ids("EC"),
    "isbnt": _ids("ISBN"),
    "doi": _ids("doi:"),
    "quote": _quote,
    "cquote": _quote,
    "quote box": _quote,
    "rquote": lambda p: p.get(2) or None,
    "lsj": lambda p: p.get(2) or p.get(1) or None,
    "lbc": lambda p: (f"{p.get(1)}-class" + (f" ({p.get(2)})" if p.get(2) else "")) if p.get(1) else None,
    "sortname": lambda p: " ".join(x for x in (p.get(1), p.get(2)) if x) or None,
    "sort": lambda p: p.get(2) or p.get(1) or None,
    "url": _url,
    "us$": lambda p: f"US${p.get(1)}" if p.get(1) else None,
    "resize": _last_pos,
}
for _name in _FIRST:
    _RENDER.setdefault(_name, lambda p: p.get(1) or None)
for _name, _v in _CONST.items():
    _RENDER[_name] = lambda p, v=_v: v
for _name, _sep in _LIST.items():
    _RENDER[_name] = lambda p, s=_sep: s.join(x for x in p.positional() if x) or None


def render(name: str, p: Params) -> str | None:
    """The text a template stands for, or ``None`` when it is dropped (see the module docstring).

    Args:
        name: the template's name as written (``Convert``, ``lang-ru``, ``formatnum:1234``); parser
            functions (``#tag:ref``) are the reader's business.
        p: its parameters.

    Returns:
        The rendered text (``None``: drop; an empty result is a drop too).
    """
    n = normalize_name(name)
    if n.startswith("formatnum:"):
        return _formatnum(name.split(":", 1)[1])
    fn = _RENDER.get(n)
    if fn is None:
        if n.startswith("lang-") and len(n) <= 12:
            code = n[5:]
            return p.get(1) or None if code == "en" else lang_prefix(code, p.get(1))
        if n.startswith("ipa-") and len(n) <= 10:
            return ipa_lang(n[4:], p)
        if n.startswith("ipac-"):
            return ipac(p)
        if n.startswith("cite ") or n == "citation":
            return cite(p, n[5:] if n.startswith("cite ") else "citation")
        return None
    out = fn(p)
    return out if out else None


# ---------------------------------------------------------------------------------- hole repair
_H = HOLE
_W = "[ \t\u00a0]"
_REPAIRS = [
    (re.compile(f"{_H}(?:{_W}*{_H})+"), _H),  # adjacent holes are one hole
    # a list of dropped items: "H, H, and H" -> "H"
    (re.compile(f"{_H}(?:{_W}*(?:[,;/]{_W}*(?:(?:and|or|&){_W}+)?|(?:and|or|&){_W}+){_H})+"), _H),
    # parentheses or brackets that held only dropped values and separators
    (re.compile(f"{_W}*\\((?:{_W}|[,;:]|{_H})*{_H}(?:{_W}|[,;:]|{_H})*\\)"), ""),
    (re.compile(f"{_W}*\\[(?:{_W}|[,;:]|{_H})*{_H}(?:{_W}|[,;:]|{_H})*\\]"), ""),
    # "(H; born 1941)" -> "(born 1941)"; "(1941, H)" -> "(1941)"
    (re.compile(f"\\({_W}*{_H}{_W}*[,;:]{_W}*"), "("),
    (re.compile(f"{_W}*[,;:]{_W}*{_H}{_W}*\\)"), ")"),
    # "H, 87 % of" at the start of a line or sentence
    (re.compile(f"(^|\\n|(?<=[.!?]){_W}){_W}*{_H}{_W}*[,;:]{_W}*", re.M), r"\1"),
    # no space left before punctuation: "of H, all" -> "of, all"
    (re.compile(f"{_W}+{_H}{_W}*(?=[,.;:!?)\\]])"), ""),
    (re.compile(f"{_H}{_W}+(?=[,.;:!?)\\]])"), ""),
    (re.compile(f"\\({_W}*{_H}{_W}+"), "("),
    (re.compile(f"{_W}+{_H}{_W}+"), " "),
    (re.compile(_H), ""),
]


def repair_holes(text: str) -> str:
    """Remove the :data:`HOLE` marks of dropped templates and the punctuation that framed only them.

    Args:
        text: rendered text holding marks.

    Returns:
        The text without marks; text away from a mark is unchanged.

    >>> repair_holes("Snowdon (\\ufdd0) which, at \\ufdd0, is high.")
    'Snowdon which, at, is high.'
    >>> repair_holes("Julia (\\ufdd0; \\ufdd0; born 1941) wrote.")
    'Julia (born 1941) wrote.'
    """
    if _H not in text:
        return text
    for pat, rep in _REPAIRS:
        text = pat.sub(rep, text)
    return text
