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

import codecs
import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from udfs.formats.collector import Collector
from udfs.formats.jsonl import UTF8_BOM, from_mapping

_BUF = 1 << 16

# Deepest nesting of arrays/objects a .json file may have. Real data sets nest a few levels; ijson
# (yajl2_c) needs memory quadratic in the depth (depth 50,000: 6.2 GB RSS, 100,000: 24 GB). 1,000 is
# where the other parsers stop too: Python's json module raises RecursionError near it (the default
# recursion limit is 1,000, sys.getrecursionlimit) and orjson rejects over 1,024 levels ("Recursion limit
# reached", https://github.com/ijl/orjson#deserialize).
MAX_JSON_DEPTH = 1000


class _RecordTooLarge(Exception):
    """One record spans more bytes than the reader holds."""


class JsonTooDeep(Exception):
    """JSON nesting went deeper than the limit (``args``: the limit)."""


# The bytes the depth scan looks at: 1 for a quote, backslash or bracket, else 0 (a bytes.translate table;
# translate then a bool nonzero is ~4x faster than numpy fancy indexing and a uint8 nonzero).
_QUOTE, _BSLASH = ord('"'), ord("\\")
_OPENS, _CLOSES = (ord("["), ord("{")), (ord("]"), ord("}"))
_SPECIAL = bytes(int(i in (_QUOTE, _BSLASH, *_OPENS, *_CLOSES)) for i in range(256))
_SLICE = 1 << 20  # scan at most this many bytes at once (bounds the index arrays: 8 bytes per special byte)


class DepthGuard:
    """The running nesting depth of a JSON byte stream fed in pieces of any size, vectorised per piece.

    A quote delimits a string unless a run of an odd number of backslashes precedes it; ``[`` and
    ``{`` outside strings open a level, ``]`` and ``}`` close one. The state carried from piece to piece
    is: inside a string or not, the parity of the backslash run the piece ended with, and the depth.
    Exact for every valid JSON prefix (bytes >= 0x80 of UTF-8 are never ASCII); after a syntax error
    the count may drift, but the parser stops at the error anyway.

    Attributes:
        limit: the deepest allowed nesting (levels, >= 1).
        depth: the depth after the bytes fed so far.
    """

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"depth limit {limit} < 1")
        self.limit, self.depth = limit, 0
        self.in_string = False
        self.odd_backslashes = False  # the bytes fed so far end with an odd run of backslashes

    def feed(self, buf: bytes) -> int | None:
        """Advance over ``buf``.

        Returns:
            None if the depth stays within ``limit``, else the offset in ``buf`` of the bracket that
            opens level ``limit + 1`` (the state is then left at the bytes before it; feed no more).
        """
        for start in range(0, len(buf), _SLICE):
            cut = self._feed(buf[start:start + _SLICE])
            if cut is not None:
                return start + cut
        return None

    def _feed(self, buf: bytes) -> int | None:
        size = len(buf)
        if not size:
            return None
        pos = np.flatnonzero(np.frombuffer(buf.translate(_SPECIAL), np.bool_))  # plain text is skipped
        byte = np.frombuffer(buf, np.uint8)[pos]
        quote = byte == _QUOTE
        # Quotes right after an odd backslash run are not delimiters (an index into pos, or -1).
        escaped = self._escaped(np.flatnonzero(byte == _BSLASH), pos, size)
        quote[escaped[escaped >= 0]] = False
        opens = (byte == _OPENS[0]) | (byte == _OPENS[1])
        br = np.flatnonzero(opens | (byte == _CLOSES[0]) | (byte == _CLOSES[1]))
        if len(br):
            quotes_before = np.cumsum(quote, dtype=np.int64)[br]  # a bracket is no quote: the count before it
            br = br[((quotes_before + self.in_string) & 1) == 0]  # outside strings
            depth = np.cumsum(np.where(opens[br], 1, -1))  # relative to self.depth
            over = np.flatnonzero(depth > self.limit - self.depth)
            if len(over):
                i = over[0]
                self.depth += int(depth[i]) - 1
                self.in_string = self.odd_backslashes = False
                return int(pos[br[i]])
            if len(depth):
                self.depth += int(depth[-1])
        self.in_string = bool((int(np.count_nonzero(quote)) + self.in_string) & 1)
        return None

    def _escaped(self, bidx: np.ndarray, pos: np.ndarray, size: int) -> np.ndarray:
        """For each odd backslash run in a piece of ``size`` bytes, the index into ``pos`` (the special
        bytes' offsets) of the special byte right after it, or -1 if the byte after it is not special
        (``bidx``: the indices of the backslashes in ``pos``). Updates the trailing-run parity."""
        carry = self.odd_backslashes
        first = np.array([0 if len(pos) and pos[0] == 0 else -1])  # the byte at offset 0, escaped by carry
        if not len(bidx):
            self.odd_backslashes = False
            return first if carry else bidx
        bs = pos[bidx]
        gap = np.flatnonzero(np.diff(bs) != 1)  # consecutive offsets are consecutive specials too
        starts = bs[np.concatenate(([0], gap + 1))]
        last = bidx[np.concatenate((gap, [len(bidx) - 1]))]  # index of each run's last backslash
        ends = pos[last] + 1  # the offset after each run
        odd = ((ends - starts) & 1).astype(bool)
        after = np.minimum(last + 1, len(pos) - 1)
        nxt = np.where((last + 1 < len(pos)) & (pos[after] == ends), last + 1, -1)
        if carry:  # the previous piece's run continues at offset 0
            if starts[0] == 0:
                odd[0] = ~odd[0]
            else:
                nxt, odd = np.concatenate((first, nxt)), np.concatenate(([True], odd))
        self.odd_backslashes = bool(ends[-1] == size and odd[-1])
        return nxt[odd]


