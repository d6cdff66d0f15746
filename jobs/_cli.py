"""Shared argument parsing for the ``jobs/*.py`` entry points (kept out of ``pipelines/`` by design)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from pipelines.core.config import ConfigError, SparkConfig, WinnowConfig, load_config
from udfs.errors import UserError

MEMORY_HINT = (
    "out of memory in {where}. Give Spark more: --set 'spark.conf={{spark.driver.memory: 4g}}' (local runs: "
    "every task runs in the driver; on a cluster spark.executor.memory and "
    "spark.executor.memoryOverhead for Python workers), or make each step smaller: ingest.batch_rows / "
    "ingest.batch_bytes (ingest), spark.arrow_batch_rows (Arrow batches of the other stages), "
    "spark.shuffle_partitions (more, smaller shuffle partitions). WINNOW_TRACEBACK=1 shows the traceback."
)


_CONTEXT_GONE = ('"org.apache.spark.SparkContext.dagScheduler()" is null', "Cannot call methods on a stopped SparkContext",
                 "SparkContext was shut down")
"""What the next Spark call reports once an ``OutOfMemoryError`` in a task thread has made Spark stop the
SparkContext of a local run (``SparkUncaughtExceptionHandler``): the error itself is only in the log."""


def memory_error(err: BaseException) -> str | None:
    """The one-line advice for an out-of-memory failure anywhere in ``err``'s chain, else ``None``.

    Recognises a JVM ``java.lang.OutOfMemoryError`` (driver or executor, as Py4J or Spark reports
    it), a Python worker's ``MemoryError`` and a Python worker killed for its memory, the driver
    JVM gone (Py4J loses its connection, most often after an OutOfMemoryError), and a SparkContext
    stopped under a running job (:data:`_CONTEXT_GONE`).
    """
    for e in _chain(err):
        text = f"{type(e).__name__}: {e}"
        if "OutOfMemoryError" in text or "GC overhead limit exceeded" in text:
            return MEMORY_HINT.format(where="the Spark JVM (java.lang.OutOfMemoryError)")
        if isinstance(e, MemoryError) or "MemoryError" in text or "exit code 137" in text:
            return MEMORY_HINT.format(where="a Python worker")
        if type(e).__name__ == "Py4JNetworkError" or "Answer from Java side is empty" in text:
            return MEMORY_HINT.format(where="the Spark driver (its JVM stopped answering, most often out of memory)")
        if any(m in text for m in _CONTEXT_GONE):
            return MEMORY_HINT.format(where="the Spark driver (its SparkContext stopped, most often after an "
                                            "OutOfMemoryError in a task)")
    return None


def disk_full(err: BaseException) -> str | None:
    """The one-line message for a full disk anywhere in ``err``'s chain (``ENOSPC``, or the JVM's "No space
    left on device"), else ``None``."""
    import errno

    for e in _chain(err):
        if (isinstance(e, OSError) and e.errno == errno.ENOSPC) or "No space left on device" in str(e):
            where = f" writing {e.filename}" if isinstance(e, OSError) and e.filename else ""
            return (f"no space left on device{where}. Free space there (or point run.root and "
                    "spark.local.dir at a larger disk) and rerun: completed stages are skipped. "
                    "WINNOW_TRACEBACK=1 shows the traceback.")
    return None


