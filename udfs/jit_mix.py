"""Hash mixing shared by the compiled kernels of ``udfs`` (numba; see :mod:`udfs.compiled`)."""

from __future__ import annotations

import numba
import numpy as np

_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)


@numba.njit(cache=True, inline="always")
def fmix64(h):  # pragma: no cover - compiled
    """MurmurHash3's 64-bit finaliser (Appleby, smhasher), a bijection of uint64, wrapping arithmetic:
    the compiled twin of :func:`udfs.decontam.fmix64` (also ``udfs.minhash.fmix64``)."""
    h ^= h >> np.uint64(33)
    h *= _M1
    h ^= h >> np.uint64(33)
    h *= _M2
    return h ^ (h >> np.uint64(33))
