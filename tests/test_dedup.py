"""The dedup stage end to end: exact + near clusters, representatives, outputs, pass-through, errors."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from bench.corpus import generate_texts
from pipelines.core import tables
from pipelines.core.runner import run_stage
from pipelines.dedup import stage as dedup
from tests.neardup_gen import documents_df

BASE = generate_texts(3, seed=11, mean_words=300)


def _near(text: str) -> str:
    words = text.split(" ")
    words[len(words) // 2] = "zzzchanged"  # one substitution: J ~ 0.97
    return " ".join(words)


@pytest.fixture(scope="module")
def corpus():
    return [
        ("a", BASE[0]),
        ("b", BASE[0]),  # exact copy of a
        ("c", _near(BASE[0])),  # near copy of a
        ("d", BASE[1]),  # unique
        ("e", BASE[2] + "  \n"),  # whitespace variant of f: same shingles, J = 1
        ("f", BASE[2]),
        ("g", "single"),  # single word
    ]


def test_run_writes_survivors_clusters_and_removed(spark, make_cfg, corpus):
    cfg = make_cfg()
    tables.write_table(documents_df(spark, corpus), cfg, "documents")
    report = run_stage(spark, cfg, "dedup")
    assert (report.rows_in, report.rows_out, report.removed) == (7, 4, {"dedup.exact": 1, "dedup.near": 2})
    assert report.extra["s_curve"] == {"J=0.50": 0.0607, "J=0.70": 0.6133, "J=0.80": 0.947, "J=0.90": 0.9999}
    deduped = tables.read_table(spark, cfg, "deduped").select("doc_id")
    assertDataFrameEqual(deduped, [("a",), ("d",), ("e",), ("g",)], checkRowOrder=False)
    clusters = tables.read_table(spark, cfg, "dup_clusters")
    assertDataFrameEqual(
        clusters,
        [
            ("a", "a", 3, True, "representative", None),
            ("b", "a", 3, False, "exact", "a"),
            ("c", "a", 3, False, "near", "a"),
            ("e", "e", 2, True, "representative", None),
            ("f", "e", 2, False, "near", "e"),
        ],
        checkRowOrder=False,
    )
    removed = spark.read.format("delta").load(cfg.table_path("removed"))
    assertDataFrameEqual(
        removed.select("doc_id", "stage", "reason", "duplicate_of", F.col("text") == F.lit(BASE[0])),
        [("b", "dedup", ["dedup.exact"], "a", True), ("c", "dedup", ["dedup.near"], "a", False),
         ("f", "dedup", ["dedup.near"], "e", False)],
        checkRowOrder=False,
    )
    props = tables.table_properties(spark, cfg.table_path("dedup_bands"))
    assert json.loads(props["signature"])["bands"] == 16 and json.loads(props["signature"])["scheme"] == "fast"
    assertDataFrameEqual(tables.read_table(spark, cfg, "dedup_bands").select("doc_id"), deduped, checkRowOrder=False)


def test_removed_rows_are_the_documents_rows(spark, make_cfg, corpus):
    # "longest": c (a's near copy, one word longer) represents a's cluster, so a (its exact group's
    # first) and b (an exact copy, never a candidate pair's end) go; the removed rows come from the
    # exact check's scan and must be the documents' rows, every column.
    cfg = make_cfg("dedup.representative=longest")
    longer = [(d, t + " tail") if d == "c" else (d, t) for d, t in corpus]
    tables.write_table(documents_df(spark, longer), cfg, "documents")
    report = run_stage(spark, cfg, "dedup")
    assert report.removed == {"dedup.near": 3}
    docs = tables.read_table(spark, cfg, "documents")
    removed = spark.read.format("delta").load(cfg.table_path("removed"))
    assertDataFrameEqual(removed.select(*docs.columns), docs.where(F.col("doc_id").isin("a", "b", "f")),
                         checkRowOrder=False)
    assertDataFrameEqual(removed.select("doc_id", "duplicate_of"), [("a", "c"), ("b", "c"), ("f", "e")],
                         checkRowOrder=False)


def _held(spark) -> set[int]:
    """Ids of the RDDs persisted in the session, less Delta's own caches of table snapshots."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    return {int(k) for k in rdds.keys() if not str(rdds[k].name()).startswith("Delta Table State")}


