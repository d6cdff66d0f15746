"""The one SparkSession factory every job and test uses.

Delta's SQL extension and catalog are always configured. Outside ``spark-submit`` (``python jobs/x.py``,
tests) the Delta jars come from Maven Central through ``spark.jars.packages`` (resolved by Spark's Ivy on
first use and cached in ``~/.ivy2*``), unless ``spark.jars`` lists local jar files (e.g. resolved with
``make jars``, which uses ``mvn dependency:copy`` and so honours the machine's Maven settings). Under
``spark-submit`` the jars must be on the command line: ``--packages`` with :func:`delta_coordinates`.

Resolution happens once (``make`` runs it at install time, else the first session does): a child
process lets Ivy resolve the packages with its console output going to a log file, and the list of
resolved jar files is kept in ``~/.cache/winnow/``; later sessions pass those files as ``spark.jars``,
so no run pays for (or prints) Ivy's resolution again.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from pipelines.core.config import SparkConfig
from pipelines.core.section import small_partitions_line
from udfs.errors import UserError

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def delta_coordinates() -> str:
    """Maven coordinates of the Delta jars that match the installed pyspark/delta-spark pair.

    Returns:
        e.g. ``"io.delta:delta-spark_4.2_2.13:4.4.0"``, computed from the installed versions with the
        rule of delta-spark's ``configure_spark_with_delta_pip``.
    """
    from importlib.metadata import version

    import pyspark

    # Same rule as delta.pip_utils.configure_spark_with_delta_pip (which only accepts a real builder).
    spark_mm = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_mm}_2.13:{version('delta_spark')}"


JAR_CACHE = Path(os.environ.get("WINNOW_CACHE", Path.home() / ".cache" / "winnow"))


def _jar_list_path() -> Path:
    return JAR_CACHE / f"delta-jars-{delta_coordinates().replace(':', '_')}.txt"


def cached_delta_jars() -> list[str] | None:
    """The jar files Ivy resolved for :func:`delta_coordinates` earlier, when they all still exist."""
    listing = _jar_list_path()
    if not listing.is_file():
        return None
    jars = [j for j in listing.read_text().split() if j]
    ok = jars and all(Path(j.removeprefix("file://").removeprefix("file:")).is_file() for j in jars)
    return jars if ok else None


def resolve_delta_jars() -> list[str] | None:
    """Let Spark's Ivy resolve the Delta packages in a child process (console output to a log file)
    and keep the list of resolved jars; ``None`` when resolution failed (the log says why)."""
    import subprocess

    JAR_CACHE.mkdir(parents=True, exist_ok=True)
    log = JAR_CACHE / "ivy-resolve.log"
    with log.open("w") as out:
        rc = subprocess.call([sys.executable, "-m", "pipelines.core.session", "--resolve"], stdout=out,
                             stderr=out)
    jars = cached_delta_jars() if rc == 0 else None
    state = "resolved" if jars else "NOT resolved"
    print(f"Delta jars {state} by Spark's Ivy; its output is in {log}", file=sys.stderr)
    return jars


def _resolve_in_child() -> None:
    from delta import configure_spark_with_delta_pip

    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    spark.stop()
    _jar_list_path().write_text("\n".join(j for j in jars.split(",") if j) + "\n")


def launched_by_spark_submit() -> bool:
    """True when the JVM was started by ``spark-submit`` (which hands the gateway port to Python)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(app_name: str, cfg: SparkConfig | None = None,
              warm_up: Callable[[], None] | None = None) -> SparkSession:
    """Return the active SparkSession, or build one configured for Winnow.

    Args:
        app_name: Spark application name; jobs pass their stage name.
        cfg: the ``spark`` config section (defaults when None).
        warm_up: imports the caller will need, called in a background thread while a JVM this call
            starts is starting (:func:`_import_while_jvm_starts`); not called for an active session.

    Returns:
        A SparkSession with Delta, Arrow, AQE, UTC session time zone and the configured shuffle
        partitions. An already active session (tests, notebooks, Databricks) is reused as is, with
        only the runtime SQL settings (shuffle partitions, Arrow batch size) applied.

    Raises:
        RuntimeError: Delta classes are missing from the JVM (``spark-submit`` without ``--packages``).
    """
    cfg = cfg or SparkConfig()
    active = SparkSession.getActiveSession()
    if active is not None:
        _apply_runtime_conf(active, cfg)
        return active

    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        # Python workers are reused across tasks, so models and tokenizers loaded into a module-level
        # cache are loaded once per worker process, not once per batch.
        .config("spark.python.worker.reuse", "true")
        # Off unless asked for (jobs/_cli.py turns it on for a terminal): in logs it is noise.
        .config("spark.ui.showConsoleProgress", "false")
        # Metastore mode on Spark's Hive catalog: a Delta table is kept in Hive with a placeholder column
        # (`col array<string>`); when a write adds columns (`removed`, mergeSchema), Delta mirrors the new
        # schema into the catalog, Hive refuses the "type change" of that placeholder, and Spark retries
        # in its own format after logging the refusal as a ~120-line trace (data and status fine). Hive
        # allowing the change lets the first attempt succeed; only the metastore's copy of the schema is
        # touched, and Spark and Delta read the schema from the table properties and the Delta log.
        .config("spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes", "false")
        # pyspark 4 (pyspark/errors/utils.py, _with_origin) otherwise records the Python call site of
        # every Column and function call in the JVM, for the "DataFrame context" of an analysis error:
        # a conf read, a class look-up and two more py4j calls each, 2-3x the driver's CPU for building
        # an expression (3.2-4.4 against 1.2-1.5 CPU-ms for `(col < lit) | col.isin(...)`), some 30,000
        # py4j calls in make run's chain. Off: the same plans; errors name the operation, not the line.
        .config(DATAFRAME_DEBUGGING, "false")
    )
    for k, v in cfg.conf.items():
        builder = builder.config(k, v)
    if small := small_partitions_line(cfg.conf):
        print(small, file=sys.stderr, flush=True)

    if not launched_by_spark_submit() and "spark.driver.memory" not in cfg.conf:
        # Local mode runs every task in the driver JVM: Spark's 1g default is too little for the
        # shuffles of dedup on a few GB of input; size it from the machine (a spark-submit user,
        # or a config that sets it, decides for themselves).
        builder = builder.config("spark.driver.memory", local_driver_memory())

    if not launched_by_spark_submit():
        # Python workers must run this interpreter (the venv with pyarrow etc.), not whatever
        # `python3` is first on PATH; spark-submit users set PYSPARK_PYTHON themselves.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        master = cfg.master or "local[*]"
        builder = builder.master(master)
        for key, value in _default_settings(cfg, master).items():
            builder = builder.config(key, value)
        jars = cfg.jars or cached_delta_jars() or resolve_delta_jars()
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
        else:
            from delta import configure_spark_with_delta_pip

            builder = configure_spark_with_delta_pip(builder)
        java_opts = cfg.conf.get(JAVA_OPTIONS, "")
        if cfg.local_jit == "c1" and master.startswith("local") and not _names_jit_flag(java_opts):
            # One JVM runs driver and tasks; C2 compiled for ~30 CPU-s of a small run (40 % of ingest +
            # dedup on 24,400 documents) to make code ~10-15 % faster: C1 alone wins below ~1 GB per core.
            java_opts = f"{java_opts} {C1_ONLY}"
            if "ReservedCodeCacheSize" not in java_opts:
                # Without tiering HotSpot reserves 48 MB of code cache, not 240: a chain run filled it
                # at ~34 s ("CodeCache is full. Compiler has been disabled") and ran its later stages
                # interpreted.
                java_opts = f"{java_opts} {C1_CODE_CACHE}"
        archive = class_archive(jars or [], cfg.conf.get("spark.driver.extraClassPath", ""))
        dump = os.environ.get(CDS_DUMP_ENV)
        if dump:  # make_class_archive's run: dump what this JVM loads
            java_opts = f"{java_opts} -XX:ArchiveClassesAtExit={dump}"
        elif archive.is_file() and os.environ.get(CDS_ENV, "1") != "0":
            # The JVM maps the classes a run loads from the archive the install step made instead of
            # parsing and verifying them from the jars (bench/notes.md, "Fixed cost").
            java_opts = f"{java_opts} -XX:SharedArchiveFile={archive} -Xshare:auto"
            _mark_used(archive)
        builder = builder.config(JAVA_OPTIONS, _system_properties(java_opts))
    elif cfg.master:
        builder = builder.master(cfg.master)

    with _child_jvm_ignores_sigterm(), _jvm_start_failure_explained(), _incubator_warning_dropped():
        _import_while_jvm_starts(warm_up)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.log_level)
    _quiet_delta(spark, cfg.log_level)
    _apply_runtime_conf(spark, cfg)
    _check_delta(spark)
    _quiet_interrupts()
    _quiet_accumulator_server(spark)
    return spark


