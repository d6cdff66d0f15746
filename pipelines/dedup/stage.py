"""The dedup stage: exact dedup, then MinHash-LSH near dedup with distributed connected components.

``documents`` -> ``deduped`` (survivors, documents schema), ``dup_clusters`` (one row per document of a
cluster of two or more), ``dedup_bands`` (band keys and signatures of the survivors, the reference for
later incremental runs) and the stage's rows of ``removed`` (reason ``dedup.exact`` or ``dedup.near``,
``duplicate_of`` = the cluster's representative).

Steps (all distributed; the driver only sees counts and the few largest LSH buckets):

1. Exact key: MD5 (128 bits) of the text's UTF-8 bytes, taken in the signature pass (Python's
   ``hashlib``); of its whitespace-collapsed form, or with near dedup off, Spark's JVM ``md5``.
   MD5 is used as a fast, well-distributed 128-bit hash, not for security: at 10^10 documents the
   chance of any collision is ~10^-19, where a 64-bit hash would already reach a few percent at 10^9.
   Each exact group keeps its representative; only representatives go on to near dedup.
2. Signatures (``udfs.minhash``) and band keys (``udfs.lsh``) in one ``mapInArrow`` pass.
3. Buckets (band, key) -> star edges: each member to the bucket's smallest ``doc_id``.
4. False-positive check: an edge survives if the Jaccard of its two documents >= ``threshold``
   (exact over shingle sets, or estimated from signatures).
5. Connected components (:mod:`pipelines.dedup.components`); cluster = component plus the exact duplicates
   of its members; ``cluster_id`` = smallest ``doc_id``; representative by policy.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import partial

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, tables
from pipelines.core.cache import release
from pipelines.core.config import ConfigError, WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.dedup.components import checkpoint, connected_components
from pipelines.dedup.config import DedupConfig
from udfs import lsh
from udfs.minhash_batch import EXACT_KEY, SignatureSettings, jaccard_batches, signature_batches
from udfs.minhash_batch import SignatureSettingsMismatch as SignatureSettingsMismatch  # re-exported

log = logging.getLogger(__name__)

STAGE = "dedup"
INPUT_COLUMNS = ("doc_id", "text")
"""Columns the transform needs (``n_chars`` too for ``representative: longest``, the named column for ``max:``)."""
ANNOTATION_COLUMNS = ("cluster_id", "cluster_size", "is_representative", "kind", "duplicate_of")
"""Columns :func:`annotate` adds."""
CLUSTER_COLUMNS = ("doc_id", "cluster_id", "cluster_size", "is_representative", "kind", "duplicate_of")
"""Columns of ``dup_clusters``."""
BAND_COLUMNS = ("doc_id", "bands", "signature")
"""Columns of ``dedup_bands``: band keys array<bigint>, signature binary (num_perm little-endian uint32)."""
REASON_EXACT, REASON_NEAR = "dedup.exact", "dedup.near"


def signatures(df: DataFrame, s: SignatureSettings, *, md5_key: bool = False) -> DataFrame:
    """``doc_id, text`` (+ any other columns) -> the same columns without ``text``, plus ``bands
    array<bigint>`` and ``signature binary`` (one ``mapInArrow`` pass; other columns pass through).

    With ``md5_key``, also ``_xkey binary``: the MD5 of each text's UTF-8 bytes (a null as ``''``,
    :func:`udfs.minhash.md5_digests`), the exact-dedup key, computed in the same pass."""
    kept = [f for f in df.schema.fields if f.name != "text"]
    extra = [T.StructField(EXACT_KEY, T.BinaryType(), False)] if md5_key else []
    schema = T.StructType([*kept, *extra, T.StructField("bands", T.ArrayType(T.LongType())), T.StructField("signature", T.BinaryType())])
    return df.mapInArrow(partial(signature_batches, s=s, md5_key=md5_key), schema)


# ------------------------------------------------------------------------------------- policy
def policy_order(policy: str) -> list[Column]:
    """Sort order whose first row is the representative: ``first`` / ``longest`` / ``max:<column>``."""
    if policy == "first":
        return [F.col("doc_id").asc()]
    if policy == "longest":
        return [F.col("n_chars").desc_nulls_last(), F.col("doc_id").asc()]
    return [F.col(policy[4:]).desc_nulls_last(), F.col("doc_id").asc()]


def _check_columns(df: DataFrame, d: DedupConfig) -> None:
    need = list(INPUT_COLUMNS)
    if d.representative == "longest":
        need.append("n_chars")
    elif d.representative.startswith("max:"):
        col = d.representative[4:]
        if col not in df.columns:  # a config value, not a broken input: one line, no traceback
            raise ConfigError(
                f"dedup.representative={d.representative!r}: the dedup input has no column {col!r}; "
                f"allowed: 'first', 'longest' or 'max:<column>' with a column of {df.columns}"
            )
        need.append(col)
    chain.require_columns(df, need, STAGE, f"dedup.representative={d.representative!r}")


def exact_key(d: DedupConfig) -> Column:
    """128-bit exact-dedup key (hex MD5) of the UTF-8 bytes of ``text`` or of its whitespace-collapsed form.

    The bytes are the string's own (a cast to binary): the same digest as ``encode(text, 'UTF-8')``
    for valid UTF-8, without ``encode``'s validation pass over every text."""
    text = F.col("text")
    if d.exact_key == "collapsed_whitespace":
        text = F.trim(F.regexp_replace(text, r"\s+", " "))
    return F.md5(F.coalesce(text, F.lit("")).cast("binary"))


