"""pipelines/dedup/components.py: large-star/small-star connected components against known graphs."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from pipelines.core.cache import release
from pipelines.dedup.components import ComponentsDidNotConverge, connected_components


@pytest.mark.parametrize("local_max_edges", [0, 100])
def test_components_of_chain_star_cycle_and_pair(spark, local_max_edges):
    edges = [
        # a long chain in scrambled order: needs several rounds
        ("n5", "n3"), ("n3", "n9"), ("n9", "n1"), ("n1", "n7"), ("n7", "n2"), ("n2", "n8"),
        # a star whose centre is not the smallest node
        ("s5", "s1"), ("s5", "s2"), ("s5", "s3"),
        # a cycle, duplicates both ways and a self-loop
        ("c2", "c3"), ("c3", "c1"), ("c1", "c2"), ("c2", "c1"), ("c3", "c3"),
        ("p2", "p1"),
    ]
    df = spark.createDataFrame(edges, "src string, dst string")
    expected = [(n, "n1") for n in ("n1", "n2", "n3", "n5", "n7", "n8", "n9")]
    expected += [(n, "s1") for n in ("s1", "s2", "s3", "s5")]
    expected += [(n, "c1") for n in ("c1", "c2", "c3")] + [("p1", "p1"), ("p2", "p1")]
    got = connected_components(df, local_max_edges=local_max_edges)
    assertDataFrameEqual(got, expected, checkRowOrder=False)


def test_local_limit_one_below_the_edge_count_runs_distributed(spark):
    df = spark.createDataFrame([("b", "a"), ("c", "b")], "src string, dst string")
    expected = [("a", "a"), ("b", "a"), ("c", "a")]
    assertDataFrameEqual(connected_components(df, local_max_edges=1), expected, checkRowOrder=False)
    assertDataFrameEqual(connected_components(df, local_max_edges=2), expected, checkRowOrder=False)


def _persisted(spark) -> set[int]:
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keys()}


@pytest.mark.parametrize("reliable", [False, True])
def test_only_the_last_rounds_checkpoint_is_kept_and_release_frees_it(spark, tmp_path, reliable):
    chain = spark.createDataFrame([(f"x{i:02d}", f"x{i + 1:02d}") for i in range(12)], "src string, dst string")
    before, held = _persisted(spark), []
    got = connected_components(chain, checkpoint_dir=str(tmp_path) if reliable else None, checkpoints=held)
    assertDataFrameEqual(got, [(f"x{i:02d}", "x00") for i in range(13)], checkRowOrder=False)
    assert len(held) == 1 and len(_persisted(spark) - before) == (0 if reliable else 1)
    release(held[0])
    assert _persisted(spark) - before == set()


def test_not_converged_and_missing_columns(spark):
    chain = spark.createDataFrame([(f"x{i:02d}", f"x{i + 1:02d}") for i in range(20)], "src string, dst string")
    with pytest.raises(ComponentsDidNotConverge, match="max_cc_iterations=1"):
        connected_components(chain, max_iterations=1)
    with pytest.raises(ValueError, match=r"missing columns \['dst'\]"):
        connected_components(chain.select("src"))