FIRST_CALL_IMPORTS = ("pyspark.testing.utils",)
"""What pyspark imports at its first call into the JVM (``NumpyArrayConverter.can_convert`` asks
``pyspark.testing.utils`` whether numpy is installed, and that module imports pandas and pyarrow): ~0.3 s
of Python, paid after the JVM has started and while it waits (bench/notes.md, "Fixed cost")."""


def _import_while_jvm_starts(warm_up: Callable[[], None] | None = None) -> None:
    """Import :data:`FIRST_CALL_IMPORTS`, then call ``warm_up``, in a daemon thread, so that they load
    while the driver JVM starts (seconds in which this thread only waits for the JVM: its launch, then
    the context's and the session's start) instead of later on the driver's path.

    Python's per-module import locks make an importer wait for a module the thread is still loading; an
    import that fails in the thread fails again, with its own error, where the code that needs it
    imports it. Nothing but imports runs in the thread.
    """
    import importlib
    import threading

    def load() -> None:
        try:
            for name in FIRST_CALL_IMPORTS:
                importlib.import_module(name)
            if warm_up is not None:
                warm_up()
        except Exception:  # noqa: BLE001  (raised again at the import that needs it, where it belongs)
            return

    threading.Thread(target=load, name="winnow-imports", daemon=True).start()


