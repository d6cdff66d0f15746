"""The one SparkSession factory every job and test uses.

Delta's SQL extension and catalog are always configured. Outside ``spark-submit`` (``python jobs/x.py``,
tests) the Delta jars come from Maven Central through ``spark.jars.packages`` (resolved by Spark's Ivy on
first use and cached in ``~/.ivy2*``), unless ``spark.jars`` lists local jar files (e.g. resolved with
``make jars``, which uses ``mvn dependency:copy`` and so honours the machine's Maven settings). Under
``spark-submit`` the jars must be on the command line: ``--packages`` with :func:`delta_coordinates`.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pipelines.config import SparkConfig

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


def launched_by_spark_submit() -> bool:
    """True when the JVM was started by ``spark-submit`` (which hands the gateway port to Python)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(app_name: str, cfg: SparkConfig | None = None) -> SparkSession:
    """Return the active SparkSession, or build one configured for Winnow.

    Args:
        app_name: Spark application name; jobs pass their stage name.
        cfg: the ``spark`` config section (defaults when None).

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
    )
    for k, v in cfg.conf.items():
        builder = builder.config(k, v)

    if not launched_by_spark_submit():
        # Python workers must run this interpreter (the venv with pyarrow etc.), not whatever
        # `python3` is first on PATH; spark-submit users set PYSPARK_PYTHON themselves.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(cfg.master or "local[*]")
        if cfg.jars:
            builder = builder.config("spark.jars", ",".join(cfg.jars))
        else:
            from delta import configure_spark_with_delta_pip

            builder = configure_spark_with_delta_pip(builder)
    elif cfg.master:
        builder = builder.master(cfg.master)

    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.log_level)
    _quiet_delta(spark, cfg.log_level)
    _apply_runtime_conf(spark, cfg)
    _check_delta(spark)
    return spark


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
    # `python -m pipelines.session` prints the --packages value for spark-submit.
    sys.stdout.write(delta_coordinates() + "\n")
