"""Passage-dedup kernels: paragraphs with code-point offsets, their exact keys and word n-gram hashes.

Pure functions over strings and Arrow batches, no Spark (the passages stage runs them per batch).

**Units** (``passages.unit``), all found on the *input* text; offsets are code points (Python ``str``
indices, Spark's ``length``), end exclusive, each unit trimmed of surrounding whitespace and never empty:

* ``line``: every line (text between ``\\n``), as dolma's paragraph dedup and DCLM's BFF split;
* ``blank_line``: runs of lines separated by one or more blank (whitespace-only) lines, the paragraphs
  of text extracted with blank lines between blocks;
* ``sentence``: each line cut after ``.``, ``!``, ``?`` or ``…`` followed by whitespace (datatrove's
  sentence dedup splits sentences; this is a tokenizer-free approximation).

**Exact key**: 128 bits, two XXH64 digests of the unit's UTF-8 text, or of its whitespace-collapsed
form (:func:`exact_key`). **Words and n-grams**: the normalised words and 64-bit word n-gram hashes of
:mod:`udfs.decontam` (NFKC, lowercase, every non-letter/mark/number a break), so case, punctuation and
spacing edits do not hide a repeat. A unit with fewer words than the n-gram size has one "n-gram": the
hash of all its words (BFF's rule for paragraphs between its minimum and maximum n-gram size).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from udfs.compiled import Kernels
from udfs.decontam import distinct_lists, ngram_windows, pair_order, whole_hashes, word_docs, word_hashes

KERNELS = Kernels("udfs.paragraphs_jit")
"""The compiled kernels (:mod:`udfs.paragraphs_jit`), loaded once a process has been handed
:data:`udfs.compiled.AFTER_BYTES` of text or n-gram lists (``compiled=True`` below; the same rows)."""

UNITS: tuple[str, ...] = ("line", "blank_line", "sentence")
"""Allowed values of ``passages.unit``."""

KEYS: tuple[str, ...] = ("text", "collapsed_whitespace")
"""Allowed values of ``passages.exact_key`` (the dedup stage's ``exact_key`` values)."""

_SEPARATORS = {"line": re.compile(r"\n"), "blank_line": re.compile(r"\n[^\S\n]*\n(?:[^\S\n]*\n)*")}
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+")

IDX_BITS = 23
"""Low bits of a unit id holding the unit's position in its document (:func:`unit_ids`): a document's
first 2**23 (8,388,608) units get ids; units after them are left alone (never cut, never "seen")."""
MAX_RANK = (1 << (63 - IDX_BITS)) - 1
"""Largest document rank a unit id can hold (2**40 - 1, about 1.1 trillion documents)."""
KEY_SEEDS = (0, 0x9E3779B97F4A7C15)
"""The two XXH64 seeds of an exact key (:func:`exact_key`): 0 and the golden ratio's 64-bit fraction
(any two distinct seeds give two differently keyed hashes)."""

PARAGRAPH_SCHEMA = pa.schema([
    ("doc_id", pa.string()), ("uid", pa.int64()), ("idx", pa.int32()),
    ("start", pa.int32()), ("end", pa.int32()),
    ("cut_end", pa.int32()), ("n_words", pa.int32()), ("key", pa.binary()), ("grams", pa.list_(pa.int64())),
])
"""Rows of :func:`paragraph_batch`: one per unit of at least ``min_words`` words."""


def _trimmed(text: str, a: int, b: int) -> tuple[int, int] | None:
    piece = text[a:b]
    stripped = piece.strip()
    if not stripped:
        return None
    lead = len(piece) - len(piece.lstrip())
    return a + lead, a + lead + len(stripped)


def _pieces(text: str, sep: re.Pattern[str], lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
    hi = len(text) if hi is None else hi
    out, pos = [], lo
    for m in sep.finditer(text, lo, hi):
        span = _trimmed(text, pos, m.start())
        if span:
            out.append(span)
        pos = m.end()
    span = _trimmed(text, pos, hi)
    if span:
        out.append(span)
    return out


def split(text: str | None, unit: str = "line") -> list[tuple[int, int]]:
    """The units of ``text``: trimmed, non-empty ``(start, end)`` code-point spans in text order.

    Args:
        text: a document (None and whitespace-only text have no units).
        unit: one of :data:`UNITS` (see the module doc).

    Returns:
        ``[(start, end), ...]``, end exclusive, ascending and disjoint.

    Raises:
        ValueError: ``unit`` is not one of :data:`UNITS`.

    >>> split("Hello there.\\n\\n  Cookie banner. \\nAgain")
    [(0, 12), (16, 30), (32, 37)]
    >>> split("Hello there.\\n\\n  Cookie banner. \\nAgain", "blank_line")
    [(0, 12), (16, 37)]
    >>> split("One. Two!  Three", "sentence")
    [(0, 4), (5, 9), (11, 16)]
    """
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} unknown; allowed: {list(UNITS)}")
    if not text:
        return []
    if unit == "sentence":
        return [s for a, b in _pieces(text, _SEPARATORS["line"]) for s in _pieces(text, _SENTENCE_END, a, b)]
    return _pieces(text, _SEPARATORS[unit])


MATH_SHARE = 0.5
"""A unit is mostly LaTeX when at least this share of its non-space characters is math or markup
(:func:`latex_share`): a judgement, half, so prose with inline ``$x$`` stays a unit."""

_DISPLAY_MATH = re.compile(
    r"\$\$.+?\$\$|\\\[.+?\\\]"
    r"|\\begin\{(equation|align|alignat|gather|multline|flalign|eqnarray|displaymath|math|split)(\*?)\}"
    r".+?\\end\{\1\2\}",
    re.DOTALL)
_LATEX_MARKUP = re.compile(r"\$[^$]+\$|\\\(.+?\\\)|\\[A-Za-z]+\*?|\\.|[{}^_&]")


def display_math(text: str) -> list[tuple[int, int]]:
    """Code-point spans of the display equations of ``text``: ``$$...$$``, ``\\[...\\]`` and the
    ``\\begin{...}...\\end{...}`` blocks of amsmath's and LaTeX's display environments (``equation``,
    ``align``, ``alignat``, ``gather``, ``multline``, ``flalign``, ``eqnarray``, ``displaymath``,
    ``math``, ``split``, starred or not).

    >>> display_math("Let\\n$$a+b$$\\nso \\\\begin{align*}x&=1\\\\end{align*}")
    [(4, 11), (15, 45)]
    """
    if "$$" not in text and "\\" not in text:
        return []
    return [m.span() for m in _DISPLAY_MATH.finditer(text)]


def latex_share(piece: str) -> float:
    """Share of the non-space characters of ``piece`` that are LaTeX: inside ``$...$`` or ``\\(...\\)``,
    a command (``\\frac``), an escaped character, or one of ``{ } ^ _ &``.

    >>> latex_share("\\\\frac{a}{b} = \\\\sum_i x_i^2")
    0.696
    >>> latex_share("The value $x$ is small.")
    0.158
    """
    total = sum(1 for c in piece if not c.isspace())
    if not total or ("\\" not in piece and "$" not in piece):
        return 0.0
    marked = sum(sum(1 for c in m.group() if not c.isspace()) for m in _LATEX_MARKUP.finditer(piece))
    return round(min(marked, total) / total, 3)


def math_units(text: str, spans: Sequence[tuple[int, int]]) -> list[bool]:
    """Per unit of ``text`` (``spans``, as :func:`split` gives them): True for display math, which the
    stage leaves alone: a unit overlapping a display equation (:func:`display_math`) or mostly LaTeX
    (:func:`latex_share` at least :data:`MATH_SHARE`). Repeated equations in papers (the same
    definition restated, ``\\begin{equation}`` lines) are content, not boilerplate.

    >>> text = "Intro words here now.\\n\\\\begin{equation}\\nE = mc^2\\n\\\\end{equation}\\nMore."
    >>> math_units(text, split(text))
    [False, True, True, True, False]
    """
    if "\\" not in text and "$" not in text:
        return [False] * len(spans)
    blocks = display_math(text)
    out = []
    for a, b in spans:
        inside = any(s < b and a < e for s, e in blocks)
        out.append(inside or latex_share(text[a:b]) >= MATH_SHARE)
    return out


def exact_key(piece: str, key: str = "collapsed_whitespace") -> bytes:
    """The 16-byte exact key of a unit's text (``key="text"``) or of its whitespace-collapsed form: the
    XXH64 digests (big-endian, ``xxhash.xxh64_digest``) of its UTF-8 with each seed of
    :data:`KEY_SEEDS`, one after the other.

    A fast, well-spread 128-bit hash, not a security measure: at 10^10 units the chance of any two
    distinct units sharing a key is ~10^20 / 2^129. XXH64 (Collet, the xxHash specification) passes
    SMHasher's tests and hashes at memory speed; MD5, the key before it, took twice its time in the
    paragraph kernel (bench/notes.md, "Passages: the exact key hashed with XXH64").

    >>> exact_key("a  b\\tc") == exact_key("a b c")
    True
    >>> exact_key("a b c", "text").hex()[:16] == xxhash.xxh64_hexdigest(b"a b c", seed=KEY_SEEDS[0])
    True
    """
    if key == "collapsed_whitespace":
        piece = " ".join(piece.split())  # str.split() splits on runs of whitespace, as \s+
    data = piece.encode("utf-8", "surrogatepass")
    return b"".join(xxhash.xxh64_digest(data, seed=seed) for seed in KEY_SEEDS)


def unit_ids(ranks: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Order-preserving 64-bit unit ids: ``rank << IDX_BITS | idx``.

    Args:
        ranks: int64, the rank of each unit's document in ``doc_id`` order (0-based, dense).
        idx: int, the unit's position among its document's units (< ``2**IDX_BITS``).

    Returns:
        int64 array, one id per unit: comparing ids compares ``(doc_id, idx)`` positions, so "the first
        occurrence" is the smallest id whatever the partitioning.

    >>> unit_ids(np.array([0, 0, 1]), np.array([0, 5, 0])).tolist()
    [0, 5, 8388608]
    """
    return (np.asarray(ranks, np.int64) << IDX_BITS) | np.asarray(idx, np.int64)


def paragraph_batch(
    doc_ids: Sequence[str | None] | None,
    texts: Sequence[str | None],
    unit: str,
    min_words: int,
    ngram_size: int,
    key: str = "collapsed_whitespace",
    grams: bool = True,
    ranks: Sequence[int] | None = None,
    exempt_math: bool = True,
    compiled: bool = True,
    distinct: bool = True,
) -> pa.RecordBatch:
    """Every unit of at least ``min_words`` words of a batch of documents, with its keys.

    Args:
        doc_ids: document ids, one per text (a sequence or an Arrow string array); None leaves the rows'
            ``doc_id`` null (a caller that drops it: :func:`units_and_blocks`).
        texts: documents (None = empty; a sequence or an Arrow string array, null = empty).
        unit: one of :data:`UNITS`.
        min_words: units with fewer normalised words are left out (never removed, never "seen").
        ngram_size: words per n-gram (BFF: 13).
        key: one of :data:`KEYS`, the exact key's normalisation.
        grams: compute ``grams`` (False: every list empty, for exact-only runs).
        ranks: each document's rank in ``doc_id`` order over the whole corpus (0 to :data:`MAX_RANK`);
            None: its position in this batch.
        exempt_math: leave display math alone (:func:`math_units`), as units below ``min_words``.
        compiled: run the numba kernel (:mod:`udfs.paragraphs_jit`, the same rows) once :data:`KERNELS`
            is loaded; False runs the Python/numpy reference below (also used for Arrow text that is not
            valid UTF-8, and before the kernels are loaded).
        distinct: False lets the compiled kernel leave each unit's ``grams`` in text order with its
            repeats (the reference form's distinct sorted lists are one such list): for
            :func:`units_and_blocks`, whose map step drops a unit's repeats in its own sort, where the
            per-unit sort was two thirds of the n-gram step's time.

    Returns:
        A batch of :data:`PARAGRAPH_SCHEMA`: ``uid`` int64 (:func:`unit_ids`), ``idx`` int32 (the
        unit's position among all units of its document, counting short ones), ``start``/``end``
        int32 (trimmed unit, code points),
        ``cut_end`` int32 (where the next unit starts, or the text's length: what removing the unit
        cuts, its trailing separator included), ``n_words`` int32, ``key`` binary(16) (:func:`exact_key`),
        ``grams`` list<int64> (distinct n-gram hashes, sorted, as signed 64-bit).

    Raises:
        ValueError: ``unit`` is not one of :data:`UNITS`; ``doc_ids``, ``texts`` or ``ranks`` differ in
            length.
    """
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} unknown; allowed: {list(UNITS)}")
    if compiled and (paragraphs_jit := KERNELS.after(_text_bytes(texts))) is not None:
        out = paragraphs_jit.paragraph_batch(doc_ids, texts, unit, min_words, ngram_size, key, grams, ranks,
                                             exempt_math, distinct)
        if out is not None:
            return out
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        texts = texts.to_pylist()
    if isinstance(doc_ids, pa.Array | pa.ChunkedArray):
        doc_ids = doc_ids.to_pylist()
    elif doc_ids is None:
        doc_ids = [None] * len(texts)
    rows: list[tuple[str | None, int, int, int, int, int]] = []
    pieces: list[str] = []
    exempt: list[bool] = []
    ranks = range(len(texts)) if ranks is None else ranks
    for doc_id, text, rank in zip(doc_ids, texts, ranks, strict=True):
        every = split(text, unit)
        spans = every[:1 << IDX_BITS]
        exempt += math_units(text, spans) if exempt_math and text else [False] * len(spans)
        base = int(rank) << IDX_BITS
        for i, (a, b) in enumerate(spans):
            cut_end = every[i + 1][0] if i + 1 < len(every) else len(text or "")
            rows.append((doc_id, base | i, i, a, b, cut_end))
            pieces.append(text[a:b])  # type: ignore[index]
    hashes, offsets, _, _ = word_hashes(pieces)
    n_words = np.diff(offsets)
    keep = np.flatnonzero((n_words >= max(min_words, 1)) & ~np.array(exempt, bool).reshape(-1))
    if grams:
        g, first = ngram_windows(hashes, offsets, ngram_size)
        g_row = word_docs(offsets)[first]
        short = keep[n_words[keep] < ngram_size]
        g = np.concatenate([g, whole_hashes(hashes, offsets, short)])
        g_row = np.concatenate([g_row, short])
        kept_row = np.zeros(len(pieces), bool)
        kept_row[keep] = True
        inside = kept_row[g_row]
        lists = distinct_lists(g[inside], g_row[inside], len(pieces)).take(pa.array(keep))
    else:
        lists = pa.array([[]] * keep.size, pa.list_(pa.int64()))
    kept = [rows[i] for i in keep.tolist()]
    cols = list(zip(*kept, strict=True)) if kept else [[] for _ in range(6)]
    return pa.record_batch([
        pa.array(cols[0], pa.string()), pa.array(cols[1], pa.int64()), pa.array(cols[2], pa.int32()),
        pa.array(cols[3], pa.int32()), pa.array(cols[4], pa.int32()), pa.array(cols[5], pa.int32()),
        pa.array(n_words[keep].astype(np.int32)),
        pa.array([exact_key(pieces[i], key) for i in keep.tolist()], pa.binary()), lists,
    ], schema=PARAGRAPH_SCHEMA)


def _text_bytes(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> int:
    # what a call hands the kernel, for KERNELS' threshold: the Arrow buffers, or the characters
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        return texts.nbytes
    return sum(len(t or "") for t in texts)


def count_input(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> None:
    """Count a whole batch of texts towards :data:`KERNELS`' threshold before it is cut into slices
    (:func:`text_slices`): a process handed one batch of :data:`udfs.compiled.AFTER_BYTES` or more runs
    every slice compiled. Counted slice by slice, the first 16 MB of each Python worker went through the
    Python forms, ~5x slower here (0.54 against 0.11 CPU-s for 6.3 MB): ~1 CPU-s per worker at scale."""
    KERNELS.after(_text_bytes(texts))


SLICE_CHARS = 1 << 21
"""Code points of text a :func:`paragraph_batch` call gets at most (:func:`text_slices`; a longer
document gets a call of its own). The call's largest arrays hold 8 bytes per code point (word hashing,
:func:`udfs.decontam.word_hashes`): 16 MiB at this size, under glibc's largest mmap threshold (32 MiB,
:data:`udfs.worker_memory.MMAP_THRESHOLD_BYTES`), so with :func:`udfs.worker_memory.keep_freed_memory`
the memory freed by one call serves the next instead of being unmapped and faulted in again. On the
passages benchmark's corpus (20,000 documents in two 10,000-document batches, 35 MB) the kernel took
1.5 + 1.9 (user + system) CPU-s in whole batches in a fresh process, 1.3 + 0.02 in 1,000-document
slices, the same rows (bench/notes.md, "Passages: the kernel in slices")."""


def text_slices(texts: Sequence[str | None] | pa.Array, budget: int = SLICE_CHARS) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` index ranges covering ``texts``, each holding at most ``budget`` code
    points of text, or one document longer than that.

    Units and keys are computed per document, so :func:`paragraph_batch` over the slices gives the rows
    of one call over all ``texts``, in the same order.

    Args:
        texts: documents (None counts as empty), or an Arrow string array (null counts as empty).
        budget: code points per slice (>= 1).

    Returns:
        ``[(start, end), ...]`` in order, end exclusive; ``[]`` for no texts.

    >>> text_slices(["aa", "bbb", None, "c", "dddddd", "e"], 4)
    [(0, 1), (1, 4), (4, 5), (5, 6)]
    """
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        lengths = pc.fill_null(pc.utf8_length(texts), 0).to_pylist()
    else:
        lengths = [len(text or "") for text in texts]
    out, start, size = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and size + n > budget:
            out.append((start, i))
            start, size = i, 0
        size += n
    if len(texts) > start:
        out.append((start, len(texts)))
    return out


def window_batch(doc_ids: Sequence[str | None] | np.ndarray, texts: Sequence[str | None],
                 n: int) -> pa.RecordBatch:
    """Every window of ``n`` consecutive normalised words of each document (the span mode's keys).

    Args:
        doc_ids: one key per text: document ids (str), or int64 [texts] document ranks
            (:func:`unit_ids`' ranks, whose order is the ``doc_id`` order).
        texts: documents (None = empty).
        n: words per window (``passages.min_span_words``).

    Returns:
        ``doc_id`` string (or ``rank`` int64 when ``doc_ids`` is an int64 array), ``gram`` int64 (the
        window's hash as signed 64-bit), ``pos`` int32 (index of its first word in the document), one row
        per window in word order.
    """
    hashes, offsets, _, _ = word_hashes(list(texts))
    g, first = ngram_windows(hashes, offsets, n)
    doc = word_docs(offsets)[first]
    pos = first - offsets[doc]
    if isinstance(doc_ids, np.ndarray):
        key, name = pa.array(np.asarray(doc_ids, np.int64)[doc]), "rank"
    else:
        key, name = pa.array(doc_ids, pa.string()).take(pa.array(doc)), "doc_id"
    return pa.record_batch([key, pa.array(g.view(np.int64)), pa.array(pos.astype(np.int32))],
                           names=[name, "gram", "pos"])


def window_spans(text: str, positions: Sequence[int], n: int,
                 firsts: Sequence[str] | None = None) -> list[tuple[int, int]] | list[tuple[int, int, str]]:
    """Code-point spans covered by the ``n``-word windows starting at word ``positions``, merged.

    Args:
        text: the document.
        positions: indexes of each window's first normalised word (as in :func:`window_batch`).
        n: words per window.
        firsts: optional, per window the ``doc_id`` that held it first.

    Returns:
        Sorted, disjoint ``(start, end)`` (with ``firsts``: ``(start, end, smallest first)``): from the
        first word's start to the last word's end of each run of overlapping or touching windows.
    """
    if not len(positions):
        return []
    _, _, starts, ends = word_hashes([text])
    labels = list(firsts) if firsts is not None else [""] * len(positions)
    out: list[list] = []
    for p, who in sorted(zip(positions, labels, strict=True)):
        if p < 0 or p + n > starts.size:
            continue
        a, b = int(starts[p]), int(ends[p + n - 1])
        if out and a <= out[-1][1]:
            out[-1][1], out[-1][2] = max(out[-1][1], b), min(out[-1][2], who)
        else:
            out.append([a, b, who])
    return [tuple(x) for x in out] if firsts is not None else [(a, b) for a, b, _ in out]


Span = tuple[int, int, str, str]
"""A removal: ``(start, end, kind, first_seen_in)``, code points of the input text, end exclusive."""


def _outside(a: int, b: int, taken: Sequence[Span]) -> list[tuple[int, int]]:
    """The parts of ``[a, b)`` that no span of ``taken`` (sorted, disjoint) covers."""
    out, pos = [], a
    for s, e, _, _ in taken:
        if e <= pos or s >= b:
            continue
        if s > pos:
            out.append((pos, s))
        pos = max(pos, e)
    if pos < b:
        out.append((pos, b))
    return out


def removals(text: str, units: Sequence[Span], windows: Sequence[tuple[int, str]],
             n: int) -> tuple[str, list[Span]]:
    """Cut removed units and reused-passage windows from one document.

    Args:
        text: the document.
        units: removed units' cut ranges ``(start, cut_end, kind, first_seen_in)``, sorted, disjoint.
        windows: ``(pos, first_seen_in)`` of each marked ``n``-word window (:func:`window_batch`).
        n: words per window.

    Returns:
        (the new text, every span removed, sorted): the units' ranges, then the merged windows' spans
        (kind ``span``) less what a unit already covers; the last span widened as
        :func:`apply_removals` does.

    >>> removals("A b c d.\\nX y z w.\\nEnd", [(9, 18, "exact", "d0")], [(0, "d1"), (1, "d1")], 3)
    ('.\\nEnd', [(0, 7, 'span', 'd1'), (9, 18, 'exact', 'd0')])
    """
    spans: list[Span] = sorted(units)
    if windows:
        pos, who = zip(*windows, strict=True)
        for a, b, first in window_spans(text, pos, n, who):  # type: ignore[misc]
            spans += [(s, e, "span", first) for s, e in _outside(a, b, units)]
        spans.sort()
    _, done = apply_removals(text, [(s[0], s[1]) for s in spans])
    spans = [(a, b, k, f) for (a, b), (_, _, k, f) in zip(done, spans, strict=True)]
    new, _ = apply_removals(text, done)
    return new, spans


def apply_removals(text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` without the (sorted, disjoint) ``spans``, pieces joined as they are.

    A removal that reaches the end of the text also takes the whitespace before it (the separator the
    last kept unit was followed by), so the text does not end in blank lines; the returned spans say so.

    Args:
        text: the document.
        spans: ``(start, end)`` code-point spans to remove, sorted and disjoint.

    Returns:
        (the new text, the spans actually removed: ``spans`` with the last one widened as above).

    >>> apply_removals("Keep me.\\nBanner\\nKeep too.\\nBanner", [(9, 16), (26, 32)])
    ('Keep me.\\nKeep too.', [(9, 16), (25, 32)])
    """
    spans = list(spans)
    if spans and spans[-1][1] >= len(text):
        a = spans[-1][0]
        floor = spans[-2][1] if len(spans) > 1 else 0
        while a > floor and text[a - 1].isspace():
            a -= 1
        spans[-1] = (a, len(text))
    pieces, pos = [], 0
    for a, b in spans:
        pieces.append(text[pos:a])
        pos = b
    pieces.append(text[pos:])
    return "".join(pieces), spans


# ------------------------------------------------------------------------ near repeats in gram blocks
GRAM_BUCKETS = 1024
"""Hash buckets the n-grams of the near rule are grouped in (:func:`gram_blocks`): a reduce step holds
one bucket at a time, about 1/1024 of the corpus's distinct (n-gram, batch) pairs (~7 bytes each packed,
:data:`BLOCK_SCHEMA`)."""
GRAM_BITS = 50
"""Bits of each n-gram's 64-bit hash the near rule compares (:func:`gram_mask`): the bucket's bits and the
top ones, rounded up to whole bytes of a block's key. N distinct n-grams give about N**2 / 2**(GRAM_BITS+1)
false matches: ~4 for the 10**8 n-grams of 600 MB of text, a share of 4e-8 (4e-6 at 10**10), each
making one n-gram of one unit count as seen. BFF, whose semantics the rule follows, keeps its n-grams in
a Bloom filter that errs the same way at the false-positive rate it is sized for (DCLM's ``bff``). Two bytes
of the ~9 of each packed pair (every byte is written to the stage's disk cache and to the shuffle and read
back twice) were left out for it (bench/notes.md, "Passages at scale: the near rule's n-grams compared
on 50 bits")."""

BLOCK_SCHEMA = pa.schema([
    ("bucket", pa.int32()), ("grams", pa.binary()), ("uids", pa.binary()), ("counts", pa.binary()),
    ("gram_shift", pa.int8()), ("uid_base", pa.int64()), ("uid_bits", pa.int8()),
    ("uid", pa.int64()), ("seen", pa.int32()),
])
"""Rows of :func:`gram_blocks`: a block (``bucket`` set) or a unit's n-grams seen earlier in the same
batch (``bucket`` null; ``uid``, ``seen``). A block packs its n-grams, first holders and holder counts
(:func:`unpack_blocks` reads them back):

* ``grams``: each n-gram's key: the top ``8 * w`` bits of the hash as unsigned with the sign bit flipped
  (so ascending as signed), little-endian in ``w = ceil((GRAM_BITS - gram_shift) / 8)`` bytes
  (:data:`GRAM_BITS`); the low ``gram_shift`` bits are the bucket (a power-of-two bucket count; 0
  otherwise), the bits between are zero (:func:`gram_mask`);
* ``uids``: with ``uid_bits`` k >= 0, ``(v >> IDX_BITS) << k | (v & (2**IDX_BITS - 1))`` of
  ``v = uid - uid_base`` (``uid_base`` the batch's smallest document rank, ``<< IDX_BITS``; k the bits
  of the largest unit index), little-endian in the fewest bytes (1 to 4) that hold the batch's largest;
  with -1 the uids as int64;
* ``counts``: only the holder counts other than 1, as (uint32 position in the block, int64 count).

Packed, a pair is ~10 bytes instead of three int64 (24): the shuffle of the scale corpus's blocks wrote
1,075 MB of near-random longs that its lz4 could not shrink (bench/notes.md, "Passages: the near rule's
blocks packed")."""

FIRST_SCHEMA = pa.schema([
    ("uid", pa.int64()), ("seen", pa.int32()), ("gram", pa.int64()), ("first", pa.int64()),
])
"""Rows of :func:`first_holders`: a unit's n-grams first held by an earlier unit of another batch (``uid``,
``seen``; ``gram`` null), or an n-gram held twice or more and its first holder (``gram``, ``first``;
``uid`` null)."""


UNIT_DROPPED = ("doc_id", "idx", "end", "n_words", "grams")
"""Columns of :data:`PARAGRAPH_SCHEMA` a unit's row of :data:`UNIT_BLOCK_SCHEMA` leaves out: no reader of
the units needs them (``idx`` is the unit id's low bits; ``doc_id`` is found from the rank in its high
bits where a unit is removed). Every field of a row costs 8 bytes in the shuffle that carries the 1.5 M
units at scale, null or not, and a string its bytes besides, copied from Arrow into the row, then through
the shuffle's checksum and compression and every read (a crawl's ``doc_id``, a URL or a path, is tens of
bytes)."""
UNIT_COLUMNS = (*(name for name in PARAGRAPH_SCHEMA.names if name not in UNIT_DROPPED), "n_grams")
"""The columns of a unit's row of :data:`UNIT_BLOCK_SCHEMA`."""
UNIT_BLOCK_SCHEMA = pa.schema([
    *(f for f in PARAGRAPH_SCHEMA if f.name not in UNIT_DROPPED), pa.field("n_grams", pa.int32()),
    *(f for f in BLOCK_SCHEMA if f.name != "uid"),
])
"""Rows of :func:`units_and_blocks`: a unit (``n_grams`` set; :data:`UNIT_COLUMNS`, the columns of
:data:`PARAGRAPH_SCHEMA` less :data:`UNIT_DROPPED`, and its distinct n-grams) or a row of
:func:`gram_blocks` (``n_grams`` null; :data:`BLOCK_SCHEMA`'s columns, ``uid`` shared)."""


def units_and_blocks(units: pa.RecordBatch, near: bool, n_buckets: int = GRAM_BUCKETS,
                     compiled: bool = True) -> pa.RecordBatch:
    """A batch of :func:`paragraph_batch` as :data:`UNIT_BLOCK_SCHEMA` rows: its units without their
    n-gram lists (``n_grams``: with ``near``, each unit's distinct n-grams on the bits the near rule
    compares, :func:`gram_mask`; without, its list's length), then, with ``near``, the near rule's map
    step on those lists (:func:`gram_blocks`), so that the lists need not be kept once the blocks are
    made.

    Args:
        units: rows of :data:`PARAGRAPH_SCHEMA`; ``grams`` may repeat an n-gram within a unit
            (:func:`paragraph_batch` without ``distinct``).
        near: make the blocks (False: the units' rows only).
        n_buckets, compiled: as :func:`gram_blocks`.
    """
    grams = units.column("grams")
    held = pc.list_value_length(grams).cast(pa.int64()).to_numpy(zero_copy_only=False)
    if near:
        blocks, repeats = _gram_blocks(units.column("uid").to_numpy(zero_copy_only=False), grams, n_buckets,
                                       compiled)
        held = held - repeats
    else:
        blocks = pa.RecordBatch.from_pylist([], schema=BLOCK_SCHEMA)
    n, m = units.num_rows, blocks.num_rows
    cols = []
    for f in UNIT_BLOCK_SCHEMA:
        if f.name == "uid":
            parts = [units.column("uid"), blocks.column("uid")]
        elif f.name == "n_grams":
            parts = [pa.array(held.astype(np.int32)), pa.nulls(m, pa.int32())]
        elif f.name in UNIT_COLUMNS:
            parts = [units.column(f.name), pa.nulls(m, f.type)]
        else:
            parts = [pa.nulls(n, f.type), blocks.column(f.name)]
        cols.append(pa.concat_arrays(parts))
    return pa.record_batch(cols, schema=UNIT_BLOCK_SCHEMA)


def _runs_of(keys: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values of sorted ``keys``."""
    if not keys.size:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def _seen_counts(uids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u, k = np.unique(uids, return_counts=True)
    return u.astype(np.int64), k.astype(np.int32)


def _signed_order(x: np.ndarray) -> np.ndarray:
    """int64 [N] as uint64 [N] in the same order (the sign bit flipped): a key for
    :func:`udfs.decontam.pair_order`."""
    return x.view(np.uint64) ^ np.uint64(1 << 63)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Each value's position in ``sorted(x)`` (int64 [N], 0 to N-1); equal values get distinct ranks."""
    out = np.empty(x.size, np.int64)
    out[np.argsort(x, kind="stable")] = np.arange(x.size, dtype=np.int64)
    return out


def gram_blocks(uids: np.ndarray, grams: pa.ListArray, n_buckets: int = GRAM_BUCKETS,
                compiled: bool = True) -> pa.RecordBatch:
    """The map step of the near rule on one batch of units: each n-gram's first holder in the batch,
    packed per hash bucket; the other holders counted as seen (:func:`_gram_blocks`' batch)."""
    return _gram_blocks(uids, grams, n_buckets, compiled)[0]


def _gram_blocks(uids: np.ndarray, grams: pa.ListArray, n_buckets: int = GRAM_BUCKETS,
                 compiled: bool = True) -> tuple[pa.RecordBatch, np.ndarray]:
    """The map step of the near rule on one batch of units: each n-gram's first holder in the batch,
    packed per hash bucket; the other holders counted as seen.

    Every holder of an n-gram but the smallest unit id of the batch holds it after an earlier unit, so
    it is "seen" whatever the rest of the corpus holds; only ``(gram, smallest uid, holders)`` leaves the
    batch. A banner in every document of a batch of 10,000 becomes one row, not 10,000.

    Args:
        uids: int64 [units], unit ids (:func:`unit_ids`).
        grams: list<int64> [units], each unit's n-gram hashes, compared on the bits of
            :func:`gram_mask` (the blocks hold them masked); a unit holding one several times counts
            once among its holders.
        n_buckets: buckets the n-grams are spread over (by hash).
        compiled: run :func:`udfs.paragraphs_jit.gram_blocks_arrays` (the same rows); False runs the
            numpy reference below.

    Returns:
        A batch of :data:`BLOCK_SCHEMA`: one block per non-empty bucket (``grams`` ascending), then one
        ``(uid, seen)`` row per unit holding n-grams an earlier unit of the batch holds; and each unit's
        repeats (int64 [units]: list entries, masked, equal to an earlier one of its own list).
    """
    lengths = np.diff(np.asarray(grams.offsets)).astype(np.int64) if len(grams) else np.zeros(0, np.int64)
    g = np.asarray(grams.flatten().to_numpy(zero_copy_only=False), np.int64) & np.int64(gram_mask(n_buckets))
    uids = np.asarray(uids, np.int64)
    if compiled and (paragraphs_jit := KERNELS.after(g.nbytes)) is not None:
        low = 64 - 8 * _gram_width(_gram_shift(n_buckets))  # the bits gram_mask leaves to the bucket or 0
        blocks, offsets, hg, hu, counts, seen, repeats = paragraphs_jit.gram_blocks_arrays(
            g, lengths, uids, n_buckets, low)
        has = seen > 0
        seen_u, inverse = np.unique(uids[has], return_inverse=True)  # np.unique's order, as the reference
        seen_k = np.bincount(inverse.reshape(-1), weights=seen[has], minlength=seen_u.size).astype(np.int32)
        batch = _block_batch(blocks, offsets[:-1], hg, hu, counts, seen_u, seen_k, n_buckets, compiled=True)
        return batch, repeats
    row = np.repeat(np.arange(uids.size, dtype=np.int64), lengths)
    order = pair_order(_signed_order(g), np.repeat(_ranks(uids), lengths),
                       minor_bits=max(uids.size - 1, 1).bit_length())
    g, row = g[order], row[order]
    again = np.r_[False, (g[1:] == g[:-1]) & (row[1:] == row[:-1])] if g.size else np.zeros(0, bool)
    repeats = np.bincount(row[again], minlength=uids.size).astype(np.int64)
    g, u = g[~again], uids[row[~again]]
    starts = _runs_of(g)
    counts = np.diff(np.r_[starts, g.size]).astype(np.int64)
    later = np.ones(g.size, bool)
    later[starts] = False
    seen_u, seen_k = _seen_counts(u[later])
    hg, hu = g[starts], u[starts]
    bucket = (hg.view(np.uint64) % np.uint64(n_buckets)).astype(np.int64)
    # Bucket numbers fit 16 bits, where numpy's stable sort is a radix sort.
    by = np.argsort(bucket.astype(np.uint16 if n_buckets <= 1 << 16 else np.int64), kind="stable")
    hg, hu, counts, bucket = hg[by], hu[by], counts[by], bucket[by]
    cuts = _runs_of(bucket)
    return _block_batch(bucket[cuts], cuts, hg, hu, counts, seen_u, seen_k, n_buckets), repeats


_EXCEPTION = np.dtype([("pos", "<u4"), ("count", "<i8")])
"""A holder count other than 1 in a block's ``counts`` (:data:`BLOCK_SCHEMA`): 12 bytes, unaligned."""
_IDX_MASK = np.uint64((1 << IDX_BITS) - 1)


def _gram_shift(n_buckets: int) -> int:
    """Low bits of every n-gram key of a bucket that are the bucket's number: log2 of a power-of-two
    bucket count, else 0."""
    return n_buckets.bit_length() - 1 if n_buckets > 1 and n_buckets & (n_buckets - 1) == 0 else 0


def _gram_width(shift):
    """Bytes of a block's n-gram key for ``shift`` bucket bits (int or int64 array): :data:`GRAM_BITS`
    less the bucket's bits, rounded up to whole bytes."""
    return (GRAM_BITS - shift + 7) // 8


def gram_mask(n_buckets: int = GRAM_BUCKETS) -> int:
    """The bits of an n-gram hash the near rule compares with ``n_buckets`` buckets, as a signed 64-bit
    int: the top ``8 * w`` (:func:`_gram_width`) and the low ``gram_shift`` (the bucket). Every n-gram
    leaves :func:`gram_blocks` masked with it, and :func:`first_holders` returns masked n-grams: a lookup
    of a unit's n-grams among them (the near repeats' first holders) masks them the same way.

    >>> hex(gram_mask(1024) & (2**64 - 1))
    '0xffffffffff0003ff'
    """
    shift = _gram_shift(n_buckets)
    top = 8 * _gram_width(shift)
    mask = (((1 << top) - 1) << (64 - top)) | ((1 << shift) - 1)
    return mask - (1 << 64) if mask >= 1 << 63 else mask


def _binary(data: np.ndarray, offsets: np.ndarray, nulls: int) -> pa.Array:
    """A binary array of ``offsets.size - 1`` values cut from ``data`` (uint8) at byte ``offsets``,
    then ``nulls`` nulls; built from the buffers, no Python ``bytes`` per value."""
    values = pa.Array.from_buffers(pa.binary(), offsets.size - 1,
                                   [None, pa.py_buffer(np.ascontiguousarray(offsets, np.int32)),
                                    pa.py_buffer(np.ascontiguousarray(data))])
    return pa.concat_arrays([values, pa.nulls(nulls, pa.binary())]) if nulls else values


def _low_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bytes of each value (uint64 [N]), little-endian, one value after another (uint8
    [N * width], contiguous)."""
    return values.astype("<u8").view(np.uint8).reshape(values.size, 8)[:, :width].reshape(-1)


def _packed_holders(hg: np.ndarray, hu: np.ndarray, width: int,
                    compiled: bool = False) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """A batch's first holders packed as :data:`BLOCK_SCHEMA` holds them: (the n-gram keys' bytes, the
    uids' bytes, uid width, ``uid_bits``, ``uid_base``) of ``hg``, ``hu`` (int64 [N]) and the keys'
    ``width``. ``compiled``: :func:`udfs.paragraphs_jit.pack_arrays` where loaded (the same bytes)."""
    if compiled and (paragraphs_jit := KERNELS.after(hg.nbytes)) is not None:
        gram_data, uid_data, uid_width, bits, base = paragraphs_jit.pack_arrays(hg, hu, width)
        return gram_data, uid_data, int(uid_width), int(bits), int(base)
    n = hg.size
    keys = (hg.view(np.uint64) ^ np.uint64(1 << 63)) >> np.uint64(64 - 8 * width)
    gram_data = _low_bytes(keys, width)
    base = (int(hu.min()) & ~int(_IDX_MASK)) if n else 0
    v = hu.view(np.uint64) - np.uint64(base & ((1 << 64) - 1))
    lo = v & _IDX_MASK
    bits = int(lo.max()).bit_length() if n else 0
    packed = ((v >> np.uint64(IDX_BITS)) << np.uint64(bits)) | lo
    uid_width = max((int(packed.max()).bit_length() + 7) // 8, 1) if n else 1
    if uid_width <= 4:
        return gram_data, _low_bytes(packed, uid_width), uid_width, bits, base
    # A batch's documents too far apart in rank: the uids as they are.
    return gram_data, hu.astype("<i8").view(np.uint8), 8, -1, base


def _block_batch(buckets: np.ndarray, cuts: np.ndarray, hg: np.ndarray, hu: np.ndarray, counts: np.ndarray,
                 seen_u: np.ndarray, seen_k: np.ndarray, n_buckets: int,
                 compiled: bool = False) -> pa.RecordBatch:
    """:data:`BLOCK_SCHEMA` rows: bucket ``buckets[i]`` holds ``hg``, ``hu``, ``counts`` (int64) from
    ``cuts[i]`` to the next block's cut (the blocks one after another, covering the arrays), packed;
    then the ``(uid, seen)`` rows. ``compiled``: pack the bytes with the compiled kernel (the same bytes)."""
    cuts = np.asarray(cuts, np.int64)
    n_blocks, n = cuts.size, hg.size
    starts = np.r_[cuts, n]  # the blocks are contiguous: block i ends where block i+1 starts
    shift = _gram_shift(n_buckets)
    width = _gram_width(shift)
    hg, hu = np.ascontiguousarray(hg, np.int64), np.ascontiguousarray(hu, np.int64)
    gram_data, uid_data, uid_width, bits, base = _packed_holders(hg, hu, width, compiled)
    odd = np.flatnonzero(np.asarray(counts) != 1)
    exceptions = np.empty(odd.size, _EXCEPTION)
    at = np.searchsorted(cuts, odd, side="right") - 1
    exceptions["pos"] = odd - cuts[at] if odd.size else odd
    exceptions["count"] = np.asarray(counts)[odd]
    exc_offsets = np.searchsorted(odd, starts) * _EXCEPTION.itemsize
    is_block = np.r_[np.ones(n_blocks, bool), np.zeros(seen_u.size, bool)]
    pad = np.zeros(seen_u.size, np.int64)
    return pa.record_batch([
        pa.array(np.r_[np.asarray(buckets, np.int64), pad].astype(np.int32), mask=~is_block),
        _binary(gram_data, starts * width, seen_u.size),
        _binary(uid_data, starts * uid_width, seen_u.size),
        _binary(exceptions.view(np.uint8), exc_offsets, seen_u.size),
        pa.array(np.r_[np.full(n_blocks, shift, np.int64), pad].astype(np.int8), mask=~is_block),
        pa.array(np.r_[np.full(n_blocks, base, np.int64), pad], mask=~is_block),
        pa.array(np.r_[np.full(n_blocks, bits, np.int64), pad].astype(np.int8), mask=~is_block),
        pa.array(np.r_[np.zeros(n_blocks, np.int64), seen_u], mask=is_block),
        pa.array(np.r_[np.zeros(n_blocks, np.int32), seen_k].astype(np.int32), mask=is_block),
    ], schema=BLOCK_SCHEMA)


def _binary_parts(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A binary column's values as (byte offsets int64 [rows + 1] from 0, the bytes uint8)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, kind, count=len(arr) + 1, offset=arr.offset * np.dtype(kind).itemsize)
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets - offsets[0], data[offsets[0]:offsets[-1]]


def _widen(data: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned values of ``width`` bytes each (uint8 [N * width], contiguous) as uint64 [N]."""
    if width in (1, 2, 4, 8):
        return data.view(f"<u{width}").astype(np.uint64)
    # Other widths: each value read as the 8 bytes from its start (a strided view over the bytes, padded
    # at the end), the bytes past its width masked off; no [N, 8] copy.
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    words = np.ndarray((data.size // width,), "<u8", padded, 0, (width,))
    return words & np.uint64((1 << (8 * width)) - 1)


def _unpack_uids(data: np.ndarray, width: int, bits: np.ndarray, base: np.ndarray) -> np.ndarray:
    """int64 [N] unit ids from their packed values of ``width`` bytes (``data``, uint8 [width N]) and
    each one's block's ``uid_bits`` and ``uid_base`` (int64 [N]; :data:`BLOCK_SCHEMA`)."""
    packed = _widen(data, width)
    k = bits.astype(np.uint64)
    v = ((packed >> k) << np.uint64(IDX_BITS)) | (packed & ((np.uint64(1) << k) - np.uint64(1)))
    return (v + base.view(np.uint64)).view(np.int64)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of the ranges ``[starts[i], starts[i] + lengths[i])`` one after another (int64
    [sum(lengths)])."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(total, dtype=np.int64)


def unpack_blocks(blocks: pa.Table | pa.RecordBatch,
                  compiled: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The n-grams (masked, :func:`gram_mask`), first holders and holder counts (int64 [N] each, block
    after block) of packed :data:`BLOCK_SCHEMA` block rows (``bucket`` set; any buckets, any batches), as
    :func:`first_holders` reads them.

    Args:
        blocks: the block rows.
        compiled: read the bytes with :func:`udfs.paragraphs_jit.unpack_arrays` (one pass over them, the
            same arrays) where loaded; False runs the numpy reference below.

    Raises:
        ValueError: a block's byte lengths do not match its packing.
    """
    if isinstance(blocks, pa.RecordBatch):
        blocks = pa.Table.from_batches([blocks])
    rows = blocks.num_rows
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    shift = blocks.column("gram_shift").to_numpy().astype(np.int64)
    width = _gram_width(shift)
    g_off, g_data = _binary_parts(blocks.column("grams"))
    lengths = np.diff(g_off)
    n = lengths // width
    if (n * width != lengths).any():
        raise ValueError("unpack_blocks: a block's grams are not a whole number of n-grams")
    bucket = blocks.column("bucket").to_numpy().astype(np.int64)
    bits = blocks.column("uid_bits").to_numpy().astype(np.int64)
    base = blocks.column("uid_base").to_numpy().astype(np.int64)
    u_off, u_data = _binary_parts(blocks.column("uids"))
    u_len = np.diff(u_off)
    u_width = np.where(n > 0, u_len // np.maximum(n, 1), 1)
    if (u_len != n * u_width).any() or ((bits < 0) & (u_width != 8) & (n > 0)).any():
        raise ValueError("unpack_blocks: a block's uids do not match its n-grams")
    c_off, c_data = _binary_parts(blocks.column("counts"))
    per_row, odd = np.divmod(np.diff(c_off), _EXCEPTION.itemsize)
    if odd.any():
        raise ValueError("unpack_blocks: a block's holder counts are not whole 12-byte entries")
    first = np.r_[0, np.cumsum(n)]
    exceptions = c_data.view(_EXCEPTION) if c_data.size else np.zeros(0, _EXCEPTION)
    if (np.repeat(n, per_row) <= exceptions["pos"]).any():
        raise ValueError("unpack_blocks: a block's holder counts point past its n-grams")
    if compiled and (paragraphs_jit := KERNELS.after(g_data.nbytes)) is not None:
        return paragraphs_jit.unpack_arrays(g_data, g_off, width, shift, bucket, u_data, u_off, u_width, bits,
                                            base, c_data, c_off, first, IDX_BITS)
    if (width == width[0]).all():
        keys = _widen(g_data, int(width[0]))
    else:  # blocks of different bucket counts: one at a time
        keys = np.concatenate([_widen(g_data[a:b], int(w)) for a, b, w in zip(g_off[:-1], g_off[1:], width,
                                                                               strict=True)])
    s = np.repeat(shift.astype(np.uint64), n)
    low = np.repeat(bucket.astype(np.uint64), n) & ((np.uint64(1) << s) - np.uint64(1))
    up = np.repeat((64 - 8 * width).astype(np.uint64), n)
    g = (((keys << up) | low) ^ np.uint64(1 << 63)).view(np.int64)
    # Each batch packs its uids in its own width (1-4 bytes, or 8 as they are): one vectorised pass per
    # width over all the blocks of that width, not one per block (a bucket holds a block of every batch).
    u = np.empty(g.size, np.int64)
    first = first[:-1]
    filled = n > 0
    kind = u_width * 2 + (bits < 0)
    for k in np.unique(kind[filled]).tolist():
        w, raw = k // 2, k % 2 == 1
        sel = np.flatnonzero(filled & (kind == k))
        data, at = u_data[_ranges(u_off[sel], u_len[sel])], _ranges(first[sel], n[sel])
        u[at] = data.view("<i8") if raw else _unpack_uids(data, w, np.repeat(bits[sel], n[sel]),
                                                            np.repeat(base[sel], n[sel]))
    c = np.ones(g.size, np.int64)
    if exceptions.size:
        c[np.repeat(first, per_row) + exceptions["pos"].astype(np.int64)] = exceptions["count"]
    return g, u, c


def first_holders(g: np.ndarray, u: np.ndarray, c: np.ndarray, compiled: bool = True) -> pa.RecordBatch:
    """The reduce step of the near rule on every block of one bucket (:func:`gram_blocks`).

    Args:
        g, u, c: int64 [N] each, the blocks' n-grams, first holders and holder counts (one bucket, any
            number of batches; :func:`unpack_blocks`).
        compiled: run :func:`udfs.paragraphs_jit.first_holders_arrays` (the same rows); False runs the
            numpy reference below.

    Returns:
        A batch of :data:`FIRST_SCHEMA`: ``(uid, seen)`` for each batch's first holder that a smaller
        unit id of another batch precedes (seen counts one per such n-gram), then ``(gram, first)`` for
        every n-gram held twice or more over all batches, ``first`` its smallest unit id.
    """
    g, u, c = (np.asarray(x, np.int64) for x in (g, u, c))
    if compiled and (paragraphs_jit := KERNELS.after(g.nbytes)) is not None:
        later_u, shared_g, shared_first = paragraphs_jit.first_holders_arrays(g, u, c)
        return _first_batch(*_seen_counts(later_u), shared_g, shared_first)
    # The pairs are distinct (a unit holds an n-gram once, in one batch), so this is lexsort's order.
    order = pair_order(_signed_order(g), _ranks(u), minor_bits=max(u.size - 1, 1).bit_length())
    g, u, c = g[order], u[order], c[order]
    starts = _runs_of(g)
    later = np.ones(g.size, bool)
    later[starts] = False
    seen_u, seen_k = _seen_counts(u[later])
    total = np.add.reduceat(c, starts) if starts.size else np.zeros(0, np.int64)
    shared = starts[total > 1]
    return _first_batch(seen_u, seen_k, g[shared], u[shared])


def _first_batch(seen_u: np.ndarray, seen_k: np.ndarray, shared_g: np.ndarray,
                 shared_first: np.ndarray) -> pa.RecordBatch:
    """:data:`FIRST_SCHEMA` rows: the ``(uid, seen)`` rows, then the ``(gram, first)`` rows."""
    is_seen = np.r_[np.ones(seen_u.size, bool), np.zeros(shared_g.size, bool)]
    return pa.record_batch([
        pa.array(np.r_[seen_u, np.zeros(shared_g.size, np.int64)], mask=~is_seen),
        pa.array(np.r_[seen_k, np.zeros(shared_g.size, np.int32)].astype(np.int32), mask=~is_seen),
        pa.array(np.r_[np.zeros(seen_u.size, np.int64), shared_g], mask=is_seen),
        pa.array(np.r_[np.zeros(seen_u.size, np.int64), shared_first], mask=is_seen),
    ], schema=FIRST_SCHEMA)


def first_holder_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The reduce step's ``mapInArrow`` body: rows of :data:`BLOCK_SCHEMA` sorted by ``bucket`` in, rows of
    :data:`FIRST_SCHEMA` out.

    The blocks of each bucket are unpacked (:func:`unpack_blocks`, from the Arrow buffers: no Python
    ``bytes`` per block) and go through :func:`first_holders`, one bucket in memory at a time; the map
    side's ``(uid, seen)`` rows (``bucket`` null) pass through as they are, with ``gram`` and ``first``
    null. It lives here, not in the stage's module, so that a worker unpickling it imports only this
    module (numpy and pyarrow), not the stage's config models and table helpers.

    Args:
        batches: the rows of one partition, every bucket's rows together (sorted by ``bucket``).

    Yields:
        Batches of :data:`FIRST_SCHEMA`.
    """
    current, parts = None, []
    for b in batches:
        KERNELS.after(b.nbytes)  # the whole batch, not bucket by bucket (as count_input)
        passed = b.column("bucket").is_null()
        if passed.true_count:
            rows = b.filter(passed)
            none = pa.nulls(rows.num_rows, pa.int64())
            yield pa.record_batch([rows.column("uid"), rows.column("seen"), none, none], schema=FIRST_SCHEMA)
            b = b.filter(pc.invert(passed))
        if not b.num_rows:
            continue
        buckets = b.column("bucket").to_numpy()
        starts = _runs_of(buckets)
        for a, e in zip(starts.tolist(), [*starts[1:].tolist(), b.num_rows], strict=True):
            if buckets[a] != current and parts:
                yield first_holders(*unpack_blocks(pa.Table.from_batches(parts)))
                parts = []
            current = buckets[a]
            parts.append(b.slice(a, e - a))
    if parts:
        yield first_holders(*unpack_blocks(pa.Table.from_batches(parts)))
