"""Shard stage: ``tokenized`` -> seeded global shuffle -> token-balanced Megatron / MDS shards + manifest.

How shards are written deterministically, in parallel, with the tokens moved once and no token per row:

1. **Order.** Every document gets ``shuffle_key = sha256("<seed>:<doc_id>")`` as hex
   (:func:`udfs.shuffle_quality.shuffle_key`); the stream order is ``(shuffle_key, doc_id)``, which
   depends on neither input order, partitioning nor executors. With ``shard.mix`` the train documents
   are first selected and copied, and each copy gets its own key (:mod:`pipelines.shard.mix`).
2. **Buckets.** The first 8 hex digits of the key (uniform, as sha256 is) give a *range* bucket
   ``floor(prefix * B / 2^32)``: bucket ``b`` holds a contiguous slice of the stream, without the
   sampling job of ``repartitionByRange``. ``B`` (``spark.shuffle_partitions``) changes no byte of output.
3. **Plan (slim columns only).** One Spark job sorts each bucket's ``(key, doc_id, n_tokens)`` and
   returns its token counts in stream order (4 bytes per document) to the driver, which cuts the stream
   into ``S`` contiguous shards whose token counts differ by at most the longest document
   (:func:`udfs.shard_balance.balanced_boundaries`). A second slim job returns the key of each shard's
   first document (``S - 1`` rows).
4. **Write.** The full rows are read once; a JVM expression gives each document its shard by a binary
   search (a ``when`` tree of depth log2 S) of its key among the ``S - 1`` boundary keys, so tokens never
   enter Python before the shuffle; one shuffle groups the rows by shard and sorts them by key, and
   one ``applyInArrow`` task per shard receives them as a stream of Arrow batches and appends each to
   ``.bin`` (the flattened ``list<int32>`` buffer cast to the shard dtype) and to the MDS samples,
   writes ``.idx`` at the end, and returns only file sizes, sha256 and shuffle statistics. A shard is
   never held whole in a Python worker.
5. **Publish.** The driver writes ``mds/index.json``, uploads to ``s3://`` when asked (verified
   remotely), and writes ``manifest.json`` last. A stale manifest is removed first, so a failed run
   never leaves a manifest that describes other shards.

The driver holds 4 bytes per document during planning (400 MB for 100 M documents); above that, shard
the corpus in several runs (e.g. by source) or raise the driver memory.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.core import chain, storage, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.shard import blend as shard_blend
from pipelines.shard import mix as shard_mix
from pipelines.shard import sources as shard_sources
from pipelines.shard.blend import blend_files
from pipelines.shard.split import SplitPlan, plan_split, split_key
from pipelines.shard.writer import KEY_HEX, RESULT_SCHEMA, keys_as_bytes, make_shard_writer, write_file
from udfs import mds, megatron
from udfs import shuffle_quality as sq
from udfs.shard_balance import balanced_boundaries

STAGE = "shard"
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "source", "tokens", "n_tokens")
MANIFEST = chain.MANIFEST
MDS_INDEX = "mds/index.json"
STREAMING_CANONICAL_NODES = 8
"""Recommended ``num_canonical_nodes`` of streaming readers (``manifest["readers"]``): the global sample order
is a function of it, the seed and the shuffle settings only, so a job may resume on any number of nodes
that divides it or that it divides (1, 2, 4, 8, 16, ...) and read the same order
(``streaming/base/partition/orig.py``). tests/test_consumers.py resumes on 1 -> 2 -> 4 nodes."""
SPLITS = ("train", "validation")
"""Shard sets under the shard root, each with its own ``megatron/`` and ``mds/`` (``validation`` only when
``shard.split.validation`` > 0)."""


class EmptyInput(ValueError):
    """The shard stage's input holds no documents: there is nothing to write (the run is empty)."""

_BUCKET_SCHEMA = T.StructType([T.StructField("_bucket", T.IntegerType()), T.StructField("n_docs", T.LongType()),
                               T.StructField("lengths", T.BinaryType()), T.StructField("duplicate", T.StringType()),
                               T.StructField("bad_counts", T.LongType())])
_BOUNDARY_SCHEMA = T.StructType([T.StructField("shard_id", T.IntegerType()), T.StructField("_key", T.StringType())])


