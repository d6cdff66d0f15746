"""Shard stage: ``tokenized`` -> seeded global shuffle -> token-balanced Megatron / MDS shards + manifest.

How shards are written deterministically, in parallel, without collecting tokens to the driver:

1. **Order.** Every document gets ``shuffle_key = sha256("<seed>:<doc_id>")``
   (:func:`udfs.shuffle_quality.shuffle_key`); the stream order is ``(shuffle_key, doc_id)``, which
   depends on neither input order, partitioning nor executors.
2. **Positions.** Only the slim metadata (``doc_id``, ``n_tokens``, key) is range-partitioned and sorted;
   per-partition document and token counts (one row per partition) go to the driver, which turns them
   into offsets; a ``mapInArrow`` pass then gives every document its global position and token start
   (running sums over the sorted partition).
3. **Balance.** With ``T`` tokens and ``S`` shards a document goes to shard
   ``floor((start + n/2) * S / T)``: the shard whose ideal token range holds the document's midpoint.
   Shards are contiguous runs of the stream, documents are never split, and every shard holds
   ``T/S +- L`` tokens (``L`` the longest document).
4. **Write.** Tokens are joined to their positions and grouped by shard; each shard is written by one
   ``applyInArrow`` task (sort by position, one ``.bin`` write, one ``.idx``, MDS samples), returning
   only file sizes, sha256 and shuffle statistics.
5. **Publish.** The driver writes ``mds/index.json``, uploads to ``s3://`` when asked (verified
   remotely), and writes ``manifest.json`` last. A stale manifest is removed first, so a failed run
   never leaves a manifest that describes other shards.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import storage, tables
from pipelines.config import WinnowConfig
from pipelines.stage import StageReport
from udfs import mds, megatron
from udfs import shuffle_quality as sq

STAGE = "shard"
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "source", "tokens", "n_tokens")
POSITION_COLUMNS: tuple[str, ...] = ("doc_id", "n_tokens", "position", "token_start", "shard_id")
MANIFEST = "manifest.json"
MDS_INDEX = "mds/index.json"

_RESULT_SCHEMA = T.StructType(
    [
        T.StructField("shard_id", T.IntegerType()),
        T.StructField("n_docs", T.LongType()),
        T.StructField("n_tokens", T.LongType()),
        T.StructField("files", T.StringType()),
        T.StructField("mds_entries", T.StringType()),
        T.StructField("tokens_by_source", T.StringType()),
        T.StructField("windows", T.StringType()),
        T.StructField("runs", T.StringType()),
        T.StructField("max_doc_tokens", T.LongType()),
    ]
)


def _check_input(df: DataFrame) -> None:
    missing = [c for c in INPUT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"shard: input is missing columns {missing}; has {df.columns}")


def shuffle_key(seed: int):
    """Spark column equal to :func:`udfs.shuffle_quality.shuffle_key` of ``doc_id``."""
    return F.sha2(F.concat(F.lit(f"{seed}:"), F.col("doc_id")), 256)


def assign_positions(df: DataFrame, seed: int, num_shards: int | None, tokens_per_shard: int | None, partitions: int) -> tuple[DataFrame, dict[str, int]]:
    """Global shuffled position, token start and shard of every document (metadata only).

    Args:
        df: documents with ``doc_id`` (string) and ``n_tokens`` (int, EOS included).
        seed: ``run.seed``.
        num_shards: shard count, or None to derive it from ``tokens_per_shard``.
        tokens_per_shard: target tokens per shard (``ceil(T / this)`` shards), when ``num_shards`` is None.
        partitions: range partitions for the sort.

    Returns:
        ``(positions, totals)``: ``positions`` has ``doc_id``, ``n_tokens`` (long), ``position`` (long, 0-based stream index),
        ``token_start`` (long), ``shard_id`` (int); ``totals`` = ``{"docs", "tokens", "shards", "max_doc_tokens"}``.
        The caller unpersists ``positions`` (it is cached).

    Raises:
        ValueError: no documents, or more shards than documents.
    """
    meta = df.select("doc_id", F.col("n_tokens").cast("long").alias("n_tokens"), shuffle_key(seed).alias("_key"))
    ranged = (
        meta.repartitionByRange(partitions, "_key", "doc_id")
        .sortWithinPartitions("_key", "doc_id")
        .withColumn("_pid", F.spark_partition_id())
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    parts = ranged.groupBy("_pid").agg(F.count(F.lit(1)).alias("n"), F.sum("n_tokens").alias("t"), F.max("n_tokens").alias("m")).collect()
    docs = sum(int(r["n"]) for r in parts)
    total = sum(int(r["t"] or 0) for r in parts)
    if docs == 0:
        ranged.unpersist()
        raise ValueError("shard: the input table 'tokenized' holds no documents; refusing to write empty shards")
    shards = num_shards if num_shards is not None else max(1, math.ceil(total / int(tokens_per_shard or 1)))
    if shards > docs:
        ranged.unpersist()
        raise ValueError(f"shard: {shards} shards requested (shard.num_shards/tokens_per_shard) but only {docs} documents")
    if 2 * total * shards >= 1 << 62:
        ranged.unpersist()
        raise ValueError("shard: total tokens x shards too large for int64 shard assignment")
    offsets: dict[int, tuple[int, int]] = {}
    d = t = 0
    for r in sorted(parts, key=lambda r: r["_pid"]):
        offsets[int(r["_pid"])] = (d, t)
        d += int(r["n"])
        t += int(r["t"] or 0)

    schema = T.StructType(
        [T.StructField("doc_id", T.StringType()), T.StructField("n_tokens", T.LongType()), T.StructField("position", T.LongType()),
         T.StructField("token_start", T.LongType()), T.StructField("shard_id", T.IntegerType())]
    )

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        doc_off = tok_off = None
        for b in batches:
            if b.num_rows == 0:
                continue
            if doc_off is None:
                doc_off, tok_off = offsets[int(b.column("_pid")[0].as_py())]
            n = b.column("n_tokens").to_numpy(zero_copy_only=False).astype(np.int64)
            ends = tok_off + np.cumsum(n)
            starts = ends - n
            shard = np.minimum(shards - 1, ((2 * starts + n) * shards) // (2 * total)).astype(np.int32)
            pos = doc_off + np.arange(b.num_rows, dtype=np.int64)
            doc_off += b.num_rows
            tok_off = int(ends[-1])
            yield pa.RecordBatch.from_arrays([b.column("doc_id"), pa.array(n), pa.array(pos), pa.array(starts), pa.array(shard)],
                                             names=list(POSITION_COLUMNS))

    positions = ranged.mapInArrow(assign, schema).persist(StorageLevel.MEMORY_AND_DISK)
    positions.count()
    ranged.unpersist()
    max_doc = max(int(r["m"] or 0) for r in parts)
    return positions, {"docs": docs, "tokens": total, "shards": shards, "max_doc_tokens": max_doc}


def _write_file(path: Path, data: bytes | memoryview) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data) if isinstance(data, bytes) else data.nbytes, hashlib.sha256(data).hexdigest()


def make_shard_writer(out_dir: str, plan: dict[int, dict[str, int]], *, prefix: str, formats: list[str], dtype: str,
                      vocab_size: int, seq_len: int, size_limit: int, window: int):
    """The per-shard ``applyInArrow`` function: write one shard's files, return their facts (one row).

    ``plan[shard]`` holds the driver's expectations (``docs``, ``tokens``, ``mds_first_file``); a mismatch
    raises inside the task, failing the job before any manifest exists.
    """
    np_dtype = np.dtype(dtype)
    per_file = mds.samples_per_file(seq_len, np_dtype, size_limit)

    def write(table: pa.Table) -> pa.Table:
        table = table.take(pc.sort_indices(table, [("position", "ascending")]))
        k = int(table.column("shard_id")[0].as_py())
        tokens = table.column("tokens").combine_chunks()
        lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = tokens.flatten().to_numpy(zero_copy_only=False)
        expect = plan[k]
        if len(lengths) != expect["docs"] or int(lengths.sum()) != expect["tokens"]:
            raise RuntimeError(f"shard {k}: got {len(lengths)} docs / {int(lengths.sum())} tokens, planned {expect}")
        if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
            raise ValueError(f"shard {k}: token id outside [0, {vocab_size})")
        data = flat.astype(np_dtype.newbyteorder("<"))
        files: list[dict[str, Any]] = []
        root = Path(out_dir)
        if "megatron" in formats:
            for ext, payload in (("bin", memoryview(data).cast("B")), ("idx", megatron.encode_index(lengths, np_dtype))):
                rel = f"megatron/{prefix}_{k:05d}.{ext}"
                size, sha = _write_file(root / rel, payload)
                files.append({"path": rel, "format": "megatron", "kind": ext, "shard": k, "documents": len(lengths),
                              "tokens": int(data.size), "bytes": size, "sha256": sha})
        entries = []
        if "mds" in formats:
            n_samples = data.size // seq_len
            samples = data[: n_samples * seq_len].reshape(n_samples, seq_len)
            for j, lo in enumerate(range(0, n_samples, per_file)):
                chunk = samples[lo : lo + per_file]
                blob = mds.encode_shard(chunk, size_limit)
                name = mds.shard_basename(expect["mds_first_file"] + j)
                size, sha = _write_file(root / "mds" / name, blob)
                files.append({"path": f"mds/{name}", "format": "mds", "kind": "mds", "shard": k, "samples": len(chunk),
                              "tokens": int(chunk.size), "bytes": size, "sha256": sha})
                entries.append(mds.index_entry(blob, name, len(chunk), np_dtype, size_limit))
        sources = table.column("source").to_pylist()
        sources = ["" if s is None else s for s in sources]
        by_src: dict[str, int] = {}
        for s, n in zip(sources, lengths.tolist(), strict=True):
            by_src[s] = by_src.get(s, 0) + n
        positions = table.column("position").to_numpy()
        row = {
            "shard_id": [k], "n_docs": [len(lengths)], "n_tokens": [int(lengths.sum())],
            "files": [json.dumps(files)], "mds_entries": [json.dumps(entries)],
            "tokens_by_source": [json.dumps(by_src)],
            "windows": [json.dumps(sq.window_counts(positions, sources, window))],
            "runs": [json.dumps(sq.runs(sources))], "max_doc_tokens": [int(lengths.max())],
        }
        return pa.table(row, schema=pa.schema([pa.field(f.name, pa.int32() if f.name == "shard_id" else
                                                        pa.int64() if isinstance(f.dataType, T.LongType) else pa.string())
                                               for f in _RESULT_SCHEMA.fields]))

    return write


def _output_dirs(cfg: WinnowConfig) -> tuple[str, Path, bool]:
    root = (cfg.shard.output or cfg.shards_path).rstrip("/")
    if storage.is_s3(root):
        staging = cfg.shard.storage.staging_dir or tempfile.mkdtemp(prefix="winnow-shards-")
        return root, Path(staging), True
    if "://" in root:
        raise ValueError(f"shard.output={root!r}: allowed are a local path (incl. /dbfs/...) or s3://bucket/prefix")
    return root, Path(root), False


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Shuffle ``tokenized`` and write shards + ``manifest.json`` (last) to ``shard.output``.

    Returns:
        A :class:`StageReport` (``rows_out`` = documents in shards; nothing is removed) whose ``extra``
        holds the manifest totals, balance and shuffle-quality figures.

    Raises:
        MissingTableError: ``tokenized`` does not exist.
        ValueError: empty input, more shards than documents, or a dtype that cannot hold the vocabulary.
        StorageError: an upload failed after retries (no manifest is written).
    """
    scfg = cfg.shard
    src_path = cfg.table_path("tokenized")
    df = tables.read_table(spark, cfg, "tokenized", written_by="tokenize")
    _check_input(df)
    props = tables.table_properties(spark, src_path)
    version = tables.table_version(spark, src_path)
    vocab = int(props["vocab_size"])
    eos_id = int(props["eos_id"])
    bos_id = json.loads(props.get("bos_id", "null"))
    dtype = megatron.choose_dtype(vocab, scfg.dtype)
    root, local, remote = _output_dirs(cfg)

    # Retract what a previous run published before anything changes under it.
    if remote:
        storage.delete(root, MANIFEST, scfg.storage)
    (local / MANIFEST).unlink(missing_ok=True)
    for sub in ("megatron", "mds"):
        shutil.rmtree(local / sub, ignore_errors=True)

    positions, totals = assign_positions(df, cfg.run.seed, scfg.num_shards, scfg.tokens_per_shard, cfg.spark.shuffle_partitions)
    try:
        per_shard = positions.groupBy("shard_id").agg(
            F.count(F.lit(1)).alias("docs"), F.sum("n_tokens").alias("tokens")).collect()
        tok_map = {int(r["shard_id"]): int(r["tokens"]) for r in per_shard}
        per_file = mds.samples_per_file(scfg.seq_len, dtype, scfg.mds_size_limit)
        plan: dict[int, dict[str, int]] = {}
        next_file = 0
        for r in sorted(per_shard, key=lambda r: r["shard_id"]):
            k = int(r["shard_id"])
            n_samples = tok_map[k] // scfg.seq_len if "mds" in scfg.formats else 0
            plan[k] = {"docs": int(r["docs"]), "tokens": tok_map[k], "mds_first_file": next_file}
            next_file += math.ceil(n_samples / per_file)
        writer = make_shard_writer(
            str(local), plan, prefix=scfg.name_prefix, formats=list(scfg.formats), dtype=dtype.name, vocab_size=vocab,
            seq_len=scfg.seq_len, size_limit=scfg.mds_size_limit, window=scfg.shuffle_window_docs,
        )
        joined = df.select(*INPUT_COLUMNS).join(positions.select("doc_id", "position", "shard_id"), "doc_id")
        results = sorted(joined.groupBy("shard_id").applyInArrow(writer, _RESULT_SCHEMA).collect(), key=lambda r: r["shard_id"])
    finally:
        positions.unpersist()

    manifest, files = build_manifest(cfg, results, totals, props=props, version=version, dtype=dtype.name, vocab=vocab,
                                     eos_id=eos_id, bos_id=bos_id, root=root)
    if "mds" in scfg.formats:
        entries = [e for r in results for e in json.loads(r["mds_entries"])]
        blob = mds.index_json(entries).encode("utf-8")
        size, sha = _write_file(local / MDS_INDEX, blob)
        files.append({"path": MDS_INDEX, "format": "mds", "kind": "index", "bytes": size, "sha256": sha})
        manifest["files"] = files
        manifest["totals"]["bytes"] += size
    upload_stats: dict[str, int] = {}
    if remote:
        local_files = [storage.LocalFile(f["path"], local / f["path"], f["bytes"], f["sha256"]) for f in files]
        upload_stats = storage.upload(local_files, root, scfg.storage)
        storage.verify_remote(local_files, root, scfg.storage)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _write_file(local / MANIFEST, text.encode("utf-8"))
    if remote:
        storage.put_text(root, MANIFEST, text, scfg.storage)
    tables.write_effective_config(spark, cfg, STAGE)

    return StageReport(
        stage=STAGE,
        rows_in=totals["docs"],
        rows_out=manifest["totals"]["documents"],
        outputs={"shards": root, "manifest": f"{root}/{MANIFEST}"},
        extra={"totals": manifest["totals"], "balance": manifest["balance"],
               "shuffle_quality": manifest["shuffle_quality"], "upload": upload_stats},
    )