def _in_chain(err: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``err`` or an exception it was raised from or while handling (``__cause__``, ``__context__``)
    is a ``kind``: a Py4J call in a clean-up block after Ctrl-C fails with the interrupt as its context."""
    return any(isinstance(e, kind) for e in _chain(err))


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err``, then each exception it was raised from or while handling (``__cause__``, else
    ``__context__``), each once (a cycle ends the walk)."""
    seen = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _user_error_hook(kind: type[BaseException], err: BaseException, tb: Any) -> None:
    """``sys.excepthook`` of a job: an out-of-memory failure prints one line naming the settings to
    change, a :class:`~udfs.errors.UserError` prints its message (it says what to do), Ctrl-C one line,
    all without a traceback unless ``WINNOW_TRACEBACK`` is set; anything else keeps its traceback. Either
    way the uncaught exception still exits with status 1 (Ctrl-C: as killed by SIGINT)."""
    prog = _prog()
    if os.environ.get("WINNOW_TRACEBACK"):
        sys.__excepthook__(kind, err, tb)
    elif _in_chain(err, KeyboardInterrupt):  # Ctrl-C, or a clean-up call it broke (exit 130, or 1 for the latter)
        print(f"{prog}: interrupted; {_rerun_hint(prog)}", file=sys.stderr, flush=True)
    elif (said := memory_error(err) or disk_full(err)) is not None:
        from pipelines.core.session import logs_off_quietly

        logs_off_quietly()
        print(f"{prog}: error: {said}", file=sys.stderr, flush=True)
    elif not isinstance(err, UserError):
        sys.__excepthook__(kind, err, tb)
    else:
        print(f"{prog}: error: {err}", file=sys.stderr, flush=True)


_CALLED_AS: list[str] = []
"""The command the user typed when it is not the script's name (``winnow run`` calls jobs/pipeline.py)."""


def called_as(command: str) -> None:
    """Name the job after the command that runs it (``winnow run``): usage lines, errors and the
    interrupt line then say what the user typed, not ``pipeline.py``."""
    _CALLED_AS[:] = [command]


def _prog(script: str | None = None) -> str:
    return _CALLED_AS[0] if _CALLED_AS else script or os.path.basename(sys.argv[0] or "winnow")


def _rerun_hint(prog: str) -> str:
    """What to run after an interrupted job: the command the user typed (``make run`` starts
    ``jobs/pipeline.py`` under make, which sets ``MAKELEVEL``), and what a rerun does."""
    again = "the same make command" if os.environ.get("MAKELEVEL") else "the same command"
    if prog in ("pipeline.py", "winnow run"):
        return f"{again} again skips the stages that completed"
    return f"the stage did not complete; {again} again runs it"


class Terminated(SystemExit):
    """Raised on the main thread by SIGTERM (:func:`_on_sigterm`), with exit status 143 (128 + 15)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM, as schedulers and ``kill`` stop a job: one line, the jobs cancelled quietly
    (:func:`pipelines.core.session.cancel_quietly`), then :class:`Terminated` so the clean-up runs as on
    Ctrl-C: the run lock released, ingest's spool folder removed, the stage recorded as failed."""
    from pipelines.core.session import cancel_quietly

    prog = _prog()
    print(f"{prog}: terminated (SIGTERM); {_rerun_hint(prog)}", file=sys.stderr, flush=True)
    cancel_quietly()
    raise Terminated(128 + signum)


@contextmanager
def stops_cleanly() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (:func:`_on_sigterm`) instead of ending
    the process at once, and a failure of a clean-up call that Ctrl-C or SIGTERM broke (a Py4J error
    with the interrupt as its context) leaves the block as that interrupt, so the job exits 130 or 143.
    The earlier SIGTERM handler is back afterwards: a job called in-process (a test, a notebook) leaves
    its caller's handling as it was. Signal handlers only on the main thread, where Python runs them."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    try:
        yield
    except BaseException as e:
        if not isinstance(e, Terminated) and _in_chain(e, Terminated):
            raise Terminated(128 + signal.SIGTERM) from e
        if not isinstance(e, KeyboardInterrupt) and _in_chain(e, KeyboardInterrupt):
            raise KeyboardInterrupt from e
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)


def install_error_hook() -> None:
    """Install :func:`_user_error_hook` as ``sys.excepthook``; every job does so when it starts (in
    :func:`parse_config`), not on import, so importing this module changes nothing."""
    sys.excepthook = _user_error_hook


