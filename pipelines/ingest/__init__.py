"""The ingest stage: raw files -> normalised ``documents``; bad records to ``quarantine``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`read_inputs`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "read_inputs"))