class JvmStartError(UserError):
    """The driver JVM exited before pyspark could reach it (``JAVA_GATEWAY_EXITED``)."""


@contextmanager
def _jvm_start_failure_explained() -> Iterator[None]:
    """Turn pyspark's ``JAVA_GATEWAY_EXITED`` (the driver JVM ended before answering: a JVM option it
    refused, no Java, too little memory) into :class:`JvmStartError`: one line after the JVM's own."""
    try:
        yield
    except Exception as e:
        if "JAVA_GATEWAY_EXITED" not in str(e) and "Java gateway process exited" not in str(e):
            raise
        raise JvmStartError(
            "the Spark driver JVM exited as it started (its own message, if any, is above): check the JVM "
            "settings in spark.conf (spark.driver.memory, spark.driver.extraJavaOptions), JAVA_HOME and the "
            "Java version (`make java-check`)") from e


INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector"
"""The line the JVM prints on stderr as it starts when asked for an incubator module (``ModuleBootstrap``;
no JVM option silences it). Spark 4's launcher asks for the Vector API on every driver command line
(``JavaModuleOptions``), for code paths Winnow does not take (MLlib's BLAS)."""

_STDERR_FILTER = (
    "import signal, sys\n"
    # Like the JVM, whose stderr this is: it ends when the JVM closes the pipe, not on the job's signals.
    "for s in (signal.SIGINT, signal.SIGTERM):\n    signal.signal(s, signal.SIG_IGN)\n"
    "out = sys.stderr.buffer\n"
    "for line in sys.stdin.buffer:\n"
    f"    if line.rstrip(b'\\r\\n') != {INCUBATOR_WARNING!r}:\n"
    "        out.write(line)\n"
    "        out.flush()\n"
)


_STDERR_FILTERS: list = []
"""The filter processes this process started (:func:`_incubator_warning_dropped`), one per driver JVM."""


@contextmanager
def _incubator_warning_dropped() -> Iterator[None]:
    """The driver JVM started in the block (as this process's child) writes its stderr through a filter
    process that passes every line on to this process's stderr, as it comes, except
    :data:`INCUBATOR_WARNING`: every other line the JVM prints (its start-up errors, log4j) is kept.

    The filter (this interpreter, ``-I -S``) outlives the driver's Python and ends when the JVM closes its
    stderr. When the JVM fails to start, the block waits for the filter to pass on the JVM's last lines
    before the error goes on (:func:`_jvm_start_failure_explained` says they are above). Under an existing
    gateway (``PYSPARK_GATEWAY_PORT``, or the JVM of a stopped session) no JVM starts: nothing is filtered.
    """
    import subprocess

    try:
        import pyspark.core.context as context
    except ImportError:  # pyspark 3 (a managed runtime's): SparkContext's module is pyspark.context
        import pyspark.context as context  # type: ignore[no-redef]

    no_launch = "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None  # type: ignore[attr-defined]
    if no_launch or not hasattr(context, "launch_gateway"):
        yield
        return
    filt = subprocess.Popen([sys.executable, "-I", "-S", "-c", _STDERR_FILTER], stdin=subprocess.PIPE)
    _STDERR_FILTERS.append(filt)  # a Popen collected while its process runs warns (ResourceWarning)
    launch = context.launch_gateway

    def launch_filtered(conf=None, popen_kwargs=None):  # noqa: ANN001, ANN202  (pyspark's signature)
        return launch(conf, {**(popen_kwargs or {}), "stderr": filt.stdin})

    context.launch_gateway = launch_filtered
    try:
        yield
    except BaseException:
        filt.stdin.close()
        try:
            filt.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a JVM still holding the pipe: its lines come later
            pass
        raise
    finally:
        context.launch_gateway = launch
        filt.stdin.close()  # the JVM holds its own copy of the pipe


@contextmanager
def _child_jvm_ignores_sigterm() -> Iterator[None]:
    """SIGTERM ignored while the block starts the driver JVM as this process's child (not under
    ``spark-submit``, where the JVM is the parent), so the JVM inherits the ignored disposition as it
    inherits pyspark's ignored SIGINT: a SIGTERM sent to the process group (a scheduler stopping the
    job) then reaches the jobs' handler (``jobs/_cli.py``), which cancels the work quietly, instead of
    also starting the JVM's shutdown hooks under the running stage (a stage's plan failing with
    ``SparkPlan.session() is null``, and its stack trace). The JVM still ends with the driver: it exits
    when its standard input closes (``PythonGatewayServer``). A SIGTERM during the JVM's start-up (a
    few seconds) is lost; only on the main thread, where Python may change signal dispositions.
    """
    import signal
    import threading

    if launched_by_spark_submit() or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _all_logs_off(sc: SparkContext) -> None:
    """Turn every log4j logger of the JVM off: the root and each logger the configuration or
    :func:`_quiet_delta` gave a level of its own (``Configurator.setAllLevels``, log4j 2), which
    ``SparkContext.setLogLevel`` leaves as they are; only ``setLogLevel`` where log4j is out of reach."""
    try:
        _log4j_off(sc._jvm)  # type: ignore[attr-defined]
    except Exception:
        sc.setLogLevel("OFF")


