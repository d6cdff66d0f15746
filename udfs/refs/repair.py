"""``repair`` policy: remove the sentences that hold dangling mentions, and undo it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from udfs.refs.matcher import _ABBREVIATIONS
from udfs.refs.mentions import Mention

# ------------------------------------------------------------------------------------------ repair
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*[ \t]+|[ \t]*\n+")


def sentence_spans(text: str, abbreviations: frozenset[str] = _ABBREVIATIONS) -> list[tuple[int, int]]:
    """Sentence spans ``[start, end)`` covering ``text``; a span keeps its trailing spaces, not newlines.

    A sentence ends at ``.``, ``!``, ``?`` followed by whitespace and a character that is not lower case,
    unless the word before the dot is an abbreviation ("Fig.", "et al.", "e.g.") or a single letter (an
    initial); a line break always ends a sentence (headings, list items, captions).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for mt in _SENTENCE_END.finditer(text):
        seg = mt.group()
        if "\n" not in seg:
            nxt = text[mt.end() : mt.end() + 1]
            word = re.search(r"([\w.]+)[.!?…]*[\"'”’)\]]*[ \t]+$", text[max(start, mt.start() - 30) : mt.end()])
            w = word.group(1).rstrip(".").lower() if word else ""
            if nxt.islower() or w in abbreviations or (len(w) == 1 and w.isalpha()):
                continue
            spans.append((start, mt.end()))
        else:
            spans.append((start, mt.start() + seg.index("\n")))
        start = mt.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def repair(text: str, mentions: Sequence[Mention], abbreviations: frozenset[str] = _ABBREVIATIONS) -> tuple[str, list[tuple[int, int, str]]]:
    """Remove the sentences that hold dangling mentions.

    Args:
        text: the document text.
        mentions: its mentions (:func:`find_mentions`).

    Returns:
        ``(repaired_text, removed)`` where ``removed`` is a list of ``(start, end, removed_text)`` in the
        coordinates of ``text``, sorted and disjoint; :func:`undo_repair` restores ``text`` exactly.
    """
    points = sorted({mt.start for mt in mentions if mt.dangling})
    if not points:
        return text, []
    spans = sentence_spans(text, abbreviations)
    starts = [a for a, _ in spans]
    chosen: dict[int, tuple[int, int]] = {}
    for p in points:
        i = max(0, bisect.bisect_right(starts, p) - 1)
        chosen[i] = spans[i]
    removed = [(a, b, text[a:b]) for _, (a, b) in sorted(chosen.items())]
    pieces, pos = [], 0
    for a, b, _ in removed:
        pieces.append(text[pos:a])
        pos = b
    pieces.append(text[pos:])
    return "".join(pieces), removed


def undo_repair(repaired: str, removed: Sequence[tuple[int, int, str]]) -> str:
    """Inverse of :func:`repair`: re-insert each removed span at its original offset."""
    out, pos, shift = [], 0, 0
    for start, end, piece in sorted(removed):
        at = start - shift
        out.append(repaired[pos:at])
        out.append(piece)
        pos = at
        shift += end - start
    out.append(repaired[pos:])
    return "".join(out)
