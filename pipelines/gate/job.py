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
        pipelines.gate.shards.GateInputError: a variant or evaluation input that cannot be used, or a gate
            root that cannot be written (checked before any model is trained).
    """
    from pipelines.gate import output
    from pipelines.gate.runner import run_gate

    root = gate_root(cfg)
    _writable_or_raise(root)
    result = run_gate(cfg, log)
    paths = output.write(result, root, cfg.report.plot_format)
    for line in output.summary_lines(result):
        log(line)
    if cfg.tracking.mlflow:
        from pipelines.gate.tracking import log_gate

        log_gate(cfg, result, paths)
    return {**paths, "root": root}


def _writable_or_raise(root: str) -> None:
    """Create the gate root and check that a file can be written in it, before training starts (a root
    that fails only when the outputs are written would throw away every trained model)."""
    import os
    import tempfile
    from pathlib import Path

    from pipelines.gate.shards import GateInputError

    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GateInputError(f"gate.output={root!r}: cannot write there ({e.strerror or e}); "
                             "give another --out or gate.output") from None


def gate_root(cfg: WinnowConfig) -> str:
    """Where the gate writes: ``gate.output``, else ``<run.root>/gate``."""
    return (cfg.gate.output or f"{cfg.run.root.rstrip('/')}/gate").rstrip("/")