@pytest.mark.parametrize("by_rounds", [False, True])
def test_a_run_leaves_nothing_persisted(spark, make_cfg, corpus, monkeypatch, by_rounds):
    # The stages of a chain share one session: what one leaves persisted stays for the rest of the run.
    if by_rounds:  # components by large-star/small-star rounds, each one checkpointed
        monkeypatch.setattr(dedup, "BROADCAST_MAX_ROWS", 0)
    cfg = make_cfg()
    tables.write_table(documents_df(spark, corpus), cfg, "documents")
    before = _held(spark)
    assert run_stage(spark, cfg, "dedup").rows_out == 4
    assert _held(spark) - before == set()


def test_whitespace_insensitive_key_and_longest_policy(spark, corpus):
    from pipelines.dedup.config import DedupConfig

    df = documents_df(spark, corpus)
    d = DedupConfig(exact_key="collapsed_whitespace", near=False, representative="longest")
    got = dedup.annotate(df, d, seed=42).where("cluster_size > 1").select("doc_id", "cluster_id", "is_representative", "kind")
    # e is longer (trailing whitespace) so it represents {e, f}; a and b tie on length -> smaller doc_id
    assertDataFrameEqual(
        got,
        [("a", "a", True, "representative"), ("b", "a", False, "exact"),
         ("e", "e", True, "representative"), ("f", "e", False, "exact")],
        checkRowOrder=False,
    )


def test_disabled_passes_documents_through(spark, make_cfg, corpus):
    cfg = make_cfg("dedup.enabled=false")
    tables.write_table(documents_df(spark, corpus), cfg, "documents")
    report = run_stage(spark, cfg, "dedup")
    assert (report.rows_in, report.rows_out, report.n_removed) == (7, 7, 0)
    assertDataFrameEqual(tables.read_table(spark, cfg, "deduped"), tables.read_table(spark, cfg, "documents"))


def test_missing_columns_are_named(spark):
    from pipelines.dedup.config import DedupConfig

    df = spark.createDataFrame([("a",)], "doc_id string")
    with pytest.raises(ValueError, match=r"missing columns \['text', 'n_chars'\]"):
        dedup.annotate(df, DedupConfig(representative="longest"), seed=1)


def test_representative_of_an_unknown_column_is_a_config_error(spark):
    # A user error: it must reach the user as one line (UserError), not a ValueError traceback.
    from pipelines.core.config import ConfigError
    from pipelines.dedup.config import DedupConfig

    df = spark.createDataFrame([("a", "t", 3)], "doc_id string, text string, n_chars int")
    with pytest.raises(ConfigError, match=r"dedup.representative='max:nope'.*no column 'nope'.*'n_chars'"):
        dedup.annotate(df, DedupConfig(representative="max:nope"), seed=1)


def test_oph_scheme_finds_the_same_clusters(spark, corpus):
    from pipelines.dedup.config import DedupConfig

    df = documents_df(spark, corpus)
    got = {s: dedup.annotate(df, DedupConfig(scheme=s), seed=42).where("cluster_size > 1")
           .select("doc_id", "cluster_id", "kind").collect() for s in ("fast", "oph")}
    assert sorted(got["oph"]) == sorted(got["fast"]) and len(got["oph"]) == 5


def test_large_buckets_name_their_smallest_document(spark, corpus):
    from pipelines.dedup.config import DedupConfig

    df = documents_df(spark, corpus)
    result = dedup.NearResult()
    dedup.annotate(df, DedupConfig(exact=False, log_buckets_over=2), seed=42, result=result).count()
    # a, b (a copy) and c (one word changed) share most bands: buckets of 3 > 2; e/f buckets hold 2
    assert result.large_buckets and {b["smallest_doc_id"] for b in result.large_buckets} == {"a"}
    assert {b["size"] for b in result.large_buckets} == {3}
    result.unpersist()
