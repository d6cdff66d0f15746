"""The local session's JVM settings (pipelines/core/session.py): what a local master gets by default."""

from __future__ import annotations

from pipelines.core.config import SparkConfig
from pipelines.core.session import ARROW_UNCHECKED, C1_CODE_CACHE, C1_ONLY, JAVA_OPTIONS


def test_a_local_jvm_compiles_with_c1_only(spark):
    # The shared test session is local[2] with the default spark.local_jit: c1.
    assert SparkConfig().local_jit == "c1"
    assert C1_ONLY in spark.sparkContext.getConf().get(JAVA_OPTIONS, "")
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert C1_ONLY in args, args
    # and keeps tiered compilation's code cache (48 MB without it fills in one chain run)
    assert C1_CODE_CACHE in args, args
    # and Arrow's buffers unchecked (a cost of every value handed to a Python worker under C1)
    assert ARROW_UNCHECKED in args, args


def test_local_sessions_start_with_winnows_log4j2_file(tmp_path, monkeypatch):
    from pipelines.core import session

    monkeypatch.setattr(session, "JAR_CACHE", tmp_path / "cache")
    path = session.log4j2_properties()
    assert path == tmp_path / "cache" / "log4j2.properties"
    text = path.read_text()
    # Spark's defaults at WARN, the start-up WARN lines of every local run at ERROR.
    assert "rootLogger.level = warn" in text
    for logger in ("org.apache.hadoop.util.NativeCodeLoader", "org.apache.spark.util.SparkStringUtils",
                   "org.apache.spark.util.Utils"):
        assert f".name = {logger}\n" in text
    path.write_text("stale")
    assert session.log4j2_properties().read_text() == session.LOG4J2_PROPERTIES  # rewritten when it differs


def test_local_python_workers_import_the_installed_pyspark(spark):
    from pipelines.core.session import DAEMON_MODULE, LOCAL_DAEMON

    def _worker_pyspark(_):  # defined here: pickled by value, the workers need not import this module
        import sys

        import pyspark

        return [(pyspark.__file__, [p for p in sys.path if p.endswith(".zip")])]

    assert spark.sparkContext.getConf().get(DAEMON_MODULE) == LOCAL_DAEMON
    found, zips = spark.sparkContext.parallelize([0], 1).mapPartitions(_worker_pyspark).collect()[0]
    # The worker's pyspark is the interpreter's installed package (cached bytecode), not Spark's zip.
    assert ".zip" not in found, found
    assert not [z for z in zips if "pyspark" in z or "py4j" in z], zips


def test_local_python_workers_collect_through_the_freezing_gc(spark):
    def _daemon_gc(_):  # defined here: pickled by value
        import pyspark.daemon

        return [type(pyspark.daemon.gc).__name__]

    assert spark.sparkContext.parallelize([0], 1).mapPartitions(_daemon_gc).collect() == ["_FreezingGC"]


def test_freeze_after_collect_still_collects_each_tasks_garbage():
    import gc

    from pipelines.core.pydaemon import freeze_after_collect

    def cycle():
        a = []
        a.append(a)

    cycle()
    try:
        assert freeze_after_collect() >= 1
        assert gc.get_freeze_count() > 0  # the survivors: left out of the next collections
        cycle()
        assert freeze_after_collect() >= 1  # garbage made after the freeze is still found
    finally:
        gc.unfreeze()


def test_spark_zips_stay_on_the_path_when_pyspark_is_only_there(tmp_path):
    from pipelines.core.pydaemon import prefer_installed_pyspark

    zips = [str(tmp_path / "pyspark.zip"), str(tmp_path / "py4j-0.10.9.9-src.zip")]
    path = [*zips, str(tmp_path)]  # neither package importable outside the zips
    assert prefer_installed_pyspark(path) == [] and path == [*zips, str(tmp_path)]
    import os
    import sys

    site = os.path.dirname(os.path.dirname(__import__("pyspark").__file__))
    path = [*zips, site, str(tmp_path)]
    assert prefer_installed_pyspark(path) == zips and path == [site, str(tmp_path)]
    assert sys.path_importer_cache.get(zips[0]) is None


def test_the_daemon_module_only_where_the_workers_find_this_package(tmp_path, monkeypatch):
    from pipelines.core import session

    assert session.workers_import_this_package()  # the suite runs in the checkout, with it on PYTHONPATH
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    # found through neither the working directory nor PYTHONPATH (this checkout is not installed)
    assert not session.workers_import_this_package()
    assert session.DAEMON_MODULE not in session._default_settings(SparkConfig(), "local[2]")


