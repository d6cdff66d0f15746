"""The shard stage: ``tokenized`` -> seeded, token-balanced Megatron + MDS shards and ``manifest.json``.

Exports (loaded on first use, :mod:`pipelines.core.lazy`): :func:`run`, :func:`build_manifest`.
"""

from pipelines.core.lazy import lazy_exports

__getattr__ = lazy_exports(__name__, stage=("run", "build_manifest"))
