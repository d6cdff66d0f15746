"""The gating run (``winnow gate``): prove a data change on small models trained on the shards.

Beside the chain, not in it: it reads two or more shard sets without Spark and trains with JAX (the
``gate`` extra). :func:`run` (:mod:`pipelines.gate.job`) is the whole gate; the modules hold its parts
(shards, vocab, model, train, evals, scoring, stats, wavy, ngram, output, tracking; runner puts them
together).

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`gate_root`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, job=("run", "gate_root"))
