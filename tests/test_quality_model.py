"""Quality classifier: training job on DCLM human labels, held-out metrics, scoring."""

from __future__ import annotations

import json

import numpy as np

from jobs.train_quality import main
from pipelines.tools.train_quality import threshold_guide
from udfs import langid, quality_model


def test_train_on_dclm_human_labels(shared_data, tmp_path, capsys):
    out = tmp_path / "q.bin"
    assert main(["--labelled", str(shared_data / "web_crawl" / "dclm_human_quality_labels_A.jsonl"),
                 "--out", str(out)]) == 0
    metrics = json.loads((tmp_path / "q.bin.metrics.json").read_text())
    print("quality classifier held-out:", metrics)
    assert metrics["n_heldout"] > 30
    assert metrics["auc"] > 0.5  # separates the classes better than chance
    keep = metrics["keep_fraction_min_score"]
    assert keep["0.1"] >= keep["0.2"] >= keep["0.5"]
    assert 0 <= metrics["best_f1_min_score"] <= 1 and 0 < metrics["best_f1"] <= 1
    model = langid.load_model(str(out))
    s = quality_model.score(model, quality_model.prepare(["some text", "more\ntext"]))
    assert s.shape == (2,) and ((s >= 0) & (s <= 1)).all()


def test_threshold_guide_on_known_scores():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.55, 0.52, 0.51, 0.5, 0.3, 0.1])
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], dtype=bool)
    g = threshold_guide(scores, labels)
    assert g["best_f1_min_score"] == 0.7 and g["best_f1"] == 1.0
    assert g["kept_at_0.5"] == 0.8
    assert g["keep_fraction_min_score"]["0.1"] >= 0.8
    assert threshold_guide(np.array([]), np.array([], dtype=bool)) == {}
