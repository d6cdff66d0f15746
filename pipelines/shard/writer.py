"""Shard stage, step 4: the per-shard writer that streams one shard's Arrow batches into its Megatron
``.bin``/``.idx`` and MDS files (see :mod:`pipelines.shard.stage` for the whole plan).

Kept apart from the planning and publishing in :mod:`pipelines.shard.stage` because it is the part that
runs in the Python workers: it sees one shard's rows as a stream, writes as they arrive and returns only
facts (file sizes, sha256, shuffle statistics) to the driver.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from udfs import mds, megatron
from udfs import shuffle_quality as sq
from udfs.tokenize import token_ids

KEY_HEX = 64  # sha256 hex digits

RESULT_SCHEMA = T.StructType(
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
"""One row per shard returned by the writer to the driver (file facts as JSON strings)."""


def keys_as_bytes(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The hex keys as a numpy ``S64`` array (zero-copy view of the Arrow string buffer)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        raise ValueError("shard: null doc_id (its shuffle key is null)")
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    if len(arr) and not np.all(np.diff(offs) == KEY_HEX):
        raise ValueError("shard: shuffle keys must be 64 hex digits")
    data = (
        np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offs[0] : offs[-1]]
        if len(arr)
        else np.zeros(0, np.uint8)
    )
    return data.view(f"S{KEY_HEX}")


def write_file(path: Path, data: bytes | memoryview) -> tuple[int, str]:
    """Write ``data`` to ``path`` atomically (temp name, then rename); returns (bytes, sha256 hex)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data) if isinstance(data, bytes) else data.nbytes, hashlib.sha256(data).hexdigest()


