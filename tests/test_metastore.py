"""Metastore mode (run.catalog + run.schema): the chain on the sample_data subset with every stage table
a managed table of Spark's built-in catalog (Hive metastore on Derby, spark-warehouse under the test's
temp folder); resume records and inspect work as in path mode, and the shards are the path-mode run's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipelines.core.config import ConfigError, load_config
from tests.chain import REPO, chain_args, output_fingerprint, reference_run  # noqa: F401 - fixture

DRIVER = """
import json, sys
from jobs import inspect, pipeline
args = json.loads(sys.argv[1])
assert pipeline.main(args + ["--quiet"]) == 0
print("=== second run")
assert pipeline.main(args) == 0
from pyspark.sql import SparkSession
spark = SparkSession.getActiveSession()
print("=== tables", json.dumps(sorted(t.name for t in spark.catalog.listTables("spark_catalog.winnow_t"))))
print("=== inspect")
assert inspect.main(args + ["--stage", "dedup", "-n", "1", "--chars", "40"]) == 0
"""


def test_catalog_and_schema_go_together_and_are_identifiers():
    cfg = load_config(overrides=["run.catalog=main", "run.schema=winnow"])
    assert cfg.table_path("documents") == "main.winnow.documents"
    assert load_config().table_path("documents") == "out/tables/documents"
    with pytest.raises(ConfigError, match="run.catalog and run.schema go together"):
        load_config(overrides=["run.catalog=main"])
    with pytest.raises(ConfigError, match="run.schema.*plain identifier"):
        load_config(overrides=["run.catalog=main", "run.schema=a.b"])


@pytest.mark.slow
def test_chain_in_metastore_mode_resumes_and_inspects(spark, reference_run, tmp_path):  # noqa: F811
    ref = reference_run
    root, warehouse = tmp_path / "run", tmp_path / "spark-warehouse"
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path}/metastore_db;create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp_path}",
        "spark.ui.enabled": "false",
    }
    args = [*chain_args(root, ref.chain, ref.inputs), "--set", "run.catalog=spark_catalog", "--set", "run.schema=winnow_t",
            "--set", "spark.master=local[2]", "--set", f"spark.conf={json.dumps(conf)}"]
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(args)], capture_output=True, text=True, cwd=REPO,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # Stages that add columns to `removed` make Delta update the Hive schema: no refused alter, no trace.
    assert "HiveAlterHandler" not in r.stderr and "Could not alter schema" not in r.stderr, r.stderr[-3000:]
    assert "\tat org.apache" not in r.stderr, r.stderr[-3000:]
    first, rest = r.stdout.split("=== second run\n")
    second, rest = rest.split("=== tables ")
    tables_line, inspect_out = rest.split("\n=== inspect\n")

    # Every stage table is a managed table of the catalog, stored in the warehouse; none under run.root.
    names = json.loads(tables_line)
    assert {"documents", "deduped", "removed", "_runs", "tokenized"} <= set(names)
    assert (warehouse / "winnow_t.db" / "documents" / "_delta_log").is_dir()
    assert not (root / "tables").exists()
    # Shards still go to a path, and they are the path-mode run's, byte for byte.
    assert (root / "shards" / "manifest.json").is_file() and (root / "config" / "dedup.json").is_file()
    assert output_fingerprint(spark, root, ref.chain) == ref.fingerprint
    # Resume: every stage's record matches, so the second run skips them all.
    for stage in ref.chain:
        assert f"[{stage}] skip: up to date" in second, second
    assert "documents removed by dedup" in inspect_out
