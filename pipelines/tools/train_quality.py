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
        score >= 0.5), ``auc`` (held-out ranking), and :func:`threshold_guide`'s figures for choosing
        ``filter.quality_model.min_score``; written next to the model as ``<model>.metrics.json``.

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
        **threshold_guide(scores, hy),
    }
    Path(out_model + ".metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


def threshold_guide(scores: np.ndarray, labels: np.ndarray) -> dict:
    """Figures for choosing ``filter.quality_model.min_score`` from held-out scores.

    fastText's probabilities are not calibrated to the filter's purpose: with balanced training data
    most web text can score above 0.5, so 0.5 may keep nearly everything. DCLM (Li et al. 2024, sec. 4.4)
    instead keeps a top fraction of documents by score; ``keep_fraction_min_score`` gives the score that
    keeps the top 10 / 20 / 50 % of the held-out documents, and ``best_f1_min_score`` the threshold
    that maximises F1 of the positive class.

    Args:
        scores: float array, shape (n,), positive-class probabilities.
        labels: bool array, shape (n,), True = positive.

    Returns:
        ``best_f1_min_score``, ``best_f1``, ``keep_fraction_min_score`` ({"0.1": s, ...}) and
        ``kept_at_0.5`` (fraction of held-out documents scoring >= 0.5). Empty dict when n = 0.
    """
    if not len(scores):
        return {}
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)
    k = np.arange(1, len(s) + 1)
    f1 = 2 * tp / (k + max(1, int(y.sum())))
    # Only thresholds between distinct scores can be set; take the last index of each tie run.
    last = np.r_[s[1:] != s[:-1], True]
    i = int(np.argmax(np.where(last, f1, -1)))
    return {
        "best_f1_min_score": round(float(s[i]), 6),
        "best_f1": round(float(f1[i]), 4),
        "keep_fraction_min_score": {str(q): round(float(np.quantile(scores, 1 - q)), 6) for q in (0.1, 0.2, 0.5)},
        "kept_at_0.5": round(float((scores >= 0.5).mean()), 4),
    }


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))
