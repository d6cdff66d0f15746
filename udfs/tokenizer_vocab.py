"""Per-id facts of a tokenizer for the audit: each id's text and bytes, unknown, byte-fallback and special
ids, the kind of word start a token makes, and the digits of all-digit tokens.

Built once per process (:func:`vocab_tables`, ~0.3 CPU s for GPT-2's 50,257 ids) and indexed by the ids of
a batch, so the per-token work of :mod:`udfs.tokenizer_audit` is numpy gathers and ``bincount``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from udfs import tokenize as tok_udfs

OTHER, LETTER, SPACE_LETTER = 0, 1, 2
"""Next-token kinds: a token whose text starts with a letter or digit (``LETTER``), with one space then a
letter or digit (``SPACE_LETTER``, GPT-2's ``Ġword``), or anything else."""

_BYTE_FALLBACK = re.compile(r"<0x[0-9A-Fa-f]{2}>")


@dataclass(frozen=True)
class VocabTables:
    """Per-id facts of one tokenizer, built once per process (:func:`vocab_tables`).

    Attributes:
        vocab_size: ids including added tokens.
        unknown: bool [vocab]: the model's unknown token(s) (``unk_token``).
        byte_fallback: bool [vocab]: SentencePiece byte-fallback pieces ``<0xAB>``.
        special: bool [vocab]: added tokens marked special.
        next_kind: int8 [vocab]: :data:`LETTER`, :data:`SPACE_LETTER` or :data:`OTHER` of the token's text.
        digit_len: int8 [vocab]: digits of an all-digit token (a leading space allowed), else 0.
        byte_tokens: ``large_binary`` [vocab]: each id's raw bytes for byte-level tokenizers, else None.
        unknown_strings: the text the decoder writes for an unknown token (``[UNK]``, ``<unk>``).
    """

    vocab_size: int
    unknown: np.ndarray
    byte_fallback: np.ndarray
    special: np.ndarray
    next_kind: np.ndarray
    digit_len: np.ndarray
    byte_tokens: pa.Array | None
    unknown_strings: tuple[str, ...] = ()


_TEXTS: dict[int, tuple[tok_udfs.LoadedTokenizer, tuple[list[str], list[bytes] | None]]] = {}
"""``id(tokenizer) -> (tokenizer, token_texts result)`` of the last tokenizer asked: the driver's audit
asks twice (its facts, then the vocabulary tables), ~0.3 s for GPT-2 each time."""


def token_texts(tok: tok_udfs.LoadedTokenizer) -> tuple[list[str], list[bytes] | None]:
    """Each id's text and, for byte-level tokenizers (a ``ByteLevel`` decoder), its raw bytes.

    Byte-level tokens are mapped back through GPT-2's byte-to-unicode table; other tokens lose their
    ``##`` continuation prefix and turn SentencePiece's ``▁`` into a space. Ids with no token (holes in
    a vocabulary) get "".

    Computed once for the last tokenizer asked (the lists are shared: callers must not modify them).

    Returns:
        ``(texts, raw)``: ``texts[id]`` (str; invalid UTF-8 bytes shown as U+FFFD) and ``raw[id]`` or None.
    """
    hit = _TEXTS.get(id(tok))
    if hit is not None and hit[0] is tok:
        return hit[1]
    result = _token_texts(tok)
    _TEXTS.clear()
    _TEXTS[id(tok)] = (tok, result)
    return result


def _token_texts(tok: tok_udfs.LoadedTokenizer) -> tuple[list[str], list[bytes] | None]:
    from udfs.tokenize_tiktoken import _byte_decoder

    hf = tok.tokenizer
    decoder = tok.config.get("decoder") or {}
    byte_level = decoder.get("type") == "ByteLevel"
    table = _byte_decoder() if byte_level else None
    texts, raw = [""] * tok.vocab_size, ([b""] * tok.vocab_size if byte_level else None)
    added = {t.content for t in hf.get_added_tokens_decoder().values()}  # type: ignore[attr-defined]
    for token, i in hf.get_vocab(with_added_tokens=True).items():  # type: ignore[attr-defined]
        if i >= tok.vocab_size:
            continue
        if table is not None and raw is not None:
            b = token.encode("utf-8") if token in added else bytes(table.get(c, 63) for c in token)
            raw[i] = b
            texts[i] = b.decode("utf-8", "replace")
        else:
            texts[i] = token[2:] if token.startswith("##") else token.replace("\u2581", " ")
    return texts, raw


def _kind(text: str) -> int:
    if text[:1].isalnum():
        return LETTER
    if text[:1] == " " and text[1:2].isalnum():
        return SPACE_LETTER
    return OTHER


def vocab_tables(tok: tok_udfs.LoadedTokenizer) -> VocabTables:
    """The :class:`VocabTables` of ``tok`` (~0.1 s for GPT-2's 50,257 ids).

    Source: the unknown token is the model's ``unk_token`` (WordLevel, WordPiece, BPE, Unigram's
    ``unk_id``); byte-fallback pieces are SentencePiece's ``<0x00>``..``<0xFF>`` (``byte_fallback=True``).
    """
    texts, raw = token_texts(tok)
    n = tok.vocab_size
    model = tok.config.get("model") or {}
    unknown = np.zeros(n, dtype=bool)
    unk_strings: list[str] = []
    unk = model.get("unk_token")
    if isinstance(unk, str) and tok.token_id(unk) is not None:
        unknown[tok.token_id(unk)] = True
        unk_strings.append(unk)
    if isinstance(model.get("unk_id"), int) and model["unk_id"] < n:
        unknown[model["unk_id"]] = True
        unk_strings.append(texts[model["unk_id"]] or "<unk>")
    vocab = tok.tokenizer.get_vocab(with_added_tokens=True)  # type: ignore[attr-defined]
    fallback = np.zeros(n, dtype=bool)
    if model.get("byte_fallback"):
        for token, i in vocab.items():
            if i < n and _BYTE_FALLBACK.fullmatch(token):
                fallback[i] = True
    special = np.zeros(n, dtype=bool)
    for i, t in tok.tokenizer.get_added_tokens_decoder().items():  # type: ignore[attr-defined]
        if t.special and i < n:
            special[i] = True
    kinds = np.fromiter((_kind(t) for t in texts), dtype=np.int8, count=n)
    stripped = [t[1:] if t[:1] == " " else t for t in texts]
    digit_len = np.fromiter(
        (len(t) if t.isascii() and t.isdigit() else 0 for t in stripped), dtype=np.int8, count=n
    )
    byte_tokens = pa.array(raw, pa.large_binary()) if raw is not None else None
    return VocabTables(n, unknown, fallback, special, kinds, digit_len, byte_tokens, tuple(unk_strings))


def ids_of_docs(flat: np.ndarray, lengths: np.ndarray, picked: np.ndarray) -> np.ndarray:
    """The ids of the documents ``picked`` (int64 positions, ascending), concatenated in order.

    One slice per picked document: on a sample (a few percent of a batch's documents) this touches the
    sampled ids only, where a boolean mask over every token would read and allocate the whole batch.

    Args:
        flat: the content ids of the batch in order.
        lengths: int64 [documents] ids per document.
        picked: int64 positions of the documents to keep.

    Returns:
        The picked documents' ids, ``lengths[picked].sum()`` of them, ``flat``'s dtype.

    >>> ids_of_docs(np.arange(6), np.array([2, 1, 3]), np.array([0, 2])).tolist()
    [0, 1, 3, 4, 5]
    """
    if len(picked) == len(lengths):
        return flat
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if not len(picked):
        return flat[:0]
    spans = zip(starts[picked].tolist(), ends[picked].tolist(), strict=True)
    return np.concatenate([flat[a:b] for a, b in spans])
