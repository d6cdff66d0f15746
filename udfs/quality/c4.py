"""C4 page signals (Raffel et al. 2020, section 2.2; TFDS ``text/c4_utils.py``, datatrove 0.10.1
``c4_filters.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.quality.parse import Parsed, _np, _per_doc, _struct

C4_END_PUNCTUATION = ".?!\"'"
"""C4's terminal punctuation (TFDS ``c4_utils``): a line must end with one of these, and not with ``...``."""

C4_POLICY_SUBSTRINGS: tuple[str, ...] = (
    "terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies",
)
"""Lines holding any of these (lower-cased) are boilerplate in C4 (TFDS ``c4_utils._POLICY_SUBSTRINGS``)."""

C4_MAX_WORD_CHARS = 1000
"""C4 drops a line holding a whitespace-separated word longer than this (TFDS ``max_word_length``)."""

_CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
# Sentence ends for C4's sentence count: a run of terminal marks (closing quotes/brackets may follow)
# before whitespace or the end of the line; approximates the spaCy sentencizer datatrove uses.
_SENTENCE_END = r"[.!?\x{3002}\x{ff01}\x{ff1f}]+[\"'\x{201d}\x{2019})\]]*(?:\s|$)"


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


def c4(p: Parsed, min_words_per_line: int = 3) -> pa.StructArray:
    """C4 signals (Raffel et al. 2020, section 2.2; TFDS ``c4_utils.clean_page``; datatrove ``C4QualityFilter``).

    Line rules run on each non-blank, stripped line in TFDS order: a word longer than
    :data:`C4_MAX_WORD_CHARS` (line dropped), Wikipedia citation markers removed, no terminal punctuation
    (:data:`C4_END_PUNCTUATION`, or ends with ``...``), fewer than ``min_words_per_line`` words, mentions
    "javascript", holds a policy phrase (:data:`C4_POLICY_SUBSTRINGS`). Each count is over lines that
    passed the earlier rules. The page-level "lorem ipsum" and ``{`` signals look at the whole page, as the
    paper states ("any page where the phrase 'lorem ipsum' appeared", "any pages that contained a curly
    bracket"); TFDS and datatrove only look at lines that survived the line rules.

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.
        min_words_per_line: C4's minimum words per kept line (paper: 3).

    Returns:
        StructArray[n] of :data:`C4_TYPE` (counts int64, flags bool); ``kept_sentences`` counts sentence
        ends (``.``, ``!``, ``?`` runs before whitespace or line end) in kept lines (paper keeps pages
        with >= 5 sentences).
    """
    n = p.n
    line = p.lines_stripped
    if len(line):
        cited = _np(pc.match_substring(line, "["), bool)
        if cited.any():  # citation markers are rare: rewrite only lines holding a "["
            line = pc.if_else(pa.array(cited), pc.utf8_trim_whitespace(pc.replace_substring_regex(line, _CITATION, "")), line)
    lower = pc.utf8_lower(p.lines_stripped)
    long_word = np.zeros(len(line), dtype=bool)
    maybe_long = np.flatnonzero(p.line_stripped_chars > C4_MAX_WORD_CHARS)
    if len(maybe_long):
        # RE2 caps a repetition count at 1000, so "more than 1000 non-spaces" is written as two halves
        half = C4_MAX_WORD_CHARS // 2
        rx = rf"\S{{{half}}}\S{{{C4_MAX_WORD_CHARS - half + 1}}}"
        long_word[maybe_long] = _np(pc.match_substring_regex(p.lines_stripped.take(pa.array(maybe_long)), rx), bool)
    last = pc.utf8_slice_codeunits(line, -1)
    terminal = _np(pc.is_in(last, value_set=pa.array(list(C4_END_PUNCTUATION))), bool) & ~_np(pc.ends_with(line, "..."), bool)
    # fewer than k words <=> no k whitespace-separated runs; the match stops at the first hit
    few_words = ~_np(pc.match_substring_regex(p.lines_stripped, r"\S" + r"\s+\S+" * (min_words_per_line - 2) + r"\s+\S"), bool) if min_words_per_line >= 2 else np.zeros(len(line), bool)
    javascript = _np(pc.match_substring(lower, "javascript"), bool)
    policy = _np(pc.match_substring_regex(lower, "|".join(C4_POLICY_SUBSTRINGS)), bool)

    alive = ~long_word
    out = {"lines": _per_doc(p.line_doc, n), "lines_long_word": _per_doc(p.line_doc[long_word], n)}
    for name, drop in (
        ("lines_no_terminal_punct", ~terminal),
        ("lines_too_few_words", few_words),
        ("lines_javascript", javascript),
        ("lines_policy", policy),
    ):
        hit = alive & drop
        out[name] = _per_doc(p.line_doc[hit], n)
        alive &= ~drop
    out["kept_lines"] = _per_doc(p.line_doc[alive], n)
    kept = np.flatnonzero(alive)
    sentences = _np(pc.count_substring_regex(line.take(pa.array(kept)), _SENTENCE_END), np.int64) if len(kept) else kept
    out["kept_sentences"] = _per_doc(p.line_doc[kept], n, np.maximum(sentences, 1))
    lower_text = pc.utf8_lower(p.texts)
    out["has_lorem_ipsum"] = _np(pc.match_substring(lower_text, "lorem ipsum"), bool)
    out["has_curly_bracket"] = _np(pc.match_substring(p.texts, "{"), bool)
    return _struct({k: out[k] for k in C4_TYPE.names}, {f.name: f.type for f in C4_TYPE})
