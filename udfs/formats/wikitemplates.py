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
Footnote templates (efn, refn, sfn, ``#tag:ref``) follow the ``<ref>`` setting.

Deterministic: nothing depends on the day the text is read, so "and age" templates render the date
without the age unless both dates are given (death date and age). Dates are written in English
(month names), day-month-year when the template asks for it (``df=y``), else month-day-year.

Source: the template documentation pages of the English Wikipedia (Template:Convert, Template:Birth
date and age, Template:Coord, Template:Lang, Template:IPAc-en, Template:Citation Style 1), read
2026-12; unit factors from NIST SP 811 (2008), Appendix B.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

HOLE = "\ufdd0"
"""Marks where a dropped template stood (a Unicode noncharacter: never text a reader sees)."""

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NUM = {m.lower(): i + 1 for i, m in enumerate(MONTHS)} | {
    m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)
}

LANGUAGES = {
    "af": "Afrikaans",
    "am": "Amharic",
    "ar": "Arabic",
    "az": "Azerbaijani",
    "be": "Belarusian",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "bo": "Tibetan",
    "br": "Breton",
    "bs": "Bosnian",
    "ca": "Catalan",
    "cs": "Czech",
    "cy": "Welsh",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "eo": "Esperanto",
    "es": "Spanish",
    "et": "Estonian",
    "eu": "Basque",
    "fa": "Persian",
    "fi": "Finnish",
    "fo": "Faroese",
    "fr": "French",
    "fy": "West Frisian",
    "ga": "Irish",
    "gd": "Scottish Gaelic",
    "gl": "Galician",
    "grc": "Ancient Greek",
    "gu": "Gujarati",
    "gv": "Manx",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "ka": "Georgian",
    "kk": "Kazakh",
    "km": "Khmer",
    "kn": "Kannada",
    "ko": "Korean",
    "ku": "Kurdish",
    "kw": "Cornish",
    "ky": "Kyrgyz",
    "la": "Latin",
    "lb": "Luxembourgish",
    "lo": "Lao",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "mk": "Macedonian",
    "ml": "Malayalam",
    "mn": "Mongolian",
    "mr": "Marathi",
    "ms": "Malay",
    "mt": "Maltese",
    "my": "Burmese",
    "nb": "Norwegian Bokmål",
    "ne": "Nepali",
    "nl": "Dutch",
    "nn": "Norwegian Nynorsk",
    "no": "Norwegian",
    "pa": "Punjabi",
    "pl": "Polish",
    "ps": "Pashto",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sa": "Sanskrit",
    "sco": "Scots",
    "si": "Sinhala",
    "sk": "Slovak",
    "sl": "Slovene",
    "sq": "Albanian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "tg": "Tajik",
    "th": "Thai",
    "tl": "Tagalog",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "uz": "Uzbek",
    "vi": "Vietnamese",
    "yi": "Yiddish",
    "zh": "Chinese",
}
"""ISO 639 code -> English name, as the ``lang-xx`` and ``IPA-xx`` templates print it."""

