"""The local session's JVM settings (pipelines/core/session.py): what a local master gets by default."""

from __future__ import annotations

from pipelines.core.config import SparkConfig
from pipelines.core.session import C1_CODE_CACHE, C1_ONLY, JAVA_OPTIONS


def test_a_local_jvm_compiles_with_c1_only(spark):
    # The shared test session is local[2] with the default spark.local_jit: c1.
    assert SparkConfig().local_jit == "c1"
    assert C1_ONLY in spark.sparkContext.getConf().get(JAVA_OPTIONS, "")
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert C1_ONLY in args, args
    # and keeps tiered compilation's code cache (48 MB without it fills in one chain run)
    assert C1_CODE_CACHE in args, args


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
