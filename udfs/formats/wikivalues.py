"""Value templates of wikitext rendered to their text: dates, coordinates, language and pronunciation
templates, citations (see :mod:`udfs.formats.wikitemplates` for which names use which renderer).

Deterministic: nothing depends on the day the text is read ("and age" templates give the date
without the age unless both dates are given). Dates are written in English, day-month-year when the
template asks for it (``df=y``), else month-day-year. A date that cannot exist (month 13, day 32,
February 30) raises :class:`InvalidDate`: MediaWiki's date templates print an error
there, and the reader drops the template's value and counts it.

Source: the template documentation pages of the English Wikipedia (Template:Birth date and age,
Template:Dts, Template:As of, Template:Coord, Template:Lang, Template:IPAc-en, Template:Citation Style
1), read 2026-12.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from udfs.formats.wikiunits import number

if TYPE_CHECKING:
    from udfs.formats.wikitemplates import Params

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


# ------------------------------------------------------------------------------------------- dates
class InvalidDate(ValueError):
    """A date template's month or day cannot exist (month 13, day 32, April 31, February 29 of a
    common year)."""


def days_in_month(year: int, month: int) -> int:
    """Days of ``month`` (1-12) in ``year`` of the proleptic Gregorian calendar (year 0 and negative
    years included, as astronomical years).

    >>> days_in_month(2000, 2), days_in_month(1900, 2), days_in_month(2023, 4)
    (29, 28, 30)
    """
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _month(m: str) -> int | None:
    m = m.strip().lower()
    if m.isdigit() and 1 <= int(m) <= 12:
        return int(m)
    return _MONTH_NUM.get(m)


def format_date(y: str, m: str = "", d: str = "", dmy: bool = False) -> str:
    """A date as the date templates print it: ``March 5, 1980`` (``dmy``: ``5 March 1980``), ``March 1980``
    or ``1980`` when the month or day is missing; a month written as a word that is not a month name is
    kept as written.

    Args:
        y, m, d: year, month (number or name), day, as written in the template.
        dmy: day before month.

    Returns:
        The date's text (``""`` when nothing is given).

    Raises:
        InvalidDate: a numeric month outside 1-12, or a numeric day outside the days of its month (of
            any month when the month or year is not a number).

    >>> format_date("1980", "3", "05"), format_date("2000", "February", "29", dmy=True)
    ('March 5, 1980', '29 February 2000')
    >>> format_date("2023", "2", "29")
    Traceback (most recent call last):
    ...
    udfs.formats.wikivalues.InvalidDate: 2023-2-29
    """
    y, m, d = y.strip(), m.strip(), d.strip()
    mi = _month(m) if m else None
    _check_date(y, m, mi, d)
    d = d.lstrip("0")
    month = MONTHS[mi - 1] if mi else m
    if not month:
        return y
    if not d:
        return f"{month} {y}".strip()
    return f"{d} {month} {y}".strip() if dmy else f"{month} {d}, {y}".strip(", ")


def _check_date(y: str, m: str, mi: int | None, d: str) -> None:
    """Raise :class:`InvalidDate` when the numbers written cannot be a date (see :func:`format_date`)."""
    if m.isdigit() and mi is None:
        raise InvalidDate(f"{y}-{m}-{d}".rstrip("-"))
    if d.isdigit():
        most = days_in_month(int(y), mi) if mi and re.fullmatch(r"-?\d{1,4}", y) else 31
        if not 1 <= int(d) <= most:
            raise InvalidDate(f"{y}-{m}-{d}")


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
    a, b = (number(pos[0]), number(pos[1])) if len(pos) >= 2 else (None, None)
    if a is None or b is None:
        return None
    lat, lon = pos[0].strip().lstrip("-+−"), pos[1].strip().lstrip("-+−")
    return f"{lat}°{'N' if a >= 0 else 'S'} {lon}°{'E' if b >= 0 else 'W'}"


# -------------------------------------------------------------------------------- language, speech
def lang_prefix(code: str, text: str) -> str | None:
    """``Russian: text`` for a ``lang-ru``-style template (``text`` alone for an unknown code)."""
    if not text:
        return None
    name = LANGUAGES.get(code.lower())
    return f"{name}: {text}" if name else text


def ipa_lang(code: str, p: Params) -> str | None:
    """``French pronunciation: [text]`` for ``IPA-fr`` (``[text]`` alone with a second parameter)."""
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


def ipac(p: Params) -> str | None:
    """An ``IPAc-xx`` transcription: its segments joined between slashes, labels (``local``, ``UK``) spelt."""
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


VALUE_RENDERERS: dict[str, Callable[[Params], str | None]] = {
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
    "langx": lambda p: lang_prefix(p.get(1), p.get(2)),
    "native name": lambda p: p.get(2) or None,
    "native phrase": lambda p: p.get(2) or None,
    "nihongo": _nihongo,
    "ipac-en": ipac,
    "ipac-ar": ipac,
    "ipac-de": ipac,
    "ipac-es": ipac,
    "ipac-fr": ipac,
    "harvnb": lambda p: _harv(p, "nb"),
    "harv": lambda p: _harv(p, "paren"),
    "harvtxt": lambda p: _harv(p, "txt"),
    "harvp": lambda p: _harv(p, "paren"),
    "harvs": lambda p: _harv(p, "txt"),
    "age": lambda p: (
        str(_age_between(a[:3], a[3:6])) if (a := _ints(*p.positional()[:6])) and len(a) == 6 else None
    ),
}
"""Template name -> renderer, for :func:`udfs.formats.wikitemplates.render`."""
