"""verify lists a broken or foreign manifest as a problem instead of raising (no Spark needed)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.tools.verify import _check_megatron, verify
from udfs import megatron


@pytest.mark.parametrize("text, expected", [
    (None, "manifest.json does not exist: the shard stage has not completed under this root"),
    ("{not json", "cannot read"),
    ("{}", "keys ['dtype', 'tokenizer', 'seq_len', 'files', 'formats', 'totals'] missing"),
    ("[1, 2]", "is not a Winnow manifest"),
])
def test_bad_manifest_is_a_problem_not_a_crash(tmp_path, text, expected):
    if text is not None:
        (tmp_path / "manifest.json").write_text(text)
    res = verify(str(tmp_path))
    assert not res.ok and len(res.problems) == 1 and expected in res.problems[0]


EOS = 0


def _pair(docs: list[list[int]]) -> tuple[dict, bytes, bytes]:
    """A Megatron pair of uint16 documents and its manifest entry."""
    lengths = np.array([len(d) for d in docs], np.int32)
    flat = np.array([t for d in docs for t in d], "<u2")
    entry = {"path": "train/winnow_00000.idx", "documents": len(docs), "tokens": int(flat.size)}
    return entry, megatron.encode_index(lengths, np.dtype(np.uint16)), flat.tobytes()


@pytest.mark.parametrize("docs, expected", [
    ([[5, 6, EOS], [7, EOS]], None),
    ([[5, 6, 9], [7, EOS]], "a document does not end with EOS"),
    ([[5, EOS, 6, EOS], [7, EOS]], "1 document holds more than one EOS"),
    ([[5, 70_000 % 65_536, EOS]], "token id 4464 >= vocab 1000"),
])
def test_megatron_pair_checks(docs, expected):
    entry, idx, bin_ = _pair(docs)
    if expected is None:
        first, n_docs, n_tokens = _check_megatron(entry, idx, bin_, np.dtype(np.uint16), 1000, EOS, None, keep=1)
        assert (n_docs, n_tokens) == (2, 5) and first[0].tolist() == [5, 6, EOS]
        return
    with pytest.raises(ValueError, match=expected):
        _check_megatron(entry, idx, bin_, np.dtype(np.uint16), 1000, EOS, None)


def test_megatron_bin_of_another_size_is_named():
    entry, idx, bin_ = _pair([[5, EOS]])
    with pytest.raises(ValueError, match=r"\.bin has 6 bytes; the index needs 4"):
        _check_megatron(entry, idx, bin_ + b"\0\0", np.dtype(np.uint16), 1000, EOS, None)
