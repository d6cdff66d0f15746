"""What every reader shares: the record schema, quarantine reasons, parse options, file names, fields."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from udfs import text as T

QUARANTINE_REASONS: dict[str, str] = {
    "unreadable_file": "the file (or its rest) cannot be decompressed or parsed as its format",
    "unsupported_format": "format auto and the file name has no known extension",
    "empty_file": "the file holds no record (0 bytes, an empty .gz, only blank lines)",
    "malformed_json": (
        "a JSONL line that is not valid JSON; in a .json file, the rest of the file from its first error"
    ),
    "malformed_xml": "an XML file (JATS, MediaWiki) that is not well-formed: the rest from its first error",
    "malformed_csv": (
        "a CSV/TSV row the csv module rejects (a field over the size limit), or the first line of a row "
        "whose quote is left open (the lines after it are read as rows)"
    ),
    "invalid_record": (
        "a record of the wrong shape (JSON that is not an object, a WARC record without payload)"
    ),
    "text_missing": "the text field is absent or null",
    "text_not_string": "the text field holds a number, list, object or bytes",
    "empty_after_normalization": "no character other than whitespace is left after normalisation",
    "too_large": "the normalised text is over max_doc_bytes UTF-8 bytes",
    "extraction_failed": "HTML to text gave nothing (no main content, or html_extractor none)",
    "unsupported_content_type": "a WARC response that is neither HTML nor plain text (images, PDF, ...)",
    "too_many_replacements": "over ingest.max_replacement_fraction of the text is U+FFFD (wrong charset)",
}
"""The fixed vocabulary of quarantine reasons, with their meaning."""

FORMATS = ("jsonl", "json", "csv", "tsv", "jats", "latex", "mediawiki", "parquet", "text", "wet", "warc")
_FORMAT_SUFFIXES = {
    ".jsonl": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".nxml": "jats",
    ".tex": "latex",
    ".xml": "xml",  # which XML (JATS, MediaWiki) is read from the file's root element
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".txt": "text",
    ".wet": "wet",
    ".warc": "warc",
    ".arc": "warc",
}
_COMPRESSION_SUFFIXES = {".gz": "gz", ".zst": "zst", ".zstd": "zst", ".bz2": "bz2", ".xz": "xz"}

RECORD_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("input_file", pa.string()),
        ("key_path", pa.string()),
        ("split_start", pa.int64()),
        ("record", pa.int64()),
        ("source", pa.string()),
        ("src_id", pa.string()),
        ("url", pa.string()),
        ("meta", pa.map_(pa.string(), pa.string())),
        ("text", pa.string()),
        ("n_chars", pa.int32()),
        ("n_bytes", pa.int32()),
        ("n_replaced", pa.int32()),
        ("record_format", pa.string()),
        ("markers_resolved", pa.map_(pa.string(), pa.int32())),
        ("reason", pa.string()),
        ("excerpt", pa.string()),
        ("detail", pa.string()),
    ]
)
"""Rows emitted by the readers: ``key_path`` is the file path relative to its input glob,
``split_start`` the first byte of the split that read the row (0 for a whole file); ``record_format``
and ``markers_resolved`` are set for structured scientific records (:mod:`udfs.formats.scirecords`:
the shape read, and the markers resolved per kind), null for every other document."""

MISSING = object()


@dataclass(frozen=True)
class ParseOptions:
    """What the readers need; built by the pipeline from the ``ingest`` config section.

    Attributes:
        format: ``auto`` (from the file name) or one of :data:`FORMATS`.
        text_field, id_field, url_field, source_field: record fields (dotted paths reach into nested
            objects, e.g. ``metadata.url``); ``None`` disables id/url/source.
        meta_fields: fields copied into ``meta`` (strings as they are, other values as JSON).
            Field paths may iterate arrays with ``[]`` (``body_text[].text``, see :func:`lookup`);
            CSV/TSV fields are column names, or 0-based column indices (``"2"``).
        record_format: ``auto`` (structured scientific records recognised from their keys), ``flat``
            (the text field as it is), ``s2orc`` or ``unarxive`` (:mod:`udfs.formats.scirecords`), or
            ``mediawiki`` (the text field holds wikitext, rendered by :mod:`udfs.formats.mediawiki`).
        heading_field: a path naming the section heading of each element of the text path's array
            (``body_text[].section`` beside ``body_text[].text``); kept as a line before the first
            paragraph of each section. ``None``: paragraphs only.
        csv_header: CSV/TSV files start with a header row of column names.
        fix_mojibake: repair text decoded with the wrong charset (ftfy, :mod:`udfs.formats.mojibake`).
        max_replacement_fraction: documents with more U+FFFD (gained in decoding) per character
            are quarantined (``too_many_replacements``) or flagged; 1.0 = never.
        replacement_action: ``quarantine``, or ``flag`` (meta ``replacement_fraction``).
        jats_tables: ``keep`` (caption + rows), ``caption`` or ``drop`` (:mod:`udfs.formats.jats`).
        jats_figures, jats_references: ``keep`` or ``drop``.
        mediawiki_namespaces: MediaWiki namespaces read as articles (others skipped, counted).
        mediawiki_templates: ``drop`` or ``params`` (keep parameter values).
        mediawiki_references, mediawiki_tables: ``drop`` or ``keep`` (:mod:`udfs.formats.mediawiki`).
        nfc, newlines, strip_invisible, strip_control: :func:`udfs.text.normalize` switches.
        max_doc_bytes: larger normalised texts are quarantined (``too_large``), UTF-8 bytes.
        html_extractor: ``trafilatura`` or ``none``.
        excerpt_chars: characters of the raw record kept in quarantine excerpts.
        batch_rows: an output Arrow batch holds at most this many rows (``ingest.batch_rows``).
        batch_bytes: a batch is emitted once its texts reach this many bytes (``ingest.batch_bytes``;
            one document may exceed it, up to ``max_doc_bytes``).
        read_bytes: bytes read from the file (and decompressed) per step.
    """

    format: str = "auto"
    text_field: str = "text"
    id_field: str | None = "id"
    url_field: str | None = "url"
    source_field: str | None = "source"
    meta_fields: tuple[str, ...] = ()
    heading_field: str | None = None
    record_format: str = "auto"
    csv_header: bool = True
    fix_mojibake: bool = False
    max_replacement_fraction: float = 0.25
    replacement_action: str = "quarantine"
    jats_tables: str = "keep"
    jats_figures: str = "keep"
    jats_references: str = "keep"
    mediawiki_namespaces: tuple[int, ...] = (0,)
    mediawiki_templates: str = "drop"
    mediawiki_references: str = "drop"
    mediawiki_tables: str = "drop"
    nfc: bool = True
    newlines: bool = True
    strip_invisible: bool = True
    strip_control: bool = True
    max_doc_bytes: int = 4_000_000
    html_extractor: str = "trafilatura"
    excerpt_chars: int = 200
    batch_rows: int = 2048
    batch_bytes: int = 32 << 20
    read_bytes: int = 4 << 20


def split_name(path: str) -> tuple[str, str | None, str | None]:
    """Split a file name into ``(stem, format, compression)`` from its suffixes.

    >>> split_name("s3://b/CC-MAIN-1-00000.warc.wet.gz")
    ('CC-MAIN-1-00000', 'wet', 'gz')
    >>> split_name("/x/notes.md")
    ('notes.md', None, None)
    """
    name = path.rstrip("/").rsplit("/", 1)[-1]
    stem, compression, fmt = name, None, None
    low = stem.lower()
    for suf, codec in _COMPRESSION_SUFFIXES.items():
        if low.endswith(suf):
            stem, compression, low = stem[: -len(suf)], codec, low[: -len(suf)]
            break
    for suf, f in _FORMAT_SUFFIXES.items():
        if low.endswith(suf):
            stem, fmt, low = stem[: -len(suf)], f, low[: -len(suf)]
            break
    if fmt == "wet" and low.endswith(".warc"):  # Common Crawl names WET files *.warc.wet.gz
        stem = stem[: -len(".warc")]
    return stem, fmt, compression


def file_format(path: str, forced: str = "auto") -> tuple[str | None, str | None]:
    """``(format, compression)`` of a file: from its name, or ``forced`` unless ``auto``."""
    _, fmt, codec = split_name(path)
    return (fmt if forced == "auto" else forced), codec


def is_splittable(path: str, forced: str = "auto") -> bool:
    """True when byte ranges of the file can be read apart: uncompressed JSONL (lines) and Parquet
    (row groups; compression lives inside the file). Other files are read by one task each."""
    fmt, codec = file_format(path, forced)
    return (fmt == "jsonl" and codec is None) or (fmt == "parquet" and codec is None)


# ------------------------------------------------------------------------------------ fields
def as_str(v: Any) -> str | None:
    """A field value as stored text: strings as they are (surrogates repaired), others as JSON."""
    if v is None or v is MISSING:
        return None
    if isinstance(v, str):
        return clean(v)
    if isinstance(v, bool | int | float):
        return json.dumps(v)
    return clean(json.dumps(v, ensure_ascii=False, sort_keys=True, default=str))


def clean(s: str) -> str:
    """``s`` with lone surrogates replaced (Arrow strings must be valid UTF-8)."""
    return T.repair_surrogates(s)[0]


def excerpt(raw: bytes | str | None, n: int) -> str | None:
    """The first ``n`` characters of a raw record (bytes decoded with replacement)."""
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw[: 4 * n]).decode("utf-8", errors="replace")[:n]
    return clean(raw[: n + 1])[:n]


def blank_detail(text: str, shown: int = 5) -> str:
    r"""The quarantine ``detail`` of a text that normalisation left blank: its length and its most common
    code points, which its excerpt cannot show (they are whitespace, control or invisible characters).

    >>> blank_detail("\u200b\u200b \t")
    '4 characters, none but whitespace once normalised: U+200B x2, U+0020 x1, U+0009 x1'
    >>> blank_detail("")
    'the text is empty'
    """
    if not text:
        return "the text is empty"
    counts = Counter(text).most_common(shown + 1)
    listed = ", ".join(f"U+{ord(c):04X} x{n}" for c, n in counts[:shown])
    more = ", ..." if len(counts) > shown else ""
    return f"{len(text)} characters, none but whitespace once normalised: {listed}{more}"


def lookup(obj: Any, path: str) -> Any:
    """``obj[path]``, or the dotted path through nested dicts; :data:`MISSING` when absent.

    A segment ending in ``[]`` maps the rest of the path over a list: ``body_text[].text`` of
    ``{"body_text": [{"text": "a"}, {"text": "b"}]}`` is ``["a", "b"]`` (elements lacking the rest
    are left out). A value that is not a list where ``[]`` expects one is returned as it is.
    """
    if "." not in path and "[]" not in path:  # a plain key, what most configs name: one dict look-up
        return obj.get(path, MISSING) if isinstance(obj, dict) else MISSING
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    if "[]" in path:
        head, _, rest = path.partition("[]")
        arr = lookup(obj, head)
        rest = rest.removeprefix(".")
        if not isinstance(arr, list) or not rest:
            return arr
        return [v for v in (lookup(x, rest) for x in arr) if v is not MISSING]
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj


def join_text(value: Any) -> str | None:
    """A text field's value as one string: a string as it is; a list (of lists) of strings joined
    with blank lines (paragraphs), ``None`` items left out; ``None`` for any other type."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    parts: list[str] = []
    for v in value:
        if v is None:
            continue
        s = join_text(v)
        if s is None:
            return None
        if s:
            parts.append(s)
    return "\n\n".join(parts)


