"""The numba kernels of ``udfs``: loaded once per process, after enough input to pay for them, never fatally.

Each ``udfs.*_jit`` module computes what the numpy / Python form beside it computes, bit for bit (its
tests compare the two), several times faster. Loading one costs a process ~0.3-0.5 CPU-s (numba's
import, then its cached machine code), so :class:`Kernels` loads a module only once the process has
been handed :data:`AFTER_BYTES` of input: a small run (``make run``, most tests) never pays it, a large
one almost at once. A module is warmed as it loads (its ``warm()`` compiles or loads every kernel on a
tiny input), so a numba that cannot compile or cache here fails then, is logged as a warning, and the
numpy / Python forms go on with the same values.

numba caches the machine code beside each module (``cache=True``; a per-user cache folder where the
package folder is read-only). ``make`` compiles every kernel when it installs the virtualenv
(:func:`warm_all`), so a run never compiles them (~10-20 CPU-s the first time).
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

AFTER_BYTES = 16 << 20
"""Bytes of input a process handles with the numpy / Python forms before it loads a compiled module:
what the MinHash loops save on ~40 MB of text pays for their load (bench/notes.md)."""

MODULES = ("udfs.minhash_jit", "udfs.paragraphs_jit", "udfs.fasttext_jit")
"""Every compiled module of ``udfs`` (each defines ``warm()``)."""


class Kernels:
    """One compiled module, loaded on demand in this process.

    Attributes:
        name: the module's import name.
        after_bytes: input bytes before :meth:`after` loads it.
        module: the module once loaded, else None.
        tried: whether a load was attempted (a failed one is not retried).
    """

    def __init__(self, name: str, after_bytes: int = AFTER_BYTES) -> None:
        self.name = name
        self.after_bytes = after_bytes
        self.module: ModuleType | None = None
        self.tried = False
        self._seen = 0

    def after(self, nbytes: int) -> ModuleType | None:
        """The module, loading it once this process has been handed ``after_bytes`` of input (this call's
        ``nbytes`` counted); None before that, or when it cannot load."""
        if self.module is None and not self.tried:
            self._seen += nbytes
            if self._seen >= self.after_bytes:
                self.load()
        return self.module

    def load(self) -> ModuleType | None:
        """Import and warm the module now (once); None where numba is missing or cannot compile here."""
        if not self.tried:
            self.tried = True
            try:
                module = importlib.import_module(self.name)
                module.warm()
            except ImportError:
                return None
            except Exception as e:  # numba present but unable to compile or cache here
                logging.getLogger(__name__).warning(
                    "%s: the compiled kernels could not be loaded (%s: %s); the numpy / Python forms compute "
                    "the same values", self.name, type(e).__name__, e)
                return None
            self.module = module
        return self.module


def warm_all() -> list[str]:
    """Compile (or load from numba's cache) every kernel of :data:`MODULES`; the names of those that could
    not be (each also logged). ``make`` runs it after installing the virtualenv."""
    return [name for name in MODULES if Kernels(name).load() is None]


if __name__ == "__main__":
    failed = warm_all()
    left = f" except {', '.join(failed)} (their numpy forms are used)" if failed else ""
    print(f"winnow: numba kernels compiled{left}")
