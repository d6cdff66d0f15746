"""Readers of whole-document files that are not JSONL: ``.json`` (one object, an array of objects, or
concatenated objects, pretty-printed or not) and CSV/TSV (quoted fields may hold newlines).

Both stream: ijson yields one top-level value (or array item) at a time, the csv module one row at a
time, over the decompressed chunks. A record is held whole (and capped at 4 x ``max_doc_bytes``), the
file never is.

Source: RFC 8259 (JSON), RFC 4180 (CSV; TSV is the same dialect with a tab), the ``ijson`` package
(yajl2 backend) and Python's ``csv`` module.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from udfs.formats.collector import Collector
from udfs.formats.jsonl import UTF8_BOM, from_mapping

_BUF = 1 << 16


class _RecordTooLarge(Exception):
    """One record spans more bytes than the reader holds."""


class ChunkFile(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks, counting the bytes read since
    :meth:`mark` so that one record larger than ``limit`` stops the parser (``_RecordTooLarge``).

    Attributes:
        last: the last chunk read (excerpt of the place where a parser failed).
    """

    def __init__(self, chunks: Iterable[bytes], limit: int, repair_utf8: bool = False):
        self._chunks = iter(chunks)
        # Invalid UTF-8 becomes U+FFFD (re-encoded), so one bad byte costs a character, not the file.
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace") if repair_utf8 else None
        self._buf = b""
        self.limit, self.since = limit, 0
        self.last = b""
        self.first = True

    def readable(self) -> bool:
        """Always readable (``io`` protocol)."""
        return True

    def mark(self) -> None:
        """A record ended: restart the per-record byte count."""
        self.since = 0

    def readinto(self, b: Any) -> int:
        """Fill ``b`` from the chunks (``io`` protocol); 0 at the end.

        Raises:
            _RecordTooLarge: more than ``limit`` bytes were read since :meth:`mark`.
        """
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                if self._utf8 is not None and (rest := self._utf8.decode(b"", final=True)):
                    self._buf, self._utf8 = rest.encode(), None
                    continue
                return 0
            if self._utf8 is not None:
                self._buf = self._utf8.decode(self._buf).encode("utf-8", "surrogatepass")
            if self.first:  # RFC 8259 section 8.1: a BOM may be ignored; Windows tools write one
                self._buf, self.first = self._buf.removeprefix(UTF8_BOM), False
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self.last = self._buf[:n]
        self._buf = self._buf[n:]
        self.since += n
        if self.since > self.limit:
            raise _RecordTooLarge(self.since)
        return n


def _first_byte(f: io.BufferedReader) -> bytes:
    return f.peek(4096).lstrip(b" \t\r\n")[:1]


