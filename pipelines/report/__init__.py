"""The run report: ``report.html`` and ``stats.json`` under ``<run.root>/report``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`collect_stats`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "collect_stats"))