def shuffle_key(seed: int):
    """Spark column equal to :func:`udfs.shuffle_quality.shuffle_key` of ``doc_id``."""
    return F.sha2(F.concat(F.lit(f"{seed}:"), F.col("doc_id")), 256)


def key_bucket(buckets: int):
    """Spark column: range bucket ``floor(int(key[:8], 16) * buckets / 2^32)`` of the ``_key`` column."""
    prefix = F.conv(F.substring("_key", 1, 8), 16, 10).cast("long")
    return F.shiftright(prefix * F.lit(buckets).cast("long"), 32).cast("int")


def _sorted_by_key(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, [("_key", "ascending"), ("doc_id", "ascending")]))


def _summarise_bucket(table: pa.Table) -> pa.Table:
    """One bucket (slim rows) -> its token counts in stream order, a duplicated doc_id and bad counts (if any).

    Problems are returned, not raised, so the driver raises one clear ``ValueError`` (not a worker trace).
    """
    table = _sorted_by_key(table)
    keys = keys_as_bytes(table.column("_key"))
    dup = np.flatnonzero(keys[1:] == keys[:-1])
    n = table.column("n_tokens")
    bad = n.null_count + (pc.sum(pc.less(n, 1)).as_py() or 0)
    lengths = pc.fill_null(n, 0).to_numpy().astype("<i4")
    return pa.table({"_bucket": pa.array([table.column("_bucket")[0].as_py()], pa.int32()),
                     "n_docs": pa.array([len(lengths)], pa.int64()), "lengths": pa.array([lengths.tobytes()], pa.binary()),
                     "duplicate": pa.array([table.column("doc_id")[int(dup[0])].as_py() if dup.size else None], pa.string()),
                     "bad_counts": pa.array([bad], pa.int64())})


@dataclass(frozen=True)
class ShardPlan:
    """Where the stream is cut.

    Attributes:
        docs: documents in the stream (N).
        tokens: tokens in the stream (T).
        max_doc_tokens: the longest document (L).
        starts: int64 [S + 1], stream index of each shard's first document, then N.
        shard_tokens: int64 [S], tokens per shard.
        boundary_keys: the shuffle key of the first document of shards 1..S-1, as ``S64`` bytes (sorted).
        requested: shards asked for (``shard.num_shards`` or derived); more than S when the stream holds
            fewer documents than that (every shard gets at least one document).
    """

    docs: int
    tokens: int
    max_doc_tokens: int
    starts: np.ndarray
    shard_tokens: np.ndarray
    boundary_keys: np.ndarray
    requested: int = 0

    @property
    def shards(self) -> int:
        """Number of shards planned."""
        return len(self.shard_tokens)


