"""The passages stage: repeated paragraphs and reused passages removed across the corpus.

``deduped`` -> ``passages_deduped`` (the documents, repeated units and passages cut from their text,
the cuts listed in ``passages_removed``) + the stage's rows of ``removed`` (documents mostly made of
text seen before, or left too short). The method is described in :mod:`pipelines.passages.transform`
and ``docs/passages.md``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`passages`,
:func:`annotate`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run",), transform=("passages", "annotate"))
