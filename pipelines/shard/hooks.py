"""What the shard stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight checks of
``shard.output`` and of the sources ``shard.mix`` names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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


def check_upstream(cfg: WinnowConfig, stage: str, extra: Callable[[], dict[str, Any]]) -> list[str]:
    """Right after ingest (run, or skipped as complete) of a run that reaches the shard stage: every
    ``shard.mix`` key has documents (:func:`pipelines.shard.mix_check.check_ingested_sources`), so no
    stage runs for a mix that cannot be met.

    Args:
        stage: the stage that just ran or was skipped.
        extra: its ``extra`` figures (the report's, or its completion record's), read only when needed.

    Returns:
        Warning lines (sources with documents and no mix entry).

    Raises:
        pipelines.shard.mix_check.MixSourceError: a ``shard.mix`` key with no document.
    """
    if stage != "ingest":
        return []
    from pipelines.shard.mix_check import check_ingested_sources

    return check_ingested_sources(cfg.shard.mix, extra())


def clear_outputs(cfg: WinnowConfig) -> None:
    """When the stage does not run because an earlier stage of the run left no document: retract the shards,
    MDS indexes, blend files and ``manifest.json`` an earlier run published under the shard root, so no
    stale shard set looks like this run's (``verify`` then finds no manifest)."""
    from pipelines.shard.stage import _output_dirs, _retract_previous

    root, local, remote = _output_dirs(cfg)
    _retract_previous(cfg, root, local, remote)