def _log4j_off(jvm: Any) -> None:
    """Every log4j 2 logger of ``jvm`` off (``Configurator.setAllLevels``)."""
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setAllLevels("", log4j.Level.OFF)


def logs_off_quietly(timeout_s: float = 2.0) -> None:
    """After a job told its error in one line (a full disk, out of memory): the driver JVM's logs off, so
    that what the JVM logs as it winds down (its shutdown hooks failing after a SparkContext that did not
    start, tasks of the failed job still running) does not follow that line.

    On a thread of its own (:func:`_on_own_thread`), waited for up to ``timeout_s`` seconds; no JVM, or
    one already gone or not answering: nothing happens.
    """
    jvm = SparkContext._jvm  # type: ignore[attr-defined]
    if jvm is not None:
        _on_own_thread(lambda: _log4j_off(jvm), "winnow-logs-off", timeout_s)


def cancel_quietly(timeout_s: float = 2.0) -> None:
    """Before a job stops on a signal: turn the JVM's logs off and cancel the active SparkContext's jobs.

    The JVM outlives a stopped driver for a moment, logging at ERROR every task whose Python worker the
    same signal stopped and every accumulator update the gone driver no longer answers. The calls run on
    a thread of their own (:func:`_on_own_thread`: the main thread's Py4J connection is most often in the
    middle of a call when a signal lands), waited for up to ``timeout_s`` seconds; a JVM already gone is
    ignored.
    """
    sc = SparkContext._active_spark_context  # type: ignore[attr-defined]
    if sc is None:
        return

    def silence_and_cancel() -> None:
        _all_logs_off(sc)
        sc.cancelAllJobs()

    _on_own_thread(silence_and_cancel, "winnow-cancel", timeout_s)


def _on_own_thread(calls: Callable[[], None], name: str, timeout_s: float) -> None:
    """Run ``calls`` (Py4J calls) on a daemon thread, which has a Py4J connection of its own, waiting for
    up to ``timeout_s`` seconds; any exception is dropped (the JVM gone, most often out of memory or
    stopped: nothing left to cancel or to hear from)."""
    import threading

    def run() -> None:
        try:
            calls()
        except Exception:
            pass

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(timeout=timeout_s)


def _quiet_accumulator_server(spark: SparkSession) -> None:
    """Silence the traceback pyspark's accumulator server prints when the JVM's end of its connection
    closes.

    The server (``pyspark.accumulators``, a ``socketserver`` on a thread of its own) reads updates from
    the JVM; when the JVM dies (out of memory, killed) the read ends in ``EOFError`` and
    ``socketserver.BaseServer.handle_error`` printed its traceback to stderr, before the job's own one
    line saying what happened. Other errors are printed as before.
    """
    import sys

    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None:
        return
    printed = server.handle_error

    def handle_error(request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], EOFError | ConnectionError):
            printed(request, client_address)

    server.handle_error = handle_error


def _quiet_interrupts() -> None:
    """Replace pyspark's Ctrl-C handler with one whose clean-up does not print (:func:`cancel_quietly`).

    pyspark's handler (``SparkContext.__init__``) cancels the jobs over Py4J from inside the signal
    handler, on the main thread's connection, which is most often in the middle of a call: the cancel
    failed with a reentrant-call error and its traceback, and the JVM's errors about the stopped workers
    followed. This one raises ``KeyboardInterrupt`` as pyspark's does, after :func:`cancel_quietly`.
    Only on the main thread, where Python runs signal handlers.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def on_sigint(signum: int, frame: object) -> None:
        cancel_quietly()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


def _default_settings(cfg: SparkConfig, master: str) -> dict[str, str]:
    """Settings a session started here (not by ``spark-submit``) gets unless ``spark.conf`` sets them."""
    out = {}
    if CODEGEN_CACHE not in cfg.conf:
        # Spark keeps 100 compiled classes of generated code; a chain run compiles ~760 (many the
        # same code again: each Delta snapshot rebuild plans the same query), so it kept recompiling
        # them with Janino on the driver's critical path (bench/notes.md, "Fixed cost").
        out[CODEGEN_CACHE] = "1000"
    if DAEMON_MODULE not in cfg.conf and master.startswith("local") and workers_import_this_package():
        # The workers run this interpreter: pyspark from its installed package, not Spark's zip
        # (pipelines/core/pydaemon.py says what the zip cost).
        out[DAEMON_MODULE] = LOCAL_DAEMON
    if SNAPSHOT_PARTITIONS not in cfg.conf:
        # Delta rebuilds a table's snapshot from its log in 50 tasks by default, sized for clusters
        # and large logs; Winnow reads small logs (one commit per run) dozens of times per run, so
        # on one machine 50 tiny tasks per read were ~44 % of a small run's CPU (bench/notes.md).
        out[SNAPSHOT_PARTITIONS] = str(local_snapshot_partitions(master))
    if master.startswith("local"):
        out.update({k: v for k, v in local_log_writers().items() if k not in cfg.conf})
    return out


LOCAL_LOG_STORE = "spark.delta.logStore.file.impl"
"""Delta setting: the ``LogStore`` that writes the ``_delta_log`` of tables on ``file:`` paths
(``DelegatingLogStore``; default ``io.delta.storage.HDFSLogStore``)."""

CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
"""Spark SQL setting read by ``CheckpointFileManager.create``, through which Delta writes each
version's checksum file (``RecordChecksum``); default: the ``FileContext`` one."""

