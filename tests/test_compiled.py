"""udfs/compiled.py: the numba kernels load once, after their byte threshold, and never fatally."""

from __future__ import annotations

import logging

from udfs import compiled
from udfs.compiled import Kernels


def test_every_compiled_module_warms():
    assert compiled.warm_all() == []


def test_a_missing_module_or_a_failed_warm_leaves_none(monkeypatch, caplog):
    assert Kernels("udfs.no_such_jit").load() is None
    from udfs import minhash_jit

    monkeypatch.setattr(minhash_jit, "warm", lambda: (_ for _ in ()).throw(RuntimeError("no locator")))
    k = Kernels("udfs.minhash_jit")
    with caplog.at_level(logging.WARNING):
        assert k.load() is None
    assert "could not be loaded" in caplog.text and k.tried
    assert k.after(1 << 30) is None  # not retried


def test_loads_once_the_threshold_is_crossed():
    k = Kernels("udfs.minhash_jit", after_bytes=100)
    assert k.after(60) is None
    assert k.after(60) is not None
    assert k.after(0) is k.module
