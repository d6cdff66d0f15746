"""bench/results.md's gate section: the calibration figures rendered as tables (no training)."""

from __future__ import annotations

from bench.gate import render_markdown

MODEL = {"d_model": 64, "n_layers": 2, "n_heads": 4, "params": 370432}


def _gate(verdict: str, mean: float = 0.01, wavy: dict | None = None, flagged: dict | None = None) -> dict:
    return {"verdict": verdict, "mean_diff_bpb": mean, "ci95": [mean - 0.02, mean + 0.02], "min_detectable_bpb": 0.025,
            "proxy_verdict": "no_difference", "proxy_mean_diff_bpb": 0.0, "wavy": wavy or {}, "flagged": flagged or {},
            "seconds": 1.0, "budget": 131072, "seeds": 3, "model": MODEL}


def test_smallest_flagged_share_false_alarms_and_wavy_rows():
    figures = {
        "base": {"train_documents": 10, "train_tokens": 1000, "reference_documents": 3, "reference_tokens": 300},
        "dup": {"10%": _gate("no_difference"), "30%": _gate("worse", 0.05), "50%": _gate("worse", 0.09)},
        "spam": {"removed_pages": 5, "10%": _gate("no_difference"), "30%": _gate("no_difference"),
                 "50%": _gate("no_difference")},
        "same": {"runs": [_gate("no_difference")] * 9 + [_gate("better", -0.05)], "false_alarms": 1,
                 "proxy_false_alarms": 2},
        "wavy": {"blocks": _gate("no_difference", wavy={"clean": 0.0, "blocks": 0.7},
                                 flagged={"clean": False, "blocks": True}),
                 "shuffled": _gate("no_difference", wavy={"clean": 0.0, "shuffled": 0.1},
                                   flagged={"clean": False, "shuffled": False})},
    }
    md = "\n".join(render_markdown(figures))
    assert "| near-duplicates put back | 30% | 64 x 2 (0.37 M) |" in md
    assert "| pages the filter removed put back | none of 10% / 30% / 50% | 64 x 2 (0.37 M) |" in md
    assert "| sources in blocks (each source's documents after the last): wavy flag | flagged |" in md
    assert "| dup | 30% | 64 x 2 (0.37 M) | 131,072 | 3 | 0.05 | [+0.030, +0.070] | 0.025 | worse | no difference |" in md
    assert "| 10 seed sets | 64 x 2 (0.37 M) | 65,536 |" not in md and "| 10 seed sets | 64 x 2 (0.37 M) | 131,072 | 1 | 2 |" in md
    assert "| wavy | blocks | 64 x 2 (0.37 M) | 0.7 | yes | no difference |" in md
    assert "{'" not in md  # no raw dict reaches the page


def test_a_subset_of_the_cases_renders_only_those():
    md = render_markdown({"raw": _gate("no_difference", 0.29)})
    assert any("raw input vs the default chain | not flagged" in line for line in md)
    assert not any("near-duplicates" in line for line in md)


def test_passages_off_and_shared_baselines():
    """The passages-off variant has its own row; copies of the same data that share baselines say so."""
    figures = {"passages": {**_gate("worse", 0.04), "documents": 9, "tokens": 900},
               "same": {"runs": [_gate("no_difference")] * 6, "baselines": 2, "false_alarms": 0,
                        "proxy_false_alarms": 0}}
    md = "\n".join(render_markdown(figures))
    assert "| the chain without its passages stage | flagged: worse (the stage off) |" in md
    assert "| passages | all | 64 x 2 (0.37 M) |" in md
    assert "| 6 copies, 2 baselines and seed sets |" in md
