"""MosaicML Streaming MDS shards of fixed-length packed token samples: encode and index entries.

One column ``tokens`` with encoding ``ndarray:<dtype>`` (dtype fixed in the header, shape dynamic), as
llm-foundry's ``convert_dataset_hf`` writes concatenated-token datasets. Byte layout, little-endian, as
``streaming/base/format/mds/writer.py`` (``MDSWriter.encode_joint_shard``/``encode_sample``) and
``mds/encodings.py`` (``NDArray``) write it:

* shard file: ``uint32 n_samples`` | ``uint32 offsets[n_samples + 1]`` (absolute byte offsets of
  each sample, the last one = file size) | ``config JSON`` (sorted keys) | samples.
* sample: ``uint32 size`` of each variable-size column (here one) | column data.
* ``ndarray:<dtype>`` datum with dynamic shape: ``uint8 (ndim << 2 | shape_dtype_code)`` |
  ``shape`` in the smallest unsigned dtype holding it (code 0 uint8, 1 uint16, 2 uint32, 3 uint64) |
  values.

``index.json`` = ``{"shards": [entry, ...], "version": 2}``; each entry holds ``column_encodings``,
``column_names``, ``column_sizes``, ``compression``, ``format``, ``hashes``, ``raw_data``
(``basename``, ``bytes``, ``hashes``), ``samples``, ``size_limit``, ``version``, ``zip_data``.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import numpy as np

COLUMN = "tokens"
HASHES = ["sha256"]


def _shape_header(seq_len: int) -> bytes:
    code = 0 if seq_len < 1 << 8 else 1 if seq_len < 1 << 16 else 2 if seq_len < 1 << 32 else 3
    shape_dtype = ("<u1", "<u2", "<u4", "<u8")[code]
    return bytes([(1 << 2) | code]) + np.array([seq_len], dtype=shape_dtype).tobytes()


def shard_config(dtype: np.dtype, size_limit: int | None) -> dict[str, Any]:
    """The writer config stored in every shard file and index entry (``Writer.get_config`` + MDS columns)."""
    return {
        "column_encodings": [f"ndarray:{np.dtype(dtype).name}"],
        "column_names": [COLUMN],
        "column_sizes": [None],
        "compression": None,
        "format": "mds",
        "hashes": HASHES,
        "size_limit": size_limit,
        "version": 2,
    }


def sample_bytes(seq_len: int, dtype: np.dtype) -> int:
    """Encoded bytes of one sample: size prefix + ndarray header + values."""
    return 4 + len(_shape_header(seq_len)) + seq_len * np.dtype(dtype).itemsize


def samples_per_file(seq_len: int, dtype: np.dtype, size_limit: int) -> int:
    """How many samples fit in one shard file of at most ``size_limit`` bytes (at least one).

    Mirrors ``Writer.write``: a new shard starts when header + offsets + config + samples would exceed it.
    """
    config = json.dumps(shard_config(dtype, size_limit), sort_keys=True).encode()
    per = sample_bytes(seq_len, dtype) + 4  # + its uint32 offset (MDSWriter.extra_bytes_per_sample)
    fixed = 4 + 4 + len(config)  # MDSWriter.extra_bytes_per_shard
    return max(1, (size_limit - fixed) // per)


def encode_shard(samples: np.ndarray, size_limit: int | None) -> bytes:
    """One ``shard.NNNNN.mds`` file.

    Args:
        samples: [n, seq_len] token array in the shard dtype (``uint16`` or ``int32``), n >= 1.
        size_limit: recorded in the config JSON.

    Returns:
        The file bytes.
    """
    n, seq_len = samples.shape
    dtype = samples.dtype
    config = json.dumps(shard_config(dtype, size_limit), sort_keys=True).encode("utf-8")
    head = _shape_header(seq_len)
    datum_size = len(head) + seq_len * dtype.itemsize
    per = 4 + datum_size
    start = 4 + 4 * (n + 1) + len(config)
    if start + per * n >= 1 << 32:
        raise ValueError("an MDS shard file must stay below 4 GiB (uint32 offsets); lower shard.mds_size_limit")
    # One buffer filled in place: header, offsets, config, then each sample's size + shape prefix and
    # values (little-endian; a view of ``samples`` when they already are), copied out once as bytes.
    out = np.empty(start + per * n, dtype=np.uint8)
    out[:4] = np.frombuffer(np.uint32(n).astype("<u4").tobytes(), dtype=np.uint8)
    out[4 : 4 + 4 * (n + 1)] = (start + per * np.arange(n + 1, dtype=np.int64)).astype("<u4").view(np.uint8)
    out[4 + 4 * (n + 1) : start] = np.frombuffer(config, dtype=np.uint8)
    body = out[start:].reshape(n, per)
    body[:, : 4 + len(head)] = np.frombuffer(np.uint32(datum_size).astype("<u4").tobytes() + head, dtype=np.uint8)
    values = np.ascontiguousarray(samples, dtype=dtype.newbyteorder("<"))
    body[:, 4 + len(head) :] = values.view(np.uint8).reshape(n, -1)
    return out.tobytes()


def decode_shard(data: bytes, seq_len: int, dtype: np.dtype) -> np.ndarray:
    """The samples of one ``shard.NNNNN.mds`` file written by :func:`encode_shard`, as [n, seq_len] ``dtype``.

    Raises:
        ValueError: the offsets do not end at the file size, or a sample's size or shape is not
            ``seq_len`` values of ``dtype``.
    """
    (n,) = struct.unpack_from("<I", data, 0)
    offsets = np.frombuffer(data, dtype="<u4", count=n + 1, offset=4).astype(np.int64)
    if offsets[-1] != len(data):
        raise ValueError(f"last offset {offsets[-1]} != file size {len(data)}")
    out = np.empty((n, seq_len), dtype=dtype)
    for i in range(n):  # one slice per packed sample (not per token)
        s = data[offsets[i] : offsets[i + 1]]
        (size,) = struct.unpack_from("<I", s, 0)
        head = s[4]
        ndim, code = head >> 2, head & 3
        shape_dt = ("<u1", "<u2", "<u4", "<u8")[code]
        shape = np.frombuffer(s, dtype=shape_dt, count=ndim, offset=5)
        if size != len(s) - 4 or tuple(shape) != (seq_len,):
            raise ValueError(f"sample {i}: size {size} / shape {tuple(shape)} do not match seq_len {seq_len}")
        out[i] = np.frombuffer(s, dtype=dtype.newbyteorder("<"), offset=5 + ndim * np.dtype(shape_dt).itemsize)
    return out


def files_per_shard(n_tokens: int, seq_len: int, per_file: int) -> int:
    """MDS files one shard of ``n_tokens`` tokens fills: whole ``seq_len`` samples (the tail that does not
    fill one is dropped), at most ``per_file`` (:func:`samples_per_file`) per file.

    >>> files_per_shard(1030, 512, 1), files_per_shard(511, 512, 1)
    (2, 0)
    """
    return math.ceil(n_tokens // seq_len / per_file)


def index_entry(data: bytes, basename: str, n_samples: int, dtype: np.dtype, size_limit: int | None,
                sha256: str | None = None) -> dict[str, Any]:
    """The ``index.json`` entry of one shard file.

    Args:
        sha256: the hex sha256 of ``data`` when the caller has it already (the writer hashes what it
            writes); None computes it.
    """
    entry = shard_config(dtype, size_limit)
    digest = sha256 if sha256 is not None else hashlib.sha256(data).hexdigest()
    entry.update(
        {
            "raw_data": {"basename": basename, "bytes": len(data), "hashes": {"sha256": digest}},
            "samples": n_samples,
            "zip_data": None,
        }
    )
    return entry


def index_json(entries: list[dict[str, Any]]) -> str:
    """``index.json`` text (sorted keys, as ``Writer._save_index``)."""
    return json.dumps({"shards": entries, "version": 2}, sort_keys=True)


def shard_basename(number: int) -> str:
    """``shard.00007.mds``."""
    return f"shard.{number:05d}.mds"
