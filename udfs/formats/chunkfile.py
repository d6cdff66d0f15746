"""A read-only file object over decompressed byte chunks, with a per-record byte cap and a JSON nesting
cap, shared by the streaming readers (``.json``/CSV in :mod:`udfs.formats.tabular`, JATS and MediaWiki XML).

Source: RFC 8259 (JSON nesting and strings), Python's ``io.RawIOBase`` protocol.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Iterable
from typing import Any

import numpy as np

UTF8_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark, dropped from the start of a file."""

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
