"""What the decontam stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check of
the local evaluation sets."""

from __future__ import annotations

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import when_running

EMPTY_HINT = "set decontam.action: cut or check decontam.eval_sets and decontam.ngram_size"


def check_eval_sets(cfg: WinnowConfig) -> None:
    """Every local evaluation set of ``decontam.eval_sets`` exists, is UTF-8 (JSONL) or Parquet, has
    each field in some row and at least one item with text (:func:`pipelines.core.eval_sets.check_local`).

    Raises:
        PreflightError: names the key (``decontam.eval_sets[i].paths`` / ``.fields``).
    """
    from pipelines.core.eval_sets import check_local

    check_local(cfg.decontam.eval_sets)


preflight = when_running("decontam", check_eval_sets)
"""The preflight hook: :func:`check_eval_sets` when decontam runs."""
