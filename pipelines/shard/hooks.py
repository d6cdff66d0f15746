"""What the shard stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight checks of
``shard.output`` and of the sources ``shard.mix`` names."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import PreflightError, check_writable_root


def preflight(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """``shard.mix`` names sources the input files can have, when ingest runs and shard is configured
    (:func:`pipelines.shard.mix_check.check_file_sources`); ``shard.output`` can be written when shard runs.
    """
    if "ingest" in stages and "shard" in cfg.pipeline.stages:
        from pipelines.shard.mix_check import MixSourceError, check_file_sources

        try:
            check_file_sources(cfg)
        except MixSourceError as e:
            raise PreflightError(str(e)) from None
    if "shard" in stages and cfg.shard.output:
        check_writable_root(cfg.shard.output, "shard.output")