def plan_shards(df: DataFrame, seed: int, num_shards: int | None, tokens_per_shard: int | None, buckets: int,
                key=None) -> ShardPlan:
    """Cut the shuffled stream into token-balanced contiguous shards (two slim Spark jobs, no token moved).

    Args:
        df: documents with ``doc_id`` (string, unique) and ``n_tokens`` (int >= 1, EOS included).
        seed: ``run.seed``.
        num_shards: shard count, or None to derive it from ``tokens_per_shard``.
        tokens_per_shard: target tokens per shard (``ceil(T / this)`` shards), when ``num_shards`` is None.
        buckets: range buckets of the key (parallelism of the slim sort; no effect on the result).
        key: the shuffle key column (64 hex digits, unique), default :func:`shuffle_key` of ``doc_id``
            (``shard.mix`` gives each copy of a document its own: :func:`pipelines.shard.mix.apply_mix`).

    Returns:
        The :class:`ShardPlan`.

    Raises:
        EmptyInput: no documents.
        ValueError: a duplicated ``doc_id`` or ``n_tokens < 1``.

    More shards requested than documents: one shard per document (``requested`` keeps the request).
    """
    key = shuffle_key(seed) if key is None else key
    slim = df.select("doc_id", F.col("n_tokens").cast("long").alias("n_tokens"), key.alias("_key"))
    slim = slim.withColumn("_bucket", key_bucket(buckets))
    rows = slim.groupBy("_bucket").applyInArrow(_summarise_bucket, _BUCKET_SCHEMA).collect()
    rows.sort(key=lambda r: r["_bucket"])
    dups = [r["duplicate"] for r in rows if r["duplicate"] is not None]
    if dups:
        raise ValueError(f"shard: doc_id {dups[0]!r} occurs more than once in 'tokenized'; doc ids must be unique")
    if any(r["bad_counts"] for r in rows):
        bad = sum(int(r["bad_counts"]) for r in rows)
        raise ValueError(f"shard: {bad} documents have a null n_tokens or n_tokens < 1 (EOS included, so >= 1 expected)")
    lengths = np.concatenate([np.frombuffer(r["lengths"], dtype="<i4") for r in rows]) if rows else np.zeros(0, np.int32)
    docs = int(lengths.size)
    if docs == 0:
        raise EmptyInput("shard: the input table 'tokenized' holds no documents; refusing to write empty shards")
    total = int(lengths.sum(dtype=np.int64))
    requested = num_shards if num_shards is not None else max(1, math.ceil(total / int(tokens_per_shard or 1)))
    shards = min(requested, docs)  # an empty shard is useless to a loader and breaks Megatron's .idx
    starts = balanced_boundaries(lengths, shards)
    prefix = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)])

    # The key of each shard's first document: (bucket, index inside the bucket) -> one slim job.
    bucket_ids = np.array([int(r["_bucket"]) for r in rows], dtype=np.int64)
    bucket_first = np.concatenate([np.zeros(1, np.int64), np.cumsum([int(r["n_docs"]) for r in rows])])
    wanted: dict[int, list[tuple[int, int]]] = {}
    for k in range(1, shards):
        b = int(np.searchsorted(bucket_first, starts[k], side="right")) - 1
        wanted.setdefault(int(bucket_ids[b]), []).append((int(starts[k] - bucket_first[b]), k))

    def pick(table: pa.Table) -> pa.Table:
        todo = wanted.get(int(table.column("_bucket")[0].as_py()), [])
        if not todo:
            return pa.table({"shard_id": pa.array([], pa.int32()), "_key": pa.array([], pa.string())})
        keys = _sorted_by_key(table.select(["_key", "doc_id"])).column("_key")
        return pa.table({"shard_id": pa.array([k for _, k in todo], pa.int32()),
                         "_key": keys.take(pa.array([i for i, _ in todo]))})

    boundary_keys = np.zeros(0, dtype=f"S{KEY_HEX}")
    if shards > 1:
        got = slim.filter(F.col("_bucket").isin(list(wanted))).groupBy("_bucket").applyInArrow(pick, _BOUNDARY_SCHEMA).collect()
        by_shard = {int(r["shard_id"]): r["_key"] for r in got}
        boundary_keys = np.array([by_shard[k].encode("ascii") for k in range(1, shards)], dtype=f"S{KEY_HEX}")
    return ShardPlan(docs=docs, tokens=total, max_doc_tokens=int(lengths.max()), starts=starts,
                     shard_tokens=np.diff(prefix[starts]), boundary_keys=boundary_keys, requested=int(requested))


def shard_id_column(boundary_keys: np.ndarray):
    """Spark column: number of boundary keys <= ``_key``, as a balanced tree of comparisons (depth log2 S).

    Evaluated in the JVM, so the token column never crosses into Python before the shuffle.
    """
    keys = [k.decode("ascii") for k in boundary_keys.tolist()]

    def node(lo: int, hi: int):
        if lo == hi:
            return F.lit(lo)
        mid = (lo + hi + 1) // 2  # shard ``mid`` starts at keys[mid - 1]
        return F.when(F.col("_key") < F.lit(keys[mid - 1]), node(lo, mid - 1)).otherwise(node(mid, hi))

    return node(0, len(keys)).cast("int")


