"""MLflow tracking of a gate: a parent run, one child run per variant and seed with the loss per step."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from pipelines.core.config import load_config
from pipelines.gate.tracking import log_gate


def test_one_child_run_per_variant_and_seed_with_the_loss_per_step(tmp_path):
    store = f"file:{tmp_path / 'mlruns'}"
    cfg = load_config(overrides=[f"run.root={tmp_path}", "tracking.mlflow=true", f"tracking.uri={store}",
                                 "tracking.experiment=gate"])
    (tmp_path / "gate.json").write_text("{}")
    result = {
        "variants": [{"name": "a", "path": "out/a"}, {"name": "b", "path": "out/b"}],
        "budget": {"seeds": [42, 43]},
        "loss_curves": {"a": [[5.0, 4.0], [5.1, 4.1]], "b": [[5.0, 3.9], [5.2, 4.0]]},
        "bits_per_byte": {"a": {"eval:x": [1.5, 1.6]}, "b": {"eval:x": [1.4, 1.5]}},
        "accuracy": {"a": {}, "b": {}},
        "verdicts": {"b": "better"},
        "comparisons": {"b": {"eval:x": {"mean": -0.1}}},
        "speed": {"tokens_per_s": 1000.0},
    }
    assert log_gate(cfg, result, {"json": str(tmp_path / "gate.json")}) == "ok"
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("gate").experiment_id])
    children = {(r.data.params["variant"], r.data.params["seed"]): r for r in runs if "variant" in r.data.params}
    assert sorted(children) == [("a", "42"), ("a", "43"), ("b", "42"), ("b", "43")]
    child = children[("b", "43")]
    assert child.data.metrics["bpb.eval_x"] == 1.5  # MLflow keys: ":" becomes "_"
    assert [m.value for m in client.get_metric_history(child.info.run_id, "train_loss")] == [5.2, 4.0]
    parent = next(r for r in runs if "variant" not in r.data.params)
    assert parent.data.metrics["verdict.b"] == 1.0 and parent.data.metrics["diff_bpb.b.eval_x"] == -0.1


def test_tracking_off_does_nothing(tmp_path):
    cfg = load_config(overrides=[f"run.root={tmp_path}"])
    assert log_gate(cfg, {}, {}) == "off"
