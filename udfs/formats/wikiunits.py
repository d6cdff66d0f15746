"""Unit templates of wikitext (``{{convert}}``, ``{{cvt}}``, ``{{height}}``) rendered to their text:
the value and unit as written, then the value in the usual other unit, rounded to the input's
significant figures (at least two), as Template:Convert prints it by default (``5 miles (8.0 km)``).

Source: Template:Convert documentation of the English Wikipedia (default output units, ``abbr``,
``disp``, ``adj``, ``sp`` options), read 2026-12; unit factors from NIST SP 811 (2008), Appendix B.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from math import isfinite
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from udfs.formats.wikitemplates import Params

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


# ------------------------------------------------------------------------------------------ numbers
def number(s: str) -> float | None:
    """A number as written in a template (``1,234.5``, ``−3``), or ``None`` when it is not one
    (``nan``, ``inf`` and values beyond a float's range, such as ``1e400``, are not: written as they are)."""
    s = s.replace(",", "").replace("−", "-").strip()
    try:
        x = float(s)
    except ValueError:
        return None
    return x if isfinite(x) else None


def group_digits(s: str) -> str:
    """``1234567.5`` -> ``1,234,567.5`` (a string that is not a plain number is returned as it is)."""
    m = re.fullmatch(r"(-?)(\d+)(\.\d+)?", s.replace(",", "").strip())
    if not m:
        return s.strip()
    sign, whole, frac = m.group(1), m.group(2).lstrip("0") or "0", m.group(3) or ""
    head = len(whole) % 3 or 3  # f"{int(whole):,}" at any length (int() refuses over 4,300 digits)
    return sign + ",".join([whole[:head], *(whole[i : i + 3] for i in range(head, len(whole), 3))]) + frac


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
        y = {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[to]
    else:
        y = x * a[1] / b[1]
    return y if isfinite(y) else None


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
    nums = [number(v) for v in values]
    plural = not (len(values) == 1 and nums[0] is not None and abs(nums[0]) == 1)

    def joined(vs: list[str]) -> str:
        return vs[0] + "".join(s + v for s, v in zip(seps, vs[1:], strict=True))

    if frm is None:
        return f"{joined([group_digits(v) for v in values])} {unit_in}".strip()
    info = _UNITS[frm]
    us = p.get("sp").lower() == "us"

    def name(u: tuple[str, float, str, str, str], pl: bool, ab: bool) -> str:
        if ab:
            return u[4]
        n = u[3] if pl and not adj else u[2]
        return n.replace("metre", "meter").replace("litre", "liter") if us else n

    sep = "-" if adj and abbr not in ("on", "in", "values") else " "
    short_in = abbr in ("on", "in", "values")
    left = f"{joined([group_digits(v) for v in values])}{sep}{name(info, plural, short_in)}"
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


UNIT_RENDERERS: dict[str, Callable[[Params], str | None]] = {
    "convert": lambda p: _convert(p, False),
    "cvt": lambda p: _convert(p, True),
    "height": _height,
}
"""Template name -> renderer, for :func:`udfs.formats.wikitemplates.render`."""
