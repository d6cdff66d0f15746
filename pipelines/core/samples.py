"""Seeded samples of documents, shared by the report and ``jobs/inspect.py``: the sample order, the
signals shown for a sampled row, text cut to head and tail, excerpts around ``⟦...⟧`` marks, and text
made safe to print.

Samples are ordered by a keyed hash of ``(run.seed, doc_id)``, so the same documents come out whatever
the partitioning.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F


def reason_matches(reason: str) -> Column:
    """Column predicate: the ``reason`` array holds ``reason`` or a reason in its family
    (``gopher_repetition`` matches ``gopher_repetition.top_2gram``)."""
    return F.exists("reason", lambda r: (r == F.lit(reason)) | r.startswith(reason + "."))


def seeded_order(seed: int, key: str = "doc_id") -> Column:
    """A sort key that orders rows by a keyed hash of ``(seed, key)``: the same sample on any partitioning."""
    return F.xxhash64(F.lit(seed), F.col(key))


def in_seeded_sample(seed: int, fraction: float, key: str = "doc_id") -> Column:
    """Column predicate: the row is in the seeded sample of ``fraction`` (resolution 1e-6): a keyed hash of
    ``(seed, key)`` below the fraction, so the same rows on any partitioning, and the samples of two
    fractions are nested (the smaller is part of the larger)."""
    buckets = 1_000_000
    h = F.pmod(F.xxhash64(F.lit(seed), F.col(key)), F.lit(buckets))
    return h < F.lit(int(round(fraction * buckets)))


def row_signals(row: dict[str, Any], reasons: list[str] | None = None) -> dict[str, Any]:
    """The signals of one collected row: scalar non-text columns, plus the fields of struct columns
    named by a reason's family (``gopher_repetition.dup_5gram`` -> the ``gopher_repetition`` struct),
    or of every struct column when ``reasons`` is None."""
    skip = {"doc_id", "text", "stage", "duplicate_of", "input_file", "url", "source", "meta", "r", "_rank"}
    families = None if reasons is None else {r.split(".")[0] for r in reasons if r}
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in skip or v is None:
            continue
        if isinstance(v, dict):
            if families is None or k in families:
                out.update({f"{k}.{f}": x for f, x in v.items()
                            if x is not None and not isinstance(x, list | dict)})
        elif isinstance(v, int | float | str | bool):
            out[k] = v
    return out


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters and DEL, except tab and newline (a text's own layout)."""


def printable(text: str) -> str:
    """``text`` with its control characters written as ``\\xNN`` escapes, for a terminal.

    A quarantined record or a cut document can hold NUL, ESC or a lone carriage return: printed raw, they
    recolour or overwrite the terminal and hide the very bytes the user is looking for. Tab and newline
    stay (the text's layout); ``\\r\\n`` line ends become ``\\n`` first so that they do not show as escapes.

    >>> printable("a\\x00b\\x1b[31m\\tc\\r\\nd")
    'a\\\\x00b\\\\x1b[31m\\tc\\nd'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


def truncate(text: str, limit: int) -> str:
    """``text`` if at most ``limit`` characters, else its head and tail around a marker naming the cut.

    >>> truncate("abcdefghij", 6)
    'abcd … [4 chars cut] … ij'
    """
    if len(text) <= limit:
        return text
    head = max(1, (limit * 2) // 3)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]} … [{cut} chars cut] … {text[len(text) - tail:] if tail else ''}".rstrip()


def excerpt_around_marks(marked: str, limit: int) -> str:
    """``marked`` when at most ``limit`` characters, else windows of context around each ``⟦...⟧`` mark.

    >>> excerpt_around_marks("a" * 50 + "⟦email #01234567⟧" + "b" * 50, 60)
    '… aaaaaaaaaaaaaaaaaaaaa⟦email #01234567⟧bbbbbbbbbbbbbbbbbbbbb …'
    """
    marks = [m.span() for m in re.finditer("⟦[^⟧]*⟧", marked)]
    if len(marked) <= limit or not marks:
        return truncate(marked, limit)
    ctx = max(10, (limit - sum(e - s for s, e in marks)) // (2 * len(marks)))
    windows: list[list[int]] = []
    for s, e in marks:
        a, b = max(0, s - ctx), min(len(marked), e + ctx)
        if windows and a <= windows[-1][1]:
            windows[-1][1] = b
        else:
            windows.append([a, b])
    out = " … ".join(marked[a:b] for a, b in windows)
    return ("… " if windows[0][0] else "") + out + (" …" if windows[-1][1] < len(marked) else "")