def not_text(value: Any) -> str:
    """What a text field holds when :func:`join_text` cannot make a string of it, for a quarantine
    detail: its type, and for a list the first item that is not a string (nested lists by index path).

    >>> not_text(5)
    'int'
    >>> not_text(["One paragraph.", ["Two.", 3]])
    'a list whose item [1][1] is int (paragraphs must be strings; null items are left out)'
    """
    def first_bad(v: Any, at: str) -> tuple[str, str] | None:
        for i, item in enumerate(v):
            if isinstance(item, list):
                found = first_bad(item, f"{at}[{i}]")
                if found:
                    return found
            elif item is not None and not isinstance(item, str):
                return f"{at}[{i}]", type(item).__name__
        return None

    found = first_bad(value, "") if isinstance(value, list) else None
    if found is None:
        return type(value).__name__
    at, kind = found
    return f"a list whose item {at} is {kind} (paragraphs must be strings; null items are left out)"


def sectioned_text(obj: Any, text_path: str, heading_path: str) -> Any:
    """The paragraphs of ``text_path`` with each section's heading (``heading_path``) as its own
    paragraph before the section's first paragraph (S2ORC / unarXive ``body_text`` shape).

    Both paths share the array they iterate (``body_text[].text`` and ``body_text[].section``,
    checked by the config). Returns a list for :func:`join_text`, or what :func:`lookup` gives
    when the array is absent or not a list.
    """
    prefix, _, text_rel = text_path.rpartition("[]")
    arr = lookup(obj, prefix)
    if not isinstance(arr, list):
        return lookup(obj, text_path)
    head_rel = heading_path.rpartition("[]")[2].removeprefix(".")
    text_rel = text_rel.removeprefix(".")
    out: list[Any] = []
    last = None
    for el in arr:
        h = lookup(el, head_rel) if head_rel else MISSING
        if isinstance(h, str) and h.strip() and h != last:
            out.append(h)
        last = h if isinstance(h, str) else last
        t = lookup(el, text_rel) if text_rel else el
        if t is not MISSING:
            out.append(t)
    return out


