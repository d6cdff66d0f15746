"""Lazy exports of a stage package: its public functions load on first use, not on import.

A stage package's ``__init__`` names what it exports (``run`` and its transforms) without importing
them, so importing ``pipelines.<stage>.config`` (what the config assembly reads for every stage of the
chain, :mod:`pipelines.core.config`) does not import the stage's Spark code, which itself reads the
assembled config.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any


def lazy_exports(package: str, **modules: Iterable[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) serving names from submodules of ``package`` on first use.

    Args:
        package: the package's ``__name__``.
        modules: submodule name -> the names it exports, e.g. ``stage=("run", "dedup")``.

    Returns:
        The function to bind as the package's ``__getattr__``; it raises :class:`AttributeError` for
        any other name, as a module does.

    >>> getattr_ = lazy_exports("pipelines.core", chain=("STAGES",))
    >>> getattr_("STAGES")[0]
    'ingest'
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    return __getattr__
