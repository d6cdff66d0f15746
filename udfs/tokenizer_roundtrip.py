"""Round trip for the audit: does ``decode(ids)`` give the text back, and if not, how does it differ?

Byte-level tokenizers (GPT-2) decode without Python per token: Arrow gathers each id's bytes from the
per-id table of :func:`udfs.tokenizer_vocab.vocab_tables` and joins them per document, and the result is
compared with the text's bytes in Arrow; the others decode through the tokenizer. Mismatches are
classified by :func:`roundtrip_kind`.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs import tokenize as tok_udfs
from udfs.tokenizer_vocab import VocabTables, ids_of_docs

RT_KINDS: tuple[str, ...] = ("ok", "lost_bytes", "whitespace", "normalisation", "other")
"""Round-trip kinds, first match wins: ``lost_bytes`` (the decoded text has more U+FFFD or unknown-token
strings than the text), ``whitespace`` (equal once all whitespace is removed), ``normalisation`` (equal once
NFKD, accents removed and case folded), ``other``."""


def _fold(text: str) -> str:
    nfkd = unicodedata.normalize("NFKD", text)
    return "".join(c for c in nfkd if not unicodedata.combining(c) and not c.isspace()).casefold()


def roundtrip_kind(text: str, decoded: str, unknown_strings: tuple[str, ...] = ()) -> str:
    """How ``decoded`` differs from ``text``: one of :data:`RT_KINDS` (``ok`` when equal).

    >>> roundtrip_kind("a  b", "a b"), roundtrip_kind("Café", "cafe")
    ('whitespace', 'normalisation')
    >>> roundtrip_kind("中", "[UNK]", ("[UNK]",))
    'lost_bytes'
    """
    if decoded == text:
        return "ok"
    if decoded.count("\ufffd") > text.count("\ufffd") or any(
        decoded.count(u) > text.count(u) for u in unknown_strings
    ):
        return "lost_bytes"
    if re.sub(r"\s+", "", decoded) == re.sub(r"\s+", "", text):
        return "whitespace"
    if _fold(decoded) == _fold(text):
        return "normalisation"
    return "other"


def decode_bytes(tables: VocabTables, lengths: np.ndarray, flat: np.ndarray) -> pa.Array:
    """Each document's decoded bytes from a byte-level tokenizer's per-id table, without Python per token.

    Arrow gathers each id's bytes (``take``) and joins them per document (``binary_join``).

    Args:
        tables: tables with ``byte_tokens`` (byte-level tokenizers only).
        lengths: int64 [documents] content tokens per document.
        flat: the content ids of all documents in order.

    Returns:
        ``large_binary`` [documents]: the bytes ``decode`` would turn into text.
    """
    assert tables.byte_tokens is not None
    pieces = tables.byte_tokens.take(pa.array(flat.astype(np.int64, copy=False)))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    docs = pa.LargeListArray.from_arrays(pa.array(offsets), pieces)
    return pc.binary_join(docs, pa.scalar(b"", pa.large_binary()))


def check_roundtrip(
    tok: tok_udfs.LoadedTokenizer,
    tables: VocabTables,
    texts: pa.Array,
    lengths: np.ndarray,
    flat: np.ndarray,
    check: np.ndarray,
) -> tuple[list[str | None], int]:
    """Kind per document (None where not checked) and the number whose decoded bytes are not UTF-8."""
    n = len(lengths)
    kinds: list[str | None] = [None] * n
    invalid = 0
    ends = np.cumsum(lengths)
    picked = np.flatnonzero(check)
    if not len(picked):
        return kinds, invalid
    texts = pc.fill_null(texts, "")

    def text(i: int) -> str:
        return tok_udfs.batch_texts(texts.slice(i, 1))[0]

    if tables.byte_tokens is None:
        for i in picked.tolist():
            got = tok.tokenizer.decode(
                flat[ends[i] - lengths[i] : ends[i]].tolist(), skip_special_tokens=False
            )  # type: ignore[attr-defined]
            kinds[i] = roundtrip_kind(text(i), got, tables.unknown_strings)
        return kinds, invalid
    if len(picked) < n:  # decode the checked documents only
        sub_lengths, sub_ids, sub_texts = (
            lengths[picked],
            ids_of_docs(flat, lengths, picked),
            texts.take(pa.array(picked)),
        )
    else:
        sub_lengths, sub_ids, sub_texts = lengths, flat, texts
    decoded = decode_bytes(tables, sub_lengths, sub_ids)
    same = pc.equal(decoded, sub_texts.cast(pa.large_binary())).to_numpy(zero_copy_only=False)
    for j, i in enumerate(picked.tolist()):
        if same[j]:
            kinds[i] = "ok"
            continue
        raw = decoded[j].as_py()
        try:
            got = raw.decode("utf-8")
        except UnicodeDecodeError:
            invalid += 1
            got = raw.decode("utf-8", "replace")
        kinds[i] = roundtrip_kind(text(i), got, tables.unknown_strings)
    return kinds, invalid
