"""Language ID on prose: markup, LaTeX and code removed, a bounded sample spread over the document, and
the document's top languages with their shares of its prose.

Why: reading only the head of a document judges a LaTeX file by its preamble and a German page with a
large English-commented code block by its code. fastText LID models (lid.176) were trained
on prose; code, math and markup are noise to them.

* :func:`prose` removes, with RE2 passes over the whole batch: fenced code blocks (Markdown, ``~~~``),
  ``<pre>``/``<code>``/``<script>``/``<style>`` elements, HTML/XML tags, the LaTeX preamble (up to
  ``\\begin{document}``), math/code/table environments, ``$...$`` math, LaTeX commands (their braced
  arguments stay: ``\\emph{word}`` is prose), wiki templates ``{{...}}``, tables ``{| ... |}``, links
  ``[[target|label]]`` (label kept), ``<ref>`` notes, lines left without a letter or digit, and lines
  that look like code (end with ``;``,
  ``{`` or ``}``, start with a comment marker or a common keyword).
* :func:`spread_sample` takes ``max_chars`` characters as ``windows`` equal slices spread evenly over
  the prose (start, middle, end), not only its head.
* :func:`window_shares` predicts each slice of that sample alone and returns the top languages with
  the share of the sample's characters each holds (the default ``lang_topk`` of a document longer than
  the sample: the model reads the sample twice, never the whole document).
* :func:`language_shares` predicts each prose line of the whole document (up to ``max_chars``) and
  returns the top languages with the share of prose characters each holds (``lang_topk`` of a document
  no longer than the sample, and of every document when ``filter.langid.topk_max_chars`` is set: then
  it reads every line, several times the sample's cost).

Scores are clamped to [0, 1]: fastText's softmax output can exceed 1.0 by float error (``1.00001``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_MATH_ENVS = ("equation|align|alignat|eqnarray|gather|multline|displaymath|math|verbatim|lstlisting|minted"
              "|tabular|tabularx|array|tikzpicture|algorithmic|algorithm|figure|table|thebibliography")
_CODE_KEYWORDS = (r"import|from\s+\S+\s+import|def|class|return|public|private|static|void|int|var|let|const"
                  r"|function|#include|#define|package|using|namespace|if\s*\(|for\s*\(|while\s*\(|print\(|SELECT")

# (pattern, replacement, trigger) in order; every pattern is RE2.
# Patterns with the same replacement are one alternation where that reads every text alike (the
# leftmost match wins where a sequence of passes would take them in turn; only interleaved blocks of two
# kinds, such as a <pre> opened inside a <code> and closed after it, come out otherwise).
# trigger: ASCII characters one of which every match of the pattern holds; such a pass reads only the
# texts that held one of them before any pass (a pass only deletes characters, keeps captured ones or
# writes a space or newline, so no pass gives a text a character it did not hold). Empty: every text.
# A pass that matches nothing still scans and copies every text it reads (~10 ms per 25 MB even where
# RE2 skips to a leading literal), so every pattern whose matches all hold an ASCII character has one.
_PASSES: tuple[tuple[str, str, str], ...] = (
    (r"(?s)```.*?(?:```|$)|~~~.*?(?:~~~|$)", "\n", "`~"),
    ("(?is)" + "|".join(rf"<{t}[\s>].*?</{t}>" for t in ("pre", "code", "script", "style", "math")),
     "\n", "<"),
    (r"(?is)<ref[^>/]*/>|<ref[^>]*>.*?</ref>", " ", "<"),
    (r"(?s)\\documentclass.*?(\\begin\{document\}|$)", "\n", "\\"),
    (rf"(?s)\\begin\{{(?:{_MATH_ENVS})\*?\}}.*?\\end\{{(?:{_MATH_ENVS})\*?\}}", "\n", "\\"),
    (r"(?s)\$\$.*?\$\$|\\\[.*?\\\]|\\\(.*?\\\)", " ", "$\\"),
    (r"\$[^$\n]{0,300}\$", " ", "$"),
    (r"\\[a-zA-Z@]+\*?(\[[^\]\n]*\])?", " ", "\\"),
    (r"(?s)\{\|.*?\|\}", "\n", "{"),
    (r"\{\{[^{}]*\}\}", " ", "{"),
    (r"\{\{[^{}]*\}\}", " ", "{"),  # templates nest once more often than not
    (r"\[\[(?:[^|\]\n]*\|)?([^\]\n]*)\]\]", r"\1", "["),
    (r"<[^<>\n]{1,300}>", " ", "<"),
    (rf"(?m)^[ \t]*(?:#|//|/\*|\*/|--|(?:{_CODE_KEYWORDS})\b).*$|^.*[;{{}}][ \t]*$", "", ""),
    (r"[{}]|'''|''", " ", "{}'"),
    (r"(?m)^[^\pL\pN\n]+$", "", ""),  # residue of removed markup: "*" of a cited reference, "|}"
)


def prose(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The prose of each text: markup, LaTeX, math and code removed (see the module docstring).

    Args:
        texts: string array of ``n`` texts (nulls read as ``""``).

    Returns:
        string[n]; lines are kept apart (``\\n``), so :func:`language_shares` can judge them one by one.

    >>> prose(pa.array(["\\\\section{Intro} Das ist $x^2$ gut.\\nint x = 1;"])).to_pylist()
    ['  Intro  Das ist   gut.\\n']
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    out = pc.fill_null(texts, "")
    holding = _holding(out, {c for _, _, trigger in _PASSES for c in trigger})
    i = 0
    while i < len(_PASSES):
        trigger = _PASSES[i][2]
        j = i + 1
        while j < len(_PASSES) and _PASSES[j][2] == trigger:  # consecutive passes of one trigger: one subset
            j += 1
        rows = np.zeros(len(out), dtype=bool)
        for c in trigger:
            rows |= holding[c]
        if not trigger or rows.all():
            for pattern, repl, _ in _PASSES[i:j]:
                out = pc.replace_substring_regex(out, pattern, repl)
        elif rows.any():
            mask = pa.array(rows)
            sub = out.filter(mask)
            for pattern, repl, _ in _PASSES[i:j]:
                sub = pc.replace_substring_regex(sub, pattern, repl)
            out = pc.replace_with_mask(out, mask, sub)
        i = j
    return out


def _holding(texts: pa.Array, chars: set[str]) -> dict[str, np.ndarray]:
    """Per ASCII character, bool[n]: the text holds it (:func:`udfs.quality.parse._byte_rows`)."""
    from udfs.quality.parse import _byte_rows

    out = {}
    for c in sorted(chars):
        rows = np.zeros(len(texts), dtype=bool)
        rows[_byte_rows(texts, ord(c))] = True
        out[c] = rows
    return out


def spread_windows(texts: pa.Array, max_chars: int, windows: int) -> list[list[str]]:
    """The slices of each text's ``max_chars`` sample: ``windows`` equal slices spread evenly over it.

    Whitespace runs (newlines included) become one space first; a text no longer than ``max_chars``
    is one slice, kept whole. Slices are stripped.

    Args:
        texts: string array of ``n`` texts (from :func:`prose`).
        max_chars: characters per text handed to the model (>= 1).
        windows: slices per text (>= 1).

    Returns:
        ``n`` lists of Python strings without ``\\n`` (one or ``windows`` strings each).

    Raises:
        ValueError: ``max_chars`` or ``windows`` < 1.

    >>> spread_windows(pa.array(["aaaa bbbb cccc dddd", "short"]), 8, 2)
    [['aaaa', 'dddd'], ['short']]
    """
    if max_chars < 1 or windows < 1:
        raise ValueError(f"max_chars and windows must be >= 1; got {max_chars}, {windows}")
    # every whitespace run becomes one space; a lone space already is one, so only longer runs and
    # other whitespace characters are matched (as r"\s+" -> " ", a fifth of its cost)
    flat = pc.replace_substring_regex(pc.fill_null(texts, ""), r"\s\s+|[\t\n\f\r]", " ")
    flat = pc.utf8_trim_whitespace(flat)
    out = []
    width = max_chars // windows
    for t in flat.to_pylist():  # string slicing only; the model call dominates
        if len(t) <= max_chars:
            out.append([t])
            continue
        # np.linspace(0, len(t) - width, windows).astype(int), without a numpy call per text
        step = (len(t) - width) / (windows - 1) if windows > 1 else 0.0
        starts = [int(i * step) for i in range(windows - 1)] + [len(t) - width] if windows > 1 else [0]
        out.append([t[s : s + width].strip() for s in starts])
    return out


def spread_sample(texts: pa.Array, max_chars: int, windows: int) -> list[str]:
    """``max_chars`` characters of each text, as ``windows`` equal slices spread evenly over it.

    The slices of :func:`spread_windows` joined with a space (a text no longer than ``max_chars`` is
    kept whole).

    Args:
        texts: string array of ``n`` texts (from :func:`prose`).
        max_chars: characters per text handed to the model (>= 1).
        windows: slices per text (>= 1).

    Returns:
        ``n`` Python strings without ``\\n``.

    >>> spread_sample(pa.array(["aaaa bbbb cccc dddd"]), 8, 2)
    ['aaaa dddd']
    """
    return [" ".join(w) for w in spread_windows(texts, max_chars, windows)]


MIN_JUDGED_CHARS = 20
"""Shortest slice or line judged alone: shorter strings give fastText too few n-grams to trust."""


def window_shares(
    model,
    windows: list[list[str]],
    first: Sequence[str],
    k: int,
    code,
    min_chars: int = MIN_JUDGED_CHARS,
    prepare=None,
    known: dict[str, str] | None = None,
) -> list[list[dict]]:
    """Top ``k`` languages of each document with their share of its sample's characters.

    Each slice of the sample (:func:`spread_windows`) of at least ``min_chars`` characters is predicted
    alone; a language's share is the characters of its slices over the characters of every judged
    slice. A document whose sample is one slice (a text no longer than the sample) is not judged again:
    the sample's own prediction already is its language.

    Args:
        model: a loaded fastText model.
        windows: ``n`` lists of slices (from :func:`spread_windows`).
        first: ``n`` canonical codes, the whole sample's top language; among equal shares it comes
            first, so a tie never moves ``lang`` off the sample's language.
        k: languages kept per document.
        code: label -> canonical code (:func:`udfs.langid.canonical_code` bound to prefix and aliases).
        min_chars: shorter slices are not judged (too little evidence).
        prepare: string array of slices -> the strings handed to the model (default: as they are);
            :func:`udfs.langid.identify` applies the sample's upper-case rule.
        known: string handed to the model -> canonical code of its top label, already predicted
            (read, and filled with this call's predictions; each distinct string is predicted once).

    Returns:
        ``n`` lists of ``{"lang", "score"}`` (score = share in [0, 1]), largest first; empty for a
        document with one slice or without a judged slice.
    """
    doc, pieces = [], []
    for d, ws in enumerate(windows):
        if len(ws) > 1:
            for w in ws:
                if len(w) >= min_chars:
                    doc.append(d)
                    pieces.append(w)
    return _shares(model, doc, pieces, len(windows), k, code, first, prepare, known)


def _shares(model, doc: list[int], pieces: list[str], n: int, k: int, code, first,
            prepare, known: dict[str, str] | None = None) -> list[list[dict]]:
    """Per document, the top ``k`` languages of its ``pieces`` weighted by characters (see callers).

    Each distinct string handed to the model is predicted once; ``known`` (string -> canonical code of
    its top label, e.g. the samples' own predictions) is read first and filled in."""
    out: list[list[dict]] = [[] for _ in range(n)]
    if not pieces:
        return out
    strings = prepare(pa.array(pieces, pa.string())) if prepare else list(pieces)
    known = {} if known is None else known
    todo = list(dict.fromkeys(t for t in strings if t not in known))
    if todo:
        if hasattr(model, "top_labels"):  # the compiled model (udfs.fasttext_jit): no per-line lists
            tops = model.top_labels(todo)
        else:
            tops = [ls[0] for ls in model.predict(todo, k=1)[0]]
        known.update(zip(todo, map(code, tops), strict=True))
    per_doc: list[dict[str, int]] = [{} for _ in range(n)]
    for d, t, p in zip(doc, strings, pieces, strict=True):
        c = known[t]
        per_doc[d][c] = per_doc[d].get(c, 0) + len(p)
    for d, counts in enumerate(per_doc):
        if not counts:
            continue
        total = sum(counts.values())
        lead = first[d] if first is not None else None
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] != lead, kv[0]))[:k]
        out[d] = [{"lang": c, "score": m / total} for c, m in best]
    return out


