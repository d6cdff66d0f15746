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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ShardLayout:
    """What every shard of one run shares: where and how its files are written.

    Attributes:
        out_dir: the split's folder (``megatron/`` and ``mds/`` go under it).
        plan: per shard id, the driver's expectations: ``docs``, ``tokens``, ``first_doc`` (stream index
            of the shard's first document) and ``mds_first_file``.
        prefix: Megatron file name prefix (``<prefix>_<shard:05d>.bin``).
        formats: ``megatron`` and/or ``mds``.
        dtype: numpy dtype name of the token ids on disk.
        vocab_size: ids must lie in ``[0, vocab_size)``.
        seq_len: MDS sample length, in tokens.
        size_limit: MDS file size limit, in bytes.
        window: shuffle-quality window, in documents (:func:`udfs.shuffle_quality.window_counts`).
    """

    out_dir: str
    plan: dict[int, dict[str, int]]
    prefix: str
    formats: list[str]
    dtype: str
    vocab_size: int
    seq_len: int
    size_limit: int
    window: int


class _ShardFiles:
    """The files of one shard, written as its batches arrive; :meth:`finish` returns its facts."""

    def __init__(self, layout: ShardLayout, k: int):
        self.layout, self.k = layout, k
        self.root = Path(layout.out_dir)
        self.np_dtype = np.dtype(layout.dtype)
        self.per_file = mds.samples_per_file(layout.seq_len, self.np_dtype, layout.size_limit)
        self.bin_file = (_StreamedFile(self.root / f"megatron/{layout.prefix}_{k:05d}.bin")
                         if "megatron" in layout.formats else None)
        self.lengths_parts: list[np.ndarray] = []
        self.sources: list[str] = []
        self.last_key = b""
        self.files: list[dict[str, Any]] = []
        self.entries: list[dict[str, Any]] = []
        self.pending: list[np.ndarray] = []  # MDS tokens not yet written (fewer than one file's samples)
        self.n_pending = 0
        self.mds_file = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """Check one batch (key order, tokens present and in the vocabulary) and write its tokens."""
        k, layout = self.k, self.layout
        keys = keys_as_bytes(batch.column("_key"))
        if keys[0] < self.last_key or np.any(keys[1:] < keys[:-1]):
            raise RuntimeError(f"shard {k}: rows arrived out of shuffle order; the writer needs them sorted "
                               "by key")
        self.last_key = keys[-1]
        tokens = batch.column("tokens")
        if tokens.null_count:
            raise ValueError(f"shard {k}: a document has null tokens")
        doc_lengths, flat = token_ids(tokens)
        self.lengths_parts.append(doc_lengths)
        # Unsigned ids (the binary layout) need no lower bound: one pass over them, not two.
        if flat.size and ((flat.dtype.kind != "u" and flat.min() < 0) or flat.max() >= layout.vocab_size):
            raise ValueError(f"shard {k}: token id outside [0, {layout.vocab_size})")
        data = flat.astype(self.np_dtype.newbyteorder("<"), copy=False)
        if self.bin_file is not None:
            self.bin_file.write(memoryview(np.ascontiguousarray(data)).cast("B"))
        if "mds" in layout.formats:
            self.pending.append(data)
            self.n_pending += data.size
            if self.n_pending >= self.per_file * layout.seq_len:
                self.flush_mds(final=False)
        self.sources += pc.fill_null(batch.column("source"), "").to_pylist()

    def flush_mds(self, final: bool) -> None:
        """Write every full MDS file of the pending tokens (``final``: the rest too, as a last file)."""
        seq_len, per_file = self.layout.seq_len, self.per_file
        pending = self.pending
        if len(pending) > 1:
            flat = np.concatenate(pending)
        else:
            flat = pending[0] if pending else np.zeros(0, self.np_dtype)
        n_samples = flat.size // seq_len
        done = 0
        while n_samples - done >= per_file or (final and n_samples > done):
            end = (done + min(per_file, n_samples - done)) * seq_len
            chunk = flat[done * seq_len : end].reshape(-1, seq_len)
            self._write_mds(chunk)
            done += len(chunk)
        rest = flat[done * seq_len :]
        self.pending, self.n_pending = ([rest] if rest.size else []), int(rest.size)

    def _write_mds(self, chunk: np.ndarray) -> None:
        blob = mds.encode_shard(chunk, self.layout.size_limit)
        name = mds.shard_basename(self.layout.plan[self.k]["mds_first_file"] + self.mds_file)
        size, sha = write_file(self.root / "mds" / name, blob)
        self.files.append({"path": f"mds/{name}", "format": "mds", "kind": "mds", "shard": self.k,
                           "samples": len(chunk), "tokens": int(chunk.size), "bytes": size, "sha256": sha})
        self.entries.append(mds.index_entry(blob, name, len(chunk), self.np_dtype, self.layout.size_limit,
                                            sha256=sha))
        self.mds_file += 1

    def _close_megatron(self, lengths: np.ndarray) -> None:
        k, prefix = self.k, self.layout.prefix
        size, sha = self.bin_file.close()
        idx_path = self.root / f"megatron/{prefix}_{k:05d}.idx"
        idx = write_file(idx_path, megatron.encode_index(lengths, self.np_dtype))
        self.files[:0] = [
            {"path": f"megatron/{prefix}_{k:05d}.{ext}", "format": "megatron", "kind": ext, "shard": k,
             "documents": len(lengths), "tokens": int(lengths.sum()), "bytes": size, "sha256": sha}
            for ext, size, sha in [("bin", size, sha), ("idx", *idx)]
        ]

    def finish(self) -> dict[str, list[Any]]:
        """Close the files, check the counts against the plan, and return the shard's result row.

        Raises:
            RuntimeError: the shard's documents or tokens differ from the driver's plan.
        """
        k = self.k
        lengths = np.concatenate(self.lengths_parts)
        expect = self.layout.plan[k]
        if len(lengths) != expect["docs"] or int(lengths.sum()) != expect["tokens"]:
            raise RuntimeError(f"shard {k}: got {len(lengths)} docs / {int(lengths.sum())} tokens, "
                               f"planned {expect}")
        if self.bin_file is not None:
            self._close_megatron(lengths)
        if "mds" in self.layout.formats:
            self.flush_mds(final=True)
        per_src: dict[str, int] = {}
        for s, n in zip(self.sources, lengths.tolist(), strict=True):
            per_src[s] = per_src.get(s, 0) + n
        positions = expect["first_doc"] + np.arange(len(lengths), dtype=np.int64)
        return {
            "shard_id": [k],
            "n_docs": [len(lengths)],
            "n_tokens": [int(lengths.sum())],
            "files": [json.dumps(self.files)],
            "mds_entries": [json.dumps(self.entries)],
            "tokens_by_source": [json.dumps(per_src, sort_keys=True)],
            "windows": [json.dumps(sq.window_counts(positions, self.sources, self.layout.window))],
            "runs": [json.dumps(sq.runs(self.sources))],
            "max_doc_tokens": [int(lengths.max())],
        }


