"""Tokenizer audit: does this tokenizer fit this data? Findings before the compute is spent.

Beside the chain: reads a run's ``tokenized`` table and the document table tokenize read, merges the
:mod:`udfs.tokenizer_audit` counters of every batch, ranks findings against the ``audit`` config section
and writes ``<run.root>/audit/audit.json`` (:func:`run`). :mod:`pipelines.audit.html` renders the report
section; :mod:`pipelines.audit.findings` turns merged counters into findings without Spark.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, job=("run",))