def language_shares(
    model,
    texts: pa.Array,
    max_chars: int,
    k: int,
    code,
    min_line_chars: int = MIN_JUDGED_CHARS,
    prepare=None,
    known: dict[str, str] | None = None,
) -> list[list[dict]]:
    """Top ``k`` languages of each document with their share of its prose characters.

    Each prose line of at least ``min_line_chars`` characters (up to ``max_chars`` characters per
    document, in order) is predicted alone; a language's share is the characters of its lines over the
    characters of every judged line.

    Args:
        model: a loaded fastText model.
        texts: string array of ``n`` prose texts (from :func:`prose`).
        max_chars: characters judged per document.
        k: languages kept per document.
        code: label -> canonical code (:func:`udfs.langid.canonical_code` bound to prefix and aliases).
        min_line_chars: shorter lines are not judged (too little evidence).
        prepare: string array of lines -> the strings handed to the model (default: the lines as they
            are); :func:`udfs.langid.identify` applies the sample's upper-case rule.
        known: see :func:`window_shares`.

    Returns:
        ``n`` lists of ``{"lang", "score"}`` (score = share in [0, 1]), largest first; empty for a
        document without a judged line.
    """
    lines = pc.split_pattern(pc.utf8_slice_codeunits(pc.fill_null(texts, ""), 0, max_chars), "\n")
    flat = pc.utf8_trim_whitespace(pc.list_flatten(lines))
    doc = np.asarray(pc.list_parent_indices(lines).to_numpy(zero_copy_only=False), np.int64)
    chars = np.asarray(pc.utf8_length(flat).to_numpy(zero_copy_only=False), np.int64)
    keep = np.flatnonzero(chars >= min_line_chars)
    judged = flat.take(pa.array(keep)).to_pylist()
    return _shares(model, doc[keep].tolist(), judged, len(texts), k, code, None, prepare, known)


def clamp_scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """fastText probabilities clamped to [0, 1] (float64)."""
    return np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)


def topk_or_fallback(shares: list[list[dict]], fallback: list) -> list:
    """Each document's shares, or the sample's fastText top-k when no line was judged."""
    return [s if s else f for s, f in zip(shares, fallback, strict=True)]
