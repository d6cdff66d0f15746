"""The Python worker daemon of a local session: pyspark's own daemon, with pyspark imported from the
installed package rather than from Spark's ``pyspark.zip``.

Spark starts its Python workers with ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip first on
``PYTHONPATH`` (``PythonUtils.sparkPythonPath``). For a pip-installed pyspark these hold the same
modules as the installed package, but Python keeps no bytecode cache for modules read from a zip: each
daemon compiled about 280 pyspark modules from source at start (~0.4 CPU-s, several times what the
installed package's cached bytecode takes), and each worker it forks re-read the zip's directory of
about 1,000 entries when pyspark's ``setup_spark_files`` called ``importlib.invalidate_caches`` (~0.05
CPU-s a worker). :func:`pipelines.core.session.get_spark` names this module as
``spark.python.daemon.module`` on a local master, where the workers run the driver's interpreter
(``PYSPARK_PYTHON``), so the installed pyspark is the driver's own.

A reused worker runs a full ``gc.collect()`` after every task (``pyspark.daemon.manager``); with numpy,
pyarrow, pyspark and the task's modules loaded that is ~90,000 tracked objects, 15-30 ms a task, every
one of them scanned again each time although nearly all live as long as the worker.
:func:`freeze_after_collect` keeps the collection and moves what survives it to the permanent
generation (``gc.freeze``), so the next task's collection scans only the objects made since: the
garbage of each task is still collected; an object that outlives a task and later becomes cyclic
garbage is not (it is freed only with its worker). Otherwise the workers are pyspark's
(``pyspark.daemon.manager``), reused as before.

Run as ``python -m pipelines.core.pydaemon pyspark.worker`` (Spark's command line for a daemon module).
"""

from __future__ import annotations

import gc
import importlib.machinery
import os
import sys
import types

SPARK_ZIPS = ("pyspark.zip", "py4j-")
"""Names (or prefixes) of the zip files Spark puts on the workers' ``PYTHONPATH``."""


def _is_spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    return name.endswith(".zip") and name.startswith(SPARK_ZIPS)


def prefer_installed_pyspark(path: list[str] | None = None) -> list[str]:
    """Drop Spark's pyspark and py4j zips from ``path`` (default ``sys.path``, changed in place) when
    both packages can be imported without them, and forget their zip importers, so neither imports nor
    ``importlib.invalidate_caches`` touch the zips again.

    Args:
        path: import path to change; ``sys.path`` when None.

    Returns:
        The zip entries dropped (empty when a package is only in a zip, or there was no zip).
    """
    path = sys.path if path is None else path
    zips = [p for p in path if _is_spark_zip(p)]
    rest = [p for p in path if not _is_spark_zip(p)]
    found = [importlib.machinery.PathFinder.find_spec(m, rest) for m in ("pyspark", "py4j")]
    if not zips or None in found:
        return []
    path[:] = rest
    for z in zips:
        sys.path_importer_cache.pop(z, None)
    return zips


class _FreezingGC(types.ModuleType):
    """The :mod:`gc` module as :mod:`pyspark.daemon` sees it: ``collect`` also freezes the survivors
    (:func:`freeze_after_collect`); every other name is :mod:`gc`'s own."""

    def __getattr__(self, name: str):
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 2) -> int:
        return freeze_after_collect(generation)


def freeze_after_collect(generation: int = 2) -> int:
    """``gc.collect(generation)``, then ``gc.freeze()``: the objects that survived it are left out of
    every later collection (see the module docstring).

    Returns:
        The number of unreachable objects found, as ``gc.collect``.
    """
    found = gc.collect(generation)
    gc.freeze()
    return found


def main() -> None:
    """Start pyspark's daemon (``pyspark.daemon.manager``) after :func:`prefer_installed_pyspark`, its
    per-task collection through :func:`freeze_after_collect`."""
    prefer_installed_pyspark()
    from pyspark import daemon

    daemon.gc = _FreezingGC("gc")
    daemon.manager()


if __name__ == "__main__":
    main()
