"""Text-side counters of the audit: words per document and runs of whitespace and digits, from the UTF-8
bytes of an Arrow string column.

One pass classifies the bytes with a 256-entry table and cuts them into runs of one class (split at
document starts); words, CJK characters and the counted runs are then read off the runs, which are a few
times fewer than the bytes. Words are maximal runs of non-whitespace bytes plus one per character of the
CJK / kana / Hangul blocks (a UTF-8 lead byte 0xE3-0xED: U+3000-U+DFFF), since those scripts do not
separate words by spaces.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RUN_BUCKETS: tuple[str, ...] = ("1", "2", "3-4", "5-8", "9-16", "17+")
"""Length buckets of whitespace and digit runs (characters)."""
_RUN_EDGES = np.array([2, 3, 5, 9, 17])

WS_KINDS: tuple[str, ...] = ("spaces", "tabs", "newlines")
"""Whitespace run kinds (U+0020, U+0009, U+000A), rows of :attr:`GroupAgg.ws_runs`."""


def text_buffer(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string column and its offsets (int64 [n + 1]), zero-copy where possible."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.fill_null(texts, "")
    large = pa.types.is_large_string(texts.type) or pa.types.is_large_binary(texts.type)
    off_type = np.int64 if large else np.int32
    bufs = texts.buffers()
    offsets = np.frombuffer(
        bufs[1], dtype=off_type, count=len(texts) + 1, offset=texts.offset * np.dtype(off_type).itemsize
    )
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return data[offsets[0] : offsets[-1]], offsets - offsets[0]


_BUCKET_OF_LEN = np.searchsorted(_RUN_EDGES, np.arange(_RUN_EDGES[-1] + 1), side="right")
"""Length bucket of a run of 0..17 characters (longer runs are clipped to 17: the last bucket)."""


def _bucket(lengths: np.ndarray) -> np.ndarray:
    return _BUCKET_OF_LEN.take(np.minimum(lengths, _RUN_EDGES[-1]))


_OTHER, _SPACE, _TAB, _NEWLINE, _WS, _DIGIT, _CJK = range(7)
_BYTE_CLASS = np.zeros(256, dtype=np.uint8)
_BYTE_CLASS[32], _BYTE_CLASS[9], _BYTE_CLASS[10] = _SPACE, _TAB, _NEWLINE
_BYTE_CLASS[[11, 12, 13]] = _WS
_BYTE_CLASS[48:58] = _DIGIT
_BYTE_CLASS[0xE3:0xEE] = _CJK  # lead bytes of U+3000-U+DFFF
"""Class of every byte value: the text is cut into runs of one class (split at document starts)."""
_RUN_KIND = np.full(7, -1, dtype=np.int64)
_RUN_KIND[[_SPACE, _TAB, _NEWLINE, _DIGIT]] = [0, 1, 2, 3]
"""Byte class -> row of the counted runs (:data:`WS_KINDS`, then digits); -1 = not counted."""


def text_counts(data: np.ndarray, offsets: np.ndarray) -> dict[str, object]:
    """Words per document and the whitespace / digit runs of a batch's byte buffer.

    Returns:
        ``words`` and ``bytes`` (int64 [documents]) and ``runs``: ``(document, kind, length bucket)`` of every
        run of spaces, tabs, newlines (kinds 0-2, :data:`WS_KINDS`) and ASCII digits (kind 3).

    One pass classifies the bytes (:data:`_BYTE_CLASS`) and cuts them into runs of one class; words,
    CJK characters and the runs of spaces, tabs, newlines and digits are then counted on the runs,
    which are a few times fewer than the bytes.
    """
    n = len(offsets) - 1
    lens = np.diff(offsets)
    if not len(data):
        return {"words": np.zeros(n, np.int64), "bytes": lens, "runs": (np.zeros(0, np.int64),) * 3}
    cls = _BYTE_CLASS.take(data)  # np.take: no intp copy of the uint8 index, unlike fancy indexing
    brk = np.empty(len(cls) + 1, dtype=bool)
    brk[0] = brk[-1] = True
    np.not_equal(cls[1:], cls[:-1], out=brk[1:-1])
    nonempty = np.flatnonzero(lens > 0)
    doc_starts = offsets[nonempty]
    brk[doc_starts] = True
    bounds = np.flatnonzero(brk)  # run starts, then the end of the buffer
    starts = bounds[:-1]
    run_cls = cls.take(starts)
    run_len = np.diff(bounds)
    first = np.zeros(len(starts), dtype=bool)
    first[np.searchsorted(starts, doc_starts)] = True
    run_doc = nonempty.take(np.cumsum(first, dtype=np.int64) - 1)
    ws = (run_cls >= _SPACE) & (run_cls <= _WS)
    prev_ws = np.empty_like(ws)
    prev_ws[0] = True
    prev_ws[1:] = ws[:-1]
    word_start = ~ws & (prev_ws | first)
    cjk = run_cls == _CJK
    words = np.bincount(run_doc[word_start], minlength=n) + np.bincount(
        run_doc[cjk], weights=run_len[cjk], minlength=n
    ).astype(np.int64)
    kind = _RUN_KIND.take(run_cls)
    sel = np.flatnonzero(kind >= 0)
    runs = (run_doc.take(sel), kind.take(sel), _bucket(run_len.take(sel)))
    return {"words": words.astype(np.int64), "bytes": lens, "runs": runs}
