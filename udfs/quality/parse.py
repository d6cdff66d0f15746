"""What every quality rule family shares: the batch split once into lines, paragraphs and words
(:class:`Parsed`, :func:`parse`), the word tokenizer (:func:`tokenize_spacing`) and the numpy helpers
that aggregate back per document (see :mod:`udfs.quality` for the definitions).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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
    """Per document: count of ``parent`` entries (int64[n]) or sum of their ``weights`` (float64[n]).

    ``parent`` (document index per element) is almost always ascending here (elements in text order):
    then one ``add.reduceat`` over the runs, 10x cheaper than ``bincount`` with weights.
    """
    if len(parent) < 2 or not (parent[1:] >= parent[:-1]).all():
        return np.bincount(parent, weights=weights, minlength=n)[:n]
    bounds = np.searchsorted(parent, np.arange(n + 1))
    if weights is None:
        return np.diff(bounds)
    out = np.zeros(n, np.float64)
    filled = bounds[1:] > bounds[:-1]
    out[filled] = np.add.reduceat(np.asarray(weights, np.float64), bounds[:-1][filled])
    return out


def _per_doc_rows(parent: np.ndarray, n: int, table: np.ndarray, ids: np.ndarray, op: np.ufunc = np.add) -> np.ndarray:
    """Per document, ``op`` (default: the sum) of ``table[:, ids]`` over its elements ([k, n], table's dtype).

    Args:
        parent: int64, the document of each element, ascending.
        n: documents.
        table: [k, m], ``k`` values of each of ``m`` distinct items.
        ids: int64, the distinct item of each element (as long as ``parent``).
        op: a reducing ufunc (``np.add``, ``np.bitwise_or``); 0 for a document without elements.
    """
    out = np.zeros((len(table), n), table.dtype)
    bounds = np.searchsorted(parent, np.arange(n + 1))
    filled = bounds[1:] > bounds[:-1]
    if filled.any():
        starts = bounds[:-1][filled]
        for row, values in zip(out, table, strict=True):
            row[filled] = op.reduceat(values[ids], starts)
    return out


def _utf8(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int64[len + 1], from 0) and UTF-8 bytes (uint8) of a string array, without a copy of the bytes."""
    wide = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return off - off[0], data[off[0] : off[-1]]


def _byte_rows(arr: pa.Array, byte: int) -> np.ndarray:
    """int64, the row of every occurrence of an ASCII byte in a string array (ascending, repeated per occurrence).

    An ASCII byte never occurs inside a multi-byte UTF-8 character, so this is a character search; one
    numpy comparison over the bytes costs a third of Arrow's substring kernel for a single character.
    """
    off, data = _utf8(arr)
    return np.searchsorted(off, np.flatnonzero(data == byte), side="right") - 1


def _holding(arr: pa.Array, byte: int) -> np.ndarray:
    """bool[len]: the string holds the ASCII byte (see :func:`_byte_rows`)."""
    out = np.zeros(len(arr), dtype=bool)
    out[_byte_rows(arr, byte)] = True
    return out


def _last_bytes(arr: pa.Array, k: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8[len, k], the last ``k`` bytes of each string (0 where it is shorter), and int64[len] byte lengths."""
    return _edge_bytes(arr, k, end=True), np.diff(_utf8(arr)[0])


def _edge_bytes(arr: pa.Array, k: int, end: bool) -> np.ndarray:
    """uint8[len, k]: the first (``end=False``) or last ``k`` bytes of each string, right- resp.
    left-aligned, 0 where the string is shorter."""
    off, data = _utf8(arr)
    size = np.diff(off)
    out = np.zeros((len(arr), k), np.uint8)
    for j in range(k):
        has = size >= (k - j if end else j + 1)
        out[has, j] = data[off[1:][has] - (k - j)] if end else data[off[:-1][has] + j]
    return out


def _edge_in(arr: pa.Array, strings: list[str], end: bool) -> np.ndarray:
    """bool[len]: the string starts (``end=False``) or ends with one of ``strings`` (compared on the UTF-8
    bytes: the edge bytes of each length packed into one integer, looked up among the strings' own).

    Raises:
        ValueError: a string of more than 7 UTF-8 bytes.
    """
    encoded = [x.encode() for x in strings]
    off, data = _utf8(arr)
    size = np.diff(off)
    out = np.zeros(len(arr), dtype=bool)
    for k in sorted({len(b) for b in encoded if b}):
        if k > 7:
            raise ValueError(f"edge strings of at most 7 UTF-8 bytes; got {k}")
        rows = np.flatnonzero(size >= k)
        at = off[1:][rows] - k if end else off[:-1][rows]
        key = np.zeros(len(rows), np.int64)
        for j in range(k):
            key = (key << 8) | data[at + j]
        out[rows] |= np.isin(key, [int.from_bytes(b, "big") for b in encoded if len(b) == k])
    if b"" in encoded:
        out[:] = True
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = num.astype(np.float64)
    den = den.astype(np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _not_first(keys: np.ndarray) -> np.ndarray:
    """Boolean mask: True where ``keys[i]`` equals a key at an earlier index."""
    out = np.zeros(len(keys), dtype=bool)
    if len(keys) < 2:
        return out
    pbits = (len(keys) - 1).bit_length()
    if keys.min() >= 0 and int(keys.max()).bit_length() + pbits <= 63:
        # (key, position) packed into one int64: a plain sort gives the stable order
        packed = np.sort((keys.astype(np.int64) << pbits) | np.arange(len(keys), dtype=np.int64))
        sk, order = packed >> pbits, packed & ((1 << pbits) - 1)
    else:
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
#    Read piece by piece (:func:`_tokenize_joined`): a piece holding "://" is all one URL match (it only
#    gains trailing spaces), so the rule is skipped for it; on a piece holding neither "://" nor "www."
#    the URL branch never matches, so the infix branch runs alone (the branch's leading \S* made the
#    pass 2.5x dearer).
_INFIX_PLAIN_RX = r"([\pL\pN])([-/:<>=\x{2013}\x{2014}])(\pL)"
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
    return _tokenize_steps(texts, np.full(len(texts), _FULL, np.int8), np.ones(len(texts), dtype=bool))


_PLAIN, _FULL, _URL = 0, 1, 2
"""Which infix rule a text of :func:`_tokenize_steps` gets: the infix branch alone (no URL mark in it),
the whole rule, none (a piece holding ``://``)."""


def _on(texts: pa.Array, rows: np.ndarray, rx: str, repl: str) -> pa.Array:
    """The regex replacement on the texts flagged in ``rows`` (bool[len]), the others as they are."""
    if rows.all():
        return pc.replace_substring_regex(texts, rx, repl)
    if not rows.any():
        return texts
    mask = pa.array(rows)
    return pc.replace_with_mask(texts, mask, pc.replace_substring_regex(texts.filter(mask), rx, repl))


def _tokenize_steps(texts: pa.Array, infix: np.ndarray, dots: np.ndarray) -> pa.Array:
    """:func:`tokenize_spacing` with the infix rule chosen per text by ``infix`` (int8[len]:
    :data:`_PLAIN`, :data:`_FULL` or :data:`_URL`; see :data:`_INFIX_PLAIN_RX`) and the abbreviation
    rule only on the texts flagged in ``dots`` (bool[len]; each of its matches holds a ``.``)."""
    out = _on(texts, dots, _ABBREV_RX, "\\1\\2\ue000")
    out = _on(out, infix == _PLAIN, _INFIX_PLAIN_RX, r"\1 \2 \3")
    out = _on(out, infix == _FULL, _INFIX_RX, r"\1\2 \3 \4")
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
        word_doc / word_chars: int64 per word of the batch in text order (see module doc): its document
            and length; ``word_ids`` int64 ids equal iff the words are equal, indices into ``word_dict``
            (string, the batch's distinct words).
        symbol_words / symbol_chars / alpha_words: int64[n], words made only of punctuation or symbols,
            their characters, and words holding a letter (``\\pL``), per document.
        n_tokens: int64[n], words counted as spaCy counts them: a symbol word counts one per character
            (a run of dots, an ellipsis, counts once), other words once.
        ws_words / ws_alpha_words: int64[n], whitespace-separated words (Unicode whitespace, no
            punctuation split off) and those holding a letter, per document (Gopher's paper reading).
        line_pieces / line_longest_piece: int64 per line, runs of characters other than ASCII
            whitespace in its stripped form (a vertical tab separates runs), and the characters of its
            longest run before stripping (C4's words per line and longest word).
        words / word_char_sum: int64[n], words and their characters per document.
        piece_ids / piece_doc: int64 per whitespace-separated piece of the batch (text order): its
            distinct piece and document; ``tok_word`` int64, the word id of each word of each distinct
            piece (pieces in order), ``tok_start`` int64[distinct pieces + 1], each piece's first one.
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
    word_doc: np.ndarray
    word_chars: np.ndarray
    word_ids: np.ndarray
    word_dict: pa.Array
    symbol_words: np.ndarray
    n_tokens: np.ndarray
    symbol_chars: np.ndarray
    alpha_words: np.ndarray
    ws_words: np.ndarray
    ws_alpha_words: np.ndarray
    line_pieces: np.ndarray
    line_longest_piece: np.ndarray
    words: np.ndarray
    word_char_sum: np.ndarray
    piece_ids: np.ndarray
    piece_doc: np.ndarray
    tok_word: np.ndarray
    tok_start: np.ndarray

    def words_any(self, word_bits: np.ndarray) -> np.ndarray:
        """Per document, the bitwise OR of ``word_bits`` (uint8[len(word_dict)], one value per distinct
        word) over its words: uint8[n] (computed per distinct piece, then over the pieces' occurrences)."""
        out = np.zeros(self.n, np.uint8)
        if not len(self.tok_word):
            return out
        piece_bits = np.zeros(len(self.tok_start) - 1, np.uint8)
        has = self.tok_start[:-1] < self.tok_start[1:]
        piece_bits[has] = np.bitwise_or.reduceat(word_bits[self.tok_word], self.tok_start[:-1][has])
        return _per_doc_rows(self.piece_doc, self.n, piece_bits[None, :], self.piece_ids, np.bitwise_or)[0]

    @functools.cached_property
    def line_duplicates(self) -> tuple[np.ndarray, np.ndarray]:
        """Per document: lines equal to an earlier line of it, and their characters (int64[n] / float64[n];
        Gopher repetition and FineWeb both read them)."""
        return _duplicates(self.line_doc, self.lines, self.line_chars, self.n)


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

    all_lines = pc.split_pattern(texts, "\n")
    n_newlines = _np(pc.list_value_length(all_lines), np.int64) - 1
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

    line_doc = parent[keep]
    w = _words(lines, line_doc, n)
    return Parsed(
        n=n, texts=texts, n_chars=n_chars, n_newlines=n_newlines,
        lines=lines, lines_stripped=lines_stripped, line_doc=line_doc,
        line_chars=_np(pc.utf8_length(lines), np.int64), line_stripped_chars=stripped_chars[keep],
        paras=pc.filter(paras, pa.array(pkeep)), para_doc=para_doc[pkeep], para_chars=para_chars[pkeep],
        **w,
    )


def _expand(pos: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``concatenate([arange(p, p + s) for p, s in zip(pos, size)])`` without a Python loop."""
    total = int(size.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(size)
    return np.arange(total, dtype=np.int64) + np.repeat(pos - (ends - size), size)


_JOIN_PIECES = 1 << 16


def _tokenize_joined(pieces: pa.Array) -> pa.Array:
    """:func:`tokenize_spacing` of each piece (string without ASCII whitespace), computed on the pieces
    joined by ``\\n`` in strings of :data:`_JOIN_PIECES` pieces: RE2 then runs a few long scans instead
    of one call per piece (2x cheaper), and the rules, which match ``\\n`` as a piece's edge and keep
    it where they rewrite one, give every piece the words it gets alone."""
    # a piece of letters and digits only holds nothing any rule splits: it is one word as it is
    other = pc.invert(pc.utf8_is_alnum(pieces))
    rest = pieces.filter(other).cast(pa.string())
    m = len(rest)
    if m == 0:
        return pieces
    # pieces by infix rule (see _INFIX_PLAIN_RX) and by holding a "." (the abbreviation rule's mark),
    # each group in strings of its own
    kind = np.where(_np(pc.match_substring(rest, "www."), bool), _FULL, _PLAIN).astype(np.int8)
    kind[_np(pc.match_substring(rest, "://"), bool)] = _URL
    group = 2 * kind
    group[_byte_rows(rest, ord("."))] |= 1
    order = np.argsort(group, kind="stable")
    first = np.searchsorted(group[order], np.arange(2 * _URL + 3))
    bounds = np.unique(np.concatenate([np.arange(a, b, _JOIN_PIECES)
                                       for a, b in zip(first[:-1], first[1:], strict=True)] + [[m]]))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(bounds.astype(np.int32)), rest.take(pa.array(order))),
                            "\n")
    chunk = group[order][bounds[:-1]]
    spaced = pc.list_flatten(pc.split_pattern(_tokenize_steps(joined, chunk >> 1, (chunk & 1) == 1), "\n"))
    back = np.empty(m, np.int64)
    back[order] = np.arange(m)
    return pc.replace_with_mask(pieces.cast(pa.string()), other, spaced.take(pa.array(back)))


def _words(lines: pa.Array, line_doc: np.ndarray, n: int) -> dict[str, object]:
    """The word fields of :class:`Parsed` from the batch's non-blank lines.

    The lines are split once on ASCII whitespace into pieces; the batch's distinct pieces (a few times
    fewer than its pieces) are tokenized (:func:`tokenize_spacing`; its rules never look across ASCII
    whitespace, so a piece is tokenized as it would be inside its text) and split into words and into
    Unicode-whitespace words, and every occurrence of a piece gathers its words through its id. A
    vertical tab separates pieces here, while the regex rules read it as part of a piece (RE2's ``\\s``
    has no ``\\v``); nothing else differs from tokenizing each text whole.
    """
    piece_lists = pc.ascii_split_whitespace(lines)
    piece_line = _np(pc.list_parent_indices(piece_lists), np.int64)
    piece_doc = line_doc[piece_line]
    encoded = pc.dictionary_encode(pc.list_flatten(piece_lists))
    piece_ids = _np(encoded.indices, np.int64)
    pieces = encoded.dictionary
    # words of each distinct piece (a piece of Unicode whitespace only has none)
    tok_lists = pc.utf8_split_whitespace(_tokenize_joined(pieces))
    toks = pc.list_flatten(tok_lists)
    tok_piece = _np(pc.list_parent_indices(tok_lists), np.int64)
    tok_chars = _np(pc.utf8_length(toks), np.int64)
    real = tok_chars > 0
    if not real.all():
        toks, tok_piece, tok_chars = pc.filter(toks, pa.array(real)), tok_piece[real], tok_chars[real]
    tok_encoded = pc.dictionary_encode(toks)
    tok_word = _np(tok_encoded.indices, np.int64)
    word_dict = tok_encoded.dictionary
    per_piece = np.bincount(tok_piece, minlength=len(pieces)).astype(np.int64)
    first_tok = np.concatenate([[0], np.cumsum(per_piece)[:-1]]).astype(np.int64)
    size = per_piece[piece_ids]
    idx = _expand(first_tok[piece_ids], size)
    word_ids = tok_word[idx]
    word_doc = np.repeat(piece_doc, size)
    word_chars = tok_chars[idx]
    # Per-word properties are computed once per distinct word of the batch and gathered back through
    # the ids; a symbol word counts as many spaCy tokens as its characters, a run of dots once.
    symbol_of = _np(pc.match_substring_regex(word_dict, r"^[\p{P}\p{S}]+$"), bool)
    alpha_of = _np(pc.match_substring_regex(word_dict, r"\pL"), bool)
    tokens_of = np.ones(len(word_dict), np.int64)
    sym = np.flatnonzero(symbol_of)
    if len(sym):
        dots_as_one = pc.replace_substring_regex(word_dict.take(pa.array(sym)), r"\.\.+", ".")
        tokens_of[sym] = _np(pc.utf8_length(dots_as_one), np.int64)
    # whitespace words (Unicode whitespace, the paper's words) and those holding a letter, per piece
    ws_lists = pc.utf8_split_whitespace(pieces)
    ws = pc.list_flatten(ws_lists)
    ws_piece = _np(pc.list_parent_indices(ws_lists), np.int64)
    ws_real = _np(pc.utf8_length(ws), np.int64) > 0
    ws_alpha = _np(pc.match_substring_regex(ws, r"\pL"), bool) & ws_real
    ws_of = np.bincount(ws_piece[ws_real], minlength=len(pieces))
    # per-document counts: summed per distinct piece first (its tokens), then over the pieces' occurrences
    # (in document order: one add.reduceat per count over the occurrences, not the words)
    symbol = symbol_of[tok_word]
    piece_table = np.stack([
        np.bincount(tok_piece, symbol, minlength=len(pieces)),
        np.bincount(tok_piece, tokens_of[tok_word], minlength=len(pieces)),
        np.bincount(tok_piece, tok_chars * symbol, minlength=len(pieces)),
        np.bincount(tok_piece, alpha_of[tok_word], minlength=len(pieces)),
        ws_of, np.bincount(ws_piece[ws_alpha], minlength=len(pieces)),
        per_piece, np.bincount(tok_piece, tok_chars, minlength=len(pieces)),
    ]).astype(np.int64)
    doc_counts = _per_doc_rows(piece_doc, n, piece_table, piece_ids)
    # pieces of each stripped line: from its first to its last piece that is not all Unicode
    # whitespace (stripping removes those at the edges); the longest piece of each line
    # (pieces are in line order and every non-blank line has a solid piece)
    m = len(lines)
    solid = np.flatnonzero(ws_of[piece_ids] > 0)
    solid_line = piece_line[solid]
    first = solid[np.searchsorted(solid_line, np.arange(m), side="left")] if m else solid
    last = solid[np.searchsorted(solid_line, np.arange(m), side="right") - 1] if m else solid
    line_start = np.searchsorted(piece_line, np.arange(m), side="left")
    longest = np.maximum.reduceat(_np(pc.utf8_length(pieces), np.int64)[piece_ids], line_start) if m else solid
    return {
        "line_pieces": last - first + 1, "line_longest_piece": longest,
        "word_doc": word_doc, "word_chars": word_chars, "word_ids": word_ids, "word_dict": word_dict,
        **dict(zip(("symbol_words", "n_tokens", "symbol_chars", "alpha_words", "ws_words", "ws_alpha_words",
                    "words", "word_char_sum"), doc_counts, strict=True)),
        "piece_ids": piece_ids, "piece_doc": piece_doc, "tok_word": tok_word, "tok_start": np.r_[first_tok, len(tok_word)],
    }


def _struct(fields: dict[str, np.ndarray], types: dict[str, pa.DataType]) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(v, type=types[k]) for k, v in fields.items()], names=list(fields))


def _duplicates(doc: np.ndarray, values: pa.Array, chars: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: number and characters of elements equal to an earlier element of the same document."""
    ids = _np(pc.dictionary_encode(values).indices, np.int64) if len(values) else np.zeros(0, np.int64)
    dup = _not_first(ids * np.int64(n) + doc)
    return _per_doc(doc[dup], n), _per_doc(doc[dup], n, chars[dup])