# unit -> (dimension, factor to the SI unit, singular name, plural name, symbol)
_UNITS: dict[str, tuple[str, float, str, str, str]] = {
    "m": ("L", 1.0, "metre", "metres", "m"),
    "km": ("L", 1e3, "kilometre", "kilometres", "km"),
    "cm": ("L", 0.01, "centimetre", "centimetres", "cm"),
    "mm": ("L", 0.001, "millimetre", "millimetres", "mm"),
    "mi": ("L", 1609.344, "mile", "miles", "mi"),
    "ft": ("L", 0.3048, "foot", "feet", "ft"),
    "in": ("L", 0.0254, "inch", "inches", "in"),
    "yd": ("L", 0.9144, "yard", "yards", "yd"),
    "nmi": ("L", 1852.0, "nautical mile", "nautical miles", "nmi"),
    "m2": ("A", 1.0, "square metre", "square metres", "m2"),
    "km2": ("A", 1e6, "square kilometre", "square kilometres", "km2"),
    "sqmi": ("A", 2589988.110336, "square mile", "square miles", "sq mi"),
    "sqft": ("A", 0.09290304, "square foot", "square feet", "sq ft"),
    "ha": ("A", 1e4, "hectare", "hectares", "ha"),
    "acre": ("A", 4046.8564224, "acre", "acres", "acres"),
    "kg": ("M", 1.0, "kilogram", "kilograms", "kg"),
    "g": ("M", 0.001, "gram", "grams", "g"),
    "t": ("M", 1000.0, "tonne", "tonnes", "t"),
    "lb": ("M", 0.45359237, "pound", "pounds", "lb"),
    "oz": ("M", 0.028349523125, "ounce", "ounces", "oz"),
    "st": ("M", 6.35029318, "stone", "stone", "st"),
    "l": ("V", 1.0, "litre", "litres", "L"),
    "L": ("V", 1.0, "litre", "litres", "L"),
    "m3": ("V", 1000.0, "cubic metre", "cubic metres", "m3"),
    "impgal": ("V", 4.54609, "imperial gallon", "imperial gallons", "imp gal"),
    "USgal": ("V", 3.785411784, "US gallon", "US gallons", "US gal"),
    "km/h": ("S", 1 / 3.6, "kilometre per hour", "kilometres per hour", "km/h"),
    "mph": ("S", 0.44704, "mile per hour", "miles per hour", "mph"),
    "kn": ("S", 1852 / 3600, "knot", "knots", "kn"),
    "m/s": ("S", 1.0, "metre per second", "metres per second", "m/s"),
    "C": ("T", 1.0, "degree Celsius", "degrees Celsius", "°C"),
    "F": ("T", 1.0, "degree Fahrenheit", "degrees Fahrenheit", "°F"),
    "K": ("T", 1.0, "kelvin", "kelvins", "K"),
    "kW": ("P", 1e3, "kilowatt", "kilowatts", "kW"),
    "hp": ("P", 745.69987158227022, "horsepower", "horsepower", "hp"),
}
_UNIT_ALIAS = {
    "sqkm": "km2",
    "acres": "acre",
    "feet": "ft",
    "foot": "ft",
    "miles": "mi",
    "mile": "mi",
    "metre": "m",
    "meter": "m",
    "metres": "m",
    "meters": "m",
    "kilometre": "km",
    "kilometer": "km",
    "usgal": "USgal",
    "kmh": "km/h",
    "kph": "km/h",
    "°C": "C",
    "°F": "F",
    "tonne": "t",
    "tonnes": "t",
    "pounds": "lb",
    "lbs": "lb",
}
_DEFAULT_OUT = {
    "m": "ft",
    "km": "mi",
    "cm": "in",
    "mm": "in",
    "mi": "km",
    "ft": "m",
    "in": "cm",
    "yd": "m",
    "nmi": "km",
    "m2": "sqft",
    "km2": "sqmi",
    "sqmi": "km2",
    "sqft": "m2",
    "ha": "acre",
    "acre": "ha",
    "kg": "lb",
    "g": "oz",
    "t": "lb",
    "lb": "kg",
    "oz": "g",
    "st": "kg",
    "l": "impgal",
    "L": "impgal",
    "m3": "cuft",
    "impgal": "l",
    "USgal": "l",
    "km/h": "mph",
    "mph": "km/h",
    "kn": "km/h",
    "m/s": "mph",
    "C": "F",
    "F": "C",
    "K": "C",
    "kW": "hp",
    "hp": "kW",
}
_RANGE = {
    "to": " to ",
    "-": "–",
    "–": "–",
    "and": " and ",
    "or": " or ",
    "x": " × ",
    "×": " × ",
    "by": " by ",
    "+/-": " ± ",
    "to(-)": " to ",
}


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


# ------------------------------------------------------------------------------------------ numbers
def _num(s: str) -> float | None:
    s = s.replace(",", "").replace("−", "-").strip()
    try:
        return float(s)
    except ValueError:
        return None


def _group(s: str) -> str:
    """``1234567.5`` -> ``1,234,567.5`` (a string that is not a plain number is returned as it is)."""
    m = re.fullmatch(r"(-?)(\d+)(\.\d+)?", s.replace(",", "").strip())
    if not m:
        return s.strip()
    sign, whole, frac = m.group(1), m.group(2), m.group(3) or ""
    return f"{sign}{int(whole):,}{frac}"