def build_manifest(cfg: WinnowConfig, results: list[Any], totals: dict[str, int], *, props: dict[str, str], version: int,
                   dtype: str, vocab: int, eos_id: int, bos_id: int | None, root: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest (without ``mds/index.json``, added by the caller) and its list of files."""
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
    manifest = {
        "manifest_version": 1,
        "output": root,
        "formats": list(cfg.shard.formats),
        "dtype": dtype,
        "seq_len": cfg.shard.seq_len,
        "seed": cfg.run.seed,
        "config_fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(STAGE),
        "tokenizer": {"spec": props.get("tokenizer"), "fingerprint": props.get("tokenizer_fingerprint"),
                      "vocab_size": vocab, "eos_id": eos_id, "bos_id": bos_id},
        "input_tables": {"tokenized": {"path": cfg.table_path("tokenized"), "version": version},
                         props.get("input_table", "unknown"): {"version": json.loads(props.get("input_version", "null"))}},
        "totals": {"shards": len(results), "documents": docs, "tokens": tokens, "files": len(files),
                   "bytes": sum(f["bytes"] for f in files), "mds_samples": sum(f.get("samples", 0) for f in files),
                   "mds_dropped_tokens": tokens - mds_tokens if "mds" in cfg.shard.formats else 0},
        "tokens_by_source": dict(sorted(by_src.items())),
        "token_share_by_source": {s: n / tokens for s, n in sorted(by_src.items())},
        "balance": {"target_tokens_per_shard": target, "min_tokens": min(shard_tokens), "max_tokens": max(shard_tokens),
                    "max_abs_deviation": max(abs(t - target) for t in shard_tokens),
                    "longest_document_tokens": totals["max_doc_tokens"]},
        "shuffle_quality": quality,
        "files": files,
    }
    return manifest, files
