"""Shard boundaries (no Spark): contiguous, every shard non-empty, max - min <= the longest document."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udfs.shard_balance import balanced_boundaries


def shard_tokens(lengths, starts) -> np.ndarray:
    prefix = np.concatenate([[0], np.cumsum(lengths)])
    return np.diff(prefix[starts])


def check(lengths: list[int], shards: int) -> np.ndarray:
    starts = balanced_boundaries(np.array(lengths), shards)
    assert starts[0] == 0 and starts[-1] == len(lengths) and len(starts) == shards + 1
    assert np.all(np.diff(starts) >= 1)
    tokens = shard_tokens(lengths, starts)
    assert tokens.sum() == sum(lengths)
    assert tokens.max() - tokens.min() <= max(lengths)
    return tokens


def test_hand_example_where_nearest_rounding_differs_by_more_than_l():
    # Nearest-ideal rounding (T/S = 14): cuts at 10 and 32 give 10 / 22 / 10 (spread 12 > L = 10).
    lengths = [10, 10, 1, 1, 10, 10]
    assert check(lengths, 3).tolist() == [20, 12, 10]


def test_one_shard_and_one_document_per_shard():
    assert check([5, 1, 7], 1).tolist() == [13]
    assert check([5, 1, 7], 3).tolist() == [5, 1, 7]


@pytest.mark.parametrize(("lengths", "shards", "match"), [([], 1, "no documents"), ([3, 0], 1, ">= 1 token"),
                                                          ([3, 4], 3, "allowed 1..2"), ([3], 0, "allowed 1..1")])
def test_bad_input_is_a_clear_error(lengths, shards, match):
    with pytest.raises(ValueError, match=match):
        balanced_boundaries(np.array(lengths, dtype=np.int64), shards)


def test_spread_never_exceeds_the_best_possible_by_more_than_the_bound_on_small_cases():
    rng = np.random.default_rng(0)
    for _ in range(300):
        lengths = rng.integers(1, 9, size=int(rng.integers(1, 8))).tolist()
        shards = int(rng.integers(1, len(lengths) + 1))
        prefix = np.concatenate([[0], np.cumsum(lengths)])
        best = min(np.ptp(np.diff(prefix[[0, *cuts, len(lengths)]]))
                   for cuts in itertools.combinations(range(1, len(lengths)), shards - 1))
        assert best <= np.ptp(check(lengths, shards)) <= max(lengths)


adversarial = st.one_of(
    st.lists(st.integers(1, 2000), min_size=1, max_size=300),
    # a few huge documents among many tiny ones
    st.lists(st.sampled_from([1, 1, 1, 2, 5000]), min_size=1, max_size=300),
    # sorted lengths: all the long documents together at the end
    st.lists(st.integers(1, 1000), min_size=1, max_size=300).map(sorted),
    # bimodal, alternating
    st.integers(1, 150).map(lambda k: [1, 999] * k),
)


@settings(max_examples=300, deadline=None)
@given(adversarial, st.data())
def test_adversarial_lengths_stay_within_the_longest_document(lengths, data):
    shards = data.draw(st.integers(1, len(lengths)))
    check(lengths, shards)
