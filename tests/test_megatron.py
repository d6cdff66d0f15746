"""Megatron .bin/.idx encoding: header bytes, a hand-computed 3-document index, dtype choice."""

from __future__ import annotations

import numpy as np
import pytest

from udfs import megatron


def test_three_document_index_byte_for_byte():
    # Documents of 3, 1 and 2 tokens (EOS included), uint16: pointers advance by 2 bytes per token.
    expected = bytes.fromhex(
        "4d4d4944494458000"  # magic MMIDIDX\0\0 (9 bytes) ...
        "0"
        "0100000000000000"  # version 1, uint64
        "08"  # dtype code 8 = uint16
        "0300000000000000"  # 3 sequences
        "0400000000000000"  # 4 document indices (docs + 1)
        "030000000100000002000000"  # int32 lengths
        "000000000000000006000000000000000800000000000000"  # int64 byte pointers 0, 6, 8
        "00000000000000000100000000000000"  # int64 document indices 0, 1,
        "02000000000000000300000000000000"  # 2, 3
    )
    assert megatron.encode_index(np.array([3, 1, 2]), np.dtype(np.uint16)) == expected
    idx = megatron.decode_index(expected)
    assert idx.dtype == np.uint16
    assert idx.lengths.tolist() == [3, 1, 2] and idx.pointers.tolist() == [0, 6, 8] and idx.doc_idx.tolist() == [0, 1, 2, 3]


def test_int32_header_and_bin_split():
    data = megatron.encode_index(np.array([2, 2]), np.dtype(np.int32))
    assert data[:9] == b"MMIDIDX\x00\x00" and data[17] == 4 and len(data) == megatron.HEADER_BYTES + 2 * 12 + 3 * 8
    seqs = megatron.split_bin(megatron.decode_index(data), np.array([70_000, 1, 5, 69_999], "<i4").tobytes())
    assert [s.tolist() for s in seqs] == [[70_000, 1], [5, 69_999]]


@pytest.mark.parametrize(("vocab", "requested", "dtype"), [
    (50_257, "auto", np.uint16), (65_499, "auto", np.uint16), (65_500, "auto", np.int32), (70_000, "auto", np.int32),
    (65_536, "uint16", np.uint16), (50_257, "int32", np.int32),
])
def test_choose_dtype_follows_megatron_optimal_dtype(vocab, requested, dtype):
    assert megatron.choose_dtype(vocab, requested) == np.dtype(dtype)


def test_forcing_uint16_with_a_larger_vocab_raises():
    with pytest.raises(ValueError, match=r"shard.dtype='uint16' cannot hold vocabulary size 70000"):
        megatron.choose_dtype(70_000, "uint16")


def test_decode_rejects_bad_magic_and_truncation():
    good = megatron.encode_index(np.array([1]), np.dtype(np.uint16))
    with pytest.raises(ValueError, match="magic"):
        megatron.decode_index(b"XXXXXXXXX" + good[9:])
    with pytest.raises(ValueError, match="need"):
        megatron.decode_index(good[:-1])
