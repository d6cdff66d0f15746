"""The gate's statistics on known numbers: paired t intervals, verdicts, detectable size, the wavy check,
the compact vocabulary's OOV accounting, the bigram proxy's probabilities, bits per byte."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.gate import evals, stats, wavy
from pipelines.gate.ngram import Bigram
from pipelines.gate.vocab import build


def test_t_quantiles_match_the_tables():
    # scipy.stats.t.ppf(0.975, df) and t.ppf(0.80, df)
    assert stats.t_quantile(0.975, 1) == 12.706 and stats.t_quantile(0.975, 9) == 2.262
    assert stats.t_quantile(0.80, 2) == 1.061
    assert stats.t_quantile(0.975, 1000) == pytest.approx(1.9623, abs=1e-3)
    with pytest.raises(ValueError, match="p must be one of"):
        stats.t_quantile(0.9, 3)


def test_paired_summary_of_known_differences():
    r = stats.paired([0.03, 0.05, 0.04, 0.04])  # mean 0.04, sd sqrt(0.0002/3)
    sd = math.sqrt(0.0002 / 3)
    assert r["mean"] == pytest.approx(0.04) and r["sd"] == pytest.approx(sd)
    half = 3.182 * sd / 2
    assert r["ci95"] == pytest.approx([0.04 - half, 0.04 + half])
    assert r["verdict"] == "worse"
    assert r["min_detectable"] == pytest.approx((3.182 + 0.978) * sd / 2)


@pytest.mark.parametrize(("diffs", "verdict"), [([-0.2, -0.1, -0.15], "better"), ([0.2, 0.1, 0.15], "worse"),
                                                ([0.1, -0.1, 0.02], "no_difference"), ([0.0, 0.0, 0.0], "no_difference")])
def test_verdicts(diffs, verdict):
    assert stats.paired(diffs)["verdict"] == verdict


def test_one_seed_has_no_interval():
    r = stats.paired([0.3])
    assert r["verdict"] == "no_difference" and r["ci95"] == [-math.inf, math.inf] and r["min_detectable"] == math.inf


def test_compare_pairs_by_seed_against_the_first_variant():
    res = {"a": {"x": [1.0, 2.0, 3.0]}, "b": {"x": [0.9, 1.85, 2.9]}}
    c = stats.compare(res, ["a", "b"])
    assert c["b"]["x"]["diffs"] == pytest.approx([-0.1, -0.15, -0.1]) and c["b"]["x"]["verdict"] == "better"


def test_wavy_flags_oscillation_that_the_random_order_lacks():
    rng = np.random.default_rng(0)
    steps = np.arange(200)
    trend = 6.0 * np.exp(-steps / 60) + 3.0
    noise = 0.02 * rng.standard_normal((2, 200))
    blocky = trend + 0.3 * np.sign(np.sin(steps / 4.0)) + noise[0]  # sources in blocks of ~12 steps
    shuffled = trend + noise[1]
    r = wavy.check(blocky.tolist(), shuffled.tolist(), smooth_steps=25, max_order_share=0.5)
    assert r["flagged"] and r["order_share"] > 0.9
    same = wavy.check((trend + noise[0]).tolist(), shuffled.tolist(), 25, 0.5)
    assert not same["flagged"] and same["order_share"] < 0.5


def test_paired_share_sees_swings_slower_than_the_window_that_the_residual_share_misses():
    steps = np.arange(96)
    trend = 6.0 * np.exp(-steps / 30) + 3.0
    swing = 0.1 * np.sin(2 * np.pi * steps / 64)  # a slow swing: sources alternating every 32 steps
    flags = []
    for seed in range(20):
        noise = 0.03 * np.random.default_rng(seed).standard_normal((3, 96))
        blocky = wavy.check((trend + swing + noise[0]).tolist(), (trend + noise[1]).tolist(), 9, 0.5)
        assert blocky["order_share"] < 0.5 < blocky["paired_order_share"]
        assert not blocky["flagged"]  # the flag reads the residual share only
        same = wavy.check((trend + noise[2]).tolist(), (trend + noise[1]).tolist(), 9, 0.5)
        flags.append(same["paired_order_share"] >= 0.5)
    assert sum(flags) <= 1  # independent batch noise alone: at most one in 20 reaches 0.5


def test_wavy_curve_shorter_than_the_window_is_not_judged():
    r = wavy.check([1.0, 2.0], [1.0, 2.0], 9, 0.5)
    assert r["order_share"] is None and r["flagged"] is False


def test_compact_vocab_charges_oov_tokens_for_every_id_they_stand_for():
    v = build([np.array([7, 7, 7, 3, 3, 1])], full_size=10, size=3)  # keeps 7 and 3, OOV stands for 8 ids
    assert v.kept.tolist() == [7, 3] and v.oov == 2 and v.oov_nats == pytest.approx(math.log(8))
    nll = np.array([[1.0, 1.0]])
    targets, mask = np.array([[7, 9]]), np.array([[True, True]])
    assert evals.total_bits(nll, targets, mask, v) == pytest.approx((2.0 + math.log(8)) / math.log(2))
    assert build([np.array([1])], 10, None).size == 11


def test_bigram_probabilities_sum_to_one():
    rng = np.random.default_rng(1)
    samples = rng.integers(0, 12, (20, 9)).astype(np.int32)
    m = Bigram(samples, vocab=12)
    for prev in (0, 5, 11):
        p = np.exp(-m.nll(np.full(12, prev), np.arange(12)))
        assert p.sum() == pytest.approx(1.0)


def test_windows_and_choice_masks():
    x, y, m = evals.choice_windows([(np.array([5, 6]), [np.array([7]), np.array([8, 9])], 1)], eos=0, seq_len=4)
    assert x.tolist() == [[0, 5, 6, 0], [0, 5, 6, 8]] and y.tolist() == [[5, 6, 7, 0], [5, 6, 8, 9]]
    assert m.tolist() == [[False, False, True, False], [False, False, True, True]]
    assert evals.accuracy(np.array([3.0, 1.0]), [(None, [1, 2], 1)]) == 1.0


def test_wavy_line_says_not_measured_when_the_curve_is_shorter_than_the_window():
    from pipelines.gate.output import summary_lines

    wavy = {"a": {"order_share": None, "flagged": False, "steps": 4, "smooth_steps": 9},
            "b": {"order_share": 0.12, "flagged": False, "steps": 40, "smooth_steps": 9}}
    lines = summary_lines({"baseline": "a", "verdicts": {}, "comparisons": {}, "proxy_verdicts": {}, "wavy": wavy})
    assert lines == [
        "[gate] a loss curve: wavy check not measured (4 steps, fewer than gate.wavy_smooth_steps=9; "
        "raise gate.tokens)",
        "[gate] b loss curve: no order-driven oscillation (order share of residual variance 0.12)",
    ]