class ChunkFile(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks, counting the bytes read since
    :meth:`mark` so that one record larger than ``limit`` stops the parser (``_RecordTooLarge``).

    With ``max_depth``, the bytes served (after the UTF-8 repair and the BOM, as the parser sees them)
    stop before the bracket that would nest deeper than ``max_depth`` levels (:class:`DepthGuard`):
    the first read there returns 0 bytes (so a buffered reader returns what it already holds and the
    parser gets the values before it), the next raises :class:`JsonTooDeep`.

    Attributes:
        last: the last chunk read (excerpt of the place where a parser failed).
        too_deep: True once the reads reached the depth cut.
    """

    def __init__(self, chunks: Iterable[bytes], limit: int, repair_utf8: bool = False,
                 max_depth: int | None = None):
        self._chunks = iter(chunks)
        # Invalid UTF-8 becomes U+FFFD (re-encoded), so one bad byte costs a character, not the file.
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace") if repair_utf8 else None
        self._buf = b""
        self.limit, self.since = limit, 0
        self.last = b""
        self.first = True
        self._guard = DepthGuard(max_depth) if max_depth is not None else None
        self._cut = False  # the depth guard cut the stream: no more chunks
        self.too_deep = False

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
            JsonTooDeep: a read after the one that returned 0 at the depth cut.
        """
        while not self._buf:
            if self._cut:
                if self.too_deep:
                    raise JsonTooDeep(self._guard.limit)
                self.too_deep = True
                return 0
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                if self._utf8 is not None and (rest := self._utf8.decode(b"", final=True)):
                    self._buf, self._utf8 = rest.encode(), None
                    self._check_depth()
                    continue
                return 0
            if self._utf8 is not None:
                self._buf = self._utf8.decode(self._buf).encode("utf-8", "surrogatepass")
            if self.first:  # RFC 8259 section 8.1: a BOM may be ignored; Windows tools write one
                self._buf, self.first = self._buf.removeprefix(UTF8_BOM), False
            self._check_depth()
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self.last = self._buf[:n]
        self._buf = self._buf[n:]
        self.since += n
        if self.since > self.limit:
            raise _RecordTooLarge(self.since)
        return n

    def _check_depth(self) -> None:
        if self._guard is not None and (cut := self._guard.feed(self._buf)) is not None:
            self._buf, self._cut = self._buf[:cut], True


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
        why = (f"nesting deeper than {MAX_JSON_DEPTH} levels (not parsed)" if raw.too_deep
               else f"{type(e).__name__}: {e}")
        c.quarantine(n + 1, "malformed_json", raw.last,
                     f"{where} {n + 1}: {why}; the {n} values before it were kept, "
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
