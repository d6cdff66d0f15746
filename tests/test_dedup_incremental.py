"""Incremental dedup against an earlier run's band table, and the signature-settings guard."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from bench.corpus import generate_texts
from pipelines.core import tables
from pipelines.core.runner import run_stage
from pipelines.dedup.stage import SignatureSettingsMismatch
from tests.neardup_gen import documents_df

OLD = generate_texts(3, seed=21, mean_words=250)
NEW = generate_texts(2, seed=22, mean_words=250)


def test_new_batch_deduped_against_reference_which_is_left_alone(spark, make_cfg, tmp_path):
    first = make_cfg(root=tmp_path / "run1")
    tables.write_table(documents_df(spark, [("o1", OLD[0]), ("o2", OLD[1]), ("o3", OLD[2])]), first, "documents")
    run_stage(spark, first, "dedup")
    ref = first.table_path("dedup_bands")
    version = tables.table_version(spark, ref)

    second = make_cfg(f"dedup.reference={ref}", root=tmp_path / "run2")
    near_old = OLD[1].replace(" ", "  ", 3) + " one more sentence here."
    batch = [("a1", near_old), ("a2", NEW[0]), ("a3", NEW[1]), ("a4", NEW[1])]
    tables.write_table(documents_df(spark, batch), second, "documents")
    report = run_stage(spark, second, "dedup")
    assert (report.rows_in, report.rows_out, report.removed) == (4, 2, {"dedup.near": 1, "dedup.exact": 1})
    removed = spark.read.format("delta").load(second.table_path("removed")).select("doc_id", "reason", "duplicate_of")
    assertDataFrameEqual(removed, [("a1", ["dedup.near"], "o2"), ("a4", ["dedup.exact"], "a3")], checkRowOrder=False)
    assert tables.table_version(spark, ref) == version  # the reference is never modified unless asked

    with pytest.raises(SignatureSettingsMismatch, match=r"num_perm: 128 there vs 64 here"):
        run_stage(spark, make_cfg(f"dedup.reference={ref}", "dedup.num_perm=64", root=tmp_path / "run2"), "dedup")
