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
    starts to its end."""
    p = parser()
    args, cfg = parse_config(p, argv)
    stages = cfg.pipeline.stages
    if args.from_stage and args.from_stage not in stages:
        p.exit(2, f"{p.prog}: --from {args.from_stage!r} is not one of pipeline.stages {stages}\n")
    preflight_or_exit(p, cfg, stages)
    if args.dry_run:  # reads only: no lock
        return _run(p, args, cfg, lambda spark: None)
    with locked(p, cfg, args) as late_lock:
        return _run(p, args, cfg, late_lock)


def _run(p: argparse.ArgumentParser, args: argparse.Namespace, cfg: WinnowConfig, late_lock: Any) -> int:
    from pipelines.core.hooks import late_config_errors
    from pipelines.core.runs import plan, run_and_record
    from pipelines.core.session import get_spark
    from pipelines.core.tracking import Tracker

    stages = cfg.pipeline.stages
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    steps = _plan_without_spark(cfg, stages, args) if args.dry_run else None
    spark = None
    if steps is None:
        spark = get_spark("winnow-pipeline", spark_config(cfg, args.quiet))
        late_lock(spark)
        steps = plan(spark, cfg, stages, from_stage=args.from_stage, force=args.force)
    say(f"winnow: stages {stages} -> {cfg.run.root} (config {cfg.fingerprint()[:12]})")
    say("plan:\n" + "\n".join(s.line() for s in steps))
    for line in version_notes(cfg, spark, [s.stage for s in steps if s.action == "skip"]):
        say(line)
    if args.dry_run:
        if args.quiet:
            print("\n".join(s.line() for s in steps), flush=True)
        return 0
    replace_check_or_exit(p, cfg, args, spark, [s.stage for s in steps if s.action == "run"])
    tracker = Tracker(cfg)
    tracker.start([s.stage for s in steps if s.action == "run"])
    reports = {}
    try:
        for i, step in enumerate(steps):
            later = [s.stage for s in steps[i + 1:] if s.action == "run"]  # whose checks of this stage apply
            if step.action == "skip":
                say(f"[{step.stage}] skip: {step.why}")
                upstream_checks_or_exit(p, cfg, step.stage, partial(_recorded_extra, spark, cfg, step.stage), later)
                continue
            # log=None with --quiet: no start line and no progress line, only the end line.
            reports[step.stage] = run_and_record(
                spark, cfg, step.stage, log=None if args.quiet else say, tracker=tracker
            )
            print(reports[step.stage].summary_line(), flush=True)
            # before the next stage: none runs for a run that cannot succeed (e.g. a shard.mix source
            # that ingest found no document of)
            upstream_checks_or_exit(p, cfg, step.stage, partial(lambda r: r.extra, reports[step.stage]), later)
    except late_config_errors() as e:  # a remote or Hadoop-only glob: a configuration error, found late
        tracker.finish(spark, failed=True)
        p.exit(2, f"{p.prog}: error: {e}\n")
    except BaseException:
        tracker.finish(spark, failed=True)
        raise
    tracker.finish(spark)
    if tracker.run_id and tracker.active:
        say(f"winnow: MLflow run {tracker.run_id} ({cfg.tracking.experiment or 'experiment from the environment'})")
    counts = _stage_counts(spark, cfg, stages, reports)
    from pipelines.core.outcome import EXIT_EMPTY, small_run

    if small_run(cfg, counts)[0] != EXIT_EMPTY:  # a run with no survivor is not "done": its line says why
        say(done_line(cfg, stages, counts))
    return _closing(cfg, counts)


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