def read_json(c: Collector, chunks: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    """Parse a ``.json`` file into ``c``: the items of a top-level array, or every top-level value
    (one object, or objects one after another, which also covers JSONL), numbered from 1.

    A syntax error ends the file: the values before it are kept, the rest is one ``malformed_json``
    row (a JSON parser cannot resynchronise). A value over 4 x ``max_doc_bytes`` is ``too_large``
    and ends the file the same way.
    """
    import ijson

    # The count is per read, so a value is stopped within two read buffers (ours and ijson's) of the cap.
    raw = ChunkFile(chunks, 4 * c.opts.max_doc_bytes + 1024 + 2 * _BUF, repair_utf8=True)
    f = io.BufferedReader(raw, _BUF)
    n = 0
    array = False
    try:
        first = _first_byte(f)
        if not first:  # nothing but whitespace: explode_split reports the empty file
            return
        array = first == b"["
        items = (ijson.items(f, "item", use_float=True, buf_size=_BUF) if array
                 else ijson.items(f, "", multiple_values=True, use_float=True, buf_size=_BUF))
        for obj in items:
            n += 1
            raw.mark()
            if isinstance(obj, dict):
                from_mapping(c, n, obj, _dumps(obj, c.opts.excerpt_chars), False, True)
            else:
                detail = f"JSON {type(obj).__name__}, not an object"
                c.quarantine(n, "invalid_record", _dumps(obj, c.opts.excerpt_chars)(), detail)
            if c.full():
                yield from c.flush()
    except _RecordTooLarge as e:
        c.quarantine(n + 1, "too_large", raw.last,
                     f"JSON value {n + 1} spans over {e.args[0]} bytes > 4 x max_doc_bytes "
                     f"{c.opts.max_doc_bytes} (not parsed; the rest of the file is not read)")
    except Exception as e:  # ijson.JSONError, IncompleteJSONError, UnicodeDecodeError
        where = "array item" if array else "top-level value"
        c.quarantine(n + 1, "malformed_json", raw.last,
                     f"{where} {n + 1}: {type(e).__name__}: {e}; the {n} values before it were kept, "
                     "the rest of the file is not read")
    yield from c.flush()


def _dumps(obj: Any, n: int):
    return lambda: json.dumps(obj, ensure_ascii=False, default=str)[: 4 * n]


def read_csv(c: Collector, chunks: Iterable[bytes], delimiter: str) -> Iterator[pa.RecordBatch]:
    """Parse a CSV (``delimiter`` ``,``) or TSV (``\\t``) file into ``c``, one record per data row
    (numbered from 1 after the header). Quoted fields may hold delimiters, quotes (doubled) and
    newlines (RFC 4180). Fields are column names from the header (``csv_header``) or 0-based
    column indices; a row shorter than the header lacks the missing columns.
    """
    limit = 4 * c.opts.max_doc_bytes + 1024
    if csv.field_size_limit() < limit:  # process-wide; only ever raised
        csv.field_size_limit(limit)
    text = io.TextIOWrapper(io.BufferedReader(ChunkFile(chunks, 1 << 62), 1 << 16), encoding="utf-8-sig",
                            errors="replace", newline="")
    lines = _QuoteCount(text)
    rows = csv.reader(lines, delimiter=delimiter)
    header: list[str] | None = None
    n = 0
    while True:
        first_line, quotes_before = rows.line_num + 1, lines.quotes
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            n += 1
            c.quarantine(n, "malformed_csv", None, f"row {n} (line {rows.line_num}): {e}")
            continue
        if rows.line_num > first_line and (lines.quotes - quotes_before) % 2 and lines.at_end():
            # A quote opened and never closed: the lenient reader (strict=False) makes the rest of the
            # file one field. Quotes come in pairs in a record that closes its fields (RFC 4180 2.5-2.7).
            n += 1
            c.quarantine(n, "malformed_csv", _csv_excerpt(row, delimiter)[: 4 * c.opts.excerpt_chars],
                         f"row {n} (lines {first_line}-{rows.line_num}): a quoted field is not closed before "
                         "the end of the file; the rows before it were kept")
            break
        if header is None and c.opts.csv_header:
            header = row
            continue
        n += 1
        if not any(row):
            n -= 1
            c.skipped["blank_line"] += 1
            continue
        obj: dict[str, Any] = {str(i): v for i, v in enumerate(row)}
        if header:
            obj.update({h: row[i] for i, h in enumerate(header) if i < len(row)})
        from_mapping(c, n, obj, lambda r=row: _csv_excerpt(r, delimiter), False, True)
        if c.full():
            yield from c.flush()
    yield from c.flush()


class _QuoteCount:
    """The lines of a text stream, as :func:`csv.reader` takes them, counting the ``"`` characters
    read so far (``quotes``); :meth:`at_end` says whether the stream has no line left."""

    def __init__(self, text: io.TextIOBase):
        self._it, self._next, self.quotes = iter(text), None, 0

    def __iter__(self) -> _QuoteCount:
        return self

    def __next__(self) -> str:
        line, self._next = (self._next, None) if self._next is not None else (next(self._it), None)
        self.quotes += line.count('"')
        return line

    def at_end(self) -> bool:
        """True when no line is left (reads one ahead, kept for the next ``__next__``)."""
        if self._next is None:
            self._next = next(self._it, None)
        return self._next is None


def _csv_excerpt(row: list[str], delimiter: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter).writerow(row)
    return buf.getvalue()
