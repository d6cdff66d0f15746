"""Heuristic quality signals (Gopher quality, Gopher repetition, C4, FineWeb), vectorised per Arrow batch.

Every public function maps an Arrow array of ``n`` texts (``string`` / ``large_string``; nulls read as
``""``) to a :class:`pyarrow.StructArray` of length ``n`` with one fixed-dtype field per signal. No
decision is taken here: :mod:`pipelines.filter` compares the signals with the configured thresholds.

Work is done with Arrow compute kernels over the whole batch (split into lines / words once, flatten,
aggregate back per document with ``numpy.bincount``) and numpy for n-gram counting; there is no Python
loop over documents, lines or words.

Shared definitions (:class:`Parsed`):

* **line**: a piece of the text between ``\\n`` characters (ingest normalised ``\\r\\n`` and ``\\r``);
  a line that is empty or whitespace-only is *blank*, and blank lines are not lines (issue 4).
* **paragraph**: a run of non-blank lines between blank lines.
* **word** (token): the text split on whitespace after runs of Unicode punctuation or symbol
  characters (``\\p{P}``, ``\\p{S}``) at the edges of a piece are set apart (:func:`tokenize_spacing`),
  so ``"(end)."`` is ``(`` + ``end`` + ``).``. This follows the tokens of datatrove's English word tokenizer (spaCy, whose
  punctuation tokens are words too) closely enough for the rules to agree (see the cross-check test)
  at a fraction of its cost. A *symbol word* is made only of punctuation or symbols.

Sources: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training Gopher",
appendix A.1.1 and table A1; Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer", section 2.2; Penedo et al. 2024, "The FineWeb Datasets", section 3.3; the
reference implementations in datatrove 0.10.1 (``pipeline/filters/gopher_quality_filter.py``,
``gopher_repetition_filter.py``, ``c4_filters.py``, ``fineweb_quality_filter.py``) and TFDS
``text/c4_utils.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STOP_WORDS: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")
"""Gopher's English stop words (Rae et al. 2021, A.1.1); a document needs at least 2 of them."""

BULLETS = "•‣◦⁃∙▪●-*"
"""Characters that start a bullet line. datatrove uses ``•`` and ``-``; the paper says "bullet point"."""

C4_END_PUNCTUATION = ".?!\"'"
"""C4's terminal punctuation (TFDS ``c4_utils``): a line must end with one of these, and not with ``...``."""

C4_POLICY_SUBSTRINGS: tuple[str, ...] = (
    "terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies",
)
"""Lines holding any of these (lower-cased) are boilerplate in C4 (TFDS ``c4_utils._POLICY_SUBSTRINGS``)."""

C4_MAX_WORD_CHARS = 1000
"""C4 drops a line holding a whitespace-separated word longer than this (TFDS ``max_word_length``)."""

FINEWEB_SHORT_LINE_CHARS = 30
"""A FineWeb *short line* has at most this many characters (datatrove ``short_line_length``)."""

# Terminal punctuation of every script, as in datatrove.utils.text.TERMINAL_PUNCTUATION (Unicode
# Sentence_Terminal characters), as code-point ranges; FineWeb's line-punctuation rule uses it.
_TERMINAL_RANGES = (
    0x21, 0x2E, 0x3F, 0x589, (0x61D, 0x61F), 0x6D4, (0x700, 0x702), 0x7F9, 0x837, 0x839, (0x83D, 0x83E),
    (0x964, 0x965), (0x104A, 0x104B), 0x1362, (0x1367, 0x1368), 0x166E, (0x1735, 0x1736), (0x17D4, 0x17D6),
    (0x17D9, 0x17DA), 0x1803, 0x1809, (0x1944, 0x1945), (0x1AA8, 0x1AAB), (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F),
    (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C), (0x1C7E, 0x1C7F), (0x203C, 0x203D), (0x2047, 0x2049), 0x2E2E,
    0x2E3C, (0x2E53, 0x2E54), 0x3002, 0xA4FF, (0xA60E, 0xA60F), 0xA6F3, 0xA6F7, (0xA876, 0xA877),
    (0xA8CE, 0xA8CF), 0xA92F, (0xA9C8, 0xA9C9), (0xAA5D, 0xAA5F), (0xAAF0, 0xAAF1), 0xABEB, 0xFE52,
    (0xFE56, 0xFE57), 0xFF01, 0xFF0E, 0xFF1F, 0xFF61, (0x10A56, 0x10A57), (0x10F55, 0x10F59),
    (0x10F86, 0x10F89), (0x11047, 0x11048), (0x110BE, 0x110C1), (0x11141, 0x11143), (0x111C5, 0x111C6),
    0x111CD, (0x111DE, 0x111DF), (0x11238, 0x11239), (0x1123B, 0x1123C), 0x112A9, (0x1144B, 0x1144C),
    (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642), (0x1173C, 0x1173E), 0x11944, 0x11946,
    (0x11A42, 0x11A43), (0x11A9B, 0x11A9C), (0x11C41, 0x11C42), (0x11EF7, 0x11EF8), (0x11F43, 0x11F44),
    (0x16A6E, 0x16A6F), 0x16AF5, (0x16B37, 0x16B38), 0x16B44, 0x16E98, 0x1BC9F, 0x1DA88,
)