def base_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser with the options every job accepts: ``--conf FILE`` (repeatable) and ``--set K=V``."""
    p = argparse.ArgumentParser(prog=_prog(prog), description=description)
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML config file; repeatable, later files win (defaults are built in, see conf/default.yaml)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one key, value parsed as YAML, e.g. --set dedup.threshold=0.85; repeatable",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="for schedulers: print only the final summary line of each stage, no progress bar, Spark logs at ERROR",
    )
    return p


def spark_config(cfg: WinnowConfig, quiet: bool) -> SparkConfig:
    """The ``spark`` section with Spark's console progress bar off unless set explicitly, and log
    level ERROR with ``--quiet``.

    Winnow prints its own progress (:mod:`pipelines.core.progress`: redrawn on a terminal, a line every
    ``pipeline.progress_s`` seconds in a log); Spark's bar would redraw over it on the same stderr.
    """
    conf = dict(cfg.spark.conf)
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    return cfg.spark.model_copy(update={"conf": conf, "log_level": "ERROR" if quiet else cfg.spark.log_level})

class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is at the time of the record (pytest swaps it per test)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """A root-logger filter: False for the records Py4J logs on the root logger itself.

    Py4J logs a lost or interrupted call with ``logging.exception`` (``GatewayClient.send_command``),
    so on Ctrl-C, or when the driver JVM is gone, each Py4J call still in flight printed "ERROR:root:"
    and a traceback; the failure itself still reaches the job as an exception (:func:`_user_error_hook`).
    """
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def configure_logging(quiet: bool) -> None:
    """Send the ``pipelines.*`` loggers' INFO lines (e.g. dedup's LSH settings) to stdout; WARNING with ``--quiet``.

    Only Winnow's own loggers: py4j and pyspark log at INFO too, and their lines are noise here. Py4J's
    records, on the root logger (:func:`_not_from_py4j`) or its own, are dropped unless
    ``WINNOW_TRACEBACK`` is set.
    """
    root = logging.getLogger()
    if not os.environ.get("WINNOW_TRACEBACK") and _not_from_py4j not in root.filters:
        root.addFilter(_not_from_py4j)
        # py4j's own loggers (a connection closed under Ctrl-C): their records stop at py4j's NullHandler
        logging.getLogger("py4j").propagate = False
    logger = logging.getLogger("pipelines")
    if not any(isinstance(h, _StdoutHandler) for h in logger.handlers):
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


def parse_config(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> tuple[argparse.Namespace, WinnowConfig]:
    """Parse ``argv`` and load the config; a bad config exits with status 2 and the error message."""
    args = parser.parse_args(argv)
    install_error_hook()
    configure_logging(args.quiet)
    try:
        cfg = load_config(args.conf, args.overrides)
    except ConfigError as e:
        parser.exit(2, f"{parser.prog}: {e}\n")
    return args, cfg

def preflight_or_exit(parser: argparse.ArgumentParser, cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """Run :func:`pipelines.core.preflight.check` before Spark starts; a failure exits with status 2."""
    from pipelines.core.preflight import PreflightError, check

    try:
        check(cfg, stages)
    except PreflightError as e:
        parser.exit(2, f"{parser.prog}: {e}\n")


@contextmanager
def preflight_beside(parser: argparse.ArgumentParser, cfg: WinnowConfig, stages: Sequence[str]) -> Iterator[None]:
    """Run :func:`pipelines.core.preflight.check` in a thread while the block runs (the Spark session's
    start: seconds in which this thread mostly waits for the JVM, and the checks load a tokenizer);
    when the block ends, a failed check exits with status 2, as :func:`preflight_or_exit`. When the
    block raises and the checks failed, the checks' message is the one the user gets (a bad setting can
    make the session's start fail too)."""
    import threading

    from pipelines.core.preflight import PreflightError, check

    failed: list[PreflightError] = []

    def run() -> None:
        try:
            check(cfg, stages)
        except PreflightError as e:
            failed.append(e)

    worker = threading.Thread(target=run, name="winnow-preflight", daemon=True)
    worker.start()
    try:
        yield
    finally:  # a failed check's exit replaces the block's own error, if any
        worker.join()
        if failed:
            parser.exit(2, f"{parser.prog}: {failed[0]}\n")


