"""The filter stage: quality rules, language ID and the quality classifier, ``passages_deduped`` (or
``deduped``) -> ``filtered``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`):
:func:`run`, :func:`filter_documents`, :func:`decide`, :func:`compute_signals`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "filter_documents", "decide", "compute_signals"))
