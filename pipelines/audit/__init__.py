"""Tokenizer audit: does this tokenizer fit this data? Findings before the compute is spent.

Beside the chain: reads a run's ``tokenized`` table and the document table tokenize read, merges the
:mod:`udfs.tokenizer_audit` counters of every batch, ranks findings against the ``audit`` config section
and writes ``<run.root>/audit/audit.json`` (:func:`run`). :mod:`pipelines.audit.html` renders the report
section; :mod:`pipelines.audit.findings` turns merged counters into findings without Spark.

The tokenize stage fills the same audit as it encodes, with no second pass (:mod:`pipelines.audit.inline`:
:func:`begin` before its write, :func:`end` after it; ``audit.inline`` switches that off).

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`begin`, :func:`end`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, job=("run",), inline=("InlineAudit", "begin", "end"))