def upstream_checks_or_exit(parser: argparse.ArgumentParser, cfg: WinnowConfig, stage: str,
                            extra: Callable[[], dict[str, Any]], later: Sequence[str]) -> None:
    """After ``stage`` ran or was skipped: the ``check_upstream`` hook of each stage of ``later`` (the
    stages still to run, :mod:`pipelines.core.hooks`); warnings go to stderr, a failed check exits 2."""
    from pipelines.core import hooks

    try:
        for _, check in hooks.each("check_upstream", later):
            for line in check(cfg, stage, extra):
                print(line, file=sys.stderr, flush=True)
    except UserError as e:
        parser.exit(2, f"{parser.prog}: {e}\n")


def add_write_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of a job that writes under ``run.root``: ``--force-unlock`` (the run lock,
    :mod:`pipelines.core.lock`) and ``--replace`` (a config that differs from the run's recorded one,
    :mod:`pipelines.core.provenance`)."""
    p.add_argument("--force-unlock", action="store_true",
                   help="remove the run root's lock even when its owner looks alive (it crashed on another host)")
    p.add_argument("--replace", action="store_true",
                   help="rerun stages whose config differs from the one the run root was made with, replacing "
                        "their tables (a new run.root keeps both runs)")
    return p


def stage_parser(stage: str) -> argparse.ArgumentParser:
    """The argument parser of ``jobs/<stage>.py`` (the common options and :func:`add_write_options`)."""
    return add_write_options(base_parser(f"{stage}.py", f"Winnow {stage} stage"))


def lock_or_exit(parser: argparse.ArgumentParser, cfg: WinnowConfig, args: argparse.Namespace,
                 spark: Any = None) -> Any:
    """Take the run root's lock (:func:`pipelines.core.lock.acquire`) before anything is written.

    Returns:
        The held :class:`~pipelines.core.lock.RunLock`, or None when the root is on a Hadoop filesystem
        and ``spark`` is None (call again once the session exists). Another live run holding the lock
        exits with status 2 and one line naming it.
    """
    from pipelines.core import lock
    from pipelines.core.preflight import PreflightError, check_writable_root

    if spark is None and lock.needs_spark(cfg):
        return None
    try:
        # The lock is the first thing written under the root: a root that is a file or cannot be
        # written is named here, not in the preflight checks that run after the lock is held.
        check_writable_root(cfg.run.root)
        held = lock.acquire(cfg, force_unlock=getattr(args, "force_unlock", False), spark=spark,
                            command=f"{parser.prog} " + " ".join(sys.argv[1:]))
    except (lock.RunLockedError, PreflightError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    except OSError as e:  # the root passed the check, then its lock could not be made (a race, a mount)
        parser.exit(2, f"{parser.prog}: error: run.root={cfg.run.root!r}: cannot make its lock file: "
                       f"{e.strerror or e}\n")
    for line in held.notes:
        print(line, file=sys.stderr, flush=True)
    return held


def replace_check_or_exit(parser: argparse.ArgumentParser, cfg: WinnowConfig, args: argparse.Namespace, spark: Any,
                          stages: Sequence[str]) -> None:
    """Refuse (exit 2) to run ``stages`` when one of them was completed in this run root with another config,
    unless ``--replace`` was given: the message lists the changed keys, from what to what
    (:func:`pipelines.core.provenance.replaced_stages`). With ``--replace`` one line says what is replaced.
    """
    from pipelines.core import provenance
    from pipelines.core.runs import latest_records

    changed = provenance.replaced_stages(spark, cfg, stages, latest_records(spark, cfg))
    if not changed:
        return
    if not getattr(args, "replace", False):
        parser.exit(2, f"{parser.prog}: error: {provenance.replace_refusal(cfg, changed)}\n")
    print(f"winnow: --replace: the tables of {', '.join(changed)} are replaced with the new config", flush=True)


def version_notes(cfg: WinnowConfig, spark: Any, stages: Sequence[str]) -> list[str]:
    """One line per stage of ``stages`` (kept from an earlier run) whose recorded library or model versions
    differ from this process's: its tables stay as they were made, ``--from STAGE`` remakes them."""
    from pipelines.core import provenance
    from pipelines.core.runs import latest_records
    from pipelines.core.versions import version_changes, versions

    current = versions(cfg)
    lines = []
    for stage, recorded in provenance.recorded_versions(spark, cfg, latest_records(spark, cfg)).items():
        if stage in stages and (changes := version_changes(recorded, current)):
            lines.append(f"[{stage}] kept tables were made with other versions ({provenance.describe_changes(changes)});"
                         f" --from {stage} remakes them")
    return lines


