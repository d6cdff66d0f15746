"""Readers of whole-document files that are not JSONL: ``.json`` (one object, an array of objects, or
concatenated objects, pretty-printed or not) and CSV/TSV (quoted fields may hold newlines).

Both stream: ijson yields one top-level value (or array item) at a time, the csv module one row at a
time, over the decompressed chunks. A record is held whole (and capped at 4 x ``max_doc_bytes``), the
file never is.

A ``.json`` file's nesting depth is capped (:data:`MAX_JSON_DEPTH`) before ijson sees the bytes: ijson's
memory grows with the square of the depth (a 400 KB file of 100,000 nested ``[`` took 24 GB).

Source: RFC 8259 (JSON), RFC 4180 (CSV; TSV is the same dialect with a tab), the ``ijson`` package
(yajl2 backend) and Python's ``csv`` module.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from udfs.formats.chunkfile import _BUF, MAX_JSON_DEPTH, ChunkFile, DepthGuard, JsonTooDeep, _RecordTooLarge
from udfs.formats.collector import Collector
from udfs.formats.jsonl import from_mapping

__all__ = ["MAX_JSON_DEPTH", "DepthGuard", "JsonTooDeep", "read_csv", "read_json"]


def _first_byte(f: io.BufferedReader) -> bytes:
    return f.peek(4096).lstrip(b" \t\r\n")[:1]


def read_json(c: Collector, chunks: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    """Parse a ``.json`` file into ``c``: the items of a top-level array, or every top-level value
    (one object, or objects one after another, which also covers JSONL), numbered from 1.

    A syntax error ends the file: the values before it are kept, the rest is one ``malformed_json``
    row (a JSON parser cannot resynchronise). A value over 4 x ``max_doc_bytes`` is ``too_large``
    and ends the file the same way; so does nesting deeper than :data:`MAX_JSON_DEPTH` levels
    (``malformed_json``), which is cut before ijson reads it.
    """
    import ijson

    # The count is per read, so a value is stopped within two read buffers (ours and ijson's) of the cap.
    raw = ChunkFile(chunks, 4 * c.opts.max_doc_bytes + 1024 + 2 * _BUF, repair_utf8=True,
                    max_depth=MAX_JSON_DEPTH)
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
                     f"JSON value {n + 1} spans over {e.args[0]} bytes > {4 * c.opts.max_doc_bytes} "
                     "(4 x ingest.max_doc_bytes; not parsed; the rest of the file is not read)")
    except Exception as e:  # ijson.JSONError, IncompleteJSONError, UnicodeDecodeError, JsonTooDeep
        where = "array item" if array else "top-level value"
        # At the depth cut ijson may see the end of the bytes first (IncompleteJSONError): same cause.
        # yajl's message goes on with a copy of the text and a "(right here) ------^" pointer: line one only
        first = (str(e).strip().splitlines() or [""])[0].strip()
        why = (f"nesting deeper than {MAX_JSON_DEPTH} levels (not parsed)" if raw.too_deep
               else f"{type(e).__name__}: {first}")
        kept = "the 1 value before it was kept" if n == 1 else f"the {n} values before it were kept"
        c.quarantine(n + 1, "malformed_json", raw.last,
                     f"{where} {n + 1}: {why}; {kept}, the rest of the file is not read")
    yield from c.flush()


def _dumps(obj: Any, n: int):
    return lambda: json.dumps(obj, ensure_ascii=False, default=str)[: 4 * n]


def read_csv(c: Collector, chunks: Iterable[bytes], delimiter: str) -> Iterator[pa.RecordBatch]:
    """Parse a CSV (``delimiter`` ``,``) or TSV (``\\t``) file into ``c``, one record per data row
    (numbered from 1 after the header). Quoted fields may hold delimiters, quotes (doubled) and
    newlines (RFC 4180). Fields are column names from the header (``csv_header``) or 0-based
    column indices; a row shorter than the header lacks the missing columns, and a row longer than it
    (a non-empty field past the header's last: an unquoted delimiter in a field) is quarantined as
    ``malformed_csv``.

    A quote left open would make the following lines part of one field, up to the next quote or the
    end of the file: a row that spans lines is checked against the strict RFC 4180 grammar (a closing
    quote is followed by a delimiter or a line end, and comes before the end of the file). One that
    fails is quarantined as ``malformed_csv`` (its first line as excerpt) and the lines after its first
    are read again as rows, so one stray quote costs one row; the same when the open field reaches the
    field limit (4 x ``max_doc_bytes``) first. A row on one line keeps the lenient reading (``a"b`` or
    ``"a" b`` stay text).
    """
    limit = 4 * c.opts.max_doc_bytes + 1024
    if csv.field_size_limit() < limit:  # process-wide; only ever raised
        csv.field_size_limit(limit)
    text = io.TextIOWrapper(io.BufferedReader(ChunkFile(chunks, 1 << 62), 1 << 16), encoding="utf-8-sig",
                            errors="replace", newline="")
    lines = _Lines(text)
    rows = csv.reader(lines, delimiter=delimiter)
    header: list[str] | None = None
    n = 0
    while True:
        lines.start()
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            n += 1
            if len(lines.taken) > 1:  # a field over the limit spanning lines: a quote left open
                first, last = lines.line - len(lines.taken) + 1, lines.line
                c.quarantine(n, "malformed_csv", lines.taken[0][: 4 * c.opts.excerpt_chars],
                             f"row {n} (line {first}): a quote opened on this line is still open at line "
                             f"{last} ({e}); this line is quarantined, the lines after it are read as rows")
                lines.push_back(lines.taken[1:])
            else:
                c.quarantine(n, "malformed_csv", None, f"row {n} (line {lines.line}): {e}")
            continue
        if len(lines.taken) > 1 and (why := _strict_error(lines.taken, delimiter)):
            n += 1
            first, last = lines.line - len(lines.taken) + 1, lines.line
            c.quarantine(n, "malformed_csv", lines.taken[0][: 4 * c.opts.excerpt_chars],
                         f"row {n} (line {first}): a quote opened on this line {why}, so lines "
                         f"{first}-{last} would be one field; this line is quarantined, the lines after it "
                         "are read as rows")
            lines.push_back(lines.taken[1:])
            continue
        if header is None and c.opts.csv_header:
            header = row
            continue
        n += 1
        if not any(row):
            n -= 1
            c.skipped["blank_line"] += 1
            continue
        if header and any(row[len(header):]):
            # an unquoted delimiter inside a field shifts the rest of the row: the named field would hold
            # a piece of its text and the rest would go unread
            c.quarantine(n, "malformed_csv", _csv_excerpt(row, delimiter)[: 4 * c.opts.excerpt_chars],
                         f"row {n} (line {lines.line - len(lines.taken) + 1}): {len(row)} fields, the header "
                         f"has {len(header)}; a field holding the delimiter {delimiter!r} must be quoted "
                         "(RFC 4180)")
            continue
        obj: dict[str, Any] = {str(i): v for i, v in enumerate(row)}
        if header:
            obj.update({h: row[i] for i, h in enumerate(header) if i < len(row)})
        from_mapping(c, n, obj, lambda r=row: _csv_excerpt(r, delimiter), False, True)
        if c.full():
            yield from c.flush()
    yield from c.flush()


def _strict_error(raw: list[str], delimiter: str) -> str | None:
    """Why the lines of one row break RFC 4180 (2.5-2.7: a quoted field closes, and its closing quote
    ends the field), or ``None`` when they hold a well-formed row."""
    try:
        for _ in csv.reader(raw, delimiter=delimiter, strict=True):
            pass
    except csv.Error as e:
        if "end of data" in str(e):
            return "is not closed before the end of the file"
        return f"is closed by a quote that text follows ({e})"
    return None


class _Lines:
    """The lines of a text stream, as :func:`csv.reader` takes them: ``taken`` holds those read since
    :meth:`start` (the current row's), ``line`` the number of the last one, and :meth:`push_back`
    serves lines again, in order, before the rest of the stream."""

    def __init__(self, text: io.TextIOBase):
        self._it, self._back = iter(text), []
        self.line, self.taken = 0, []

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._back.pop() if self._back else next(self._it)
        self.line += 1
        self.taken.append(line)
        return line

    def start(self) -> None:
        """A new row starts: forget the lines of the last one."""
        self.taken = []

    def push_back(self, lines: list[str]) -> None:
        """Serve ``lines`` again, first to last, before any line not read yet."""
        self._back.extend(reversed(lines))
        self.line -= len(lines)


def _csv_excerpt(row: list[str], delimiter: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter).writerow(row)
    return buf.getvalue()
