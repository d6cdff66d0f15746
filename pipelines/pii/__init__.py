"""The pii stage: personal data and secrets redacted, the previous document table -> ``pii_redacted``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`redact_pii`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "redact_pii"))
