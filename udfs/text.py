"""Text repair and normalisation: bytes -> valid UTF-8 strings, and Arrow string columns -> normal form.

Two layers:

* Per-record repair while parsing (:func:`decode_utf8`, :func:`repair_surrogates`): invalid UTF-8
  bytes and lone UTF-16 surrogates (e.g. the JSON escape ``"\\ud83d"`` without its partner) become
  U+FFFD REPLACEMENT CHARACTER, and the number of replacements is returned so it can be kept per
  document (``n_replaced``). Arrow strings must be valid UTF-8, so this runs before a string reaches Arrow.
* Column normalisation (:func:`normalize`): Arrow compute kernels (RE2 regex replace, ICU-free
  ``utf8_normalize``) over a whole batch, no per-document Python.

Sources: Unicode 15 chapter 3.9 (U+FFFD substitution of maximal subparts, which CPython's
``errors="replace"`` implements), UAX #15 (NFC), and the C0/C1 control ranges of Unicode chapter 23.1.
"""

from __future__ import annotations

import codecs
import functools
import re
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REPLACEMENT = "\ufffd"
_REPLACEMENT_UTF8 = REPLACEMENT.encode("utf-8")
_SURROGATE = re.compile("[\ud800-\udfff]")

# RE2 patterns for pyarrow.compute.replace_substring_regex.
NEWLINE_PATTERN = r"\r\n?"
"""CRLF and lone CR (old Mac) both become LF."""
INVISIBLE_PATTERN = r"[\x{200B}\x{FEFF}]"
"""U+200B ZERO WIDTH SPACE and U+FEFF BOM / ZERO WIDTH NO-BREAK SPACE. U+200C/U+200D (ZWNJ/ZWJ) are
kept: they change meaning in Persian, Indic scripts and emoji sequences."""
CONTROL_PATTERN = r"[\x00-\x08\x0B-\x1F\x7F-\x{9F}]"
"""C0 controls (U+0000-U+001F) except TAB (U+0009) and LF (U+000A), DEL (U+007F), C1 controls
(U+0080-U+009F). CR is in this range: with ``newlines`` on it is already gone; with it off, a CR is
removed here rather than kept as a control character."""


def decode_utf8(data: bytes) -> tuple[str, int]:
    """Decode UTF-8, replacing each maximal invalid subpart by U+FFFD.

    Args:
        data: raw bytes.

    Returns:
        ``(text, n_replaced)``: the decoded text and how many U+FFFD were *introduced* (U+FFFD
        already present as valid bytes ``EF BF BD`` is not counted).

    Source: Unicode 15 §3.9 "U+FFFD Substitution of Maximal Subparts" (CPython ``errors="replace"``).

    >>> decode_utf8(b"caf\\xc3\\xa9 \\xff!")
    ('café \\ufffd!', 1)
    """
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        # A valid EF BF BD can never be swallowed by an invalid sequence (EF is a lead byte), so the
        # difference is exactly the number of substitutions.
        return text, text.count(REPLACEMENT) - data.count(_REPLACEMENT_UTF8)


def decode_utf8_escaped(data: bytes) -> tuple[str, bool]:
    """Decode UTF-8 keeping invalid bytes as lone surrogates U+DC80-U+DCFF (PEP 383 ``surrogateescape``).

    Used on a JSON line before ``json.loads``, so invalid bytes inside a string value survive parsing
    and are repaired, per field, by :func:`repair_surrogates`.

    Returns:
        ``(text, had_invalid)``.
    """
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="surrogateescape"), True


def _restore_escaped_bytes(err: UnicodeEncodeError) -> tuple[bytes, int]:
    # surrogateescape'd bytes go back to the raw byte (so a truncated multibyte sequence is one maximal
    # subpart again); any other lone surrogate becomes the UTF-8 of U+FFFD.
    out = bytearray()
    for ch in err.object[err.start : err.end]:
        cp = ord(ch)
        out += bytes([cp - 0xDC00]) if 0xDC80 <= cp <= 0xDCFF else _REPLACEMENT_UTF8
    return bytes(out), err.end


# Registered once per process, at import.
codecs.register_error("winnow_restore", _restore_escaped_bytes)


