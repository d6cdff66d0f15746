"""MDS shards read back by an independent reader written from the format description."""

from __future__ import annotations

import json
import struct

import numpy as np

from udfs import mds


def read_mds(data: bytes) -> tuple[dict, list[np.ndarray]]:
    """Independent MDS reader: n (u32), n+1 absolute offsets (u32), config JSON, samples.

    Sample = one u32 size per variable-size column, then the column bytes; ``ndarray:<dtype>`` datum =
    one byte (ndim << 2 | shape dtype code), the shape, then the values.
    """
    n = struct.unpack("<I", data[:4])[0]
    offs = struct.unpack(f"<{n + 1}I", data[4 : 4 + 4 * (n + 1)])
    config = json.loads(data[4 + 4 * (n + 1) : offs[0]])
    dtype = np.dtype(config["column_encodings"][0].split(":")[1]).newbyteorder("<")
    out = []
    for a, b in zip(offs[:-1], offs[1:], strict=True):
        sample = data[a:b]
        size = struct.unpack("<I", sample[:4])[0]
        datum = sample[4:]
        assert size == len(datum)
        ndim, code = datum[0] >> 2, datum[0] & 3
        width = 1 << code
        shape = [int.from_bytes(datum[1 + i * width : 1 + (i + 1) * width], "little") for i in range(ndim)]
        out.append(np.frombuffer(datum[1 + ndim * width :], dtype=dtype).reshape(shape))
    return config, out


def test_shard_round_trips_through_an_independent_reader():
    samples = np.arange(3 * 300, dtype=np.int32).reshape(3, 300) + 65_000
    blob = mds.encode_shard(samples, 1 << 26)
    config, got = read_mds(blob)
    assert config == {
        "column_encodings": ["ndarray:int32"], "column_names": ["tokens"], "column_sizes": [None],
        "compression": None, "format": "mds", "hashes": ["sha256"], "size_limit": 1 << 26, "version": 2,
    }
    assert [g.tolist() for g in got] == samples.tolist()
    # seq_len 300 needs a uint16 shape: header byte (1 << 2) | 1
    assert blob[4 + 4 * 4 + len(json.dumps(config, sort_keys=True)) + 4] == 5


def test_uint16_samples_and_index_entry():
    samples = np.array([[1, 2, 3, 4]], dtype=np.uint16)
    blob = mds.encode_shard(samples, None)
    _, got = read_mds(blob)
    assert got[0].dtype == np.uint16 and got[0].tolist() == [1, 2, 3, 4]
    entry = mds.index_entry(blob, mds.shard_basename(7), 1, np.dtype(np.uint16), None)
    assert entry["raw_data"]["basename"] == "shard.00007.mds" and entry["raw_data"]["bytes"] == len(blob)
    assert entry["samples"] == 1 and entry["zip_data"] is None and entry["version"] == 2
    assert json.loads(mds.index_json([entry])) == {"shards": [entry], "version": 2}


def test_samples_per_file_respects_the_size_limit():
    per = mds.samples_per_file(2048, np.dtype(np.uint16), 1 << 20)
    assert len(mds.encode_shard(np.zeros((per, 2048), np.uint16), 1 << 20)) <= 1 << 20
    assert len(mds.encode_shard(np.zeros((per + 1, 2048), np.uint16), 1 << 20)) > 1 << 20
