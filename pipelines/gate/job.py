"""The whole gate (:func:`run`): train, score, write ``gate.json`` / ``gate.html``, log to MLflow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.core.config import WinnowConfig


def run(cfg: WinnowConfig, log: Callable[[str], Any] = print) -> dict[str, str]:
    """Run the gate of ``cfg.gate`` and write its outputs.

    Args:
        cfg: a :class:`~pipelines.core.config.WinnowConfig` whose ``gate.variants`` name two or more
            shard sets.
        log: receives progress and summary lines.

    Returns:
        ``{"json": path of gate.json, "html": path of gate.html, "root": the gate root}``.

    Raises:
        pipelines.gate.shards.GateInputError: a variant or evaluation input that cannot be used.
    """
    from pipelines.gate import output
    from pipelines.gate.runner import run_gate

    result = run_gate(cfg, log)
    root = gate_root(cfg)
    paths = output.write(result, root, cfg.report.plot_format)
    for line in output.summary_lines(result):
        log(line)
    if cfg.tracking.mlflow:
        from pipelines.gate.tracking import log_gate

        log_gate(cfg, result, paths)
    return {**paths, "root": root}


def gate_root(cfg: WinnowConfig) -> str:
    """Where the gate writes: ``gate.output``, else ``<run.root>/gate``."""
    return (cfg.gate.output or f"{cfg.run.root.rstrip('/')}/gate").rstrip("/")
