"""The tokenize stage: the last document table of the chain -> token ids in ``tokenized``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`tokenize`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "tokenize"))