def _sig_round(x: float, sig: int) -> str:
    if x == 0:
        return "0"
    from math import floor, log10

    digits = sig - 1 - floor(log10(abs(x)))
    v = round(x, digits)
    if digits <= 0:
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


def _sig_digits(s: str) -> int:
    digits = s.replace(",", "").replace("-", "").lstrip("0").replace(".", "")
    if "." not in s:
        digits = digits.rstrip("0") or digits
    return max(len(digits), 1)


# ----------------------------------------------------------------------------------------- convert
def _unit(u: str) -> str | None:
    u = u.strip()
    return u if u in _UNITS else _UNIT_ALIAS.get(u, _UNIT_ALIAS.get(u.lower()))


def _convert_value(x: float, frm: str, to: str) -> float | None:
    a, b = _UNITS[frm], _UNITS.get(to)
    if b is None or a[0] != b[0]:
        return None
    if a[0] == "T":
        c = {"C": x, "F": (x - 32) * 5 / 9, "K": x - 273.15}[frm]
        return {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[to]
    return x * a[1] / b[1]


def _convert(p: Params, abbr_default: bool) -> str | None:
    pos = p.positional()
    if len(pos) < 2:
        return None
    values, seps, i = [pos[0]], [], 1
    while i + 1 < len(pos) and pos[i] in _RANGE:
        seps.append(_RANGE[pos[i]])
        values.append(pos[i + 1])
        i += 2
    if i >= len(pos):
        return None
    unit_in = pos[i]
    out_given = pos[i + 1] if i + 1 < len(pos) else ""
    frm = _unit(unit_in)
    abbr = p.get("abbr", "on" if abbr_default else "out").lower()  # unset: "2 kilometres (1.2 mi)"
    disp = p.get("disp").lower()
    adj = p.yes("adj")
    nums = [_num(v) for v in values]
    plural = not (len(values) == 1 and nums[0] is not None and abs(nums[0]) == 1)

    def joined(vs: list[str]) -> str:
        return vs[0] + "".join(s + v for s, v in zip(seps, vs[1:], strict=True))

    if frm is None:
        return f"{joined([_group(v) for v in values])} {unit_in}".strip()
    info = _UNITS[frm]
    us = p.get("sp").lower() == "us"

    def name(u: tuple[str, float, str, str, str], pl: bool, ab: bool) -> str:
        if ab:
            return u[4]
        n = u[3] if pl and not adj else u[2]
        return n.replace("metre", "meter").replace("litre", "liter") if us else n

    sep = "-" if adj and abbr not in ("on", "in", "values") else " "
    left = f"{joined([_group(v) for v in values])}{sep}{name(info, plural, abbr in ('on', 'in', 'values'))}"
    to = _unit(out_given.split()[0]) if out_given.strip() else _DEFAULT_OUT.get(frm)
    if to is None or any(n is None for n in nums) or disp == "number":
        return left
    conv = [_convert_value(n, frm, to) for n in nums]
    if any(c is None for c in conv):
        return left
    sig = max(2, min(_sig_digits(v) for v in values))
    right = (
        f"{joined([_sig_round(c, sig) for c in conv])} {name(_UNITS[to], True, abbr not in ('off', 'in'))}"
    )
    if disp in ("output only", "out"):
        return right
    if disp == "or":
        return f"{left} or {right}"
    if disp == "flip":
        return f"{right} ({left})"
    return f"{left} ({right})"


def _height(p: Params) -> str | None:
    parts = []
    for key, unit in (
        ("m", "m"),
        ("meter", "m"),
        ("metre", "m"),
        ("cm", "cm"),
        ("ft", "ft"),
        ("foot", "ft"),
        ("feet", "ft"),
        ("in", "in"),
        ("inch", "in"),
    ):
        v = p.get(key)
        if v:
            parts.append(f"{v} {unit}")
    return " ".join(parts) or None


# ------------------------------------------------------------------------------------------- dates
def _month(m: str) -> int | None:
    m = m.strip().lower()
    if m.isdigit() and 1 <= int(m) <= 12:
        return int(m)
    return _MONTH_NUM.get(m)


def format_date(y: str, m: str = "", d: str = "", dmy: bool = False) -> str:
    """A date as the date templates print it: ``March 5, 1980`` (``dmy``: ``5 March 1980``), ``March 1980``
    or ``1980`` when the month or day is missing; a month that is not a month is kept as written.

    Args:
        y, m, d: year, month (number or name), day, as written in the template.
        dmy: day before month.

    Returns:
        The date's text (``""`` when nothing is given).
    """
    y, m, d = y.strip(), m.strip(), d.strip().lstrip("0")
    mi = _month(m) if m else None
    month = MONTHS[mi - 1] if mi else m
    if not month:
        return y
    if not d:
        return f"{month} {y}".strip()
    return f"{d} {month} {y}".strip() if dmy else f"{month} {d}, {y}".strip(", ")


_ISO = re.compile(r"(-?\d{1,4})-(\d{1,2})(?:-(\d{1,2}))?")


def _date_args(p: Params, start: int = 1) -> tuple[str, str, str]:
    pos = p.positional()[start - 1 : start + 2]
    pos += [""] * (3 - len(pos))
    if len(pos[0]) > 4 and (m := _ISO.fullmatch(pos[0])):
        return m.group(1), m.group(2), m.group(3) or ""
    return pos[0], pos[1], pos[2]


def _dmy(p: Params) -> bool:
    return p.yes("df") or p.get("format").lower() == "dmy"


def _date_tpl(p: Params) -> str | None:
    y, m, d = _date_args(p)
    if not y.strip() or not re.fullmatch(r"-?\d{1,4}", y.strip()):
        return None
    return format_date(y, m, d, _dmy(p))


def _age_between(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    return b[0] - a[0] - ((b[1], b[2]) < (a[1], a[2]))


def _ints(*xs: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) if x.isdigit() else _month(x) or int(x) for x in xs)
    except ValueError:
        return None


def _death_date_and_age(p: Params) -> str | None:
    pos = p.positional() + [""] * 6
    text = format_date(pos[0], pos[1], pos[2], _dmy(p))
    if not re.fullmatch(r"\d{1,4}", pos[0].strip()):
        return None
    death, birth = _ints(*pos[0:3]), _ints(*pos[3:6])
    if death and birth:
        return f"{text} (aged {_age_between(birth, death)})"
    return text


def _dts(p: Params) -> str | None:
    pos = p.positional()
    if pos and (m := _ISO.fullmatch(pos[0])):
        return format_date(m.group(1), m.group(2), m.group(3) or "", _dmy(p))
    if len(pos) == 1:
        return pos[0] or None
    pos += [""] * (3 - len(pos))
    if re.fullmatch(r"-?\d{3,4}", pos[0].strip()):  # year, month, day
        return format_date(pos[0], pos[1], pos[2], _dmy(p)) or None
    # day, month, year (the order of the German and other editions' dts)
    return format_date(pos[2], pos[1], pos[0], True) or None


def _as_of(p: Params) -> str | None:
    if p.get("alt"):
        return p.get("alt")
    y, m, d = _date_args(p)
    if not y:
        return None
    when = format_date(y, m, d, p.get("df").lower() != "us")
    lead = "Since" if p.yes("since") else "As of"
    return f"{lead.lower() if p.yes('lc') else lead} {when}"


def _circa(p: Params) -> str:
    pos = [x for x in p.positional() if x]
    if not pos:
        return "c."
    return "c. " + " – c. ".join(pos[:2])


# ------------------------------------------------------------------------------------------ coords
def _coord(p: Params) -> str | None:
    if p.get("display") and "inline" not in p.get("display").lower():
        return None
    pos = p.positional()
    hemi = [i for i, x in enumerate(pos) if x.upper() in ("N", "S", "E", "W")]
    if len(hemi) >= 2:
        lat, lon = pos[: hemi[0]], pos[hemi[0] + 1 : hemi[1]]
        marks = ("°", "′", "″")

        def dms(parts: list[str], h: str) -> str:
            return "".join(f"{v}{marks[i]}" for i, v in enumerate(parts[:3]) if v) + h.upper()

        return f"{dms(lat, pos[hemi[0]])} {dms(lon, pos[hemi[1]])}"
    a, b = (_num(pos[0]), _num(pos[1])) if len(pos) >= 2 else (None, None)
    if a is None or b is None:
        return None
    lat, lon = pos[0].strip().lstrip("-+−"), pos[1].strip().lstrip("-+−")
    return f"{lat}°{'N' if a >= 0 else 'S'} {lon}°{'E' if b >= 0 else 'W'}"


# -------------------------------------------------------------------------------- language, speech
def _lang_prefix(code: str, text: str) -> str | None:
    if not text:
        return None
    name = LANGUAGES.get(code.lower())
    return f"{name}: {text}" if name else text


def _ipa_lang(code: str, p: Params) -> str | None:
    t = p.get(1)
    if not t:
        return None
    t = t if t[:1] in "[/" else f"[{t}]"
    name = LANGUAGES.get(code.lower())
    return f"{name} pronunciation: {t}" if name and not p.has(2) else t


_IPAC_LABELS = {
    "lang": "English pronunciation:",
    "pron": "pronounced",
    "local": "locally",
    "uk": "UK:",
    "us": "US:",
    "ca": "Canada:",
    "au": "Australia:",
    "nz": "New Zealand:",
    "also": "also",
    "uklang": "UK English pronunciation:",
    "uspron": "US pronunciation:",
}


def _ipac(p: Params) -> str | None:
    words, cur = [], []
    for x in p.positional():
        label = _IPAC_LABELS.get(x.strip().lower())
        if label is not None and not cur:
            words.append(label)
        elif x.strip() in (",", ";"):
            if cur:
                words.append("/" + "".join(cur).replace("_", " ") + "/" + x.strip())
                cur = []
        else:
            cur.append(x.strip())
    if cur:
        words.append("/" + "".join(cur).replace("_", " ") + "/")
    return " ".join(words) or None


def _nihongo(p: Params) -> str | None:
    pos = p.positional() + ["", "", ""]
    inner = ", ".join(x for x in pos[1:3] if x)
    if pos[0] and inner:
        return f"{pos[0]} ({inner})"
    return pos[0] or inner or None


# --------------------------------------------------------------------------------- citation styles
def _authors(p: Params) -> str:
    names = []
    for i in ["", *range(1, 10)]:
        last = p.get(f"last{i}") or p.get(f"surname{i}")
        first = p.get(f"first{i}") or p.get(f"given{i}")
        if i == 1 and not last and names:
            continue
        if last:
            names.append(f"{last}, {first}" if first else last)
        elif p.get(f"author{i}"):
            names.append(p.get(f"author{i}"))
        elif i not in ("", 1):
            break
    for key in ("authors", "vauthors"):
        if not names and p.get(key):
            names.append(p.get(key))
    return "; ".join(dict.fromkeys(names))


def cite(p: Params, kind: str) -> str | None:
    """One bibliographic line from a Citation Style 1 template's fields: authors (date). Title.
    Work. Volume (issue): pages. Publisher. ISBN.

    Args:
        p: the template's parameters.
        kind: what follows ``cite `` in the name (``book``, ``web``...; ``citation`` for {{citation}}).

    Returns:
        The line, or ``None`` when the template names no title and no work.
    """
    title = p.get("title") or p.get("trans-title")
    chapter = p.get("chapter") or p.get("contribution")
    work = next(
        (
            p.get(k)
            for k in (
                "work",
                "journal",
                "newspaper",
                "magazine",
                "website",
                "periodical",
                "encyclopedia",
                "series",
            )
            if p.get(k)
        ),
        "",
    )
    if not title and not work:
        return None
    parts = []
    who, date = _authors(p), p.get("date") or p.get("year")
    head = f"{who} ({date})." if who and date else (f"{who}." if who else (f"{date}." if date else ""))
    if head:
        parts.append(head)
    if chapter:
        parts.append(f'"{chapter}".')
    if title:
        parts.append(
            f'"{title}".' if kind in ("web", "news", "journal", "magazine", "press release") else f"{title}."
        )
    vol = p.get("volume")
    issue = p.get("issue") or p.get("number")
    pages = p.get("pages") or p.get("page")
    if work:
        where = work + (f" {vol}" if vol else "") + (f" ({issue})" if issue else "")
        parts.append(where + (f": {pages}." if pages else "."))
    elif pages:
        parts.append(f"p. {pages}.")
    place, pub = p.get("location") or p.get("place"), p.get("publisher")
    if pub:
        parts.append(f"{place}: {pub}." if place else f"{pub}.")
    if p.get("isbn") or p.get("ISBN"):
        parts.append(f"ISBN {p.get('isbn') or p.get('ISBN')}.")
    return " ".join(parts).replace("..", ".")


def _harv(p: Params, style: str) -> str | None:
    pos = p.positional()
    years = [x for x in pos if re.fullmatch(r"\d{4}[a-z]?|n\.d\.", x)]
    names = [x for x in pos if x and x not in years]
    if not names:
        return None
    who = names[0] if len(names) == 1 else " & ".join(names[:2]) if len(names) == 2 else f"{names[0]} et al."
    loc = p.get("p") or p.get("pp") or p.get("page") or p.get("pages")
    loc = f", p. {loc}" if p.get("p") or p.get("page") else (f", pp. {loc}" if loc else "")
    y = years[0] if years else ""
    if style == "txt":
        return f"{who} ({y}{loc})"
    body = f"{who} {y}{loc}".strip()
    return f"({body})" if style == "paren" else body


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
    v = _group(pos[0])
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
    return _group(arg) if arg.strip() else None


_RENDER: dict[str, Callable[[Params], str | None]] = {
    "convert": lambda p: _convert(p, False),
    "cvt": lambda p: _convert(p, True),
    "height": _height,
    "val": _val,
    "start date": _date_tpl,
    "end date": _date_tpl,
    "start date and age": _date_tpl,
    "end date and age": _date_tpl,
    "birth date": _date_tpl,
    "birth date and age": _date_tpl,
    "bda": _date_tpl,
    "dob": _date_tpl,
    "death date": _date_tpl,
    "film date": _date_tpl,
    "release date": _date_tpl,
    "date": _date_tpl,
    "death date and age": _death_date_and_age,
    "dda": _death_date_and_age,
    "birth year and age": lambda p: p.get(1) or None,
    "death year and age": lambda p: p.get(1) or None,
    "birth based on age as of date": lambda p: None,
    "dts": _dts,
    "formatdate": _dts,
    "format date": _dts,
    "as of": _as_of,
    "circa": _circa,
    "c.": _circa,
    "ca.": _circa,
    "coord": _coord,
    "lang": lambda p: p.get(2) or None,
    "langx": lambda p: _lang_prefix(p.get(1), p.get(2)),
    "transl": _last_pos,
    "transliteration": _last_pos,
    "native name": lambda p: p.get(2) or None,
    "native phrase": lambda p: p.get(2) or None,
    "nihongo": _nihongo,
    "ipac-en": _ipac,
    "ipac-ar": _ipac,
    "ipac-de": _ipac,
    "ipac-es": _ipac,
    "ipac-fr": _ipac,
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
    "harvnb": lambda p: _harv(p, "nb"),
    "harv": lambda p: _harv(p, "paren"),
    "harvtxt": lambda p: _harv(p, "txt"),
    "harvp": lambda p: _harv(p, "paren"),
    "harvs": lambda p: _harv(p, "txt"),
    "age": lambda p: (
        str(_age_between(a[:3], a[3:6])) if (a := _ints(*p.positional()[:6])) and len(a) == 6 else None
    ),
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
            return p.get(1) or None if code == "en" else _lang_prefix(code, p.get(1))
        if n.startswith("ipa-") and len(n) <= 10:
            return _ipa_lang(n[4:], p)
        if n.startswith("ipac-"):
            return _ipac(p)
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