def _re2_class(ranges: tuple) -> str:
    parts = []
    for r in ranges:
        a, b = r if isinstance(r, tuple) else (r, r)
        parts.append(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}")
    return "[" + "".join(parts) + "]"


_TERMINAL_CLASS = _re2_class(_TERMINAL_RANGES)
_CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
# Sentence ends for C4's sentence count: a run of terminal marks (closing quotes/brackets may follow)
# before whitespace or the end of the line; approximates the spaCy sentencizer datatrove uses.
_SENTENCE_END = r"[.!?\x{3002}\x{ff01}\x{ff1f}]+[\"'\x{201d}\x{2019})\]]*(?:\s|$)"
_MIX = np.uint64(0x9E3779B97F4A7C15)

GOPHER_REPETITION_TOP_N = (2, 3, 4)
GOPHER_REPETITION_DUP_N = (5, 6, 7, 8, 9, 10)


def _as_text(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        raise TypeError(f"texts must be an Arrow string array; got {texts.type}")
    return pc.fill_null(texts, "")


def _np(a: pa.Array | pa.ChunkedArray, dtype=None) -> np.ndarray:
    out = np.asarray(a.to_numpy(zero_copy_only=False))
    return out.astype(dtype) if dtype is not None else out


def _per_doc(parent: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(parent, weights=weights, minlength=n)[:n]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = num.astype(np.float64)
    den = den.astype(np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    # SplitMix64 finaliser (Steele et al. 2014): a bijective 64-bit mixer, so distinct ids stay distinct.
    z = x.astype(np.uint64) + _MIX
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _repeated(keys: np.ndarray) -> np.ndarray:
    """Boolean mask: True where ``keys[i]`` occurs more than once in ``keys``.

    A plain sort answers "no repeats" cheaply (most long n-gram sets); otherwise one argsort marks both
    neighbours of every equal pair (about 3x faster than ``np.isin`` against the repeated values).
    """
    if len(keys) < 2:
        return np.zeros(len(keys), dtype=bool)
    s = np.sort(keys)
    if not (s[1:] == s[:-1]).any():
        return np.zeros(len(keys), dtype=bool)
    order = np.argsort(keys)
    eq = keys[order[1:]] == keys[order[:-1]]
    marked = np.zeros(len(keys), dtype=bool)
    marked[1:] |= eq
    marked[:-1] |= eq
    out = np.empty(len(keys), dtype=bool)
    out[order] = marked
    return out


def _not_first(keys: np.ndarray) -> np.ndarray:
    """Boolean mask: True where ``keys[i]`` equals a key at an earlier index."""
    out = np.zeros(len(keys), dtype=bool)
    if len(keys) < 2:
        return out
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    out[order[1:]] = sk[1:] == sk[:-1]
    return out


# Tokenizer tables after spaCy 3's English tokenizer (spacy/lang/punctuation.py, spacy/lang/char_classes.py,
# spacy/lang/en/tokenizer_exceptions.py), which datatrove's word split uses: a prefix is split off the start
# of a whitespace-separated piece, a suffix off its end, an infix between letters/digits.
_QUOTES = "'\"\u201d\u201c`\u2018\u00b4\u2019\u201a\u201e\u00bb\u00ab\u300c\u300d\u300e\u300f\uff08\uff09\u3014\u3015\u3010\u3011\u300a\u300b\u3008\u3009\u27e6\u27e7"
_PUNCT = "\u2026,:;!?\u00bf\u061f\u00a1()\\[\\]{}<>_#*&\u3002\uff1f\uff01\uff0c\u3001\uff1b\uff1a\uff5e\u00b7\u0964\u060c\u06d4\u061b\u066a"
_CURRENCY = "$\u00a3\u20ac\u00a5\u0e3f\u20bd\ufdfc\u20a0-\u20bf"
_PREFIX = f"[\u00a7%=\u2014\u2013+{_PUNCT}{_QUOTES}{_CURRENCY}\\p{{So}}]"
_SUFFIX = f"[\u2014\u2013{_PUNCT}{_QUOTES}\\p{{So}}]"

SPACY_ABBREVIATIONS: tuple[str, ...] = (
    "Adm", "Ak", "Ala", "Apr", "Ariz", "Ark", "Aug", "Bros", "Calif", "Co", "Colo", "Conn", "Corp", "Dec",
    "Del", "Dr", "Feb", "Fla", "Ga", "Gen", "Gov", "Ia", "Id", "Ill", "Inc", "Ind", "Jan", "Jr", "Jul", "Jun",
    "Kan", "Kans", "Ky", "La", "Ltd", "Mar", "Mass", "Md", "Messrs", "Mich", "Minn", "Miss", "Mo", "Mont",
    "Mr", "Mrs", "Ms", "Mt", "Neb", "Nebr", "Nev", "Nov", "Oct", "Okla", "Ore", "Pa", "Ph.D", "Prof", "Rep",
    "Rev", "Sen", "Sep", "Sept", "St", "Tenn", "Va", "Wash", "Wis", "co", "vs", "v.s", "a.m", "p.m", "e.g",
    "i.e", "E.g", "I.e",
)
"""Words that keep their final ``.`` (spaCy 3 English tokenizer exceptions ending in ``.``; words of
letters and dots such as ``U.S.``, ``a.m.`` or ``J.C.`` keep it by the rules in :func:`tokenize_spacing`; unlike
spaCy, a single lower-case letter (``x.``) loses it, and an abbreviation followed by more dots keeps one)."""

# 1. abbreviations and initials ("U.S.", "G."; spaCy splits a final "." after a lower-case letter, digit or
#    two capitals, not after one capital): their final "." becomes U+E000 (a private-use character, neither punctuation nor a
#    letter) so the suffix rule leaves it attached; words are only counted and compared, never output.
_ABBREV_RX = (
    f"(^|\\s|[(\\[{{\"\u201c\u2018\u00ab])({'|'.join(re.escape(a) for a in SPACY_ABBREVIATIONS)}|(?:\\p{{L}}\\.)+\\p{{Ll}}|(?:\\p{{L}}\\.)*\\p{{Lu}})\\."
)
# 2. infixes: hyphens, dashes and : < > = / between a letter or digit and a letter; URLs stay whole.
_INFIX_RX = r"(\S*://\S*|www\.\S+)|([\pL\pN])([-/:<>=\x{2013}\x{2014}])(\pL)"
# 3. prefixes: a run of prefix characters (or dots) at the start of a piece.
_PREFIX_RX = f"(^|\\s)((?:{_PREFIX}|\\.\\.+)+)"
# 4. suffixes: a run of suffix characters or dots at the end of a piece (the protected "." of step 1 is
#    neither); one alternation without a leading class, which keeps RE2 on its fast path (4x faster).
_SUFFIX_RX = f"(\\.(?:{_SUFFIX}|\\.)*)(\\s|$)|({_SUFFIX}(?:{_SUFFIX}|\\.)*)(\\s|$)"
_SUFFIX_REPL = r" \1\3\2\4"
# 5. clitics, once trailing punctuation is apart: 's n't 'm 're 've 'd 'll (spaCy suffix "'s" and the
#    English exceptions such as "don't" -> "do" "n't").
_CLITIC_RX = "(n['\u2019]t|N['\u2019]T|['\u2019](?:[sSmMdD]|re|RE|ve|VE|ll|LL))(\\s|$)"


def tokenize_spacing(texts: pa.Array) -> pa.Array:
    """The texts with spaces added so that splitting on whitespace gives words (see the module doc).

    Approximates spaCy 3's English tokenizer, which datatrove's Gopher and FineWeb filters use to count
    words, with five RE2 passes over the batch: prefix punctuation, quotes, brackets and currency split
    off the start of a piece; suffix punctuation and the clitics ``'s n't 'm 're 've 'd 'll`` off its
    end; ``.`` at the end only after a lower-case letter, digit or two capitals, and never after the
    abbreviations of :data:`SPACY_ABBREVIATIONS` or in initials; hyphens, ``/``, ``:`` between a letter
    or digit and a letter; URLs stay whole. A run of split-off punctuation stays one piece here (spaCy
    makes one token per character): :func:`parse` counts its characters as words instead.

    >>> tokenize_spacing(pa.array(["(Hi), Mr. Lee's 3.5 km-long walk..."])).to_pylist()[0].split()
    ['(', 'Hi', '),', 'Mr\\ue000', 'Lee', "'s", '3.5', 'km', '-', 'long', 'walk', '...']
    """
    out = pc.replace_substring_regex(texts, _ABBREV_RX, "\\1\\2\ue000")
    out = pc.replace_substring_regex(out, _INFIX_RX, r"\1\2 \3 \4")
    out = pc.replace_substring_regex(out, _PREFIX_RX, r"\1\2 ")
    out = pc.replace_substring_regex(out, _SUFFIX_RX, _SUFFIX_REPL)
    return pc.replace_substring_regex(out, _CLITIC_RX, r" \1\2")


@dataclass
class Parsed:
    """A batch split once into lines, paragraphs and words, shared by every signal family.

    Attributes:
        n: documents in the batch.
        n_chars: int64[n], characters (code points) per text.
        n_newlines: int64[n], ``\\n`` characters per text.
        lines: flat non-blank lines (string), their document index ``line_doc`` (int64), their stripped
            form ``lines_stripped`` and lengths ``line_chars`` (raw) / ``line_stripped_chars``.
        paras / para_doc / para_chars: flat non-blank paragraphs (stripped), their document, length.
        words / word_doc / word_chars: flat words (see module doc), document index, length; ``word_ids``
            int64 ids equal iff the words are equal (dictionary encoding over the batch), indices into
            ``word_dict`` (string, the batch's distinct words).
        symbol_words / symbol_chars / alpha_words: int64[n], words made only of punctuation or symbols,
            their characters, and words holding a letter (``\\pL``), per document.
        n_tokens: int64[n], words counted as spaCy counts them: a symbol word counts one per character
            (a run of dots, an ellipsis, counts once), other words once.
    """

    n: int
    texts: pa.Array
    n_chars: np.ndarray
    n_newlines: np.ndarray
    lines: pa.Array
    lines_stripped: pa.Array
    line_doc: np.ndarray
    line_chars: np.ndarray
    line_stripped_chars: np.ndarray
    paras: pa.Array
    para_doc: np.ndarray
    para_chars: np.ndarray
    words: pa.Array
    word_doc: np.ndarray
    word_chars: np.ndarray
    word_ids: np.ndarray
    word_dict: pa.Array
    symbol_words: np.ndarray
    n_tokens: np.ndarray
    symbol_chars: np.ndarray
    alpha_words: np.ndarray


def parse(texts: pa.Array | pa.ChunkedArray) -> Parsed:
    """Split a batch of texts into lines, paragraphs and words (see the module docstring).

    Args:
        texts: string array of ``n`` documents; nulls read as empty text.

    Returns:
        A :class:`Parsed` batch.

    Raises:
        TypeError: ``texts`` is not a string array.
    """
    texts = _as_text(texts)
    n = len(texts)
    n_chars = _np(pc.utf8_length(texts), np.int64)
    n_newlines = _np(pc.count_substring(texts, "\n"), np.int64)

    all_lines = pc.split_pattern(texts, "\n")
    flat = pc.list_flatten(all_lines)
    parent = _np(pc.list_parent_indices(all_lines), np.int64)
    stripped = pc.utf8_trim_whitespace(flat)
    stripped_chars = _np(pc.utf8_length(stripped), np.int64)
    keep = stripped_chars > 0
    keep_arr = pa.array(keep)
    lines = pc.filter(flat, keep_arr)
    lines_stripped = pc.filter(stripped, keep_arr)

    # Paragraphs: split on runs of blank lines (\n followed by a whitespace-only line).
    para_lists = pc.split_pattern_regex(texts, r"\n[ \t\f\v]*\n(?:[ \t\f\v]*\n)*")
    paras = pc.utf8_trim_whitespace(pc.list_flatten(para_lists))
    para_doc = _np(pc.list_parent_indices(para_lists), np.int64)
    para_chars = _np(pc.utf8_length(paras), np.int64)
    pkeep = para_chars > 0

    spaced = tokenize_spacing(texts)
    word_lists = pc.utf8_split_whitespace(spaced)
    words = pc.list_flatten(word_lists)
    word_doc = _np(pc.list_parent_indices(word_lists), np.int64)
    word_chars = _np(pc.utf8_length(words), np.int64)
    if (word_chars == 0).any():  # utf8_split_whitespace yields one "" for an empty text
        nonempty = word_chars > 0
        words, word_doc, word_chars = pc.filter(words, pa.array(nonempty)), word_doc[nonempty], word_chars[nonempty]
    encoded = pc.dictionary_encode(words)
    word_ids = _np(encoded.indices, np.int64)
    word_dict = encoded.dictionary
    # Per-word properties are computed once per distinct word of the batch (a few times fewer regex
    # calls than words) and gathered back through the ids.
    symbol = _np(pc.match_substring_regex(word_dict, r"^[\p{P}\p{S}]+$"), bool)[word_ids]
    alpha = _np(pc.match_substring_regex(word_dict, r"\pL"), bool)[word_ids]
    symbol_words = _per_doc(word_doc[symbol], n).astype(np.int64)
    sym_idx = np.flatnonzero(symbol)
    sym_tokens = _np(pc.utf8_length(pc.replace_substring_regex(words.take(pa.array(sym_idx)), r"\.\.+", "."))) if len(sym_idx) else sym_idx
    n_tokens = _per_doc(word_doc, n).astype(np.int64) - symbol_words + _per_doc(word_doc[sym_idx], n, sym_tokens).astype(np.int64)
    symbol_chars = _per_doc(word_doc[symbol], n, word_chars[symbol]).astype(np.int64)
    alpha_words = _per_doc(word_doc[alpha], n).astype(np.int64)
    return Parsed(
        n=n, texts=texts, n_chars=n_chars, n_newlines=n_newlines,
        lines=lines, lines_stripped=lines_stripped, line_doc=parent[keep],
        line_chars=_np(pc.utf8_length(lines), np.int64), line_stripped_chars=stripped_chars[keep],
        paras=pc.filter(paras, pa.array(pkeep)), para_doc=para_doc[pkeep], para_chars=para_chars[pkeep],
        words=words, word_doc=word_doc, word_chars=word_chars, word_ids=word_ids, word_dict=word_dict,
        symbol_words=symbol_words, n_tokens=n_tokens, symbol_chars=symbol_chars, alpha_words=alpha_words,
    )


def _struct(fields: dict[str, np.ndarray], types: dict[str, pa.DataType]) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(v, type=types[k]) for k, v in fields.items()], names=list(fields))


# ------------------------------------------------------------------------------------ Gopher quality
GOPHER_QUALITY_TYPE = pa.struct([
    ("word_count", pa.int64()),
    ("mean_word_length", pa.float64()),
    ("hash_word_ratio", pa.float64()),
    ("ellipsis_word_ratio", pa.float64()),
    ("bullet_lines_ratio", pa.float64()),
    ("ellipsis_lines_ratio", pa.float64()),
    ("alpha_words_ratio", pa.float64()),
    ("stop_words", pa.int64()),
])


def gopher_quality(p: Parsed) -> pa.StructArray:
    """Gopher quality-filter signals (Rae et al. 2021, A.1.1; datatrove ``GopherQualityFilter``).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.

    Returns:
        StructArray[n] of :data:`GOPHER_QUALITY_TYPE`:
        ``word_count`` int64, non-symbol words (paper range 50..100,000);
        ``mean_word_length`` float64, characters per non-symbol word, 0.0 without words (paper 3..10);
        ``hash_word_ratio`` / ``ellipsis_word_ratio`` float64, ``#`` resp. ``...``/``…`` occurrences per
        word, all words counted as datatrove does (paper <= 0.1);
        ``bullet_lines_ratio`` / ``ellipsis_lines_ratio`` float64, fraction of non-blank lines starting
        with a bullet (:data:`BULLETS`) resp. ending with ``...``/``…`` (paper <= 0.9 / <= 0.3);
        ``alpha_words_ratio`` float64, words holding an alphabetic character / words (paper >= 0.8);
        ``stop_words`` int64, distinct :data:`STOP_WORDS` present, case-insensitive (paper >= 2).
        Ratios are 0.0 when their denominator is 0.
    """
    n = p.n
    n_words = p.n_tokens
    word_count = _per_doc(p.word_doc, n).astype(np.int64) - p.symbol_words
    word_len = _per_doc(p.word_doc, n, p.word_chars) - p.symbol_chars
    hashes = _np(pc.count_substring(p.texts, "#"), np.int64)
    ellipses = _np(pc.count_substring(p.texts, "..."), np.int64) + _np(pc.count_substring(p.texts, "…"), np.int64)

    n_lines = _per_doc(p.line_doc, n)
    bullet = _np(pc.is_in(pc.utf8_slice_codeunits(p.lines_stripped, 0, 1), value_set=pa.array(list(BULLETS))), bool)
    ell_end = _np(pc.or_(pc.ends_with(p.lines_stripped, "..."), pc.ends_with(p.lines_stripped, "…")), bool)

    # Stop-word index of each distinct word (-1: none), gathered back to every word.
    stop_of_dict = _np(pc.fill_null(pc.index_in(pc.utf8_lower(p.word_dict), value_set=pa.array(STOP_WORDS)), -1), np.int64)
    stop_idx = stop_of_dict[p.word_ids]
    hit = stop_idx >= 0
    pairs = p.word_doc[hit] * len(STOP_WORDS) + stop_idx[hit]
    stop_words = _per_doc(np.unique(pairs) // len(STOP_WORDS), n).astype(np.int64)
    return _struct(
        {
            "word_count": word_count,
            "mean_word_length": _ratio(word_len, word_count),
            "hash_word_ratio": _ratio(hashes, n_words),
            "ellipsis_word_ratio": _ratio(ellipses, n_words),
            "bullet_lines_ratio": _ratio(_per_doc(p.line_doc[bullet], n), n_lines),
            "ellipsis_lines_ratio": _ratio(_per_doc(p.line_doc[ell_end], n), n_lines),
            "alpha_words_ratio": _ratio(p.alpha_words, n_words),
            "stop_words": stop_words,
        },
        {f.name: f.type for f in GOPHER_QUALITY_TYPE},
    )


# --------------------------------------------------------------------------------- Gopher repetition
GOPHER_REPETITION_TYPE = pa.struct(
    [
        ("dup_line_frac", pa.float64()),
        ("dup_line_char_frac", pa.float64()),
        ("dup_para_frac", pa.float64()),
        ("dup_para_char_frac", pa.float64()),
    ]
    + [(f"top_{k}gram_char_frac", pa.float64()) for k in GOPHER_REPETITION_TOP_N]
    + [(f"dup_{k}gram_char_frac", pa.float64()) for k in GOPHER_REPETITION_DUP_N]
)


def _duplicates(doc: np.ndarray, values: pa.Array, chars: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: number and characters of elements equal to an earlier element of the same document."""
    ids = _np(pc.dictionary_encode(values).indices, np.int64) if len(values) else np.zeros(0, np.int64)
    dup = _not_first(ids * np.int64(n) + doc)
    return _per_doc(doc[dup], n), _per_doc(doc[dup], n, chars[dup])


def gopher_repetition(p: Parsed) -> pa.StructArray:
    """Gopher repetition signals (Rae et al. 2021, A.1.1 and table A1; datatrove ``GopherRepetitionFilter``).

    Character fractions are over all characters of the text (``len(text)``, as datatrove). Word n-grams
    are compared through a 64-bit hash of their word ids (collision odds ~ k^2/2^64 for k n-grams).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.

    Returns:
        StructArray[n] of :data:`GOPHER_REPETITION_TYPE`, all float64 in [0, 1], 0.0 for empty text:
        ``dup_line_frac`` / ``dup_para_frac``: non-blank lines (paragraphs) equal to an earlier one, over
        all lines (paragraphs) (paper <= 0.30 / 0.30); ``dup_line_char_frac`` / ``dup_para_char_frac``:
        their characters (paper <= 0.20 / 0.20); ``top_{2,3,4}gram_char_frac``: characters of the most
        frequent word n-gram (joined by one space) times its count (ties: the earliest), as in the paper
        and datatrove (paper <= 0.20 / 0.18 / 0.16); ``dup_{5..10}gram_char_frac``: characters (spaces
        excluded) of the words covered by occurrences of a word n-gram after its first, each word
        counted once (paper: "taking care not to count characters that occur in overlapping n-grams more
        than once"; datatrove's greedy scan instead jumps n words after each duplicate, which can miss
        overlapping ones) (paper <= 0.15 .. 0.10).
    """
    n = p.n
    out: dict[str, np.ndarray] = {}
    n_lines = _per_doc(p.line_doc, n)
    line_dups, line_dup_chars = _duplicates(p.line_doc, p.lines, p.line_chars, n)
    para_dups, para_dup_chars = _duplicates(p.para_doc, p.paras, p.para_chars, n)
    out["dup_line_frac"] = _ratio(line_dups, n_lines)
    out["dup_line_char_frac"] = _ratio(line_dup_chars, p.n_chars)
    out["dup_para_frac"] = _ratio(para_dups, _per_doc(p.para_doc, n))
    out["dup_para_char_frac"] = _ratio(para_dup_chars, p.n_chars)

    n_words = len(p.word_ids)
    cum = np.concatenate([[0], np.cumsum(p.word_chars)])
    doc = p.word_doc
    h = _splitmix64(p.word_ids)
    acc = h
    dup_prev = np.ones(n_words, dtype=bool)
    for k in range(2, max(GOPHER_REPETITION_DUP_N) + 1):
        # acc[i] = hash of words i..i+k-1; an n-gram occurs twice only if both its (k-1)-gram prefix
        # and suffix do, so only those starts are counted (exact pruning, most starts drop out)
        acc = (acc[:-1] * np.uint64(0x100000001B3)) ^ h[k - 1 :]
        m = len(acc)
        valid = doc[:m] == doc[k - 1 :]
        cand = np.flatnonzero(valid & dup_prev[:m] & dup_prev[1 : m + 1])
        keys = acc[cand] * _MIX + doc[cand].astype(np.uint64)
        rep = _repeated(keys)
        dup_starts = cand[rep]
        dup_prev = np.zeros(m, dtype=bool)
        dup_prev[dup_starts] = True
        if k in GOPHER_REPETITION_TOP_N:
            top = np.zeros(n)
            # a document without a repeated k-gram: its most frequent k-gram is its first, once
            vs = np.flatnonzero(valid)
            first = vs[np.r_[True, doc[vs][1:] != doc[vs][:-1]]] if len(vs) else vs
            top[doc[first]] = cum[first + k] - cum[first] + (k - 1)
            if len(dup_starts):
                _, fidx, counts = np.unique(keys[rep], return_index=True, return_counts=True)
                fpos = dup_starts[fidx]
                dpos = doc[fpos]
                order = np.lexsort((fpos, -counts, dpos))
                best = order[np.r_[True, dpos[order][1:] != dpos[order][:-1]]]
                chars = cum[fpos[best] + k] - cum[fpos[best]] + (k - 1)
                top[dpos[best]] = chars * counts[best]
            out[f"top_{k}gram_char_frac"] = _ratio(top, p.n_chars)
        if k in GOPHER_REPETITION_DUP_N:
            covered_chars = np.zeros(n)
            if len(dup_starts):
                # the duplicates are the occurrences after the first (as datatrove counts them)
                later = dup_starts[_not_first(keys[rep])]
                delta = np.bincount(later, minlength=n_words + k + 1)
                delta[k:] -= np.bincount(later, minlength=n_words + 1)[: len(delta) - k]
                covered = np.cumsum(delta)[:n_words] > 0
                covered_chars = _per_doc(doc[covered], n, p.word_chars[covered])
            out[f"dup_{k}gram_char_frac"] = _ratio(covered_chars, p.n_chars)
    return _struct(out, {f.name: f.type for f in GOPHER_REPETITION_TYPE})


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


# ----------------------------------------------------------------------------------------- FineWeb
FINEWEB_TYPE = pa.struct([
    ("line_punct_ratio", pa.float64()),
    ("short_line_ratio", pa.float64()),
    ("char_dup_ratio", pa.float64()),
    ("newline_ratio", pa.float64()),
])


def fineweb(p: Parsed) -> pa.StructArray:
    """FineWeb quality signals (Penedo et al. 2024, section 3.3; datatrove ``FineWebQualityFilter``).

    Args:
        p: a :func:`parse`-d batch of ``n`` texts.

    Returns:
        StructArray[n] of :data:`FINEWEB_TYPE`, float64:
        ``line_punct_ratio``: non-blank lines whose last character (unstripped, as datatrove) is terminal
        punctuation of any script, over non-blank lines (paper >= 0.12);
        ``short_line_ratio``: non-blank lines of <= :data:`FINEWEB_SHORT_LINE_CHARS` characters, over
        non-blank lines (paper <= 0.67);
        ``char_dup_ratio``: characters of non-blank lines equal to an earlier line, over the characters
        of the text without ``\\n`` (paper <= 0.01);
        ``newline_ratio``: ``\\n`` characters per word (paper <= 0.3; +inf with newlines but no words).
        With no non-blank line every field is 0.0.
    """
    n = p.n
    n_lines = _per_doc(p.line_doc, n)
    punct = _np(pc.match_substring_regex(pc.utf8_slice_codeunits(p.lines, -1), _TERMINAL_CLASS), bool)
    short = p.line_chars <= FINEWEB_SHORT_LINE_CHARS
    _, dup_chars = _duplicates(p.line_doc, p.lines, p.line_chars, n)
    n_words = p.n_tokens
    newline = _ratio(p.n_newlines, n_words)
    newline[(n_words == 0) & (p.n_newlines > 0)] = np.inf
    return _struct(
        {
            "line_punct_ratio": _ratio(_per_doc(p.line_doc[punct], n), n_lines),
            "short_line_ratio": _ratio(_per_doc(p.line_doc[short], n), n_lines),
            "char_dup_ratio": _ratio(dup_chars, p.n_chars - p.n_newlines),
            "newline_ratio": newline,
        },
        {f.name: f.type for f in FINEWEB_TYPE},
    )


# --------------------------------------------------------------------------------------------- all
FAMILIES = {
    "gopher_quality": (gopher_quality, GOPHER_QUALITY_TYPE),
    "gopher_repetition": (gopher_repetition, GOPHER_REPETITION_TYPE),
    "c4": (c4, C4_TYPE),
    "fineweb": (fineweb, FINEWEB_TYPE),
}
"""Signal family name -> (function of a :class:`Parsed` batch, its Arrow struct type)."""

SIGNALS_TYPE = pa.struct([(name, t) for name, (_, t) in FAMILIES.items()])


def quality_signals(texts: pa.Array | pa.ChunkedArray, families: tuple[str, ...] | None = None) -> pa.StructArray:
    """All heuristic signal families for a batch of texts, parsing the batch once.

    Args:
        texts: string array of ``n`` documents (nulls read as empty text).
        families: names from :data:`FAMILIES` to compute (default all); others come back as nulls.

    Returns:
        StructArray[n] of :data:`SIGNALS_TYPE`: one struct field per family.

    Raises:
        TypeError: ``texts`` is not a string array.
        ValueError: an unknown family name (lists the allowed ones).
    """
    wanted = tuple(FAMILIES) if families is None else families
    unknown = sorted(set(wanted) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown signal families {unknown}; allowed: {list(FAMILIES)}")
    p = parse(texts)
    cols = []
    for name, (fn, t) in FAMILIES.items():
        cols.append(fn(p) if name in wanted else pa.nulls(p.n, type=t))
    return pa.StructArray.from_arrays(cols, fields=list(SIGNALS_TYPE))