_FILE_SYSTEM_MANAGERS = tuple(
    f"org.apache.spark.sql.execution.streaming.{pkg}FileSystemBasedCheckpointFileManager"
    for pkg in ("checkpointing.", "")  # this pyspark's package, then the one Spark 4.0 kept it in
)


def local_log_writers() -> dict[str, str]:
    """:data:`LOCAL_LOG_STORE` and :data:`CHECKPOINT_FILE_MANAGER` for a local session: Delta's log
    files and checksum files written through Hadoop's ``FileSystem`` API instead of ``FileContext``.

    Why: without Hadoop's native library (pyspark ships none) its local file system runs a shell
    command for each ``readlink`` and ``chmod``, ~6 ms each from the driver JVM. ``FileContext``'s rename
    without overwrite reads the link status of both paths (two ``readlink`` processes per file, and the
    same again for the ``.crc`` file beside it): 288 of the 525 processes a ``make run`` chain started,
    on the driver between its jobs. Delta's ``LocalLogStore`` and Spark's
    ``FileSystemBasedCheckpointFileManager`` check that the target does not exist and rename, as the
    ``FileContext`` ones do on a local file system, whose rename replaces silently either way: a
    run root takes one writer at a time (:mod:`pipelines.core.lock`). A commit of a small table: ~15 %
    less time (bench/notes.md, "Fixed cost").

    Returns:
        The two settings; without the checkpoint manager when this pyspark's jars hold neither of its
        known class names.
    """
    out = {LOCAL_LOG_STORE: "io.delta.storage.LocalLogStore"}
    if (manager := _spark_sql_class(_FILE_SYSTEM_MANAGERS)) is not None:
        out[CHECKPOINT_FILE_MANAGER] = manager
    return out


