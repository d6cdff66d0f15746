"""FineWeb quality signals (Penedo et al. 2024, section 3.3; datatrove 0.10.1
``fineweb_quality_filter.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.quality.parse import Parsed, _last_bytes, _np, _per_doc, _ratio, _struct

FINEWEB_SHORT_LINE_CHARS = 30
"""A FineWeb *short line* has at most this many characters (datatrove ``short_line_length``)."""

# Terminal punctuation of every script, as in datatrove.utils.text.TERMINAL_PUNCTUATION (Unicode
# Sentence_Terminal characters), as code-point ranges; FineWeb's line-punctuation rule uses it.
_TERMINAL_RANGES = (
    0x21, 0x2E, 0x3F, 0x589, (0x61D, 0x61F), 0x6D4, (0x700, 0x702), 0x7F9, 0x837, 0x839, (0x83D, 0x83E),
    (0x964, 0x965), (0x104A, 0x104B), 0x1362, (0x1367, 0x1368), 0x166E, (0x1735, 0x1736), (0x17D4, 0x17D6),
    (0x17D9, 0x17DA), 0x1803, 0x1809, (0x1944, 0x1945), (0x1AA8, 0x1AAB), (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F),
    (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C), (0x1C7E, 0x1C7F), (0x203C, 0x203D), (0x2047, 0x2049), 0x2E2E,
    0x2E3C, (0x2E53, 0x2E54), 0x3002, 0xA4FF, (0xA60E, 0xA60F), 0xA6F3, 0xA6F7, (0xA876, 0xA877),
    (0xA8CE, 0xA8CF), 0xA92F, (0xA9C8, 0xA9C9), (0xAA5D, 0xAA5F), (0xAAF0, 0xAAF1), 0xABEB, 0xFE52,
    (0xFE56, 0xFE57), 0xFF01, 0xFF0E, 0xFF1F, 0xFF61, (0x10A56, 0x10A57), (0x10F55, 0x10F59),
    (0x10F86, 0x10F89), (0x11047, 0x11048), (0x110BE, 0x110C1), (0x11141, 0x11143), (0x111C5, 0x111C6),
    0x111CD, (0x111DE, 0x111DF), (0x11238, 0x11239), (0x1123B, 0x1123C), 0x112A9, (0x1144B, 0x1144C),
    (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642), (0x1173C, 0x1173E), 0x11944, 0x11946,
    (0x11A42, 0x11A43), (0x11A9B, 0x11A9C), (0x11C41, 0x11C42), (0x11EF7, 0x11EF8), (0x11F43, 0x11F44),
    (0x16A6E, 0x16A6F), 0x16AF5, (0x16B37, 0x16B38), 0x16B44, 0x16E98, 0x1BC9F, 0x1DA88,
)


def _re2_class(ranges: tuple) -> str:
    parts = []
    for r in ranges:
        a, b = r if isinstance(r, tuple) else (r, r)
        parts.append(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}")
    return "[" + "".join(parts) + "]"


_TERMINAL_CLASS = _re2_class(_TERMINAL_RANGES)


# ----------------------------------------------------------------------------------------- FineWeb
FINEWEB_TYPE = pa.struct([
    ("line_punct_ratio", pa.float64()),
    ("short_line_ratio", pa.float64()),
    ("char_dup_ratio", pa.float64()),
    ("newline_ratio", pa.float64()),
])


def fineweb(p: Parsed) -> pa.StructArray:
    """FineWeb quality signals (Penedo et al. 2024, section 3.3; datatrove ``FineWebQualityFilter``).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.

    Returns:
        StructArray[n] of :data:`FINEWEB_TYPE`, float64:
        ``line_punct_ratio``: non-blank lines whose last character (unstripped, as datatrove) is terminal
        punctuation of any script, over non-blank lines (paper >= 0.12);
        ``short_line_ratio``: non-blank lines of <= :data:`FINEWEB_SHORT_LINE_CHARS` characters, over
        non-blank lines (paper <= 0.67);
        ``char_dup_ratio``: characters of non-blank lines equal to an earlier line, over the characters
        of the text without ``\\n`` (paper <= 0.01);
        ``newline_ratio``: ``\\n`` characters per word (paper <= 0.3; +inf with newlines but no words).
        With no non-blank line every field is 0.0.
    """
    n = p.n
    n_lines = _per_doc(p.line_doc, n)
    # an ASCII last byte is the last character (".", "!" and "?" are the ASCII terminals); other lines
    # are read by the regex
    tail, _ = _last_bytes(p.lines, 1)
    punct = np.isin(tail[:, 0], np.frombuffer(b"!.?", np.uint8))
    wide = np.flatnonzero(tail[:, 0] >= 0x80)
    if len(wide):
        last = pc.utf8_slice_codeunits(p.lines.take(pa.array(wide)), -1)
        punct[wide] = _np(pc.match_substring_regex(last, _TERMINAL_CLASS), bool)
    short = p.line_chars <= FINEWEB_SHORT_LINE_CHARS
    _, dup_chars = p.line_duplicates
    n_words = p.n_tokens
    newline = _ratio(p.n_newlines, n_words)
    newline[(n_words == 0) & (p.n_newlines > 0)] = np.inf
    return _struct(
        {
            "line_punct_ratio": _ratio(_per_doc(p.line_doc[punct], n), n_lines),
            "short_line_ratio": _ratio(_per_doc(p.line_doc[short], n), n_lines),
            "char_dup_ratio": _ratio(dup_chars, p.n_chars - p.n_newlines),
            "newline_ratio": newline,
        },
        {f.name: f.type for f in FINEWEB_TYPE},
    )
