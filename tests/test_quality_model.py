"""Quality classifier: training job on DCLM human labels, held-out metrics, scoring."""

from __future__ import annotations

import json

from jobs.train_quality import main
from udfs import langid, quality_model


def test_train_on_dclm_human_labels(shared_data, tmp_path, capsys):
    out = tmp_path / "q.bin"
    assert main(["--labelled", str(shared_data / "web_crawl" / "dclm_human_quality_labels_A.jsonl"),
                 "--out", str(out)]) == 0
    metrics = json.loads((tmp_path / "q.bin.metrics.json").read_text())
    print("quality classifier held-out:", metrics)
    assert metrics["n_heldout"] > 30
    assert metrics["auc"] > 0.5  # separates the classes better than chance
    model = langid.load_model(str(out))
    s = quality_model.score(model, quality_model.prepare(["some text", "more\ntext"]))
    assert s.shape == (2,) and ((s >= 0) & (s <= 1)).all()
