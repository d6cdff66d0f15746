"""Run the configured chain of stages (``pipeline.stages``) in one SparkSession, resuming where it stopped.

``python jobs/pipeline.py --conf conf/local.yaml`` or ``spark-submit jobs/pipeline.py ...``. Stages
whose completion record matches the current config and inputs are skipped (see pipelines/core/runs.py);
``--from STAGE`` reruns from a stage, ``--force`` reruns everything, ``--dry-run`` prints the plan only.
"""

import os
import sys

# Python puts this script's folder first on sys.path, where jobs/tokenize.py and jobs/inspect.py would
# shadow the standard library modules of the same names; put the project root there instead.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])

import argparse
from collections.abc import Sequence
from functools import partial
from typing import Any

from jobs._cli import (
    add_write_options,
    base_parser,
    locked,
    parse_config,
    preflight_beside,
    preflight_or_exit,
    replace_check_or_exit,
    spark_config,
    upstream_checks_or_exit,
    version_notes,
)
from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig


def parser() -> argparse.ArgumentParser:
    """The pipeline's argument parser: the common options plus ``--from``, ``--force``, ``--dry-run``."""
    p = base_parser("pipeline.py", "Run the Winnow chain of stages, skipping the ones already complete")
    p.add_argument("--from", dest="from_stage", choices=STAGES, metavar="STAGE",
                   help=f"rerun this stage and every later one, whatever their records say; one of {list(STAGES)}")
    p.add_argument("--force", action="store_true", help="rerun every configured stage")
    p.add_argument("--dry-run", action="store_true", help="print the plan (run/skip and why) and exit")
    return add_write_options(p)


def main(argv: Sequence[str] | None = None) -> int:
    """Plan and run the configured stages, skipping the complete ones; returns the exit status.

    Every run but ``--dry-run`` holds the run root's lock (:mod:`pipelines.core.lock`) from before Spark
    starts to its end. The refusals come before Spark starts, the quick ones first: the lock held by
    another run, then (a local run root) a rerun over another config without ``--replace``, then the
    preflight checks."""
    p = parser()
    args, cfg = parse_config(p, argv)
    stages = cfg.pipeline.stages
    if args.from_stage and args.from_stage not in stages:
        p.exit(2, f"{p.prog}: --from {args.from_stage!r} is not one of pipeline.stages {stages}\n")
    if args.dry_run:  # reads only: no lock
        return _run(p, args, cfg, lambda spark: None)
    # The lock first: a run root in use is refused at once, before the preflight checks' imports and reads.
    with locked(p, cfg, args) as late_lock:
        return _run(p, args, cfg, late_lock)


def _run(p: argparse.ArgumentParser, args: argparse.Namespace, cfg: WinnowConfig, late_lock: Any) -> int:
    stages = cfg.pipeline.stages
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    spark, steps = _prepare(p, args, cfg, late_lock)
    say(f"winnow: stages {stages} -> {cfg.run.root} (config {cfg.fingerprint()[:12]})")
    say("plan:\n" + "\n".join(s.line() for s in steps))
    for line in version_notes(cfg, spark, [s.stage for s in steps if s.action == "skip"]):
        say(line)
    if spark is not None and steps and stages[0] != STAGES[0]:  # a chain that starts after ingest
        from pipelines.core.runs import stale_upstream

        if (line := stale_upstream(spark, cfg, stages[0])) is not None:
            print(line, file=sys.stderr, flush=True)
    if args.dry_run:
        if args.quiet:
            print("\n".join(s.line() for s in steps), flush=True)
        _say_lock_holder(cfg, spark)
        _say_replace_refusal(cfg, args, spark, [s.stage for s in steps if s.action == "run"])
        return 0
    reports = _run_steps(p, args, cfg, spark, steps, say)
    counts = _stage_counts(spark, cfg, stages, reports)
    from pipelines.core.outcome import EXIT_EMPTY, small_run

    if small_run(cfg, counts)[0] != EXIT_EMPTY:  # a run with no survivor is not "done": its line says why
        say(done_line(cfg, stages, counts))
    return _closing(cfg, counts)