@functools.cache
def _spark_sql_class(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that a ``spark-sql_*.jar`` of the installed pyspark holds; None if none
    (or no such jar: a pyspark that brings no jars)."""
    import zipfile

    import pyspark

    for jar in sorted((Path(pyspark.__file__).parent / "jars").glob("spark-sql_*.jar")):
        with zipfile.ZipFile(jar) as z:
            held = set(z.NameToInfo)
        for name in names:
            if name.replace(".", "/") + ".class" in held:
                return name
    return None


def workers_import_this_package() -> bool:
    """True when the Python workers of a local session import the ``pipelines`` package this process
    runs: they run this interpreter (``PYSPARK_PYTHON``) in this working directory with this
    ``PYTHONPATH``, and the package's folder is one of those or a site-packages folder. Else (a package
    found through a path added at run time, an editable install's ``.pth`` file) False: a worker could
    not start :data:`LOCAL_DAEMON`."""
    import site

    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if os.path.realpath(shutil.which(python) or python) != os.path.realpath(sys.executable):
        return False
    root = os.path.realpath(Path(__file__).resolve().parents[2])
    seen = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep), *site.getsitepackages()]
    return any(p and os.path.realpath(p) == root for p in seen)


LOG4J2_PROPERTIES = """\
# Winnow's logging of a local Spark session (pipelines/core/session.py writes this file): Spark's own
# defaults (log4j2-defaults.properties of spark-common-utils) at WARN, with the WARN lines that every
# normal local run printed, and that ask nothing of the user, at ERROR.
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.jetty2.name = org.sparkproject.jetty.util.component.AbstractLifeCycle
logger.jetty2.level = error
logger.metastore.name = org.apache.hadoop.hive.metastore.RetryingHMSHandler
logger.metastore.level = fatal
logger.metastore2.name = org.apache.hadoop.hive.metastore.ObjectStore
logger.metastore2.level = error
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
# "Unable to load native-hadoop library for your platform": Hadoop's Java code serves a local run.
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
# "Truncated the string representation of a plan": the filter's many signal columns, in debug strings only.
logger.strings.name = org.apache.spark.util.SparkStringUtils
logger.strings.level = error
# "Your hostname resolves to a loopback address", "SparkUI could not bind on port 4040" (another session).
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
# A failed task, told once per layer (writer, executor, scheduler), each with its stack trace: hundreds of
# lines before the job's own one-line message. A local master does not retry a task, so its first failure
# fails the job, and the exception that reaches the job holds that failure and its trace (printed unless
# the job recognises it: a full disk, out of memory; WINNOW_TRACEBACK=1 prints it then too).
logger.utils.filter.task.type = RegexFilter
logger.utils.filter.task.regex = (?s)Aborting task.*
logger.utils.filter.task.onMatch = DENY
logger.utils.filter.task.onMismatch = NEUTRAL
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.filter.task.type = RegexFilter
logger.executor.filter.task.regex = (?s)Exception in task .*
logger.executor.filter.task.onMatch = DENY
logger.executor.filter.task.onMismatch = NEUTRAL
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.filter.task.type = RegexFilter
logger.tasks.filter.task.regex = (?s)(Lost task |Task [^ ]+ in stage .*; aborting job).*
logger.tasks.filter.task.onMatch = DENY
logger.tasks.filter.task.onMismatch = NEUTRAL
logger.writer.name = org.apache.spark.sql.execution.datasources.FileFormatWriter
logger.writer.filter.job.type = RegexFilter
logger.writer.filter.job.regex = (?s)(Aborting job |Job:? [^ ]+ .*aborted).*
logger.writer.filter.job.onMatch = DENY
logger.writer.filter.job.onMismatch = NEUTRAL
logger.deltawriter.name = org.apache.spark.sql.delta.files.DeltaFileFormatWriter
logger.deltawriter.filter.job.type = RegexFilter
logger.deltawriter.filter.job.regex = (?s)(Aborting job |Job:? [^ ]+ .*aborted).*
logger.deltawriter.filter.job.onMatch = DENY
logger.deltawriter.filter.job.onMismatch = NEUTRAL
# A failed shuffle task's clean-up, one line per partial file it drops (a full spark.local.dir).
logger.shuffle.name = org.apache.spark.storage.DiskBlockObjectWriter
logger.shuffle.filter.drop.type = RegexFilter
logger.shuffle.filter.drop.regex = (?s)(Exception occurred while manually close|Uncaught .* while revert).*
logger.shuffle.filter.drop.onMatch = DENY
logger.shuffle.filter.drop.onMismatch = NEUTRAL
# "spark.local.dir will be overridden by the value set by the cluster manager": not by a local master,
# and Winnow's full-disk message tells the user to set it.
logger.conf.name = org.apache.spark.SparkConf
logger.conf.filter.localdir.type = RegexFilter
logger.conf.filter.localdir.regex = (?s)Note that spark.local.dir will be overridden.*
logger.conf.filter.localdir.onMatch = DENY
logger.conf.filter.localdir.onMismatch = NEUTRAL
# The same for a SparkContext that fails to start (a full spark.local.dir): rethrown to the job.
logger.context.name = org.apache.spark.SparkContext
logger.context.filter.start.type = RegexFilter
logger.context.filter.start.regex = (?s)Error initializing SparkContext.*
logger.context.filter.start.onMatch = DENY
logger.context.filter.start.onMismatch = NEUTRAL
# "RDD N was locally checkpointed, its lineage has been truncated": dedup frees each local checkpoint
# once nothing reads it again (pipelines.core.cache.release), which is what the line warns about.
logger.checkpoint.name = org.apache.spark.rdd.MapPartitionsRDD
logger.checkpoint.filter.freed.type = RegexFilter
logger.checkpoint.filter.freed.regex = (?s)RDD [0-9]+ was locally checkpointed.*
logger.checkpoint.filter.freed.onMatch = DENY
logger.checkpoint.filter.freed.onMismatch = NEUTRAL
"""
"""The log4j2 configuration of a local session (``-Dlog4j2.configurationFile``, unless
``spark.driver.extraJavaOptions`` names one): given at JVM start, so Spark prints neither its start-up
WARN lines nor "Using Spark's default log4j profile"; ``spark.log_level`` still applies after start."""


def _system_properties(java_opts: str) -> str:
    """``java_opts`` with the ``-D`` settings of a local JVM it does not name: :data:`ARROW_UNCHECKED` and
    the log4j2 file (:func:`log4j2_properties`), stripped."""
    if "arrow.enable_unsafe_memory_access" not in java_opts:
        java_opts = f"{java_opts} {ARROW_UNCHECKED}"
    if "log4j2.configurationFile" not in java_opts:
        # Before the JVM logs its first line: setLogLevel comes after the start-up WARN lines.
        java_opts = f"{java_opts} -Dlog4j2.configurationFile={log4j2_properties()}"
    return java_opts.strip()


def log4j2_properties() -> Path:
    """The file holding :data:`LOG4J2_PROPERTIES` under the Winnow cache (``$WINNOW_CACHE`` or
    ``~/.cache/winnow``), written when missing or different.

    Returns:
        Its path; a temporary file when the cache folder cannot be written.
    """
    path = JAR_CACHE / "log4j2.properties"
    try:
        if not path.is_file() or path.read_text(encoding="utf-8") != LOG4J2_PROPERTIES:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(LOG4J2_PROPERTIES, encoding="utf-8")
            tmp.replace(path)
    except OSError:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="winnow-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(LOG4J2_PROPERTIES)
        return Path(name)
    return path


JAVA_OPTIONS = "spark.driver.extraJavaOptions"

DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
"""pyspark setting (read once, at the first Column or function call): record each call's Python call
site in the JVM for error messages (default true); Winnow's sessions turn it off, a config may turn it
back on through ``spark.conf``."""
ARROW_UNCHECKED = "-Darrow.enable_unsafe_memory_access=true"
"""Arrow Java's switch for the bounds check of every ``ArrowBuf`` read and write
(``org.apache.arrow.memory.BoundsChecking``, read once at class load), given to a local JVM unless
``spark.driver.extraJavaOptions`` names it. Every value Spark hands a Python worker or reads back goes
through those checks; with C1 only (``spark.local_jit: c1``) they are calls, not folded away:
``ArrowBuf.chk``/``checkIndexD``/``refCnt`` were ~15 % of the executor threads' samples of the passages
stage at scale, and the flag made that stage 6.6 % cheaper, identical outputs (bench/notes.md,
"Passages' default mode at scale"). What it gives up: an out-of-range index into an Arrow buffer is no
longer an ``IndexOutOfBoundsException``; Spark's and pyarrow's writers size their buffers themselves."""
C1_ONLY = "-XX:TieredStopAtLevel=1"
"""HotSpot flag: compile with C1 only (no C2), the ``spark.local_jit: c1`` setting."""
C1_CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
"""HotSpot's code cache size with tiered compilation (its default then); with ``TieredStopAtLevel=1``
the default falls to 48 MB, which one chain run fills (``CompilerConfig::ergo_initialize``, JDK 17)."""


def _names_jit_flag(java_options: str) -> bool:
    """Whether ``java_options`` already choose the JIT (TieredStopAtLevel, TieredCompilation, -Xint/-Xcomp).

    >>> [_names_jit_flag(o) for o in ("-Xss4m", "-XX:-TieredCompilation", "-XX:TieredStopAtLevel=4")]
    [False, True, True]
    """
    return bool(re.search(r"-XX:[+-]?Tiered|-Xint\b|-Xcomp\b", java_options))
CDS_ENV = "WINNOW_CDS"
"""Environment variable: ``0`` starts the local JVM without the class archive (to compare or rule it out)."""
CDS_DUMP_ENV = "WINNOW_CDS_DUMP"
"""Environment variable set by :func:`jobs.class_archive.make_class_archive`'s run: the file its JVM
dumps its classes to."""


CLASS_PATH_ENV = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH",
                  "SPARK_CLASSPATH")
"""Environment variables whose folders Spark's launcher adds to the driver's class path."""


def class_archive(jars: list[str], extra_class_path: str = "") -> Path:
    """Where the JVM's class-data-sharing archive for this Java, pyspark and Delta jar set lives.

    A local session's JVM loads some 15,000 classes of Spark, Scala and Delta, parsing and verifying
    each: a HotSpot dynamic CDS archive (``-XX:ArchiveClassesAtExit``, JDK 13+; JEP 350) holds them
    ready to map. An archive only fits the JVM build and class path that made it, so its name is a
    digest of the ``java`` binary, pyspark's jar folder, ``jars``, ``extra_class_path`` and the folders
    Spark's launcher puts on the class path (``SPARK_CONF_DIR``, ``HADOOP_CONF_DIR``, ...): a new Java,
    pyspark or Delta version, or another class path, looks for another file, and the session runs
    without one (and without the JVM's one-line warning about a mismatch) until
    :func:`jobs.class_archive.make_class_archive` (the install step) writes it.

    Args:
        jars: the ``spark.jars`` files of the session (Delta's), local paths or ``file:`` URLs.
        extra_class_path: the session's ``spark.driver.extraClassPath``, if any.
    """
    import hashlib
    import shutil

    import pyspark

    h = hashlib.sha256()
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    spark_jars = Path(pyspark.__file__).parent / "jars"
    files = [Path(os.path.realpath(java))] if java else []
    files += sorted(spark_jars.glob("*.jar")) if spark_jars.is_dir() else []
    files += [Path(j.removeprefix("file://").removeprefix("file:")) for j in jars]
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        h.update(f"{f}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    for var in CLASS_PATH_ENV:
        if os.environ.get(var):
            h.update(f"{var}={os.environ[var]}\n".encode())
    if extra_class_path:
        h.update(f"extraClassPath={extra_class_path}\n".encode())
    return JAR_CACHE / f"classes-{h.hexdigest()[:16]}.jsa"


ARCHIVES_KEPT = 3
"""Class archives :func:`prune_class_archives` keeps in the cache: the one just written and the two used
last. Each is ~200 MB, and every new install (a fresh clone's virtualenv: new jar times) writes one."""


def _mark_used(archive: Path) -> None:
    # The archive's modification time is when a session last mapped it: prune_class_archives keeps the
    # ones used last. A cache on a read-only or foreign file system keeps its old time.
    try:
        os.utime(archive)
    except OSError:
        pass


def prune_class_archives(keep: Path, kept: int = ARCHIVES_KEPT) -> list[Path]:
    """Delete the class archives beside ``keep`` (``classes-*.jsa``) but ``keep`` and the ``kept - 1``
    others used last (latest modification time: a session that maps an archive touches it).

    An archive no session has used lately belongs to an install that has gone or moved on (another
    Java, pyspark or Delta version, or another virtualenv's jar files); a JVM that still maps a deleted
    one keeps its pages (POSIX unlink), and a later session without it starts without class sharing.

    Args:
        keep: the archive just written (:func:`class_archive`).
        kept: archives left, ``keep`` included (at least 1).

    Returns:
        The archives deleted; one that cannot be deleted is left and not listed.
    """
    def used(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    others = sorted((p for p in keep.parent.glob("classes-*.jsa") if p != keep), key=used, reverse=True)
    gone = []
    for p in others[max(kept - 1, 0):]:
        try:
            p.unlink()
            gone.append(p)
        except OSError:
            continue
    return gone


CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"
"""Spark static SQL setting: compiled generated classes kept for reuse (``StaticSQLConf``, default 100)."""

DAEMON_MODULE = "spark.python.daemon.module"
"""Spark setting: the module a Python worker daemon runs (``python -m <module>``; ``pyspark.daemon``)."""
LOCAL_DAEMON = "pipelines.core.pydaemon"
"""The daemon module of a local session (:mod:`pipelines.core.pydaemon`)."""

SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
"""Delta SQL setting: partitions of the job that rebuilds a table snapshot from its ``_delta_log``
(Delta's ``DeltaSQLConf.DELTA_SNAPSHOT_PARTITIONS``, default 50)."""


def local_snapshot_partitions(master: str) -> int:
    """Delta snapshot partitions for a local master: its thread count, 1 to 8.

    Args:
        master: a Spark master URL such as ``local``, ``local[4]``, ``local[*]`` or ``local[2,3]``.

    Returns:
        The number of worker threads of ``master`` (the machine's CPUs for ``*``), clamped to 1..8;
        8 for a non-local master.

    >>> [local_snapshot_partitions(m) for m in ("local[2]", "local", "local[64]", "spark://h:7077")]
    [2, 1, 8, 8]
    """
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if m is None:
        return 8
    threads = m.group(1)
    if threads == "*":
        n = os.cpu_count() or 1
    else:
        n = int(threads or 1)  # plain "local" is one thread
    return max(1, min(8, n))


def local_driver_memory(total_bytes: int | None = None) -> str:
    """``spark.driver.memory`` for a local run: a quarter of the machine's memory, 1g to 8g.

    Args:
        total_bytes: physical memory (default: from ``os.sysconf``).

    Returns:
        A JVM size string, e.g. ``"2g"`` or ``"1536m"``.

    >>> local_driver_memory(8 << 30), local_driver_memory(2 << 30), local_driver_memory(64 << 30)
    ('2048m', '1024m', '8192m')
    """
    if total_bytes is None:
        try:
            total_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total_bytes = 4 << 30
    mib = min(8192, max(1024, total_bytes // 4 >> 20))
    return f"{mib}m"


def _apply_runtime_conf(spark: SparkSession, cfg: SparkConfig) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg.arrow_batch_rows))


def _quiet_delta(spark: SparkSession, level: str) -> None:
    # Delta logs whole snapshots at WARN when a table is replaced with new metadata; that is expected
    # here (every stage replaces its tables), so keep Delta one level quieter than the rest.
    if level != "WARN":
        return
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.sql.delta", jvm.org.apache.logging.log4j.Level.ERROR
        )
    except Exception:  # log4j not reachable (e.g. Spark Connect): keep Spark's default
        pass


def _check_delta(spark: SparkSession) -> None:
    try:
        spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            "io.delta.tables.DeltaTable", True, spark._jvm.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        )
    except Exception:
        raise RuntimeError(
            "Delta Lake classes are not on the Spark classpath. With spark-submit pass "
            f"--packages {delta_coordinates()} (or --jars with the jars from `make jars`)."
        ) from None


if __name__ == "__main__":
    # `python -m pipelines.core.session` prints the --packages value for spark-submit; `--resolve` fills the
    # jar cache (the install step runs it; `python -m jobs.class_archive` then writes the class archive).
    if sys.argv[1:] == ["--resolve"]:
        _resolve_in_child()
    else:
        sys.stdout.write(delta_coordinates() + "\n")
