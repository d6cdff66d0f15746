"""Megatron-LM indexed dataset (``.bin`` + ``.idx``): encode and decode, byte for byte.

Layout of the ``.idx`` file, all little-endian, as ``megatron/core/datasets/indexed_dataset.py``
(``_IndexWriter`` / ``_IndexReader``) writes and reads it:

=========  =====================  ===============================================
bytes      type                   value
=========  =====================  ===============================================
9          bytes                  magic ``MMIDIDX\\x00\\x00``
8          uint64                 version = 1
1          uint8                  dtype code (``DType``: 4 = int32, 8 = uint16, ...)
8          uint64                 sequence count S
8          uint64                 document count D (= documents + 1)
4 * S      int32                  sequence lengths in tokens (EOS included)
8 * S      int64                  byte offset of each sequence in ``.bin``
8 * D      int64                  document indices: ``[0, 1, ..., S]`` (one sequence per document)
=========  =====================  ===============================================

The ``.bin`` file is the token ids of every sequence, concatenated, in the dtype of the header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_BYTES = 9 + 8 + 1 + 8 + 8  # 34, as _IndexReader's fixed offset
DTYPE_CODES: dict[str, int] = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
"""Megatron's ``DType`` enum (indexed_dataset.py)."""
UINT16_MAX_VOCAB = 65500
"""``DType.optimal_dtype``: uint16 when the cardinality is < 65500, else int32."""


def choose_dtype(vocab_size: int, requested: str = "auto") -> np.dtype:
    """Token dtype for a vocabulary: Megatron's ``optimal_dtype`` rule, or a forced dtype that must fit.

    Args:
        vocab_size: number of token ids (every id is < this).
        requested: ``auto``, ``uint16`` or ``int32``.

    Returns:
        ``np.dtype('uint16')`` or ``np.dtype('int32')``.

    Raises:
        ValueError: ``uint16`` forced for a vocabulary with ids above 65535, or an unknown request.
    """
    if requested == "auto":
        return np.dtype(np.uint16 if vocab_size < UINT16_MAX_VOCAB else np.int32)
    if requested == "uint16":
        if vocab_size > 1 << 16:
            raise ValueError(
                f"shard.dtype='uint16' cannot hold vocabulary size {vocab_size} (ids up to {vocab_size - 1} > 65535); "
                "allowed: auto, int32"
            )
        return np.dtype(np.uint16)
    if requested == "int32":
        return np.dtype(np.int32)
    raise ValueError(f"shard.dtype={requested!r}; allowed: auto, uint16, int32")


def encode_index(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` bytes for one document per sequence.

    Args:
        lengths: int array, tokens per document (EOS included), in file order.
        dtype: token dtype of the ``.bin`` file (``uint16`` or ``int32``).

    Returns:
        The complete ``.idx`` file content (34 + 20 * n + 8 bytes for n documents).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
        raise ValueError("sequence lengths must fit in int32")
    n = lengths.size
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1] * np.dtype(dtype).itemsize, out=pointers[1:])
    doc_idx = np.arange(n + 1, dtype=np.int64)
    header = MAGIC + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[np.dtype(dtype).name])
    header += struct.pack("<Q", n) + struct.pack("<Q", n + 1)
    return header + lengths.astype("<i4").tobytes() + pointers.astype("<i8").tobytes() + doc_idx.astype("<i8").tobytes()


@dataclass(frozen=True)
class MegatronIndex:
    """A decoded ``.idx`` file.

    Attributes:
        dtype: token dtype named by the header.
        lengths: int32 [S], tokens per sequence.
        pointers: int64 [S], byte offsets into ``.bin``.
        doc_idx: int64 [D], document indices.
    """

    dtype: np.dtype
    lengths: np.ndarray
    pointers: np.ndarray
    doc_idx: np.ndarray


def decode_index(data: bytes) -> MegatronIndex:
    """Parse ``.idx`` bytes exactly as Megatron's ``_IndexReader`` does, checking every field.

    Raises:
        ValueError: bad magic, version, dtype code, or a size that does not match the counts.
    """
    if data[:9] != MAGIC:
        raise ValueError(f"bad .idx magic {data[:9]!r}; expected {MAGIC!r}")
    (version,) = struct.unpack_from("<Q", data, 9)
    if version != VERSION:
        raise ValueError(f"bad .idx version {version}; expected {VERSION}")
    code = data[17]
    names = {v: k for k, v in DTYPE_CODES.items()}
    if code not in names:
        raise ValueError(f"bad .idx dtype code {code}; allowed {sorted(names)}")
    s, d = struct.unpack_from("<QQ", data, 18)
    expected = HEADER_BYTES + 4 * s + 8 * s + 8 * d
    if len(data) != expected:
        raise ValueError(f".idx has {len(data)} bytes; header counts (S={s}, D={d}) need {expected}")
    lengths = np.frombuffer(data, dtype="<i4", count=s, offset=HEADER_BYTES)
    pointers = np.frombuffer(data, dtype="<i8", count=s, offset=HEADER_BYTES + 4 * s)
    doc_idx = np.frombuffer(data, dtype="<i8", count=d, offset=HEADER_BYTES + 12 * s)
    return MegatronIndex(np.dtype(names[code]), lengths, pointers, doc_idx)


def split_bin(index: MegatronIndex, data: bytes) -> list[np.ndarray]:
    """The sequences of a ``.bin`` file as arrays of the index dtype.

    Raises:
        ValueError: the ``.bin`` size differs from the sum of sequence lengths times the item size.
    """
    total = int(index.lengths.astype(np.int64).sum()) * index.dtype.itemsize
    if len(data) != total:
        raise ValueError(f".bin has {len(data)} bytes; the index needs {total}")
    flat = np.frombuffer(data, dtype=index.dtype.newbyteorder("<"))
    bounds = (index.pointers // index.dtype.itemsize).astype(np.int64)
    return [flat[b : b + n] for b, n in zip(bounds, index.lengths.astype(np.int64), strict=True)]