def _prepare(p: argparse.ArgumentParser, args: argparse.Namespace, cfg: WinnowConfig,
             late_lock: Any) -> tuple[Any, list[Any]]:
    """The Spark session (None for a ``--dry-run`` of a local run root) and the plan, after the refusals.

    A local run root is planned from its files, and a rerun over another config refused, before a JVM
    starts (about a second, not a Spark session's start-up); then the preflight checks (seconds: the
    tokenizer's), beside the session's start-up (before it, for a ``--dry-run``); other run roots are
    planned, and refused, with Spark. Exits 2 on a refusal.
    """
    from pipelines.core.runs import plan
    from pipelines.core.session import get_spark

    stages = cfg.pipeline.stages
    steps = _plan_without_spark(cfg, stages, args)
    checked = steps is not None and not args.dry_run
    if checked:
        replace_check_or_exit(p, cfg, args, None, [s.stage for s in steps if s.action == "run"])
    if steps is not None and args.dry_run:
        preflight_or_exit(p, cfg, stages)
        return None, steps
    with preflight_beside(p, cfg, stages):
        spark = get_spark("winnow-pipeline", spark_config(cfg, args.quiet), warm_up=partial(_warm_up, stages))
    late_lock(spark)
    if steps is None:  # the local plan equals Spark's (tests/test_small_runs.py): kept, under the lock
        steps = plan(spark, cfg, stages, from_stage=args.from_stage, force=args.force)
    if not checked and not args.dry_run:
        replace_check_or_exit(p, cfg, args, spark, [s.stage for s in steps if s.action == "run"])
    return spark, steps


def _warm_up(stages: list[str]) -> None:
    """Import the package of each stage of ``stages`` and call its ``warm_up`` hook
    (:mod:`pipelines.core.hooks`): run while the Spark session starts (:func:`get_spark`)."""
    import importlib

    from pipelines.core import hooks

    for stage in stages:
        importlib.import_module(f"pipelines.{stage}")
    for _, warm in hooks.each("warm_up", stages):
        warm()


def _run_steps(p: argparse.ArgumentParser, args: argparse.Namespace, cfg: WinnowConfig, spark: Any,
               steps: list[Any], say: Any) -> dict[str, Any]:
    """Run or skip each step of the plan in order; returns the reports of the stages that ran.

    Once a stage leaves no document, the later stages are not run (one line says which), except those
    that declare ``RUNS_WITHOUT_DOCUMENTS`` (the report, which shows the funnel down to zero); a stage
    not run retracts what an earlier run published (its ``clear_outputs`` hook: the shards).
    """
    from pipelines.core import hooks
    from pipelines.core.hooks import late_config_errors
    from pipelines.core.runs import run_and_record
    from pipelines.core.tracking import Tracker

    tracker = Tracker(cfg)
    tracker.start([s.stage for s in steps if s.action == "run"])
    reports: dict[str, Any] = {}
    emptied: str | None = None  # the stage that left no document
    try:
        for i, step in enumerate(steps):
            if emptied is not None and not hooks.hook(step.stage, "RUNS_WITHOUT_DOCUMENTS"):
                if (clear := hooks.hook(step.stage, "clear_outputs")) is not None:
                    clear(cfg)
                continue
            later = [s.stage for s in steps[i + 1:] if s.action == "run"]  # whose checks of this stage apply
            if step.action == "skip":
                say(f"[{step.stage}] skip: {step.why}")
                extra, rows_out = partial(_recorded_extra, spark, cfg, step.stage), _recorded_rows_out(spark, cfg, step.stage)
            else:
                # log=None with --quiet: no start line and no progress line, only the end line.
                report = reports[step.stage] = run_and_record(
                    spark, cfg, step.stage, log=None if args.quiet else say, tracker=tracker, why=step.why
                )
                print(report.summary_line(), flush=True)
                extra, rows_out = partial(lambda r: r.extra, report), report.rows_out
            if rows_out == 0 and step is not steps[-1]:
                emptied = step.stage
                not_run = [s.stage for s in steps[i + 1:] if not hooks.hook(s.stage, "RUNS_WITHOUT_DOCUMENTS")]
                if not_run:
                    say(f"winnow: {step.stage} left no document; not run: {', '.join(not_run)}")
                continue
            # before the next stage: none runs for a run that cannot succeed (e.g. a shard.mix source
            # that ingest found no document of)
            upstream_checks_or_exit(p, cfg, step.stage, extra, later)
    except late_config_errors() as e:  # a remote or Hadoop-only glob: a configuration error, found late
        tracker.finish(spark, failed=True)
        p.exit(2, f"{p.prog}: error: {e}\n")
    except BaseException:
        tracker.finish(spark, failed=True)
        raise
    tracker.finish(spark)
    if tracker.run_id and tracker.active:
        say(f"winnow: MLflow run {tracker.run_id} ({cfg.tracking.experiment or 'experiment from the environment'})")
    return reports