# ------------------------------------------------------------------------------------- transform
BROADCAST_MAX_ROWS = 200_000
"""Largest number of rows of a small side (clustered documents, candidate documents) that is broadcast
to the tasks that scan the documents, so the full texts are never shuffled; above it, a shuffle join.
About 150 bytes a row: 200,000 rows stay near Spark's 10 MB ``autoBroadcastJoinThreshold`` x 3."""


@dataclass
class NearResult:
    """Byproducts of :func:`annotate` that :func:`run` writes or reports."""

    signatures: DataFrame | None = None
    large_buckets: list[dict] | None = None
    n_candidate_edges: int = 0
    n_edges: int = 0
    clustered: DataFrame | None = None
    n_clustered: int = 0
    rows_of: DataFrame | None = None
    """The documents' rows (all columns) of every document :func:`annotate` may remove, read in the exact
    check's scan: the candidate pairs' documents and the exact duplicates that are not their group's first.
    None when there is no exact check (no scan to share)."""
    removed_by_kind: dict[str, int] = field(default_factory=dict)
    n_documents: int | None = None
    """Rows of the input when the caller knows them without a Spark job (the Delta log's counts), else
    None: a bound that spares counting a part of them to decide on a broadcast."""
    cached: list[DataFrame] = field(default_factory=list)
    checkpoints: list[DataFrame] = field(default_factory=list)
    """The checkpointed frames the cached ones were computed from (the numbered LSH nodes, the last
    round of the connected components), freed after them."""

    def unpersist(self) -> None:
        """Release every DataFrame :func:`annotate` cached or checkpointed (call once its output has been
        written)."""
        for df in self.cached:
            df.unpersist()
        for df in self.checkpoints:
            release(df)
        self.cached.clear()
        self.checkpoints.clear()


def _small(df: DataFrame, n_rows: int) -> DataFrame:
    """``df`` with a broadcast hint when it holds at most :data:`BROADCAST_MAX_ROWS` rows."""
    return F.broadcast(df) if n_rows <= BROADCAST_MAX_ROWS else df


def _policy_columns(d: DedupConfig) -> list[str]:
    if d.representative == "longest":
        return ["n_chars"]
    if d.representative.startswith("max:"):
        return [d.representative[4:]]
    return []