def run_single_stage(
    stage: str,
    argv: Sequence[str] | None = None,
    parser: argparse.ArgumentParser | None = None,
    options: Callable[[argparse.Namespace], dict[str, Any]] | None = None,
) -> int:
    """Entry point body of ``jobs/<stage>.py``: parse, build the session, run one stage, print a summary.

    Args:
        parser: the job's parser when it has options of its own (default :func:`stage_parser`).
        options: maps the parsed arguments to keyword arguments of the stage's ``run``.
    """
    from pipelines.core.session import get_spark

    p = parser or stage_parser(stage)
    args, cfg = parse_config(p, argv)
    with locked(p, cfg, args) as late_lock:
        preflight_or_exit(p, cfg, [stage])
        spark = get_spark(f"winnow-{stage}", spark_config(cfg, args.quiet))
        late_lock(spark)
        return _run_one(p, args, cfg, stage, spark, options)


@contextmanager
def locked(parser: argparse.ArgumentParser, cfg: WinnowConfig, args: argparse.Namespace) -> Iterator[Callable[[Any], None]]:
    """Hold the run root's lock (:func:`lock_or_exit`) while the block runs, released however it ends,
    SIGTERM included (:func:`stops_cleanly`).

    Yields:
        A function to call with the Spark session once it exists: it takes the lock then when the root
        is on a Hadoop filesystem (:func:`pipelines.core.lock.needs_spark`), and does nothing otherwise.
    """
    with ExitStack() as stack:
        stack.enter_context(stops_cleanly())
        held = lock_or_exit(parser, cfg, args)
        if held is not None:
            stack.callback(held.release)

        def late(spark: Any) -> None:
            if held is None:
                stack.callback(lock_or_exit(parser, cfg, args, spark).release)

        yield late


def _run_one(p: argparse.ArgumentParser, args: argparse.Namespace, cfg: WinnowConfig, stage: str, spark: Any,
             options: Callable[[argparse.Namespace], dict[str, Any]] | None) -> int:
    from pipelines.core.runs import run_and_record, stale_upstream
    from pipelines.core.tracking import Tracker

    replace_check_or_exit(p, cfg, args, spark, [stage])
    if (line := stale_upstream(spark, cfg, stage)) is not None:
        print(line, file=sys.stderr, flush=True)
    # The completion record lets jobs/pipeline.py skip this stage later when nothing changed.
    tracker = Tracker(cfg)
    tracker.start([stage])
    from pipelines.core.hooks import late_config_errors

    try:
        report = run_and_record(spark, cfg, stage, log=None if args.quiet else _say, tracker=tracker,
                                **(options(args) if options else {}))
    except late_config_errors() as e:  # e.g. a remote or Hadoop-only glob: a configuration error, found late
        tracker.finish(spark, failed=True)
        p.exit(2, f"{p.prog}: error: {e}\n")
    except BaseException:
        tracker.finish(spark, failed=True)
        raise
    tracker.finish(spark)
    print(report.summary_line(), flush=True)
    for name, loc in sorted(report.outputs.items()):
        print(f"  {name}: {loc}", flush=True)
    from pipelines.core.chain import STAGES
    from pipelines.core.outcome import small_run

    later = [s for s in cfg.pipeline.stages if STAGES.index(s) > STAGES.index(stage)]
    upstream_checks_or_exit(p, cfg, stage, lambda: report.extra, later)
    status, line = small_run(cfg, {stage: report})
    if line:
        print(line, flush=True)
    return status

def _say(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("jobs/_cli.py is a helper module; run jobs/<stage>.py")
