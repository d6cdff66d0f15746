"""Which charset an HTML or text payload is in, and from what: BOM, HTTP header, ``<meta>``, detection.

Order (WHATWG HTML, "determining the character encoding", section 13.2.3.2): a byte order mark wins
(it cannot be wrong about the bytes that follow it), then the HTTP ``Content-Type`` charset, then a
``<meta charset>`` / ``<meta http-equiv=Content-Type content="...; charset=...">`` in the first bytes,
then, for bytes that are not valid UTF-8, detection with charset-normalizer; else UTF-8. Labels map to
codecs as browsers map them (WHATWG Encoding Standard, "encodings" table): ``gb2312`` and ``gbk`` are
decoded as GB18030 (their superset; Python's strict ``gb2312`` codec turns every GBK-only character
into U+FFFD), ``iso-8859-1`` and ``us-ascii`` as windows-1252, ``shift_jis`` as cp932, ``euc-kr`` as
cp949.
"""

from __future__ import annotations

import codecs
import re

SOURCES = ("bom", "http", "meta", "detected", "default")
"""Where a charset decision came from, in the order they are tried."""

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_WHATWG = {
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030", "chinese": "gb18030",
    "csgb2312": "gb18030", "iso-ir-58": "gb18030", "cp936": "gb18030", "windows-936": "gb18030",
    "iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "l1": "cp1252", "us-ascii": "cp1252",
    "ascii": "cp1252", "iso-8859-9": "cp1254", "latin5": "cp1254", "tis-620": "cp874", "iso-8859-11": "cp874",
    "shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "x-sjis": "cp932", "ms_kanji": "cp932",
    "windows-31j": "cp932", "euc-kr": "cp949", "ks_c_5601-1987": "cp949", "korean": "cp949",
    "big5": "big5hkscs", "x-x-big5": "big5hkscs", "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8",
}
_META = re.compile(rb"<meta[^>]{0,300}?charset\s*=\s*[\"']?\s*([a-zA-Z0-9_.:-]{1,40})", re.IGNORECASE)
META_SCAN = 4096
"""Bytes searched for ``<meta charset>``: WHATWG prescans 1024; real pages put it later (after long
``<script>`` or ``<link>`` blocks), and a charset label further in is still the page's own word."""
DETECT_BYTES = 64 << 10
"""Bytes given to the detector (enough for its language and coherence tests, bounded time)."""


def codec_of(label: str | None) -> str | None:
    """Python codec name of a charset label as browsers read it; ``None`` when unknown or blank."""
    if not label:
        return None
    low = label.strip().strip("\"'").lower()
    try:
        return codecs.lookup(_WHATWG.get(low, low)).name
    except LookupError:
        return None


def http_charset(content_type: str | None) -> str | None:
    """The codec of the ``charset`` parameter of a ``Content-Type`` header value, if known."""
    for part in (content_type or "").split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k.strip().lower() == "charset":
            return codec_of(v)
    return None


def decide(payload: bytes, content_type: str | None, html: bool) -> tuple[str, str]:
    """``(codec, source)`` of a payload; ``source`` is one of :data:`SOURCES`.

    Args:
        payload: the HTTP body bytes.
        content_type: the HTTP ``Content-Type`` header value (or ``None``).
        html: look for ``<meta>`` charset declarations.
    """
    for bom, name in _BOMS:
        if payload.startswith(bom):
            return name, "bom"
    if codec := http_charset(content_type):
        return codec, "http"
    if html and (m := _META.search(payload[:META_SCAN])):
        codec = codec_of(m.group(1).decode("ascii", "replace"))
        if codec in ("utf-16-le", "utf-16-be", "utf-16"):  # WHATWG: a meta cannot declare UTF-16
            codec = "utf-8"
        if codec:
            return codec, "meta"
    try:
        payload.decode("utf-8")
        return "utf-8", "default"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(payload[:DETECT_BYTES]).best()
    codec = codec_of(best.encoding) if best is not None else None
    return (codec, "detected") if codec else ("utf-8", "default")


def decode(payload: bytes, codec: str) -> tuple[str, int]:
    """``payload`` decoded (BOM removed, bad bytes -> U+FFFD) and the number of U+FFFD in the text."""
    for bom, name in _BOMS:
        if codec == name and payload.startswith(bom):
            payload = payload[len(bom):]
    text = payload.decode(codec, errors="replace")
    return text, text.count("\ufffd")