def test_the_jvm_prints_neither_the_incubator_warning_nor_a_failed_tasks_log_lines(tmp_path):
    """A local session in a process of its own: stderr holds what the JVM prints besides the start-up
    line about incubator modules, and of a failed write only the exception that reached the job (no
    per-layer log lines with stack traces: writer, executor, scheduler); after ``logs_off_quietly`` the
    JVM logs nothing."""
    import subprocess
    import sys
    from pathlib import Path

    from pipelines.core.session import INCUBATOR_WARNING

    code = (
        "import sys\n"
        "from pyspark.sql import functions as F\n"
        "from pipelines.core.config import SparkConfig\n"
        "from pipelines.core.session import get_spark\n"
        "java, out = sys.argv[1:]\n"
        "try:\n"
        "    s = get_spark('t', SparkConfig(master='local[1]', conf={'spark.driver.extraJavaOptions': java}))\n"
        "except Exception as e:\n"
        "    sys.exit(type(e).__name__)\n"
        "err = s._jvm.java.lang.System.err\n"
        "err.println('a line of the JVM'); err.flush()\n"
        "boom = F.udf(lambda x: 1 // 0, 'int')\n"
        "try:\n"
        "    s.range(3).select(boom('id')).write.parquet(out)\n"
        "except Exception as e:\n"
        "    print('caught: ' + ('ZeroDivisionError' in str(e)) * 'ZeroDivisionError', file=sys.stderr)\n"
        "log = s._jvm.org.apache.logging.log4j.LogManager.getLogger('winnow.test')\n"
        "log.error('logged before the logs go off')\n"
        "from pipelines.core.session import logs_off_quietly\n"
        "logs_off_quietly()\n"
        "log.error('logged after')\n"
    )
    repo = Path(__file__).resolve().parents[1]

    def stderr_of(java_options: str) -> list[str]:
        run = subprocess.run([sys.executable, "-c", code, java_options, str(tmp_path / "out")], cwd=repo,
                             capture_output=True, text=True, timeout=300)
        return run.stderr.splitlines()

    lines = stderr_of("-Dwinnow.test=1")
    assert lines[:2] == ["a line of the JVM", "caught: ZeroDivisionError"], lines
    assert lines[2].endswith("ERROR test: logged before the logs go off") and len(lines) == 3, lines
    # a JVM that does not start: its own lines, then the job's error, in that order
    failed = stderr_of("-Xss1q")
    assert failed[0] == "Invalid thread stack size: -Xss1q" and failed[-1] == "JvmStartError", failed
    assert INCUBATOR_WARNING.decode() not in failed


def test_a_local_session_writes_delta_logs_without_a_process_per_rename(spark, tmp_path):
    from pipelines.core import session

    settings = session._default_settings(SparkConfig(), "local[2]")
    assert settings[session.LOCAL_LOG_STORE] == "io.delta.storage.LocalLogStore"
    manager = settings[session.CHECKPOINT_FILE_MANAGER]
    assert manager.endswith(".FileSystemBasedCheckpointFileManager")
    # a setting of the user's is left as set, and a cluster's master gets neither
    own = SparkConfig(conf={session.LOCAL_LOG_STORE: "io.delta.storage.HDFSLogStore"})
    assert session.LOCAL_LOG_STORE not in session._default_settings(own, "local[2]")
    assert session.LOCAL_LOG_STORE not in session._default_settings(SparkConfig(), "spark://host:7077")
    # The shared test session has them; a table written twice through them keeps both versions, and
    # each version's checksum file is written (the manager's class exists in this pyspark).
    assert spark.conf.get(session.CHECKPOINT_FILE_MANAGER) == manager
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    spark.range(2).write.format("delta").mode("append").save(path)
    assert spark.read.format("delta").load(path).count() == 5
    log = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir() if p.name.endswith((".crc", ".json"))
                 and not p.name.startswith("."))
    assert log == ["00000000000000000000.crc", "00000000000000000000.json",
                   "00000000000000000001.crc", "00000000000000000001.json"]


def test_prune_class_archives_keeps_the_new_one_and_those_used_last(tmp_path):
    import os

    from pipelines.core.session import prune_class_archives

    old = [tmp_path / f"classes-{i:016x}.jsa" for i in range(5)]
    for i, p in enumerate(old):
        p.write_bytes(b"x")
        os.utime(p, (1_000 + i, 1_000 + i))  # classes-...4 used last
    new = tmp_path / "classes-ffffffffffffffff.jsa"
    new.write_bytes(b"x")
    os.utime(new, (10, 10))  # its time does not matter: it is kept
    dumping = tmp_path / "classes-0000000000000009.jsa.123.tmp"  # another install's dump in progress
    dumping.write_bytes(b"x")
    other = tmp_path / "delta-jars.txt"
    other.write_text("x")

    gone = prune_class_archives(new)

    assert sorted(gone) == old[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [old[3].name, old[4].name, new.name, dumping.name, other.name])
    assert prune_class_archives(new, kept=1) == [old[4], old[3]]


def test_the_accumulator_server_is_quiet_when_the_jvm_closes_its_connection(spark, capsys):
    # A JVM that dies (out of memory) ends the server's read in EOFError: socketserver printed its
    # traceback before the job's one line. Other errors still print.
    server = spark.sparkContext._accumulatorServer
    for error, printed in ((EOFError(), False), (ConnectionResetError(), False), (ValueError("x"), True)):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 0))
        assert ("Traceback" in capsys.readouterr().err) is printed, error
