"""fastText quality classifier: example formatting and batch scoring (DCLM / NeMo Curator style).

A supervised fastText model separates high-quality text (label :data:`POSITIVE`) from random web text
(label :data:`NEGATIVE`); ``quality_score`` is the probability of the positive label. Training and
scoring see the same text: newlines replaced by spaces (fastText reads one example per line), as in
DCLM's ``fasttext_hq_prob`` annotator.

Source: Li et al. 2024, "DataComp-LM", section 4.4 (fastText OH-2.5 + ELI5 classifier); NeMo Curator
``FastTextQualityFilter``; Joulin et al. 2017 (fastText).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"


def prepare(texts: pa.Array | pa.ChunkedArray | Sequence[str]) -> list[str]:
    """Texts as fastText reads them: nulls become ``""``, newlines (``\\n``, ``\\r``) become spaces.

    Args:
        texts: ``n`` texts (Arrow string array or Python strings).

    Returns:
        ``n`` Python strings without line breaks.
    """
    arr = texts if isinstance(texts, pa.Array | pa.ChunkedArray) else pa.array(list(texts), pa.string())
    arr = pc.replace_substring_regex(pc.fill_null(arr, ""), r"[\r\n]", " ")
    return arr.to_pylist()


def training_lines(texts: Sequence[str], positive: Sequence[bool]) -> list[str]:
    """fastText supervised-training lines: ``"<label> <text>"`` per example.

    >>> training_lines(["good\\ntext", "spam"], [True, False])
    ['__label__hq good text', '__label__lq spam']

    Raises:
        ValueError: ``texts`` and ``positive`` differ in length.
    """
    if len(texts) != len(positive):
        raise ValueError(f"texts ({len(texts)}) and positive ({len(positive)}) differ in length")
    return [f"{POSITIVE if p else NEGATIVE} {t}" for t, p in zip(prepare(texts), positive, strict=True)]


def score(model, texts: Sequence[str], positive_label: str = POSITIVE) -> np.ndarray:
    """Probability of ``positive_label`` for each prepared text (:func:`prepare`).

    Args:
        model: a loaded fastText supervised model.
        texts: ``n`` prepared strings.
        positive_label: the label whose probability is returned.

    Returns:
        float64[n] in [0, 1].

    Raises:
        ValueError: the model has no label ``positive_label``.
    """
    labels = model.get_labels()
    if positive_label not in labels:
        raise ValueError(f"quality model has no label {positive_label!r}; its labels: {labels}")
    if not texts:
        return np.zeros(0, dtype=np.float64)
    got, probs = model.predict(list(texts), k=len(labels))
    out = np.zeros(len(texts), dtype=np.float64)
    for i, (ls, ps) in enumerate(zip(got, probs, strict=True)):
        for lab, p in zip(ls, ps, strict=True):
            if lab == positive_label:
                out[i] = min(1.0, float(p))
    return out
