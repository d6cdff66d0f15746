"""The dedup stage: exact (MD5) and near (MinHash-LSH) duplicates removed, ``documents`` -> ``deduped``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`dedup`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "dedup"))
