"""C4 page signals (Raffel et al. 2020, section 2.2; TFDS ``text/c4_utils.py``, datatrove 0.10.1
``c4_filters.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.quality.parse import Parsed, _holding, _last_bytes, _np, _per_doc, _struct

C4_END_PUNCTUATION = ".?!\"'"
"""Terminal punctuation of datatrove's ``C4QualityFilter`` (the ``web`` reading): a line must end with one
of these, and not with ``...``. The code that built C4 (TFDS ``c4_utils._END_MARKS``) has no ``'``:
:data:`TFDS_END_MARKS`."""

TFDS_END_MARKS = ".?!\""
"""TFDS ``tensorflow_datasets/text/c4_utils.py`` ``_END_MARKS = (".", "?", "!", "\"")``."""
TFDS_MIN_WORDS_PER_LINE = 5
"""TFDS ``c4_utils._MIN_WORDS_PER_LINE``: the code that built C4 keeps lines of >= 5 whitespace words."""
TFDS_MIN_NUM_SENTENCES = 3
"""TFDS ``c4_utils._MIN_NUM_SENTENCES``: the code that built C4 keeps pages of >= 3 sentences."""

C4_POLICY_SUBSTRINGS: tuple[str, ...] = (
    "terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies",
)
"""Lines holding any of these (lower-cased) are boilerplate in C4 (TFDS ``c4_utils._POLICY_SUBSTRINGS``)."""

C4_MAX_WORD_CHARS = 1000
"""C4 drops a line holding a whitespace-separated word longer than this (TFDS ``max_word_length``)."""

_CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
_RE2_SPACE = re.compile(r"[\t\n\f\r ]+")  # RE2's \s: a word is a run of anything else
# Sentence ends for C4's sentence count: a run of terminal marks (closing quotes/brackets may follow)
# before whitespace or the end of the line; approximates the spaCy sentencizer datatrove uses.
_SENTENCE_END = r"[.!?\x{3002}\x{ff01}\x{ff1f}]+[\"'\x{201d}\x{2019})\]]*(?:\s|$)"


_PHRASES = "|".join(("javascript", "lorem ipsum", *C4_POLICY_SUBSTRINGS))
# Every line whose lower-cased form holds a phrase, without lower-casing the batch: RE2's case folding
# matches every character Arrow lower-cases to an ASCII letter except U+0130 (lower-cased to "i"),
# added by hand; it also matches a few more ("\u017f" folds to "s"), which only widens this first pass.
_PHRASES_ANY_CASE = "(?i)" + _PHRASES.replace("i", "[i\u0130]")


def _terminal(line: pa.Array, end_marks: str) -> np.ndarray:
    """bool per line: it ends with one of ``end_marks`` and not with ``...`` (an empty line: False)."""
    if not end_marks.isascii():
        last = pc.utf8_slice_codeunits(line, -1)
        return _np(pc.is_in(last, value_set=pa.array(list(end_marks))), bool) & ~_np(pc.ends_with(line, "..."), bool)
    # ASCII marks: the last byte is the last character (a multi-byte character ends in a byte >= 0x80)
    tail, size = _last_bytes(line, 3)
    dots = (size >= 3) & (tail == ord(".")).all(axis=1)
    return (size > 0) & np.isin(tail[:, 2], np.frombuffer(end_marks.encode(), np.uint8)) & ~dots


# ---------------------------------------------------------------------------------------------- C4
C4_TYPE = pa.struct([
    ("lines", pa.int64()),
    ("lines_no_terminal_punct", pa.int64()),
    ("lines_too_few_words", pa.int64()),
    ("lines_long_word", pa.int64()),
    ("lines_javascript", pa.int64()),
    ("lines_policy", pa.int64()),
    ("kept_lines", pa.int64()),
    ("kept_sentences", pa.int64()),
    ("has_lorem_ipsum", pa.bool_()),
    ("has_curly_bracket", pa.bool_()),
])


@dataclass(frozen=True)
class C4Options:
    """How C4's line rules read a page (the ``filter.c4`` keys of the same names).

    Attributes:
        min_words_per_line: a line with fewer whitespace-separated words is dropped (datatrove 3; TFDS 5).
        end_marks: characters a kept line must end with (datatrove ``.?!"'``; TFDS ``.?!"``).
        page_checks: where "lorem ipsum" and ``{`` are looked for: ``page`` (the whole text, as the paper
            words it) or ``kept_lines`` (lines that survived the earlier line rules, as TFDS
            ``clean_page`` does).
        sentences_in: where sentences are counted: ``kept_lines`` (TFDS, datatrove) or ``text`` (the
            whole text; a one-line paragraph without final punctuation still holds sentences).
    """

    min_words_per_line: int = 3
    end_marks: str = C4_END_PUNCTUATION
    page_checks: str = "page"
    sentences_in: str = "kept_lines"


DATATROVE_C4 = C4Options()
"""The ``web`` reading (datatrove ``C4QualityFilter`` defaults)."""


@dataclass
class _Lines:
    line: pa.Array  # stripped lines with citation markers removed
    keep: np.ndarray  # bool per line: survives every line rule
    counts: dict[str, np.ndarray]  # per document counts of C4_TYPE's line fields
    lorem_line: np.ndarray  # bool per line: "lorem ipsum" in a line alive when TFDS checks it
    brace_line: np.ndarray  # bool per line: "{" in a line alive when TFDS checks it
    page_lorem: np.ndarray  # bool per line: "lorem ipsum" in the line as the page has it (no rewrite)


def _line_rules(p: Parsed, o: C4Options) -> _Lines:
    """C4's line rules in TFDS ``clean_page`` order over every non-blank stripped line of the batch."""
    n = p.n
    line = p.lines_stripped
    # a vertical tab splits the parse's runs, not RE2's \s: such lines are read by the regexes below
    vtab = _holding(line, 0x0B)
    cited = _holding(line, ord("["))  # citation markers are rare: rewrite only lines holding a "["
    rewritten = np.flatnonzero(cited)
    if len(rewritten):
        new = pc.utf8_trim_whitespace(pc.replace_substring_regex(line.take(pa.array(rewritten)), _CITATION, ""))
        line = pc.replace_with_mask(line, pa.array(cited), new.cast(line.type))
    long_word = np.zeros(len(line), dtype=bool)
    maybe_long = np.flatnonzero((p.line_longest_piece > C4_MAX_WORD_CHARS) | (vtab & (p.line_stripped_chars > C4_MAX_WORD_CHARS)))
    if len(maybe_long):  # rare lines, split as RE2's \s splits (a regex of 1,000 repeats costs more to compile)
        long_word[maybe_long] = [max(map(len, _RE2_SPACE.split(t))) > C4_MAX_WORD_CHARS
                                 for t in p.lines_stripped.take(pa.array(maybe_long)).to_pylist()]
    terminal = _terminal(line, o.end_marks)
    k = o.min_words_per_line
    # fewer than k words <=> fewer than k whitespace-separated runs (the parse's runs of each line;
    # a line whose citation markers were removed or holding a vertical tab: the regex)
    few_words = p.line_pieces < k
    reread = np.flatnonzero(vtab | cited)
    if k >= 2 and len(reread):
        few_words[reread] = ~_np(pc.match_substring_regex(line.take(pa.array(reread)), r"\S+" + r"\s+\S+" * (k - 1)), bool)
    # the phrases are looked for (lower-cased) only in lines one of them may hold: one regex pass finds
    # those before the citation rewrite, and rewritten lines are read again
    phrase = _np(pc.match_substring_regex(p.lines_stripped, _PHRASES_ANY_CASE), bool) if len(line) else cited
    look = np.flatnonzero(phrase | cited)
    javascript, policy, lorem = (np.zeros(len(line), dtype=bool) for _ in range(3))
    if len(look):
        lower = pc.utf8_lower(line.take(pa.array(look)))
        javascript[look] = _np(pc.match_substring(lower, "javascript"), bool)
        policy[look] = _np(pc.match_substring_regex(lower, "|".join(C4_POLICY_SUBSTRINGS)), bool)
        lorem[look] = _np(pc.match_substring(lower, "lorem ipsum"), bool)
    brace = _holding(p.lines_stripped, ord("{"))  # a citation marker holds no "{"
    page_lorem = np.zeros(len(line), dtype=bool)
    hold = np.flatnonzero(phrase)
    if len(hold):
        page_lorem[hold] = _np(pc.match_substring(pc.utf8_lower(p.lines_stripped.take(pa.array(hold))), "lorem ipsum"), bool)

    alive = ~long_word
    counts = {"lines": _per_doc(p.line_doc, n), "lines_long_word": _per_doc(p.line_doc[long_word], n)}
    lorem_line = brace_line = np.zeros(len(line), bool)
    for name, drop in (
        ("lines_no_terminal_punct", ~terminal),
        ("lines_too_few_words", few_words),
        ("lines_javascript", javascript),
        ("lines_policy", policy),
    ):
        if name == "lines_javascript":
            lorem_line = alive & lorem  # TFDS: after the word count, before javascript
        if name == "lines_policy":
            brace_line = alive & brace  # TFDS: after javascript, before the policy lines
        hit = alive & drop
        counts[name] = _per_doc(p.line_doc[hit], n)
        alive &= ~drop
    counts["kept_lines"] = _per_doc(p.line_doc[alive], n)
    return _Lines(line, alive, counts, lorem_line, brace_line, page_lorem)


def c4(p: Parsed, options: C4Options | None = None) -> pa.StructArray:
    """C4 signals (Raffel et al. 2020, section 2.2; TFDS ``c4_utils.clean_page``; datatrove ``C4QualityFilter``).

    Line rules run on each non-blank, stripped line in TFDS ``clean_page`` order: a word longer than
    :data:`C4_MAX_WORD_CHARS` (line dropped), Wikipedia citation markers removed, no terminal mark
    (``options.end_marks``, or ends with ``...``), fewer than ``options.min_words_per_line``
    whitespace words, mentions "javascript", holds a policy phrase (:data:`C4_POLICY_SUBSTRINGS`). Each
    count is over lines that passed the earlier rules. "lorem ipsum" and ``{`` are looked for in the
    whole page or, with ``page_checks="kept_lines"``, where TFDS looks (lines alive at that point).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.
        options: the line-rule reading (:class:`C4Options`; default datatrove's).

    Returns:
        StructArray[n] of :data:`C4_TYPE` (counts int64, flags bool). ``kept_sentences`` counts sentence
        ends (runs of ``.``, ``!``, ``?`` before whitespace or line end), at least one per kept line, in
        kept lines (TFDS counts punkt sentences of each kept line; each ends with a mark, so >= 1), or
        with ``sentences_in="text"`` in the whole text (at least 1 for a non-empty text).
    """
    n = p.n
    options = options or DATATROVE_C4
    lr = _line_rules(p, options)
    out = dict(lr.counts)
    if options.sentences_in == "text":
        ends = _np(pc.count_substring_regex(p.texts, _SENTENCE_END), np.int64)
        out["kept_sentences"] = np.where(p.n_chars > 0, np.maximum(ends, 1), 0)
    else:
        kept = np.flatnonzero(lr.keep)
        sentences = _np(pc.count_substring_regex(lr.line.take(pa.array(kept)), _SENTENCE_END), np.int64) if len(kept) else kept
        out["kept_sentences"] = _per_doc(p.line_doc[kept], n, np.maximum(sentences, 1))
    if options.page_checks == "kept_lines":
        out["has_lorem_ipsum"] = _per_doc(p.line_doc[lr.lorem_line], n) > 0
        out["has_curly_bracket"] = _per_doc(p.line_doc[lr.brace_line], n) > 0
    else:
        # the phrase holds no line break, so the page holds it iff one of its lines does
        out["has_lorem_ipsum"] = _per_doc(p.line_doc[lr.page_lorem], n) > 0
        out["has_curly_bracket"] = _holding(p.texts, ord("{"))
    return _struct({k: out[k] for k in C4_TYPE.names}, {f.name: f.type for f in C4_TYPE})


def c4_clean(p: Parsed, options: C4Options | None = None) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """C4's line cleaning: each page keeps only the lines its line rules keep (TFDS ``clean_page``).

    The kept lines are stripped, citation markers removed, joined with ``\\n`` (TFDS:
    ``"\\n".join(valid_lines).strip()``).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.
        options: the line-rule reading (:class:`C4Options`).

    Returns:
        ``(texts, lines_removed, chars_removed)``: the cleaned string[n]; int64[n] non-blank lines
        removed; int64[n] characters (code points) removed (blank lines and stripped whitespace count).
    """
    lr = _line_rules(p, options or DATATROVE_C4)
    kept = np.flatnonzero(lr.keep)
    offsets = np.concatenate([[0], np.cumsum(lr.counts["kept_lines"])]).astype(np.int32)
    values = lr.line.take(pa.array(kept)).cast(pa.string())
    cleaned = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), values), "\n")
    removed_lines = (lr.counts["lines"] - lr.counts["kept_lines"]).astype(np.int64)
    removed_chars = (p.n_chars - _np(pc.utf8_length(cleaned), np.int64)).astype(np.int64)
    return cleaned, removed_lines, removed_chars
