"""The whole gate (:func:`run`): train, score, write ``gate.json`` / ``gate.html``, log to MLflow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.core.config import WinnowConfig


def run(
    cfg: WinnowConfig,
    log: Callable[[str], Any] = print,
    force_unlock: bool = False,
    command: str | None = None,
) -> dict[str, str]:
    """Run the gate of ``cfg.gate`` and write its outputs, holding the gate root's lock.

    The variants are checked first (nothing is created for a usage error), then the gate root is created
    and checked writable, then its lock (``<gate root>/_lock.json``, :mod:`pipelines.core.lock`) is taken
    for the whole gate, so two gates writing one root do not interleave their outputs. The variants are
    only read: their own run locks are not taken, but a variant whose run is in progress is refused.

    Args:
        cfg: a :class:`~pipelines.core.config.WinnowConfig` whose ``gate.variants`` name two or more
            shard sets.
        log: receives progress and summary lines.
        force_unlock: take the gate root's lock even when its owner looks alive.
        command: written into the lock for another gate's message (default: this process's arguments).

    Returns:
        ``{"json": path of gate.json, "html": path of gate.html, "root": the gate root}``.

    Raises:
        pipelines.gate.shards.GateUsageError: fewer than two variants, or one given twice.
        pipelines.core.lock.RunLockedError: the gate root is held by another live gate, or a variant's
            run is in progress (one line naming the owner).
        pipelines.gate.shards.GateInputError: a variant or evaluation input that cannot be used, or a gate
            root that cannot be written (checked before any model is trained).
    """
    from pipelines.gate import output
    from pipelines.gate.runner import open_variants, run_gate

    variants = open_variants(cfg.gate.variants)
    root = gate_root(cfg)
    _writable_or_raise(root)
    with _gate_lock(cfg, root, force_unlock, command) as held:
        for note in held.notes:
            log(note)
        result = run_gate(cfg, log, variants)
        paths = output.write(result, root, cfg.report.plot_format)
    for line in output.summary_lines(result):
        log(line)
    if cfg.tracking.mlflow:
        from pipelines.gate.tracking import log_gate

        log_gate(cfg, result, paths)
    return {**paths, "root": root}


def _gate_lock(cfg: WinnowConfig, root: str, force_unlock: bool, command: str | None) -> Any:
    """Take ``<root>/_lock.json`` (the run lock's format and stale rule, with the gate root as its root).

    Raises:
        pipelines.core.lock.RunLockedError: another live gate holds it; one line naming its owner.
    """
    import json
    from pathlib import Path

    from pipelines.core import lock

    lcfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"root": root})})
    try:
        return lock.acquire(lcfg, force_unlock=force_unlock, command=command)
    except lock.RunLockedError as e:
        path = Path(lock.lock_path(lcfg))
        try:
            owner = lock.describe(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError):  # released in between: the lock's own message stands
            raise e from None
        raise lock.RunLockedError(
            f"gate root {root} is in use by another gate: {owner} (lock {path}). Wait for it to end or "
            "give another --out; if that gate is gone, rerun with --force-unlock"
        ) from None


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
