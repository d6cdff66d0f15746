"""MLflow tracking of a gate (``tracking.mlflow``): one parent run, one child run per variant and seed.

Logged after the models are trained, so tracking never slows or stops the gate: the parent run holds
the config as params, every verdict as metrics and ``gate.json`` / ``gate.html`` as artifacts; each
child run holds its variant and seed as params, the training loss per step and the bits per byte and
accuracy per evaluation set. A tracking failure is one warning line
(:class:`pipelines.core.tracking.Tracker`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pipelines.core.config import WinnowConfig
from pipelines.core.tracking import Tracker

VERDICT_VALUE = {"better": 1.0, "no_difference": 0.0, "worse": -1.0, "mixed": 0.5}
"""Verdicts as metric values (MLflow metrics are numbers)."""


def log_gate(cfg: WinnowConfig, result: dict[str, Any], paths: dict[str, str],
             warn: Callable[[str], None] | None = None) -> str:
    """Log a finished gate; does nothing when ``tracking.mlflow`` is off.

    Args:
        cfg: the gate's config.
        result: the content of ``gate.json``.
        paths: ``{"json": ..., "html": ...}`` files to attach to the parent run.
        warn: receives a warning line if tracking fails.

    Returns:
        The tracking status: ``ok``, ``off`` or ``failed: ...``.
    """
    t = Tracker(cfg, warn)
    t.start(["gate"])
    if not t.active:
        return t.status
    try:
        from mlflow.entities import Metric

        client = t.client
        seeds = result["budget"]["seeds"]
        path_of = {v["name"]: v["path"] for v in result["variants"]}
        for name, runs in result["loss_curves"].items():
            for k, losses in enumerate(runs):
                tags = t.tags(**{"mlflow.parentRunId": t.run_id, "winnow.gate.variant": name})
                run_name = f"gate {name} seed {seeds[k]}"
                child = client.create_run(t.experiment_id, run_name=run_name, tags=tags)
                cid = child.info.run_id
                final = {f"bpb.{s}": v[k] for s, v in result["bits_per_byte"][name].items()}
                final |= {f"accuracy.{s}": v[k] for s, v in result["accuracy"].get(name, {}).items()}
                t.log(cid, params={"variant": name, "path": path_of[name], "seed": seeds[k]}, metrics=final)
                now = int(time.time() * 1000)
                steps = [Metric("train_loss", float(x), now, i + 1) for i, x in enumerate(losses)]
                for lo in range(0, len(steps), 1000):
                    client.log_batch(cid, metrics=steps[lo : lo + 1000])
                client.set_terminated(cid, "FINISHED")
        verdicts = {f"verdict.{n}": VERDICT_VALUE[v] for n, v in result["verdicts"].items()}
        diffs = {f"diff_bpb.{n}.{s}": c["mean"] for n, per in result["comparisons"].items()
                 for s, c in per.items()}
        t.log(t.run_id, metrics={**verdicts, **diffs, "tokens_per_s": result["speed"]["tokens_per_s"]})
        for p in paths.values():
            client.log_artifact(t.run_id, p)
        client.set_terminated(t.run_id, "FINISHED")
    except Exception as e:  # noqa: BLE001 - tracking must never fail the gate
        t.fail("logging the gate", e)
    return t.status