class _StreamedFile:
    """A file written in pieces under a temporary name, hashed as it goes, renamed when complete."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.tmp = path, path.with_name(f"{path.name}.tmp-{os.getpid()}")
        self.f = open(self.tmp, "wb")  # noqa: SIM115 (closed in close())
        self.sha, self.size = hashlib.sha256(), 0

    def write(self, data: bytes | memoryview) -> None:
        self.f.write(data)
        self.sha.update(data)
        self.size += len(data) if isinstance(data, bytes) else data.nbytes

    def close(self) -> tuple[int, str]:
        self.f.close()
        os.replace(self.tmp, self.path)
        return self.size, self.sha.hexdigest()


def make_shard_writer(
    out_dir: str,
    plan: dict[int, dict[str, int]],
    *,
    prefix: str,
    formats: list[str],
    dtype: str,
    vocab_size: int,
    seq_len: int,
    size_limit: int,
    window: int,
):
    """The per-shard ``applyInArrow`` function: write one shard's files as its batches arrive, return
    their facts (one row).

    The function takes an iterator of Arrow batches (Spark's grouped-map iterator API), so a shard of
    any size is written with the memory of one batch (``spark.arrow_batch_rows`` rows) plus one MDS
    file (``shard.mds_size_limit``) plus a few bytes per document (lengths and sources, for the
    ``.idx`` and the shuffle statistics). The batches must come sorted by ``_key`` (the caller sorts
    within partitions); a batch out of order fails the task. ``plan[shard]`` holds the driver's
    expectations (``docs``, ``tokens``, ``first_doc`` = stream index of the shard's first document,
    ``mds_first_file``); a mismatch raises inside the task, failing the job before any manifest
    exists. Tokens are handled as the flat id buffer of the ``tokens`` column
    (:func:`udfs.tokenize.token_ids`: one cast, one write per batch), never per token or per document
    in Python.
    """
    np_dtype = np.dtype(dtype)
    per_file = mds.samples_per_file(seq_len, np_dtype, size_limit)
    out_schema = pa.schema(
        [
            pa.field(
                f.name,
                pa.int32()
                if f.name == "shard_id"
                else pa.int64()
                if isinstance(f.dataType, T.LongType)
                else pa.string(),
            )
            for f in RESULT_SCHEMA.fields
        ]
    )

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # The type hints select Spark's iterator form of applyInArrow (the batches of one shard).
        root = Path(out_dir)
        k: int | None = None
        bin_file = None
        lengths_parts: list[np.ndarray] = []
        sources: list[str] = []
        last_key = b""
        files: list[dict[str, Any]] = []
        entries: list[dict[str, Any]] = []
        pending: list[np.ndarray] = []  # MDS tokens not yet written (fewer than one file's samples)
        n_pending = 0
        mds_file = 0

        def flush_mds(final: bool) -> None:
            nonlocal pending, n_pending, mds_file
            flat = (
                np.concatenate(pending)
                if len(pending) > 1
                else (pending[0] if pending else np.zeros(0, np_dtype))
            )
            n_samples = flat.size // seq_len
            done = 0
            while n_samples - done >= per_file or (final and n_samples > done):
                chunk = flat[done * seq_len : (done + min(per_file, n_samples - done)) * seq_len].reshape(
                    -1, seq_len
                )
                blob = mds.encode_shard(chunk, size_limit)
                name = mds.shard_basename(plan[k]["mds_first_file"] + mds_file)
                size, sha = write_file(root / "mds" / name, blob)
                files.append(
                    {
                        "path": f"mds/{name}",
                        "format": "mds",
                        "kind": "mds",
                        "shard": k,
                        "samples": len(chunk),
                        "tokens": int(chunk.size),
                        "bytes": size,
                        "sha256": sha,
                    }
                )
                entries.append(mds.index_entry(blob, name, len(chunk), np_dtype, size_limit))
                done += len(chunk)
                mds_file += 1
            rest = flat[done * seq_len :]
            pending, n_pending = ([rest] if rest.size else []), int(rest.size)

        for batch in batches:
            if batch.num_rows == 0:
                continue
            if k is None:
                k = int(batch.column("shard_id")[0].as_py())
                if "megatron" in formats:
                    bin_file = _StreamedFile(root / f"megatron/{prefix}_{k:05d}.bin")
            keys = keys_as_bytes(batch.column("_key"))
            if keys[0] < last_key or np.any(keys[1:] < keys[:-1]):
                raise RuntimeError(
                    f"shard {k}: rows arrived out of shuffle order; the writer needs them sorted by key"
                )
            last_key = keys[-1]
            tokens = batch.column("tokens")
            if tokens.null_count:
                raise ValueError(f"shard {k}: a document has null tokens")
            doc_lengths, flat = token_ids(tokens)
            lengths_parts.append(doc_lengths)
            if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
                raise ValueError(f"shard {k}: token id outside [0, {vocab_size})")
            data = flat.astype(np_dtype.newbyteorder("<"), copy=False)
            if bin_file is not None:
                bin_file.write(memoryview(np.ascontiguousarray(data)).cast("B"))
            if "mds" in formats:
                pending.append(data)
                n_pending += data.size
                if n_pending >= per_file * seq_len:
                    flush_mds(final=False)
            sources += pc.fill_null(batch.column("source"), "").to_pylist()
        if k is None:
            return
        lengths = np.concatenate(lengths_parts)
        expect = plan[k]
        if len(lengths) != expect["docs"] or int(lengths.sum()) != expect["tokens"]:
            raise RuntimeError(
                f"shard {k}: got {len(lengths)} docs / {int(lengths.sum())} tokens, planned {expect}"
            )
        if bin_file is not None:
            out = []
            size, sha = bin_file.close()
            out.append(("bin", size, sha))
            out.append(
                (
                    "idx",
                    *write_file(
                        root / f"megatron/{prefix}_{k:05d}.idx", megatron.encode_index(lengths, np_dtype)
                    ),
                )
            )
            files[:0] = [
                {
                    "path": f"megatron/{prefix}_{k:05d}.{ext}",
                    "format": "megatron",
                    "kind": ext,
                    "shard": k,
                    "documents": len(lengths),
                    "tokens": int(lengths.sum()),
                    "bytes": size,
                    "sha256": sha,
                }
                for ext, size, sha in out
            ]
        if "mds" in formats:
            flush_mds(final=True)
        per_src: dict[str, int] = {}
        for s, n in zip(sources, lengths.tolist(), strict=True):
            per_src[s] = per_src.get(s, 0) + n
        positions = expect["first_doc"] + np.arange(len(lengths), dtype=np.int64)
        row = {
            "shard_id": [k],
            "n_docs": [len(lengths)],
            "n_tokens": [int(lengths.sum())],
            "files": [json.dumps(files)],
            "mds_entries": [json.dumps(entries)],
            "tokens_by_source": [json.dumps(per_src, sort_keys=True)],
            "windows": [json.dumps(sq.window_counts(positions, sources, window))],
            "runs": [json.dumps(sq.runs(sources))],
            "max_doc_tokens": [int(lengths.max())],
        }
        yield pa.RecordBatch.from_pydict(row, schema=out_schema)

    return write
