"""The rule profile that fits each document (``filter.default_profile: auto``), from cheap signals.

One pass of RE2 counts over an Arrow batch (no Python loop over documents or lines) gives each
document a few form signals; :func:`choose` turns them into one of :data:`AUTO_PROFILES`, checked in
this order (the first that fits wins):

1. ``wiki``: raw MediaWiki markup. At least :data:`MIN_WIKI_MARKS` marks of at least two kinds among
   links ``[[...]]``, templates ``{{...``, ``== heading ==`` lines, ``'''bold'''`` and ``<ref>`` tags,
   or a redirect page (``#REDIRECT [[...]]``).
   Web pages almost never hold two of these kinds; extracted (plain-text) Wikipedia has none and stays
   ``web``, whose rules fit it.
2. ``science``: LaTeX source (at least :data:`MIN_LATEX_COMMANDS` structural commands:
   ``\\documentclass``, ``\\usepackage``, ``\\section{``, ``\\cite{``, ``\\label{``, ``\\ref{``...; math
   alone is not enough, a blog with MathJax stays ``web``), or a paper's
   structure: at least :data:`MIN_PAPER_HEADINGS` section headings of a paper (Abstract, Introduction,
   Methods, Results, Discussion, Conclusion, References, ... as whole lines, numbered or not; a response
   to peer reviewers, which arXiv sources and journals publish beside papers, is headed "Reviewer 2",
   "Response to Reviewers" and "Response:" instead) and at
   least :data:`MIN_SCHOLARLY_MARKS_PER_1K_WORDS` scholarly marks per 1,000 words (bracketed numeric
   citations ``[3]`` / ``[1-4]``, ``et al.``, ``Fig.``/``Table``/``Eq.`` references, converter
   placeholders ``{{cite:...}}``/``{{formula:...}}``, ``REF``, numbered
   theorems and lemmas), or at least :data:`MANY_PAPER_HEADINGS` such headings and
   :data:`MIN_SCHOLARLY_MARKS_PER_1K_WORDS_MANY_HEADINGS` marks. A numbered heading counts when a
   paragraph of at least 100 characters follows it (a table of contents does not count). A long
   document dense in marks only papers hold (all but bracketed numbers) is ``science`` without headings
   (:data:`MIN_PAPER_MARKS_PER_1K_WORDS`, :data:`MIN_PAPER_WORDS`).
3. ``code``: at least :data:`MIN_CODE_SHARE` of the non-blank characters are on lines that read as
   code (end in ``{`` or ``}``, start with ``}``, a comment marker or a common keyword, end in ``;``
   after a call, an assignment, ``->`` or ``::``, or sit in a fenced Markdown block); legal
   enumerations whose items end in ``;`` are prose.
4. ``books``: at least :data:`MIN_CHAPTERS` chapter headings ("Chapter 1", "CHAPTER IV", "Chapter
   One") and at least :data:`MIN_BOOK_WORDS` words, or more words than a web page has
   (:data:`MIN_WORDS_ALWAYS_BOOK`, Gopher's ``max_words``).
5. ``web``: everything else.

The thresholds were set on the shared real samples (Wikipedia wikitext, unarXive and PMC papers,
Common Crawl, DCLM and multilingual text) and invented documents of every kind
(``bench/auto_profile.py`` measures the agreement with the profile a person gives each document).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.quality.parse import _holding, _utf8

AUTO_PROFILES: tuple[str, ...] = ("wiki", "science", "code", "books", "web")
"""The profiles ``auto`` chooses among, in the order they are checked."""

MIN_WIKI_MARKS = 5
"""Wiki marks (links, templates, headings, bold, ref tags) a ``wiki`` document holds at least."""
MIN_LATEX_COMMANDS = 5
"""Structural LaTeX commands (``\\documentclass``, ``\\section{``, ``\\cite{``...) of a LaTeX source."""
MIN_PAPER_HEADINGS = 2
"""Section headings of a paper (Abstract, Introduction, ...) a ``science`` document holds at least."""
MIN_SCHOLARLY_MARKS_PER_1K_WORDS = 3.0
"""Citations, figure/table/equation references and theorems per 1,000 words of a ``science`` document."""
MIN_PAPER_MARKS_PER_1K_WORDS = 5.0
MIN_PAPER_WORDS = 1_000
"""A document of at least ``MIN_PAPER_WORDS`` words with this many marks only papers hold (all scholarly
marks but bracketed numbers, which Wikipedia articles hold too) per 1,000 words is ``science`` whatever
its headings (a thesis converted without its section titles)."""
MANY_PAPER_HEADINGS = 5
MIN_SCHOLARLY_MARKS_PER_1K_WORDS_MANY_HEADINGS = 1.0
"""A document with this many paper headings needs only this many scholarly marks per 1,000 words (a
paper whose citations and formulas a converter removed still has its section structure)."""
MIN_CODE_SHARE = 0.5
"""Share of non-blank characters on code lines of a ``code`` document."""
MIN_CHAPTERS = 2
MIN_BOOK_WORDS = 5_000
MIN_WORDS_ALWAYS_BOOK = 100_000
"""Chapter headings and words of a ``books`` document; above ``MIN_WORDS_ALWAYS_BOOK`` words (Gopher's
``max_words``, Rae et al. 2021 appendix A.1.1) a prose text is a book whatever its headings."""

_WIKI_KINDS: tuple[str, ...] = (
    r"\[\[[^\[\]\n]{1,200}\]\]",
    r"\{\{[A-Za-z#][^{}\n|]{0,80}(\||\}\})",
    r"(?m)^={2,6}[^=\n]{1,200}={2,6}[ \t]*$",
    r"'''[^'\n]{1,200}'''",
    r"(?i)<ref[\s>/]",
)
_REDIRECT = r"(?i)\A[ \t\n]*#redirect[ \t]*\[\["
_LATEX = (r"\\(?:documentclass|begin\{document\}|(?:sub)*section\*?\{|cite[pt]?\{|usepackage|label\{|ref\{"
          r"|bibliography)")
_PAPER_HEADINGS = (
    r"(?im)^[ \t]*(?:[0-9IVX]+\.?(?:[0-9]+\.?)*[ \t]+)?(?:abstract|introduction|background|related work"
    r"|methods?|materials and methods|methodology|experiments?|experimental setup|results"
    r"|results and discussion|discussion|conclusions?|acknowledge?ments?|references|bibliography"
    r"|evaluation|preliminaries|appendix|response|(?:response to (?:the )?)?reviewers?(?:[ \t]*#?[0-9]+)?)"
    r"[ \t]*:?[ \t]*$"
    r"|(?m)^[ \t]*-?[0-9]{1,2}(?:\.[0-9]{1,2}){0,3}\.?[ \t]+[A-Z][^\n.!?:;]{2,80}\n+[^\n]{100,}"
)
_CITATION = r"\[[0-9]{1,3}(?:[ \t]*[,–-][ \t]*[0-9]{1,3})*\]"
_PAPER_MARKS = (
    r"\bet al\.|\b(?:Figs?\.|Figure|Tables?|Eqs?\.|Equation)[ \t]*(?:[0-9]+|REF)\b|\bREF\b"
    r"|\{\{(?:cite|formula|figure|table):"
    r"|\b(?:Theorem|Lemma|Definition|Proposition|Corollary|Remark)[ \t]+[0-9]"
)
_SCHOLARLY = f"{_CITATION}|{_PAPER_MARKS}"
_CODE_LINE = (
    r"^[ \t]*(?://|/\*|\*/|#include|#define|#!|(?:import|from[ \t]+\S+[ \t]+import|def|class|return|public"
    r"|private|static|void|int|var|let|const|function|package|using|namespace|if[ \t]*\(|for[ \t]*\(|while"
    r"[ \t]*\(|elif|else:|try:|except|print\(|SELECT|fn|struct|impl)\b)|^[ \t]*\}|[{}][ \t]*$"
    r"|(?:\w\(.*|=.*|->.*|::.*|^[ \t]*(?:break|continue|\w+\+\+));[ \t]*$"
)
_FENCE = r"(?ms)^[ \t]*```.*?^[ \t]*```|^[ \t]*~~~.*?^[ \t]*~~~"
_CHAPTER = (r"(?m)^[ \t]*(?:CHAPTER|Chapter)[ \t]+(?:[0-9]+|[IVXLC]+|One|Two|Three|Four|Five|Six|Seven|Eight"
            r"|Nine|Ten|Eleven|Twelve|[A-Z][a-z]+teen|Twenty\S*)\b")

PROFILE_SIGNALS_TYPE = pa.struct([
    ("wiki_marks", pa.int64()), ("wiki_kinds", pa.int64()), ("latex_commands", pa.int64()),
    ("paper_headings", pa.int64()), ("scholarly_per_1k_words", pa.float64()), ("code_share", pa.float64()),
    ("chapters", pa.int64()), ("words", pa.int64()), ("wiki_redirect", pa.int64()),
    ("paper_marks_per_1k_words", pa.float64()),
])
"""Fields of :func:`profile_signals`: counts per document (int64), ``scholarly_per_1k_words`` (marks per
1,000 whitespace words, float64) and ``code_share`` (fraction of non-blank characters, float64 in [0, 1])."""


def _count(texts: pa.Array, pattern: str, rows: np.ndarray | None = None) -> np.ndarray:
    """Matches of ``pattern`` per text; with ``rows`` (bool[n]) only those texts are searched (the
    others cannot match: 0)."""
    if rows is None:
        return np.asarray(pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False), np.int64)
    out = np.zeros(len(texts), np.int64)
    if rows.any():
        out[rows] = _count(texts.filter(pa.array(rows)), pattern)
    return out


def _re2_space(data: np.ndarray) -> np.ndarray:
    """bool per UTF-8 byte (uint8): one of the characters RE2's ``\\s`` matches (``[\\t\\n\\f\\r ]``,
    bytes 9, 10, 12, 13 and 32: RE2's Perl classes are ASCII only; ``\\v``, NBSP and other Unicode
    spaces are not ``\\s``, and ``\\S`` holds them). Comparisons, not a table lookup (3x cheaper)."""
    space = data == 0x20
    low = (data - np.uint8(9)) <= np.uint8(4)  # bytes 9..13 (uint8 arithmetic wraps the others above 4)
    low &= data != 0x0B
    space |= low
    return space


def _count_per_text(flags: np.ndarray, off: np.ndarray) -> np.ndarray:
    """int64[n]: the True bytes of each text (``flags`` bool per byte, ``off`` int64[n + 1] byte offsets
    from 0); one vectorised ``count_nonzero`` per text, cheaper than locating every True byte."""
    bounds = off.tolist()
    return np.fromiter((np.count_nonzero(flags[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)),
                       np.int64, len(bounds) - 1)


def _space_counts(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """int64[n] each: the runs of ``\\S+`` (RE2) and the characters that are not ``\\s``, per text.

    The same numbers as ``count_substring_regex(texts, r"\\S+")`` and the length of
    ``replace_substring_regex(texts, r"\\s+", "")``, from numpy passes over the UTF-8 bytes: an
    ASCII byte never occurs inside a multi-byte character, so :func:`_re2_space` finds every ``\\s``
    character, and a character is counted at its first byte (any byte but ``0b10xxxxxx``).
    """
    off, data = _utf8(texts)
    space = _re2_space(data)
    start = np.empty_like(space)  # a run starts at a solid byte after a space byte, or where its text starts
    start[:1] = ~space[:1]
    np.greater(space[:-1], space[1:], out=start[1:])
    heads = off[:-1][off[:-1] < off[1:]]
    start[heads] = ~space[heads]
    continuation = (data & np.uint8(0xC0)) == np.uint8(0x80)
    return (_count_per_text(start, off),
            np.diff(off) - _count_per_text(space, off) - _count_per_text(continuation, off))


def _code_share(texts: pa.Array, total: np.ndarray) -> np.ndarray:
    """Fraction of non-blank characters on code lines (fenced blocks count as code); ``total``: the
    non-blank characters of each text (:func:`_space_counts`)."""
    n = len(texts)
    fence_chars = np.zeros(n, np.int64)
    fenced = texts
    # a fence holds three backticks or tildes: only the texts holding one can change
    rows = _holding(texts, ord("`")) | _holding(texts, ord("~"))
    if rows.any():
        mask = pa.array(rows)
        sub = pc.replace_substring_regex(texts.filter(mask), _FENCE, "")
        fence_chars[rows] = np.maximum(total[rows] - _space_counts(sub)[1], 0)
        fenced = pc.replace_with_mask(texts, mask, sub)
    lines = pc.split_pattern(fenced, "\n")
    flat = pc.list_flatten(lines)
    if len(flat) == 0:
        return np.zeros(n)
    doc = np.asarray(pc.list_parent_indices(lines).to_numpy(zero_copy_only=False), np.int64)
    chars = np.asarray(pc.utf8_length(pc.utf8_trim_whitespace(flat)).to_numpy(zero_copy_only=False), np.int64)
    is_code = np.asarray(pc.match_substring_regex(flat, _CODE_LINE).to_numpy(zero_copy_only=False), bool)
    code = np.bincount(doc, weights=chars * is_code, minlength=n) + fence_chars
    return np.where(total > 0, code / np.maximum(total, 1), 0.0)


def profile_signals(texts: pa.Array | pa.ChunkedArray) -> pa.StructArray:
    """The form signals :func:`choose` reads, per document.

    Args:
        texts: string array of ``n`` texts (nulls read as ``""``).

    Returns:
        StructArray[n] of :data:`PROFILE_SIGNALS_TYPE`; an empty or whitespace-only text has every
        count 0 and both ratios 0.0.
    """
    return _signals(texts, for_choice=False)


def _signals(texts: pa.Array | pa.ChunkedArray, for_choice: bool) -> pa.StructArray:
    """:func:`profile_signals`; with ``for_choice``, ``paper_headings`` and ``chapters`` are counted only
    where :func:`choose` reads them (0 elsewhere), so only its choice is exact: a paper-heading count
    decides nothing where ``scholarly_per_1k_words`` is below both of its thresholds, a chapter count
    nothing below :data:`MIN_BOOK_WORDS` words. Each of the two is a scan of every text RE2 cannot
    skip ahead in, on a web corpus ~25 % of the choice's CPU."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    texts = pc.fill_null(texts, "")
    # the heading-line and chapter patterns cannot skip ahead to a literal; they run only on the texts
    # holding a character every match holds ("=" of a heading, "C" of "Chapter"/"CHAPTER")
    kinds = (np.stack([_count(texts, p, _holding(texts, ord("=")) if p == _WIKI_KINDS[2] else None)
                       for p in _WIKI_KINDS]) if len(texts) else np.zeros((5, 0), np.int64))
    words, nonblank = _space_counts(texts)
    # _SCHOLARLY's count is the two alternatives' counts added: a citation match holds "[", "]", digits,
    # spaces, commas and dashes only and starts with "[", a paper-mark match never holds "[" and starts
    # with a letter or "{", so no match of one overlaps one of the other and each scan finds the same
    # matches (the "\b" before a mark sees a non-word character after a citation's "]", as at a scan's
    # start). The marks are counted once for both columns, the citations only where a "[" is.
    marks = _count(texts, _PAPER_MARKS)
    scholarly = _count(texts, _CITATION, _holding(texts, ord("["))) + marks
    per_1k = np.where(words > 0, 1000.0 * scholarly / np.maximum(words, 1), 0.0)
    heading_rows = chapter_rows = None
    if for_choice:
        fewest = min(MIN_SCHOLARLY_MARKS_PER_1K_WORDS, MIN_SCHOLARLY_MARKS_PER_1K_WORDS_MANY_HEADINGS)
        heading_rows = per_1k >= fewest
        chapter_rows = words >= MIN_BOOK_WORDS
    if chapter_rows is None or chapter_rows.any():
        held = _holding(texts, ord("C"))
        chapter_rows = held if chapter_rows is None else chapter_rows & held
    cols = [
        kinds.sum(axis=0), (kinds > 0).sum(axis=0), _count(texts, _LATEX),
        _count(texts, _PAPER_HEADINGS, heading_rows), per_1k, _code_share(texts, nonblank),
        _count(texts, _CHAPTER, chapter_rows), words, _count(texts, _REDIRECT),
        np.where(words > 0, 1000.0 * marks / np.maximum(words, 1), 0.0),
    ]
    fields = list(PROFILE_SIGNALS_TYPE)
    arrays = [pa.array(c, f.type) for c, f in zip(cols, fields, strict=True)]
    return pa.StructArray.from_arrays(arrays, fields=fields)


def choose(signals: pa.StructArray) -> pa.Array:
    """The profile of each document from its :func:`profile_signals` (rules in the module docstring).

    Returns:
        string[n], each one of :data:`AUTO_PROFILES`.
    """
    s = {f.name: np.asarray(signals.field(i).to_numpy(zero_copy_only=False))
         for i, f in enumerate(signals.type)}
    wiki = ((s["wiki_marks"] >= MIN_WIKI_MARKS) & (s["wiki_kinds"] >= 2)) | (s["wiki_redirect"] > 0)
    heads, marks = s["paper_headings"], s["scholarly_per_1k_words"]
    science = ((s["latex_commands"] >= MIN_LATEX_COMMANDS)
               | ((heads >= MIN_PAPER_HEADINGS) & (marks >= MIN_SCHOLARLY_MARKS_PER_1K_WORDS))
               | ((heads >= MANY_PAPER_HEADINGS) & (marks >= MIN_SCHOLARLY_MARKS_PER_1K_WORDS_MANY_HEADINGS))
               | ((s["paper_marks_per_1k_words"] >= MIN_PAPER_MARKS_PER_1K_WORDS)
                  & (s["words"] >= MIN_PAPER_WORDS)))
    code = s["code_share"] >= MIN_CODE_SHARE
    words = s["words"]
    books = ((s["chapters"] >= MIN_CHAPTERS) & (words >= MIN_BOOK_WORDS)) | (words > MIN_WORDS_ALWAYS_BOOK)
    out = np.select([wiki, science, code, books], ["wiki", "science", "code", "books"], default="web")
    return pa.array(out.tolist(), pa.string())


def auto_profile(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The profile that fits each text: :func:`choose` of :func:`profile_signals`.

    >>> auto_profile(pa.array(["A short note about the weather today.", ""])).to_pylist()
    ['web', 'web']
    """
    return choose(_signals(texts, for_choice=True))