def _say_lock_holder(cfg: WinnowConfig, spark: Any) -> None:
    """For ``--dry-run``, which takes no lock: one line on stderr when another live run holds the run root
    (a run now would exit 2; :mod:`pipelines.core.lock`)."""
    from pipelines.core.lock import holder, lock_path

    owner = holder(cfg, spark)
    if owner is not None:
        print(f"winnow: run.root {cfg.run.root} is in use by another run: {owner} (lock {lock_path(cfg)});"
              " running now would be refused (exit 2) until it ends", file=sys.stderr, flush=True)


def _say_replace_refusal(cfg: WinnowConfig, args: argparse.Namespace, spark: Any, stages: list[str]) -> None:
    """For ``--dry-run``: one line on stderr when a run now would be refused for running ``stages`` over
    another config than the run root's without ``--replace`` (:func:`jobs._cli.replace_check_or_exit`)."""
    from pipelines.core import provenance
    from pipelines.core.runs import latest_records

    changed = provenance.replaced_stages(spark, cfg, stages, latest_records(spark, cfg))
    if changed and not args.replace:
        print(f"winnow: running now would be refused (exit 2): {provenance.replace_refusal(cfg, changed)}",
              file=sys.stderr, flush=True)


def done_line(cfg: WinnowConfig, stages: list[str], counts: dict[str, Any] | None = None) -> str:
    """Where this run's outputs are: the tables (a folder, or ``<catalog>.<schema>`` in metastore mode),
    and the shards and report only when ``stages`` write them.

    Args:
        counts: stage -> its report or completion record (:func:`_stage_counts`); when given, shards are
            named only if the shard stage wrote some: with no document left it writes no ``shards/``.
    """
    from pipelines.core.outcome import counts as stage_counts

    tables = cfg.table_path("<name>").removesuffix(".<name>").removesuffix("/<name>")
    parts = [f"tables {tables}" + ("" if cfg.run.catalog else "/")]
    shard = (counts or {}).get("shard")
    if "shard" in stages and not (shard is not None and stage_counts(shard)["extra"].get("empty")):
        parts.append(f"shards {cfg.shard_root}/")
    if "report" in stages:
        parts.append(f"report {cfg.report_path}/")
    return f"winnow: done. Outputs: {', '.join(parts)}, effective configs {cfg.config_path}/"


def _plan_without_spark(cfg: WinnowConfig, stages: list[str], args: argparse.Namespace) -> list[Any] | None:
    """The plan read from local files (Delta logs, markers, input globs) with no JVM, or None when the run
    is not local or its ``_runs`` log cannot be read that way (then Spark plans, as a real run does)."""
    from pipelines.core import local_state
    from pipelines.core.runs import plan

    if not local_state.can_plan(cfg):
        return None
    try:
        return plan(None, cfg, stages, from_stage=args.from_stage, force=args.force)
    except local_state.NeedsSpark:
        return None


def _recorded_extra(spark: Any, cfg: WinnowConfig, stage: str) -> dict[str, Any]:
    """The ``extra`` figures of ``stage``'s latest completion record ({} without one)."""
    import json

    from pipelines.core.runs import latest_records

    rec = latest_records(spark, cfg).get(stage)
    return json.loads(rec["extra"]) if rec else {}


def _recorded_rows_out(spark: Any, cfg: WinnowConfig, stage: str) -> int | None:
    """``rows_out`` of ``stage``'s latest completion record (None without one)."""
    from pipelines.core.runs import latest_records

    rec = latest_records(spark, cfg).get(stage)
    return None if rec is None else int(rec["rows_out"])


def _stage_counts(spark: Any, cfg: WinnowConfig, stages: list[str], reports: dict[str, Any]) -> dict[str, Any]:
    """Stage -> this run's report of it, or its completion record when it was skipped."""
    from pipelines.core.runs import latest_records

    counts = dict(reports)
    if any(s not in reports for s in stages):  # skipped stages: their completion records hold the counts
        counts = {s: r for s, r in latest_records(spark, cfg).items() if s in stages} | counts
    return counts


def _closing(cfg: WinnowConfig, counts: dict[str, Any]) -> int:
    """Print the small-run line (no survivor, fewer documents than shards) and return the exit status."""
    from pipelines.core.outcome import small_run

    status, line = small_run(cfg, counts)
    if line:
        print(line, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
