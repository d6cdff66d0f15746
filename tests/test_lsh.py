"""udfs/lsh.py without Spark: banding parameters against datasketch, the S-curve, band keys."""

from __future__ import annotations

import numpy as np
import pytest
from datasketch.lsh import _optimal_param

from udfs import lsh


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.1, 0.9)])
def test_bands_rows_match_datasketch(threshold, weights):
    assert lsh.optimal_bands_rows(threshold, 128, *weights) == _optimal_param(threshold, 128, *weights)


def test_s_curve_at_default():
    assert lsh.s_curve(14, 9) == {"J=0.50": 0.027, "J=0.70": 0.4382, "J=0.80": 0.867, "J=0.90": 0.999}


def test_band_keys_equal_iff_band_values_equal():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, size=(1, 12), dtype=np.uint32)
    b = a.copy()
    b[0, 5] ^= 1  # band 1 (rows 4..7) differs
    ka, kb = lsh.band_keys(a, 3, 4), lsh.band_keys(b, 3, 4)
    assert ka.dtype == np.int64 and ka.shape == (1, 3)
    assert (ka == kb).tolist() == [[True, False, True]]
    # the same values in another band give another key
    assert lsh.band_keys(np.tile(a[:, :4], 3), 3, 4)[0, 0] != lsh.band_keys(np.tile(a[:, :4], 3), 3, 4)[0, 1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="threshold 1.0 out of range"):
        lsh.optimal_bands_rows(1.0, 128)
    with pytest.raises(ValueError, match="exceeds num_perm"):
        lsh.band_keys(np.zeros((1, 8), np.uint32), 3, 3)