def annotate(
    df: DataFrame,
    d: DedupConfig,
    seed: int,
    *,
    reference: DataFrame | None = None,
    checkpoint_dir: str | None = None,
    result: NearResult | None = None,
) -> DataFrame:
    """Mark every document with its duplicate cluster (exact and near).

    The texts are read in one pass (exact key and signatures together); everything after it (exact
    groups, LSH buckets, connected components, representatives) works on narrow rows without texts; the
    false-positive check reads back the rows of candidate documents and exact duplicates only (kept in
    ``result.rows_of`` for the stage's removed rows), and the annotation is joined to the documents
    once, from the clustered documents alone.

    Args:
        df: documents; needs ``doc_id`` (unique), ``text`` (+ the policy column).
        d: the ``dedup`` config section.
        seed: ``run.seed`` (MinHash permutations), 0 <= seed < 2^32.
        reference: optional earlier band table (``doc_id, bands, signature``); its documents are never
            removed, and a cluster holding one is represented by its smallest reference ``doc_id``.
        checkpoint_dir: for the numbered LSH nodes and connected components; None = localCheckpoint.
        result: filled with the signatures DataFrame, the largest buckets and edge counts.

    Returns:
        ``df`` plus ``cluster_id`` string (smallest doc_id of the cluster, the doc itself if unique),
        ``cluster_size`` int, ``is_representative`` bool (True for survivors), ``kind`` string
        (``exact``/``near`` for removed documents, ``representative`` for cluster representatives,
        null for unique documents), ``duplicate_of`` string (the representative, null for survivors).

    Raises:
        ValueError: missing input columns, or ``seed`` out of range.
    """
    _check_columns(df, d)
    settings = SignatureSettings.from_config(d, seed)
    result = result if result is not None else NearResult()
    order = policy_order(d.representative)
    pol = [c for c in _policy_columns(d) if c != "doc_id"]

    # With near dedup on, the MD5 of the plain text is taken in the signature pass (Python's OpenSSL MD5,
    # several times cheaper than the JVM's under the C1 compiler); other keys are JVM expressions.
    md5_in_pass = d.near and d.exact and d.exact_key == "text"
    key = [] if md5_in_pass else [(exact_key(d) if d.exact else F.col("doc_id")).alias("_xkey")]
    narrow = df.select("doc_id", *key, *pol, *(["text"] if d.near else []))
    if d.near:
        narrow = signatures(narrow, settings, md5_key=md5_in_pass).persist(StorageLevel.MEMORY_AND_DISK)
        result.signatures = narrow.select(*BAND_COLUMNS)
        result.cached.append(narrow)
    cols = ["doc_id", "_xkey", *pol, *(["bands"] if d.near else [])]
    if d.exact:
        keyed = narrow.select(*cols).withColumn("_xrep", F.first("doc_id").over(Window.partitionBy("_xkey").orderBy(*order)))
    else:
        keyed = narrow.select(*cols).withColumn("_xrep", F.col("doc_id"))
    keyed = keyed.persist(StorageLevel.MEMORY_AND_DISK)
    result.cached.append(keyed)

    if d.near:
        reps = keyed.where(F.col("doc_id") == F.col("_xrep")).select("doc_id", "bands")
        sig_of = narrow.select("doc_id", "signature")
        # The exact duplicates that are not their group's representative: besides the candidate pairs'
        # documents, the only documents a cluster can remove (see _near_components' ``rows_of``).
        others = keyed.where(F.col("doc_id") != F.col("_xrep")).select("doc_id") if d.exact else None
        comp = _near_components(reps, sig_of, df, d, settings, reference, checkpoint_dir, result, others)
    else:
        comp = None

    keyed = keyed.select("doc_id", "_xkey", "_xrep", *pol)
    if comp is None:
        grouped = keyed.withColumn("_ckey", F.col("_xrep")).withColumn("_refrep", F.lit(None).cast("string")).withColumn("_nref", F.lit(0))
    elif reference is None:  # no reference documents: no per-component aggregate or join for them
        grouped = (
            keyed.join(comp.select(F.col("node").alias("_xrep"), "component"), "_xrep", "left")
            .withColumn("_ckey", F.coalesce("component", "_xrep"))
            .withColumn("_refrep", F.lit(None).cast("string"))
            .withColumn("_nref", F.lit(0))
            .drop("component")
        )
    else:
        ref_info = comp.where("is_ref").groupBy("component").agg(F.min("node").alias("_refrep"), F.count(F.lit(1)).alias("_nref"))
        new_comp = comp.where(~F.col("is_ref")).select(F.col("node").alias("_xrep"), "component")
        grouped = (
            keyed.join(new_comp, "_xrep", "left")
            .withColumn("_ckey", F.coalesce("component", "_xrep"))
            .join(ref_info.withColumnRenamed("component", "_ckey"), "_ckey", "left")
            .withColumn("_nref", F.coalesce("_nref", F.lit(0)))
            .drop("component")
        )
    cw = Window.partitionBy("_ckey")
    cwo = Window.partitionBy("_ckey").orderBy(*order)
    clustered = (
        grouped.withColumn("_size", (F.count(F.lit(1)).over(cw) + F.col("_nref")).cast("int"))
        .where(F.col("_size") > 1)
        .withColumn("_min", F.min("doc_id").over(cw))
        .withColumn("_polrep", F.first("doc_id").over(cwo))
        .withColumn("_repkey", F.first("_xkey").over(cwo))
        .withColumn("_rep", F.coalesce("_refrep", "_polrep"))
        .withColumn("cluster_id", F.when(F.col("_refrep").isNotNull(), F.least("_min", "_refrep")).otherwise(F.col("_min")))
        .withColumn("cluster_size", F.col("_size"))
        .withColumn("is_representative", F.col("doc_id") == F.col("_rep"))
        .withColumn(
            "kind",
            F.when(F.col("is_representative"), F.lit("representative"))
            .when(F.col("_refrep").isNull() & (F.col("_xkey") == F.col("_repkey")) & F.lit(d.exact), F.lit("exact"))
            .otherwise(F.lit("near")),
        )
        .withColumn("duplicate_of", F.when(~F.col("is_representative"), F.col("_rep")))
        .select("doc_id", *ANNOTATION_COLUMNS)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    result.cached.append(clustered)
    result.clustered = clustered
    # One job counts the clustered documents and the removed ones by kind (``exact`` / ``near``).
    counts = clustered.groupBy("is_representative", "kind").count().collect()
    result.n_clustered = sum(r["count"] for r in counts)
    result.removed_by_kind = {r["kind"]: r["count"] for r in counts if not r["is_representative"]}
    joined = df.join(_small(clustered, result.n_clustered).withColumnRenamed("doc_id", "_cdoc"),
                     F.col("doc_id") == F.col("_cdoc"), "left")
    found = F.col("_cdoc").isNotNull()
    out = joined.select(
        *df.columns,
        F.coalesce("cluster_id", "doc_id").alias("cluster_id"),
        F.when(found, F.col("cluster_size")).otherwise(F.lit(1)).alias("cluster_size"),
        F.when(found, F.col("is_representative")).otherwise(F.lit(True)).alias("is_representative"),
        F.col("kind"),
        F.col("duplicate_of"),
    )
    return out


def _near_components(
    reps: DataFrame,
    sig_of: DataFrame,
    texts: DataFrame,
    d: DedupConfig,
    s: SignatureSettings,
    reference: DataFrame | None,
    checkpoint_dir: str | None,
    result: NearResult,
    others: DataFrame | None = None,
) -> DataFrame:
    """Connected components (``node``, ``component``, ``is_ref``) of near-duplicate edges among ``reps``.

    Args:
        reps: ``doc_id, bands`` of the exact-group representatives.
        sig_of: ``doc_id, signature`` of at least every document of ``reps``.
        texts: the documents (``doc_id, text`` + other columns), read for the candidate documents of the
            exact check.
        others: ``doc_id`` of further documents whose rows the exact check's scan keeps in
            ``result.rows_of`` (the exact duplicates a cluster may remove), or None.
    """
    nodes = reps.select("doc_id", "bands", F.lit(False).alias("is_ref"))
    if reference is not None:
        nodes = nodes.unionByName(reference.select("doc_id", "bands", F.lit(True).alias("is_ref")))
        sig_of = sig_of.unionByName(reference.select("doc_id", "signature"))
    # Buckets are aggregated over 64-bit node numbers in (doc_id, is_ref) order, so the smallest member
    # is a hash aggregate's min over longs rather than a sort aggregate's min over string structs. The
    # numbers come from a range-partitioned sort and are checkpointed: recomputed, the sort's sampled
    # boundaries (and so the numbers) could differ.
    numbered = checkpoint(nodes.orderBy("doc_id", "is_ref").withColumn("node", F.monotonically_increasing_id()), checkpoint_dir)
    result.checkpoints.append(numbered)
    ids = numbered.select("node", "doc_id", "is_ref")
    members = numbered.select("node", "is_ref", F.posexplode("bands").alias("band", "key"))
    buckets = (
        members.groupBy("band", "key")
        .agg(F.count(F.lit(1)).alias("size"), F.min("node").alias("centre"))
        .where(F.col("size") > 1)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    result.cached.append(buckets)
    big = buckets.where(F.col("size") > d.log_buckets_over).orderBy(F.col("size").desc(), "band", "key").limit(20).collect()
    smallest = {}
    if big:  # rare: name the smallest document of each large bucket
        smallest = {r["node"]: r["doc_id"] for r in ids.where(F.col("node").isin([b["centre"] for b in big])).collect()}
    result.large_buckets = [{"band": r["band"], "size": r["size"], "smallest_doc_id": smallest[r["centre"]]} for r in big]
    for b in result.large_buckets:
        log.warning("dedup: LSH bucket of band %d holds %d documents (smallest %s)", b["band"], b["size"], b["smallest_doc_id"])
    candidates = (
        members.join(buckets, ["band", "key"])
        .where(F.col("node") != F.col("centre"))
        .select("node", "centre")
        .join(ids.toDF("node", "src", "_sref"), "node")
        .join(ids.toDF("centre", "dst", "_dref"), "centre")
        .where((F.col("src") != F.col("dst")) & ~(F.col("_sref") & F.col("_dref")))
        .select("src", "dst")
        .distinct()
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    result.cached.append(candidates)
    result.n_candidate_edges = candidates.count()
    if d.fp_check is None:
        scored = candidates.withColumn("jaccard", F.lit(None).cast("double"))
    else:
        exact = d.fp_check == "exact"
        pairs = candidates
        if not exact or reference is not None:  # estimates from signatures (reference documents have no text here)
            sig_small = _small(sig_of, 2 * result.n_candidate_edges)
            pairs = pairs.join(sig_small.toDF("src", "sig_a"), "src").join(sig_small.toDF("dst", "sig_b"), "dst")
        if exact:
            text_of = _texts_of_ends(candidates, texts, others, result)
            pairs = pairs.join(text_of.toDF("src", "text_a"), "src", "left").join(text_of.toDF("dst", "text_b"), "dst", "left")
        cols = ["src", "dst", *(["sig_a", "sig_b"] if "sig_a" in pairs.columns else []), *(["text_a", "text_b"] if exact else [])]
        scored = pairs.select(*cols).mapInArrow(
            partial(jaccard_batches, s=s, exact=exact), "src string, dst string, jaccard double"
        )
    scored = scored.withColumn("keep", F.col("jaccard").isNull() | (F.col("jaccard") >= F.lit(d.threshold)))
    scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
    result.cached.append(scored)
    result.n_edges = scored.where("keep").count()
    edges = scored.where("keep").select("src", "dst")
    comp = connected_components(edges, max_iterations=d.max_cc_iterations, checkpoint_dir=checkpoint_dir,
                                local_max_edges=BROADCAST_MAX_ROWS, checkpoints=result.checkpoints)
    if reference is None:
        comp = comp.withColumn("is_ref", F.lit(False))
    else:
        comp = comp.join(nodes.select(F.col("doc_id").alias("node"), "is_ref"), "node")
    comp = comp.persist(StorageLevel.MEMORY_AND_DISK)
    result.cached.append(comp)
    return comp


def _texts_of_ends(candidates: DataFrame, texts: DataFrame, others: DataFrame | None, result: NearResult) -> DataFrame:
    """``doc_id, text`` (null text as ``''``) of both ends of every candidate pair, for the exact check.

    One scan of the documents reads the rows of the ends and of ``others`` (cached: the check's two joins
    read it, and with ``others`` the stage writes its removed rows from it, ``result.rows_of``, instead
    of scanning the documents again).
    """
    ends = candidates.select(F.col("src").alias("doc_id")).union(candidates.select(F.col("dst").alias("doc_id")))
    n_wanted = 2 * result.n_candidate_edges
    if others is not None:
        # ``others`` are some of the documents: when all of these fit beside the pairs' ends, the broadcast
        # is decided without a Spark job counting ``others``.
        bound = result.n_documents
        fits = bound is not None and n_wanted + bound <= BROADCAST_MAX_ROWS
        ends, n_wanted = ends.union(others), n_wanted + (bound if fits else others.count())
    rows_of = texts.join(_small(ends.distinct(), n_wanted), "doc_id", "left_semi").persist(StorageLevel.MEMORY_AND_DISK)
    result.cached.append(rows_of)
    result.rows_of = rows_of if others is not None else None
    return rows_of.select("doc_id", F.coalesce("text", F.lit("")).alias("text"))


# ------------------------------------------------------------------------------------------- run
def dedup(df: DataFrame, cfg: WinnowConfig) -> DataFrame:
    """``df.transform(lambda d: dedup(d, cfg))``: the survivors (documents columns only)."""
    return annotate(df, cfg.dedup, cfg.run.seed).where("is_representative").select(*df.columns)


def _read_reference(spark: SparkSession, path: str, s: SignatureSettings) -> DataFrame:
    if not tables.table_exists(spark, path):
        raise tables.MissingTableError(f"dedup.reference: no Delta band table at {path!r}")
    props = tables.table_properties(spark, path)
    found = json.loads(props.get("signature", "{}"))
    s.check_same(found, f"dedup.reference {path!r}")
    return tables.read_path(spark, path)


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Read ``documents``, dedup, write ``deduped``, ``dup_clusters``, ``dedup_bands`` and ``removed``.

    Returns:
        StageReport with removals by reason, and in ``extra``: signature settings, the S-curve, edge
        counts and the largest LSH buckets.

    Raises:
        SignatureSettingsMismatch: ``dedup.reference`` was made with other signature settings.
    """
    d = cfg.dedup
    docs = tables.read_table(spark, cfg, chain.stage(STAGE).input)
    report = StageReport(STAGE)
    cluster_schema = "doc_id string, cluster_id string, cluster_size int, is_representative boolean, kind string, duplicate_of string"
    if not d.enabled:
        report.rows_in = report.rows_out = docs.count()
        empty = docs.limit(0).withColumn("reason", F.array().cast("array<string>")).withColumn(
            "duplicate_of", F.lit(None).cast("string"))
        outputs = {"deduped": docs, "dup_clusters": spark.createDataFrame([], cluster_schema)}
        report.outputs = tables.publish(spark, cfg, STAGE, outputs, removed=empty, properties={"dedup": {"enabled": False}})
        return report

    s = SignatureSettings.from_config(d, cfg.run.seed)
    curve = lsh.s_curve(s.bands, s.rows)
    log.info(f"[dedup] LSH {s.bands} bands x {s.rows} rows (threshold {d.threshold}); candidate probability " +
             ", ".join(f"{k}: {v}" for k, v in curve.items()))
    reference = _read_reference(spark, d.reference, s) if d.reference else None
    report.rows_in = tables.table_rows(spark, cfg.table_path(chain.stage(STAGE).input), docs)
    near = NearResult(n_documents=report.rows_in)
    ann = annotate(docs, d, cfg.run.seed, reference=reference, checkpoint_dir=d.checkpoint_dir, result=near)
    clustered = near.clustered
    report.rows_out = report.rows_in - sum(near.removed_by_kind.values())
    for kind, n in sorted(near.removed_by_kind.items()):
        report.removed[f"dedup.{kind}"] = n

    props = {"signature": s.to_dict(), "threshold": d.threshold, "s_curve": curve, "fp_check": d.fp_check or "none",
             "representative": d.representative, "exact_key": d.exact_key if d.exact else "none"}
    outputs = {"deduped": ann.where("is_representative").select(*docs.columns), "dup_clusters": clustered.select(*CLUSTER_COLUMNS)}
    gone_rows = ann.where(~F.col("is_representative"))
    if near.rows_of is not None:  # the removed documents' rows are among those the exact check read: no second scan
        gone = clustered.where(~F.col("is_representative")).select("doc_id", "kind", "duplicate_of")
        gone_rows = near.rows_of.join(_small(gone, near.n_clustered), "doc_id")
    removed = gone_rows.select(
        *docs.columns, F.array(F.concat(F.lit("dedup."), F.col("kind"))).alias("reason"), "duplicate_of"
    )
    bands = None
    if near.signatures is not None:
        gone = clustered.where(~F.col("is_representative")).select("doc_id")
        bands = near.signatures.join(_small(gone, near.n_clustered), "doc_id", "left_anti").select(*BAND_COLUMNS)
        outputs["dedup_bands"] = bands
    report.outputs = tables.publish(spark, cfg, STAGE, outputs, removed=removed, properties=props)
    if bands is not None and d.reference and d.reference_append:
        tables.append(bands, d.reference)
    report.extra = {"signature": s.to_dict(), "s_curve": curve, "candidate_edges": near.n_candidate_edges,
                    "edges": near.n_edges, "large_buckets": near.large_buckets or []}
    near.unpersist()
    return report
