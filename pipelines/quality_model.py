"""Train the fastText quality classifier (DCLM-style): labelled JSONL in, model + held-out metrics out.

Source: Li et al. 2024, "DataComp-LM", section 4.4 (fastText on high-quality vs random web text);
fastText ``train_supervised`` (Joulin et al. 2017). Training is single-threaded with a fixed seed, so
the same inputs give the same model.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from udfs import quality_model


def read_jsonl(path: str, text_field: str = "text") -> list[dict]:
    """Records of a JSONL file that hold a string ``text_field`` (others are skipped and counted out)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if isinstance(rec.get(text_field), str):
                rows.append(rec)
    return rows


def train(texts: list[str], positive: list[bool], out_model: str, seed: int = 42, holdout: float = 0.2,
          epoch: int = 10, word_ngrams: int = 2) -> dict:
    """Train on a deterministic split, evaluate on the held-out part, write the model and its metrics JSON.

    The split puts a document in the held-out set when sha1(seed, text) falls in the lowest ``holdout``
    fraction, so it does not depend on input order.

    Returns:
        Metrics: ``n_train``, ``n_heldout``, ``accuracy``, ``precision``, ``recall`` (positive class at
        score >= 0.5), ``auc`` (held-out ranking), written next to the model as ``<model>.metrics.json``.

    Raises:
        ValueError: one class is missing, or ``holdout`` is not in (0, 1).
    """
    import fasttext

    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1); got {holdout}")
    if all(positive) or not any(positive):
        raise ValueError("training needs both positive and negative examples")
    key = [int(hashlib.sha1(f"{seed}:{t}".encode()).hexdigest()[:8], 16) / 2**32 for t in texts]
    held = np.array(key) < holdout
    lines = quality_model.training_lines(texts, positive)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(line for line, h in zip(lines, held, strict=True) if not h) + "\n")
        train_path = f.name
    try:
        model = fasttext.train_supervised(train_path, epoch=epoch, wordNgrams=word_ngrams, thread=1, seed=seed,
                                          verbose=0)
    finally:
        os.unlink(train_path)
    Path(out_model).parent.mkdir(parents=True, exist_ok=True)
    model.save_model(out_model)
    ht = [t for t, h in zip(texts, held, strict=True) if h]
    hy = np.array([p for p, h in zip(positive, held, strict=True) if h], dtype=bool)
    scores = quality_model.score(model, quality_model.prepare(ht))
    pred = scores >= 0.5
    tp = int((pred & hy).sum())
    metrics = {
        "n_train": int((~held).sum()), "n_heldout": int(held.sum()),
        "accuracy": float((pred == hy).mean()) if len(hy) else 0.0,
        "precision": tp / max(1, int(pred.sum())), "recall": tp / max(1, int(hy.sum())),
        "auc": _auc(scores, hy),
    }
    Path(out_model + ".metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))
