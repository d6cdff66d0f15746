"""The passages stage: paragraphs repeated across documents removed, the first occurrence kept.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`find_repeats`,
:func:`remove_repeats`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "find_repeats", "remove_repeats"))
