"""The refs stage: dangling Table/Figure references flagged or removed, ``filtered`` -> ``refs_checked``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`check_refs`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "check_refs"))
