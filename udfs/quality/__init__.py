"""Heuristic quality signals (Gopher quality, Gopher repetition, C4, FineWeb), vectorised per Arrow batch.

Every public function maps an Arrow array of ``n`` texts (``string`` / ``large_string``; nulls read as
``""``) to a :class:`pyarrow.StructArray` of length ``n`` with one fixed-dtype field per signal. No
decision is taken here: :mod:`pipelines.filter.stage` compares the signals with the configured thresholds.

Work is done with Arrow compute kernels over the whole batch (split into lines / words once, flatten,
aggregate back per document with ``numpy.bincount``) and numpy for n-gram counting; there is no Python
loop over documents, lines or words.

Shared definitions (:class:`Parsed`):

* **line**: a piece of the text between ``\\n`` characters (ingest normalised ``\\r\\n`` and ``\\r``);
  a line that is empty or whitespace-only is *blank*, and blank lines are not lines
  (they only separate paragraphs).
* **paragraph**: a run of non-blank lines between blank lines.
* **word** (token): the text split on whitespace after runs of Unicode punctuation or symbol
  characters (``\\p{P}``, ``\\p{S}``) at the edges of a piece are set apart (:func:`tokenize_spacing`),
  so ``"(end)."`` is ``(`` + ``end`` + ``).``. This follows the tokens of datatrove's English word
  tokenizer (spaCy, whose punctuation tokens are words too) closely enough for the rules to agree (see
  the cross-check test) at a fraction of its cost. A *symbol word* is made only of punctuation or symbols.
  Gopher's alphabetic-word ratio reads whitespace-separated words instead by default (the paper's
  words; ``alpha_words_reading="datatrove"`` for the tokens above).

Sources: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training Gopher",
appendix A.1.1 and table A1; Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer", section 2.2; Penedo et al. 2024, "The FineWeb Datasets", section 3.3; the
reference implementations in datatrove 0.10.1 (``pipeline/filters/gopher_quality_filter.py``,
``gopher_repetition_filter.py``, ``c4_filters.py``, ``fineweb_quality_filter.py``) and TFDS
``text/c4_utils.py``.
"""

from __future__ import annotations

import pyarrow as pa

from udfs.quality.c4 import C4_TYPE, DATATROVE_C4, C4Options, c4, c4_clean
from udfs.quality.fineweb import FINEWEB_TYPE, fineweb
from udfs.quality.gopher import GOPHER_QUALITY_TYPE, GOPHER_REPETITION_TYPE, gopher_quality, gopher_repetition
from udfs.quality.parse import Parsed, parse, tokenize_spacing

__all__ = [
    "C4_TYPE", "FAMILIES", "FINEWEB_TYPE", "GOPHER_QUALITY_TYPE", "GOPHER_REPETITION_TYPE", "SIGNALS_TYPE",
    "C4Options", "Parsed", "c4", "c4_clean",
    "fineweb", "gopher_quality", "gopher_repetition", "parse", "quality_signals", "tokenize_spacing",
]

# --------------------------------------------------------------------------------------------- all
FAMILIES = {
    "gopher_quality": (gopher_quality, GOPHER_QUALITY_TYPE),
    "gopher_repetition": (gopher_repetition, GOPHER_REPETITION_TYPE),
    "c4": (c4, C4_TYPE),
    "fineweb": (fineweb, FINEWEB_TYPE),
}
"""Signal family name -> (function of a :class:`Parsed` batch, its Arrow struct type)."""

SIGNALS_TYPE = pa.struct([(name, t) for name, (_, t) in FAMILIES.items()])


def quality_signals(
    texts: pa.Array | pa.ChunkedArray,
    families: tuple[str, ...] | None = None,
    *,
    alpha_words_reading: str = "whitespace",
    c4_options: C4Options = DATATROVE_C4,
) -> pa.StructArray:
    """All heuristic signal families for a batch of texts, parsing the batch once.

    Args:
        texts: string array of ``n`` documents (nulls read as empty text).
        families: names from :data:`FAMILIES` to compute (default all); others come back as nulls.
        alpha_words_reading: Gopher's word reading for ``alpha_words_ratio`` (``whitespace``: the paper;
            ``datatrove``: spaCy-like tokens), see :func:`udfs.quality.gopher.gopher_quality`.
        c4_options: how C4's line rules read a page (:class:`C4Options`).

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
    kwargs = {"gopher_quality": {"alpha_words_reading": alpha_words_reading}, "c4": {"options": c4_options}}
    for name, (fn, t) in FAMILIES.items():
        cols.append(fn(p, **kwargs.get(name, {})) if name in wanted else pa.nulls(p.n, type=t))
    return pa.StructArray.from_arrays(cols, fields=list(SIGNALS_TYPE))
