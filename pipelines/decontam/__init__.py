"""The decontam stage: evaluation-set n-gram overlap cut or removed, ``refs_checked`` -> ``decontaminated``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`):
:func:`run`, :func:`decontaminate`, :func:`find_matches`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "decontaminate", "find_matches"))
