"""Paragraph kernels of the passages stage: paragraph spans with a content hash, and cutting spans out.

A paragraph is a maximal run of text between blank lines (a line holding only spaces or tabs counts as
blank). Its key is its text with every whitespace run collapsed to one space, hashed to 64 bits
(BLAKE2b, digest size 8): two paragraphs that differ only in line wrapping or indentation are equal.
This is the exact-paragraph variant of the repeated-passage removal of Gopher (Rae et al. 2021,
appendix A.1.1, "repetition removal") and of C4's line deduplication (Raffel et al. 2020, section 2.2),
at paragraph granularity and across documents.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import pyarrow as pa

from udfs.text import outside_spans

SEPARATOR = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
"""Blank lines between paragraphs (one or more, spaces and tabs on them allowed)."""

SPAN_TYPE = pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32()), ("hash", pa.int64())]))
"""Arrow type of :func:`paragraph_spans`' result."""


def paragraph_key(paragraph: str) -> int:
    """The 64-bit key of a paragraph: BLAKE2b-64 of its whitespace-collapsed text, as a signed int64.

    >>> paragraph_key("a  b\\n c") == paragraph_key("a b c")
    True
    """
    digest = hashlib.blake2b(" ".join(paragraph.split()).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def paragraphs(text: str) -> list[tuple[int, int, int]]:
    """``(start, content_end, end)`` of every non-blank paragraph of ``text``, in order.

    Offsets are code points. ``start:content_end`` is the paragraph, ``start:end`` also holds the blank
    lines after it (up to the next paragraph), so cutting ``start:end`` leaves the text around it as
    paragraphs still; the last paragraph's ``end`` is ``len(text)``.

    >>> paragraphs("one\\n\\ntwo\\n \\n\\nthree")
    [(0, 3, 5), (5, 8, 12), (12, 17, 17)]
    >>> paragraphs("")
    []
    """
    out: list[tuple[int, int, int]] = []
    start = 0
    for sep in SEPARATOR.finditer(text):
        if text[start : sep.start()].strip():
            out.append((start, sep.start(), sep.end()))
        start = sep.end()
    if text[start:].strip():
        out.append((start, len(text), len(text)))
    return out


def paragraph_spans(texts: pa.Array, min_chars: int) -> pa.Array:
    """Per document, the paragraphs of at least ``min_chars`` characters (whitespace collapsed).

    Args:
        texts: a string array (null: no paragraph).
        min_chars: shortest paragraph, in code points after collapsing whitespace, that gets a key;
            shorter ones (headings, "Share this", dates) are never compared.

    Returns:
        A :data:`SPAN_TYPE` array of the same length: ``start``, ``end`` (blank lines after the
        paragraph included, :func:`paragraphs`) and ``hash`` (:func:`paragraph_key`).
    """
    out = []
    for text in texts.to_pylist():
        spans = []
        for start, content_end, end in paragraphs(text or ""):
            para = text[start:content_end]
            if len(" ".join(para.split())) >= min_chars:
                spans.append({"start": start, "end": end, "hash": paragraph_key(para)})
        out.append(spans)
    return pa.array(out, SPAN_TYPE)


def cut(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` without the code-point spans ``spans`` (sorted, not overlapping).

    >>> cut("one\\n\\ntwo\\n\\nthree", [(5, 10)])
    'one\\n\\nthree'
    """
    return "".join(outside_spans(text, spans))
