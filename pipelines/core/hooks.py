"""Where the framework finds what a stage adds to it: the optional ``pipelines/<stage>/hooks.py``.

The framework names no stage; it loops over the chain (:data:`pipelines.core.chain.CHAIN`) and asks each
stage's hooks module for one attribute. A stage without the module, or without the attribute, adds
nothing. The hooks a stage may define:

``preflight(cfg, stages) -> None``
    Checks without Spark before a run of ``stages`` (every stage's hook is called, so a stage can check
    what an earlier stage of the run will read for it); raises
    :class:`pipelines.core.preflight.PreflightError` naming the key to fix.
``input_files(spark, cfg) -> list[tuple[str, int, int]]``
    The raw files a stage that reads no table reads, sorted ``(path, size_bytes, mtime_ms)``;
    ``spark=None`` lists local paths without Spark. Their digest is the stage's input state in its
    completion record (:mod:`pipelines.core.runs`) and their size its bytes of input (progress line,
    small-input settings).
``extra_inputs(spark, cfg) -> dict[str, str]``
    What a stage reads besides the run's tables and raw input files (decontam: its evaluation sets), as
    ``label -> state`` (a digest, a Delta version): joined to its input state in its completion record, so
    a change of one reruns the stage. ``spark=None``: local state read without Spark; raises
    :class:`pipelines.core.local_state.NeedsSpark` when that is not possible.
``check_upstream(cfg, stage, extra) -> list[str]``
    Called when an earlier stage of the run ends (or is skipped as complete) and this stage will run:
    ``extra()`` gives that stage's figures; returns warning lines, raises a
    :class:`udfs.errors.UserError` when the run cannot succeed (the jobs exit 2).
``LATE_CONFIG_ERRORS: tuple[type[Exception], ...]``
    Configuration errors the stage finds only once Spark runs (the jobs exit 2 on them).
``inspect_view(spark, cfg, *, reason, kept, n, text_chars) -> str | None`` and ``inspect_sample(...)``
    What ``jobs/inspect.py --stage <stage>`` shows when the stage has its own view (a whole text) or its
    own sample (rows); ``INSPECT_WHAT`` names what that sample holds. Either returns None for options
    it has no view of its own for (the generic sample is shown).
``inspect_annotations(row) -> list[str]``
    What ``jobs/inspect.py --doc-id`` shows under the stage's line: the stage's notes on one document
    (mentions, cuts, findings) from the row it wrote (its output row, or its ``removed`` row; a dict,
    maps as dicts), whether it kept the document or removed it; ``[]`` when it noted nothing.
``warm_up() -> None``
    Imports what the stage loads lazily on the driver when it runs (a plotting library); the pipeline
    job calls it in a background thread while the Spark session starts, after importing the stage's
    package. It must only import.
``RUNS_WITHOUT_DOCUMENTS: bool``
    True for a stage that still runs after an earlier stage of the run left no document (the report);
    every other later stage is not run.
``clear_outputs(cfg) -> None``
    Called instead of the stage when it is not run because an earlier stage left no document: retracts
    files an earlier run published that would otherwise look current (shards and their manifest).
``fingerprint_keys(config) -> dict``
    Settings outside the stage's own section that change its output, from the config's plain data
    (``WinnowConfig.model_dump(mode="json")``), nested as in it (``{"audit": {...}}``): they join the
    stage fingerprint (:meth:`pipelines.core.config.WinnowConfigBase.stage_fingerprint`), so changing one
    reruns the stage, and the "config changed" line names them (:mod:`pipelines.core.provenance`).
``EMPTY_HINT: str``
    What to change when the stage kept no document, for the closing line of the run
    (:mod:`pipelines.core.outcome`).

A job beside the chain (:data:`pipelines.core.chain.BESIDE`) may define these two as well; the report
asks every package of :data:`pipelines.core.chain.PACKAGES`:

``report_part(spark, cfg) -> dict | None``
    Its part of the run report's ``stats.json`` (JSON-serialisable, stored under the package's name), or
    None when the run holds nothing of it (the part is left out).
``report_section(part) -> str``
    Its section of ``report.html`` from that part: an ``<h2>`` and its body, every value escaped
    (:mod:`pipelines.core.html`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Iterator
from functools import cache
from types import ModuleType
from typing import Any

from pipelines.core.chain import STAGES


@cache
def _hooks_module(stage: str) -> ModuleType | None:
    if importlib.util.find_spec(f"pipelines.{stage}") is None:
        return None
    if importlib.util.find_spec(f"pipelines.{stage}.hooks") is None:
        return None
    return importlib.import_module(f"pipelines.{stage}.hooks")


def hook(stage: str, name: str) -> Any:
    """Attribute ``name`` of ``pipelines/<stage>/hooks.py``, or None when the stage does not define it.

    >>> hook("ingest", "input_files").__name__, hook("report", "input_files")
    ('input_files', None)
    """
    module = _hooks_module(stage)
    return None if module is None else getattr(module, name, None)


def fingerprint_keys(stage: str, config: dict[str, Any]) -> dict[str, Any]:
    """The settings outside ``stage``'s section that its ``fingerprint_keys`` hook names ({} without one).

    Args:
        config: the whole config's plain data (``model_dump(mode="json")``, or a recorded config).
    """
    found = hook(stage, "fingerprint_keys")
    return {} if found is None else found(config)


def late_config_errors() -> tuple[type[Exception], ...]:
    """Every stage's ``LATE_CONFIG_ERRORS``, for the jobs to exit 2 on."""
    return tuple(e for _, errors in each("LATE_CONFIG_ERRORS") for e in errors)


def each(name: str, stages: Iterable[str] = STAGES) -> Iterator[tuple[str, Any]]:
    """``(stage, hook)`` for each stage of ``stages`` (in the order given) that defines hook ``name``."""
    for stage in stages:
        found = hook(stage, name)
        if found is not None:
            yield stage, found