BINARY_MAGIC = {b"PK\x03\x04": "a zip archive", b"%PDF-": "a PDF document", b"\x89PNG": "a PNG image",
                b"\xff\xd8\xff": "a JPEG image", b"\x7fELF": "an executable",
                b"SQLite format 3": "an SQLite database"}
"""Magic numbers of binary files that end up under a text name (file(1)'s magic database)."""

MAX_UNDECODABLE_SHARE = 0.1
"""Share of the first bytes that are not UTF-8 (or are control bytes other than whitespace and ESC) above
which a file without NUL bytes is still called binary; legacy 8-bit text stays well under it."""


WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
             (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))
"""Byte-order marks of the Unicode encodings wider than a byte (Unicode 15, section 23.8), longest first."""


WIDE_UNICODE = ("UTF-16", "UTF-32")
"""How :func:`looks_like` (through :func:`wide_encoding`) starts its description of UTF-16 / UTF-32 text."""


_WIDE_LANES = (("UTF-32LE", (0,)), ("UTF-32BE", (3,)), ("UTF-16LE", (0, 2)), ("UTF-16BE", (1, 3)))
"""Encodings of ASCII text and the byte positions (mod 4) that are not NUL in them."""


def wide_encoding(head: bytes) -> str | None:
    """The UTF-16 / UTF-32 encoding of text whose first bytes are ``head``, or ``None``.

    Told by a byte-order mark, or without one by the NUL bytes of ASCII text at fixed positions (the
    BOM-less detection of RFC 4627 section 3, over the first 64 bytes instead of 4).

    >>> wide_encoding("{}".encode("utf-16"))
    'UTF-16 (little-endian, byte-order mark)'
    >>> wide_encoding('{"a": 1}'.encode("utf-16-be"))
    'UTF-16BE'
    >>> wide_encoding(b'{"a": 1}') is None
    True
    """
    for bom, name in WIDE_BOMS:
        if head.startswith(bom):
            return f"{name[:6]} ({'little' if name.endswith('LE') else 'big'}-endian, byte-order mark)"
    h = head[: min(64, len(head) // 4 * 4)]
    if len(h) < 8:
        return None
    lanes = [h[i::4] for i in range(4)]
    for name, text in _WIDE_LANES:
        if all(all(lanes[i]) for i in text) and not any(any(lanes[i]) for i in range(4) if i not in text):
            return name
    return None


def _not_text(head: bytes) -> str | None:
    """What ``head`` is when it is not UTF-8 text: a known binary file, wide Unicode text, or binary."""
    for m, name in BINARY_MAGIC.items():
        if head.startswith(m):
            return f"binary data ({name})"
    if wide := wide_encoding(head):
        return f"{wide} text, not UTF-8 (re-encode it, e.g. iconv -f {wide.split()[0]} -t UTF-8)"
    return "binary data (not text)" if _is_binary(head) else None


_COMPRESSED_MAGIC = {b"\x1f\x8b": ("gzip", ".gz"), b"\x28\xb5\x2f\xfd": ("zstd", ".zst"),
                     b"BZh": ("bzip2", ".bz2"), b"\xfd7zXZ": ("xz", ".xz")}
"""Magic numbers of the compressions read (gzip RFC 1952, zstd RFC 8878, bzip2, xz) -> name, suffix."""


def no_text(look: str) -> bool:
    """Whether :func:`looks_like`'s description says by a magic number or a byte-order pattern that a
    file's bytes are no text to parse (compressed, a known binary format, UTF-16 or UTF-32): such a
    file is named whatever its number of records, since a parser's records of it are noise, not a count
    of bad records. Bytes only guessed binary (a NUL, many undecodable bytes) are not: a text file
    holding a stray NUL is judged by its records."""
    if "-compressed data" in look:
        return True
    return look.startswith((*WIDE_UNICODE, "binary data")) and not look.startswith("binary data (not text)")


def looks_like(head: bytes) -> str:
    """What the first bytes of a file look like, for messages about a file read with the wrong
    format (magic numbers: gzip RFC 1952, zstd RFC 8878, bzip2, xz, Parquet ``PAR1``, WARC, and
    :data:`BINARY_MAGIC`).

    A NUL byte in the first 8,000 bytes makes a file binary, as git decides (``buffer_is_binary``); so
    does a share of undecodable or control bytes over :data:`MAX_UNDECODABLE_SHARE`.

    >>> looks_like(bytes(range(256)))
    'binary data (not text)'
    >>> looks_like(b"PK\x03\x04rest")
    'binary data (a zip archive)'
    >>> looks_like('{"id": 1}'.encode("utf-16"))
    'UTF-16 (little-endian, byte-order mark) text, not UTF-8 (re-encode it, e.g. iconv -f UTF-16 -t UTF-8)'
    """
    for m, (name, suffix) in _COMPRESSED_MAGIC.items():
        if head.startswith(m):
            return (f"{name}-compressed data (a file's compression is read from its name: "
                    f"name it with {suffix} at the end)")
    for m, name in {b"PAR1": "parquet", b"WARC/": "warc"}.items():
        if head.startswith(m):
            return name
    if not_text := _not_text(head):
        return not_text
    s = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:4096].decode("utf-8", "replace")
    first = s.split("\n", 1)[0].strip()
    if s.startswith("["):
        return "json (an array; name it .json or set ingest.format: json)"
    if s.startswith("{") and not first.endswith("}"):
        return "json (a pretty-printed object; name it .json or set ingest.format: json)"
    if s.startswith("{"):
        return "jsonl"
    low = s[:1000].lower()
    if "<mediawiki" in low:
        return "mediawiki xml"
    if "<article" in low:
        return "jats xml"
    if low.startswith(("<!doctype html", "<html")):
        return "html"
    if "\\documentclass" in low or "\\begin{document}" in low:
        return "latex"
    lines = [x for x in s.split("\n")[:5] if x.strip()]
    for sep, name in (("\t", "tsv"), (",", "csv")):
        if len(lines) > 1 and len({x.count(sep) for x in lines[:-1]}) == 1 and lines[0].count(sep):
            return name
    return "plain text"


def _is_binary(head: bytes) -> bool:
    """A NUL byte in the first 8,000 bytes, or more than :data:`MAX_UNDECODABLE_SHARE` of the first
    4,096 bytes undecodable as UTF-8 or control bytes other than tab, newlines, form feed and ESC."""
    if b"\x00" in head[:8000]:
        return True
    sample = head[:4096]
    if not sample:
        return False
    text = sample.decode("utf-8", "replace")
    bad = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\f\x1b"))
    return bad > MAX_UNDECODABLE_SHARE * len(text)