def _output_dirs(cfg: WinnowConfig) -> tuple[str, Path, bool]:
    root = cfg.shard_root
    if storage.is_s3(root):
        staging = cfg.shard.storage.staging_dir or tempfile.mkdtemp(prefix="winnow-shards-")
        return root, Path(staging), True
    if "://" in root:
        raise ValueError(f"shard.output={root!r}: allowed are a local path (incl. /dbfs/...) or s3://bucket/prefix")
    return root, Path(root), False


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Shuffle ``tokenized`` and write ``train/`` (and ``validation/``, and with ``shard.per_source_sets``
    ``sources/<folder>/``) shard sets + ``manifest.json`` (last).

    Publishing order: data files (and, for ``s3://``, their upload and remote check), then each
    ``mds/index.json``, then ``manifest.json``; the indexes and the manifest of a previous run are
    retracted first, so a failed run leaves no index pointing at a missing or short file.

    Returns:
        A :class:`StageReport` (``rows_out`` = documents in shards; nothing is removed) whose ``extra``
        holds the manifest totals, balance and shuffle-quality figures.

    Raises:
        MissingTableError: ``tokenized`` does not exist.
        ValueError: empty input, more shards than documents, or a dtype that cannot hold the vocabulary.
        StorageError: an upload failed after retries (no manifest is written).
    """
    scfg = cfg.shard
    src_name = chain.stage(STAGE).input
    src_path = cfg.table_path(src_name)
    # Queried by the split, the mix and each shard set's writer: cached for the stage while small.
    df = tables.read_table(spark, cfg, src_name, cache_under_bytes=tables.SMALL_TABLE_BYTES)
    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    props = tables.table_properties(spark, src_path)
    version = tables.table_version(spark, src_path)
    vocab = int(props["vocab_size"])
    dtype = megatron.choose_dtype(vocab, scfg.dtype)
    root, local, remote = _output_dirs(cfg)

    # Retract what a previous run published before anything changes under it: readers trust the
    # manifest and the MDS indexes, so they go first.
    indexes = [f"{s}/{MDS_INDEX}" for s in SPLITS] + [MDS_INDEX, shard_blend.MEGATRON, shard_blend.STREAMS,
                                                      shard_blend.MIX]
    if remote:
        for rel in [MANIFEST, *indexes]:
            storage.delete(root, rel, scfg.storage)
        shard_sources.retract_remote_indexes(root, scfg.storage)
    (local / MANIFEST).unlink(missing_ok=True)
    for sub in ("megatron", "mds", "blend", *SPLITS, shard_sources.SOURCES):
        shutil.rmtree(local / sub, ignore_errors=True)

    df = df.select(*INPUT_COLUMNS)
    cut = plan_split(df, cfg.run.seed, scfg.split)
    parts = [("train", df, scfg.num_shards, scfg.tokens_per_shard)]
    if cut.cut is not None:
        held = split_key(cfg.run.seed) < F.lit(cut.cut)
        parts = [("train", df.filter(~held), scfg.num_shards, scfg.tokens_per_shard),
                 ("validation", df.filter(held), scfg.split.validation_shards, None)]
    mix: dict[str, Any] | None = None
    train_docs = parts[0][1]  # each train document once: the per-source sets hold these, unmixed
    counts = shard_mix.source_counts(train_docs) if scfg.mix or scfg.per_source_sets else {}
    if scfg.mix:  # the mix applies to train only, after the validation documents are chosen
        plans = shard_mix.plan_mix(counts, scfg.mix)
        plans = shard_mix.pick_cuts(parts[0][1], cfg.run.seed, plans)
        copies = shard_mix.apply_mix(parts[0][1], cfg.run.seed, plans)
        mix = shard_mix.mix_section(plans, shard_mix.mix_counts(copies))
        parts[0] = ("train", copies.select(*INPUT_COLUMNS, "_key"), scfg.num_shards, scfg.tokens_per_shard)
    sections: dict[str, dict[str, Any]] = {}
    requested: dict[str, int] = {}  # shards asked for per split (more than written when documents are few)
    data_files: list[dict[str, Any]] = []
    index_blobs: dict[str, bytes] = {}
    for name, part, num, per in parts:
        try:
            section, files, blob, asked = _write_split(cfg, part, name, local / name, dtype, vocab, num, per)
        except EmptyInput:
            if name != "train":
                raise
            # No document survived: no shard and no manifest (the old ones are gone), a completion record
            # all the same, so the report still runs and shows the funnel down to zero.
            tables.publish(spark, cfg, STAGE, {})
            return StageReport(stage=STAGE, outputs={"shards": root},
                               extra={"totals": {"docs": 0, "tokens": 0, "shards": 0}, "empty": True,
                                      "shards_requested": scfg.num_shards})
        sections[name], data_files = section, data_files + files
        requested[name] = asked
        if blob is not None:
            index_blobs[f"{name}/{MDS_INDEX}"] = blob

    sources: dict[str, dict[str, Any]] | None = None
    if scfg.per_source_sets:
        def write(part: DataFrame, name: str) -> tuple[dict[str, Any], list[dict[str, Any]], bytes | None]:
            return _write_split(cfg, part, name, local / name, dtype, vocab, scfg.num_shards, scfg.tokens_per_shard)[:3]

        sources, files, blobs = shard_sources.write_source_sets(train_docs, counts, write)
        data_files += files
        index_blobs.update(blobs)

    # Publish: data files verified first, then the MDS indexes, then the manifest.
    _check_local(local, data_files)
    upload_stats: dict[str, int] = {}
    if remote:
        upload_stats = storage.upload_verified(_local_files(local, data_files), root, scfg.storage)
    index_files = []
    split_files = [f for f in data_files if f["path"].split("/", 1)[0] in SPLITS]
    for rel, text in blend_files(root, split_files, remote).items():
        index_blobs[rel] = text.encode("utf-8")
    if mix is not None:
        text = shard_blend.mix_file(mix, sources, data_files, root=root, remote=remote)
        index_blobs[shard_blend.MIX] = text.encode("utf-8")
    for rel, blob in index_blobs.items():
        size, sha = write_file(local / rel, blob)
        fmt, kind = ("mds", "index") if rel.endswith("index.json") else ("blend", "blend")
        index_files.append({"path": rel, "format": fmt, "kind": kind, "bytes": size, "sha256": sha})
    if remote and index_files:
        more = storage.upload_verified(_local_files(local, index_files), root, scfg.storage)
        upload_stats = {k: upload_stats.get(k, 0) + v for k, v in more.items()}
    manifest = build_manifest(cfg, sections, data_files + index_files, props=props, version=version,
                              dtype=dtype.name, vocab=vocab, root=root, cut=cut, mix=mix, sources=sources)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_file(local / MANIFEST, text.encode("utf-8"))
    if remote:
        storage.put_text(root, MANIFEST, text, scfg.storage)
    tables.publish(spark, cfg, STAGE, {})

    return StageReport(
        stage=STAGE,
        rows_in=sum(s["documents"] for s in sections.values()),
        rows_out=manifest["totals"]["documents"],
        outputs={"shards": root, "manifest": f"{root}/{MANIFEST}"},
        extra={"totals": manifest["totals"], "balance": manifest["balance"], "split": manifest["split"],
               "shuffle_quality": manifest["shuffle_quality"], "upload": upload_stats,
               "shards_requested": sum(requested.values()), **({"mix": mix} if mix is not None else {})},
        notes=mix_notes(mix),
    )


def mix_notes(mix: dict[str, Any] | None) -> dict[str, int]:
    """The stage line's account of a mix: in/out count the documents written (copies included), so the
    train documents read, those the mix left out and the extra copies it added are said beside them.

    >>> mix_notes({"a": {"documents_in": 10, "documents_selected": 4, "documents_out": 4},
    ...            "b": {"documents_in": 2, "documents_selected": 2, "documents_out": 5}})
    {'train_read': 12, 'not_selected': 6, 'repeat_copies': 3}
    """
    if not mix:
        return {}
    total = {k: sum(m[k] for m in mix.values()) for k in ("documents_in", "documents_selected", "documents_out")}
    return {"train_read": total["documents_in"], "not_selected": total["documents_in"] - total["documents_selected"],
            "repeat_copies": total["documents_out"] - total["documents_selected"]}


def _local_files(local: Path, files: list[dict[str, Any]]) -> list[storage.LocalFile]:
    return [storage.LocalFile(f["path"], local / f["path"], f["bytes"], f["sha256"]) for f in files]


def _check_local(local: Path, files: list[dict[str, Any]]) -> None:
    """Every data file the workers reported is on disk with its size (before any index names it)."""
    bad = [f["path"] for f in files if not (local / f["path"]).is_file() or (local / f["path"]).stat().st_size != f["bytes"]]
    if bad:
        raise RuntimeError(f"shard: {len(bad)} written files are missing or of another size than reported: {bad[:5]}")


def _write_split(cfg: WinnowConfig, df: DataFrame, name: str, out: Path, dtype: np.dtype, vocab: int,
                 num_shards: int | None, tokens_per_shard: int | None
                 ) -> tuple[dict[str, Any], list[dict[str, Any]], bytes | None, int]:
    """Shuffle and write one split's shards under ``out``.

    Returns:
        (its manifest section, its data files with paths relative to the shard root, the bytes of its
        ``mds/index.json`` or None when MDS is not written, the number of shards asked for).
    """
    scfg = cfg.shard
    key = F.col("_key") if "_key" in df.columns else shuffle_key(cfg.run.seed)
    sp = plan_shards(df, cfg.run.seed, num_shards, tokens_per_shard, cfg.spark.shuffle_partitions, key=key)
    per_file = mds.samples_per_file(scfg.seq_len, dtype, scfg.mds_size_limit)
    plan: dict[int, dict[str, int]] = {}
    next_file = 0
    for k in range(sp.shards):
        tokens_k = int(sp.shard_tokens[k])
        plan[k] = {"docs": int(sp.starts[k + 1] - sp.starts[k]), "tokens": tokens_k, "first_doc": int(sp.starts[k]),
                   "mds_first_file": next_file}
        next_file += mds.files_per_shard(tokens_k, scfg.seq_len, per_file) if "mds" in scfg.formats else 0
    writer = make_shard_writer(
        str(out), plan, prefix=scfg.name_prefix, formats=list(scfg.formats), dtype=dtype.name, vocab_size=vocab,
        seq_len=scfg.seq_len, size_limit=scfg.mds_size_limit, window=scfg.shuffle_window_docs,
    )
    keyed = df.withColumn("_key", key)
    # Rows reach the writer sorted by key within their shard: the grouped-map operator needs its input
    # clustered by shard_id and sorted by it, which this partitioning and sort already satisfy, so Spark
    # adds no exchange or sort of its own (the writer checks the order as it streams).
    with_shard = (
        keyed.withColumn("shard_id", shard_id_column(sp.boundary_keys))
        .repartition(min(sp.shards, cfg.spark.shuffle_partitions), "shard_id")
        .sortWithinPartitions("shard_id", "_key")
    )
    results = sorted(with_shard.groupBy("shard_id").applyInArrow(writer, RESULT_SCHEMA).collect(), key=lambda r: r["shard_id"])
    totals = {"docs": sp.docs, "tokens": sp.tokens, "shards": sp.shards, "max_doc_tokens": sp.max_doc_tokens}
    section = split_section(cfg, results, totals)
    files = [dict(f, path=f"{name}/{f['path']}") for r in results for f in json.loads(r["files"])]
    blob = None
    if "mds" in scfg.formats:
        blob = mds.index_json([e for r in results for e in json.loads(r["mds_entries"])]).encode("utf-8")
    return section, files, blob, sp.requested


def split_section(cfg: WinnowConfig, results: list[Any], totals: dict[str, int]) -> dict[str, Any]:
    """One split's manifest section: counts, tokens by source, balance and shuffle quality of its shards.

    Raises:
        RuntimeError: the writers wrote other document or token counts than planned.
    """
    files = [f for r in results for f in json.loads(r["files"])]
    docs = sum(int(r["n_docs"]) for r in results)
    tokens = sum(int(r["n_tokens"]) for r in results)
    if docs != totals["docs"] or tokens != totals["tokens"]:
        raise RuntimeError(f"shard: wrote {docs} docs / {tokens} tokens, input has {totals['docs']} / {totals['tokens']}")
    by_src: dict[str, int] = {}
    windows: dict[int, dict[str, int]] = {}
    for r in results:
        for s, n in json.loads(r["tokens_by_source"]).items():
            by_src[s] = by_src.get(s, 0) + n
        for w, c in json.loads(r["windows"]).items():
            cell = windows.setdefault(int(w), {})
            for s, n in c.items():
                cell[s] = cell.get(s, 0) + n
    shard_tokens = [int(r["n_tokens"]) for r in results]
    target = tokens / len(results)
    mds_tokens = sum(f["tokens"] for f in files if f["kind"] == "mds")
    quality = sq.window_deviation(windows, docs, cfg.shard.shuffle_window_docs)
    quality["longest_same_source_run"] = sq.longest_run([json.loads(r["runs"]) for r in results])
    return {
        "shards": len(results), "documents": docs, "tokens": tokens,
        "mds_samples": sum(f.get("samples", 0) for f in files),
        "mds_dropped_tokens": tokens - mds_tokens if "mds" in cfg.shard.formats else 0,
        "tokens_by_source": dict(sorted(by_src.items())),
        "token_share_by_source": {s: n / tokens for s, n in sorted(by_src.items())},
        "balance": {"target_tokens_per_shard": target, "min_tokens": min(shard_tokens), "max_tokens": max(shard_tokens),
                    "max_abs_deviation": max(abs(t - target) for t in shard_tokens),
                    "longest_document_tokens": totals["max_doc_tokens"]},
        "shuffle_quality": quality,
    }


def build_manifest(cfg: WinnowConfig, sections: dict[str, dict[str, Any]], files: list[dict[str, Any]], *,
                   props: dict[str, str], version: int, dtype: str, vocab: int, root: str, cut: SplitPlan,
                   mix: dict[str, Any] | None = None, sources: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest: run-wide facts, totals over the splits, the train split's figures at top level
    (``balance``, ``shuffle_quality``, ``tokens_by_source``), each split under ``splits``, every file, and
    with ``shard.mix`` set the ``mix`` block per source (:func:`pipelines.shard.mix.mix_section`), with
    ``shard.per_source_sets`` the ``sources`` block (:func:`pipelines.shard.sources.write_source_sets`;
    ``totals`` stay those of the splits except ``files`` and ``bytes``, which count every file)."""
    train = sections["train"]
    split_cfg = cfg.shard.split
    return {
        "manifest_version": 2,
        "output": root,
        "formats": list(cfg.shard.formats),
        "dtype": dtype,
        "seq_len": cfg.shard.seq_len,
        "seed": cfg.run.seed,
        "config_fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(STAGE),
        "tokenizer": {"spec": props.get("tokenizer"), "fingerprint": props.get("tokenizer_fingerprint"),
                      "vocab_size": vocab, "eos_id": int(props["eos_id"]), "bos_id": json.loads(props.get("bos_id", "null"))},
        "input_tables": {"tokenized": {"path": cfg.table_path("tokenized"), "version": version},
                         props.get("input_table", "unknown"): {"version": json.loads(props.get("input_version", "null"))}},
        "totals": {"shards": sum(s["shards"] for s in sections.values()),
                   "documents": sum(s["documents"] for s in sections.values()),
                   "tokens": sum(s["tokens"] for s in sections.values()), "files": len(files),
                   # Blend files name the output root: counting them would make two runs of the same
                   # data under two roots differ, so the total is of the data and index files only.
                   "bytes": sum(f["bytes"] for f in files if f["kind"] != "blend"),
                   "mds_samples": sum(s["mds_samples"] for s in sections.values()),
                   "mds_dropped_tokens": sum(s["mds_dropped_tokens"] for s in sections.values())},
        "split": {"validation": split_cfg.validation, "unit": split_cfg.unit, "target": cut.target,
                  "key": "sha256(<seed>:validation:<doc_id>) < cut", "cut": cut.cut,
                  "validation_documents": cut.docs, "validation_tokens": cut.tokens},
        "splits": sections,
        "readers": {
            "streaming": {"num_canonical_nodes": STREAMING_CANONICAL_NODES, "shuffle": True, "shuffle_algo": "py1e",
                          "shuffle_seed": cfg.run.seed, "partition_algo": "orig"},
            "megatron": {"seed": cfg.run.seed, "sequence_length": cfg.shard.seq_len, "split": "100,0,0",
                         "per_split_data_args_path": f"{root}/{shard_blend.MEGATRON}"},
        },
        "tokens_by_source": train["tokens_by_source"],
        "token_share_by_source": train["token_share_by_source"],
        "balance": train["balance"],
        "shuffle_quality": train["shuffle_quality"],
        "files": files,
        **({"mix": mix} if mix is not None else {}),
        **({"sources": sources} if sources is not None else {}),
    }