def _arrow_result_schema() -> pa.Schema:
    """:data:`RESULT_SCHEMA` as Arrow types (shard id int32, counts int64, the rest strings)."""
    def arrow_type(f: T.StructField) -> pa.DataType:
        if f.name == "shard_id":
            return pa.int32()
        return pa.int64() if isinstance(f.dataType, T.LongType) else pa.string()

    return pa.schema([pa.field(f.name, arrow_type(f)) for f in RESULT_SCHEMA.fields])


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
    in Python. The arguments are the fields of :class:`ShardLayout`.
    """
    layout = ShardLayout(out_dir, plan, prefix, formats, dtype, vocab_size, seq_len, size_limit, window)
    return make_sets_writer([(0, layout)])


def make_sets_writer(sets: list[tuple[int, ShardLayout]]):
    """The ``applyInArrow`` function of :func:`make_shard_writer` for several shard sets written by one job.

    Args:
        sets: ``(first, layout)`` per shard set, ``first`` ascending: the rows of ``shard_id`` ``g`` belong
            to the set with the largest ``first <= g`` and are written as its shard ``g - first`` (file
            names, ``plan`` and the facts returned use that number; the result row keeps ``g``).

    Returns:
        The grouped-map function (an iterator of one shard's Arrow batches in, one result row out).
    """
    firsts = [first for first, _ in sets]
    if firsts != sorted(firsts):
        raise ValueError(f"shard sets must be given by ascending first shard id, got {firsts}")
    out_schema = _arrow_result_schema()

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # The type hints select Spark's iterator form of applyInArrow (the batches of one shard).
        shard: _ShardFiles | None = None
        g = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if shard is None:
                g = int(batch.column("shard_id")[0].as_py())
                first, layout = next((f, lay) for f, lay in reversed(sets) if f <= g)
                shard = _ShardFiles(layout, g - first)
            shard.add(batch)
        if shard is not None:
            row = shard.finish()
            row["shard_id"] = [g]
            yield pa.RecordBatch.from_pydict(row, schema=out_schema)

    return write