def repair_surrogates(text: str, escaped: bool = False) -> tuple[str, int]:
    """Replace lone surrogates (and, when ``escaped``, surrogate-escaped invalid bytes) by U+FFFD.

    Args:
        text: a str that may hold lone surrogates (``json.loads`` keeps ``"\\ud83d"`` as one).
        escaped: ``text`` came from :func:`decode_utf8_escaped`; U+DC80-U+DCFF are then raw bytes and
            are re-decoded so each maximal invalid subpart counts once, as in :func:`decode_utf8`.

    Returns:
        ``(repaired, n_replaced)``; ``text`` unchanged and 0 when it holds no surrogate.

    >>> repair_surrogates("a\\ud83db")
    ('a\\ufffdb', 1)
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text, 0
    before = text.count(REPLACEMENT)
    if escaped:
        repaired = text.encode("utf-8", errors="winnow_restore").decode("utf-8", errors="replace")
    else:
        repaired = _SURROGATE.sub(REPLACEMENT, text)
    return repaired, repaired.count(REPLACEMENT) - before


def normalize(
    texts: pa.Array | pa.ChunkedArray,
    *,
    nfc: bool = True,
    newlines: bool = True,
    strip_invisible: bool = True,
    strip_control: bool = True,
) -> pa.Array | pa.ChunkedArray:
    """Normalise a column of strings with Arrow kernels, each step switchable.

    Order: newlines, invisible characters, control characters, then NFC last, because removing a
    character between a base letter and a combining mark can create a new composition.

    Args:
        texts: ``string`` or ``large_string`` array of valid UTF-8 (nulls stay null).
        nfc: Unicode Normalization Form C (UAX #15): composed and decomposed "café" become equal.
        newlines: ``\\r\\n`` and lone ``\\r`` become ``\\n``.
        strip_invisible: remove U+200B and U+FEFF (:data:`INVISIBLE_PATTERN`).
        strip_control: remove C0/C1 controls except ``\\t`` and ``\\n`` (:data:`CONTROL_PATTERN`).

    Returns:
        An array of the same type and length (a ChunkedArray input comes back as one Array).
    """
    out = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    # Scanning is cheaper than rewriting, and pure-ASCII rows (most crawled prose) can hold neither
    # U+200B/U+FEFF, C1 controls nor anything NFC changes: rewrite only the rows that need it. The
    # per-row kernels scan at 0.6-5 GB/s; one numpy pass over the batch's bytes (~9 GB/s) first says
    # whether any row can need a step at all (a step only removes characters, so it never creates
    # work for a later one), and most batches of clean prose skip them all.
    scan = ByteScan.of(out)
    if scan.ascii:
        non_ascii = pa.array(np.zeros(len(out), dtype=bool))
    else:
        non_ascii = pc.fill_null(pc.invert(pc.string_is_ascii(out)), False)
    if newlines and scan.cr:
        out = _rewrite(out, pc.match_substring(out, "\r"), lambda a: pc.replace_substring_regex(a, NEWLINE_PATTERN, "\n"))
    if strip_invisible:
        out = _rewrite(out, _match_within(out, non_ascii, INVISIBLE_PATTERN),
                       lambda a: pc.replace_substring_regex(a, INVISIBLE_PATTERN, ""))
    if strip_control and scan.control:
        out = _rewrite(out, pc.match_substring_regex(out, CONTROL_PATTERN),
                       lambda a: pc.replace_substring_regex(a, CONTROL_PATTERN, ""))
    if nfc:
        out = _rewrite(out, _match_within(out, non_ascii, NFC_CANDIDATE_PATTERN), nfc_strings)
    return out


class ByteScan:
    """What one pass over the UTF-8 bytes of a whole string column can rule out (nulls' bytes included,
    so a flag may say "maybe" where no row needs it; never the reverse).

    Attributes:
        ascii: no byte >= 0x80 (every row is ASCII).
        cr: some byte is CR (0x0D).
        control: some byte is a C0 control other than TAB and LF, or DEL, or some C2 80..C2 9F pair
            (the UTF-8 of the C1 controls): :data:`CONTROL_PATTERN` may match.
    """

    __slots__ = ("ascii", "cr", "control")

    def __init__(self, data: np.ndarray):
        top = int(data.max()) if data.size else 0
        self.ascii = top < 0x80
        # Clean prose has no C0 byte but LF (and TAB): when the counts agree, neither CR nor any other
        # control is there, and two passes said so.
        low = int(np.count_nonzero(data < 0x20))
        other = low - int(np.count_nonzero(data == 0x0A))
        if other:
            other -= int(np.count_nonzero(data == 0x09))
        self.cr = other > 0 and bool((data == 0x0D).any())
        control = other > 0 or (top >= 0x7F and bool((data == 0x7F).any()))
        if not control and not self.ascii:
            after_c2 = data[1:][data[:-1] == 0xC2]
            control = bool(((after_c2 >= 0x80) & (after_c2 <= 0x9F)).any())
        self.control = control

    @classmethod
    def of(cls, arr: pa.Array) -> ByteScan:
        """Scan the bytes the offsets of a ``string`` / ``large_string`` array span (no copy)."""
        return cls(string_bytes(arr))


def string_bytes(arr: pa.Array) -> np.ndarray:
    """The UTF-8 bytes a ``string`` / ``large_string`` array's offsets span, as a uint8 view (no copy)."""
    _, offsets, data = arr.buffers()
    if data is None or len(arr) == 0:
        return np.zeros(0, dtype=np.uint8)
    kind = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    off = np.frombuffer(offsets, dtype=kind)[arr.offset : arr.offset + len(arr) + 1]
    return np.frombuffer(data, dtype=np.uint8)[int(off[0]) : int(off[-1])]


@functools.cache
def arrow_nfc_composes() -> bool:
    """Whether this pyarrow's ``utf8_normalize(..., "NFC")`` composes. The shipped wheels skip the composition
    step for NFC/NFKC (apache/arrow#51225, fixed by apache/arrow#51237; every wheel from 19.0.1 to 25.0.1
    checked here on 2026-12-01 decomposes), so "é" came out as "e" + U+0301 in every document holding any code
    point >= U+0300 (a curly quote is enough). pandas falls back to ``unicodedata`` the same way
    (pandas-dev/pandas#66221); a fixed pyarrow switches back to the kernel by itself.

    Asked on first use, not at import: Arrow's first ``utf8_normalize`` call loads its Unicode tables
    (~0.15 CPU-s), which a process whose texts need no NFC (all ASCII) never has to pay.
    """
    return pc.utf8_normalize(pa.array(["e\u0301"]), "NFC").to_pylist() == ["\u00e9"]


def nfc_strings(arr: pa.Array) -> pa.Array:
    """NFC of a string column (UAX #15), nulls kept.

    Arrow's kernel when it composes (:func:`arrow_nfc_composes`), otherwise CPython's ``unicodedata`` over the
    rows that are not NFC already (``is_normalized`` is a C quick check). Only candidate rows reach this
    (:data:`NFC_CANDIDATE_PATTERN`), so the Python path runs on a fraction of a batch.

    >>> nfc_strings(pa.array(["e\u0301 \u2019", None, "\u00e9"])).to_pylist()
    ['é ’', None, 'é']
    """
    if arrow_nfc_composes():
        return pc.utf8_normalize(arr, "NFC")
    return pa.array([s if s is None or unicodedata.is_normalized("NFC", s) else unicodedata.normalize("NFC", s)
                     for s in arr.to_pylist()], pa.string())


NFC_CANDIDATE_PATTERN = r"[\x{0300}-\x{10FFFF}]"
"""Every code point whose NFC_Quick_Check is No or Maybe is >= U+0300 (Unicode DerivedNormalizationProps),
so a string without any is already NFC and skips Arrow's (slow, utf8proc-based) ``utf8_normalize``."""


def _match_within(arr: pa.Array, candidates: pa.Array, pattern: str) -> pa.Array:
    if not pc.any(candidates).as_py():
        return candidates
    sub = pc.fill_null(pc.match_substring_regex(arr.filter(candidates), pattern), False)
    return pc.replace_with_mask(candidates, candidates, sub)


def _rewrite(arr: pa.Array, mask: pa.Array, fn) -> pa.Array:
    mask = pc.fill_null(mask, False)
    n = pc.sum(mask).as_py() or 0
    if n == 0:
        return arr
    if n == len(arr):
        return fn(arr)
    return pc.replace_with_mask(arr, mask, fn(arr.filter(mask)))


def lengths(texts: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    """Per-document sizes.

    Returns:
        ``(n_chars, n_bytes)``, both int32: Unicode code points and UTF-8 bytes.
    """
    n_bytes = pc.cast(pc.binary_length(texts), pa.int32())
    if isinstance(texts, pa.Array) and ByteScan.of(texts).ascii:  # one byte per code point
        return n_bytes, n_bytes
    n_chars = pc.cast(pc.utf8_length(texts), pa.int32())
    return n_chars, n_bytes


def is_blank(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """True where a string is empty or only Unicode whitespace (null counts as blank).

    Returns:
        bool array of the same length.
    """
    if isinstance(texts, pa.Array) and len(texts) and texts.type in (pa.string(), pa.large_string()):
        # A row that starts with a printable ASCII character other than space is not blank: only the
        # others (empty, null, starting with whitespace or a non-ASCII character) need the kernel.
        _, offsets, data = texts.buffers()
        kind = np.int64 if pa.types.is_large_string(texts.type) else np.int32
        off = np.frombuffer(offsets, dtype=kind)[texts.offset : texts.offset + len(texts) + 1]
        raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
        starts, sizes = off[:-1], np.diff(off)
        first = raw[np.minimum(starts, max(raw.size - 1, 0))] if raw.size else np.zeros(len(texts), np.uint8)
        maybe = (sizes == 0) | (first < 0x21) | (first > 0x7E)
        if texts.null_count:
            maybe |= ~np.asarray(texts.is_valid())
        if not maybe.any():
            return pa.array(np.zeros(len(texts), dtype=bool))
        if not maybe.all():
            mask = pa.array(maybe)
            return pc.replace_with_mask(pa.array(np.zeros(len(texts), dtype=bool)), mask, _blank(texts.filter(mask)))
    return _blank(texts)


def _blank(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    trimmed = pc.utf8_trim_whitespace(texts)
    return pc.fill_null(pc.equal(pc.utf8_length(trimmed), 0), True)
