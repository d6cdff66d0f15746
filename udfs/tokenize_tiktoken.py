"""tiktoken as a faster engine for byte-level BPE tokenizers, built from the tokenizer's own vocab/merges.

:func:`tiktoken_compatibility` decides, from the Hugging Face tokenizer's JSON alone, whether tiktoken's
algorithm gives the same ids; :func:`build_encoding` then builds a ``tiktoken.Encoding`` offline (never a
downloaded encoding) whose mergeable ranks are the tokenizer's own ids and whose split pattern is the
tokenizer's own pre-tokenizer regex. The run-time audit (``pipelines.tokenize.stage``) re-encodes a seeded
sample with the Hugging Face tokenizer and fails the stage on any difference.

Why equal ids need these conditions (tiktoken ``load.py`` ``data_gym_to_mergeable_bpe_ranks`` makes the
same check for GPT-2: "tiktoken assumes that ranks are ordered the same as merge priority"):

* tiktoken merges, in each regex piece, the adjacent pair whose concatenation has the lowest rank;
  ``tokenizers``' BPE merges the adjacent pair listed earliest in ``merges``. They pick the same pair when
  each merge's result has a larger id than every earlier merge's result and than every single byte.
* tiktoken returns a piece's id directly when the whole piece is a token, and merges any adjacent pair
  whose concatenation is a token, listed merge or not; ``tokenizers`` only applies listed merges. They
  agree when every token, run through the BPE model alone, comes out as itself (checked for every token).
* Pre-tokenization must be the byte-level regex split only: no normalizer, no prefix space, no
  dropout, no subword prefix/suffix, no byte fallback, and added tokens only special ones (with
  ``encode_special_tokens`` they are ordinary text on both engines; tiktoken allows none of its own).

Source: openai/tiktoken ``tiktoken/load.py`` and ``src/lib.rs`` (``byte_pair_merge``); huggingface/tokenizers
``models/bpe/word.rs`` (``merge_all``) and ``pre_tokenizers/byte_level.rs`` (the GPT-2 regex below).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from udfs.tokenize import TokenizerError

ENGINES = ("auto", "hf", "tiktoken")
"""Values of ``tokenize.engine``."""

_ENCODINGS: dict[tuple[str, bool], object] = {}
_LOCK = threading.Lock()

# tokenizers' ByteLevel(use_regex=True) split pattern: OpenAI's GPT-2 encoder.py regex.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

GPT2_SPLIT = r"""(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+)|\s+(?!\S)|\s"""
r""":data:`GPT2_PATTERN` in the form tiktoken runs fastest: the same pieces, ~1.4x less CPU per byte for the
whole encode (bench/notes.md). tiktoken's regex engine (fancy-regex) runs a pattern that holds a
look-ahead in its own backtracking VM, handing the parts without one to the ``regex`` crate; grouped, the
ten alternatives without a look-ahead are one such part, tried as one. Why the pieces are the same:

* ``(?:A|B)|C`` tries ``A``, ``B`` then ``C``, as ``A|B|C`` does, and the ``regex`` crate's leftmost-first
  match of the group is the alternative a backtracking engine takes first; nothing follows the group, so
  no backtracking into it is ever needed.
* ``\s+`` -> ``\s`` in the last alternative: it is tried only at a whitespace character (a letter, digit
  or other character is taken by ``\p{L}``, ``\p{N}`` or ``[^\s\p{L}\p{N}]``) where ``\s+(?!\S)`` failed,
  i.e. where no prefix of the whitespace run is followed by a non-space or the end; every prefix shorter
  than the run is followed by whitespace, so the run is one character long and ``\s+`` takes just it.
  tiktoken's own GPT-2 pattern makes the same change (``tiktoken_ext/openai_public.py``, ``r50k_pat_str``).
"""

_TIKTOKEN_FORM = {GPT2_PATTERN: GPT2_SPLIT}


@dataclass(frozen=True)
class Compatibility:
    """Whether tiktoken can run a tokenizer with identical ids, and what it needs to.

    Attributes:
        ok: True when every condition of the module docstring holds.
        reason: why not (empty when ``ok``), naming the first condition that failed.
        pattern: the split regex (``pat_str``) when ``ok``.
        ranks: token bytes -> id for every single byte and merge result when ``ok``.
    """

    ok: bool
    reason: str = ""
    pattern: str = ""
    ranks: dict[bytes, int] | None = None


def _byte_decoder() -> dict[str, int]:
    # GPT-2's bytes_to_unicode table (tokenizers' ByteLevel alphabet): printable bytes map to
    # themselves, the others to U+0100 + n in byte order.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + n)] = b
            n += 1
    return table


def _pattern(pre: dict | None) -> tuple[str | None, str]:
    """The split regex of a byte-level pre-tokenizer, or ``(None, why not)``."""
    if pre is None:
        return None, "it has no pre-tokenizer"
    kind = pre.get("type")
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            return None, "its ByteLevel pre-tokenizer adds a prefix space"
        if not pre.get("use_regex", True):
            return None, "its ByteLevel pre-tokenizer splits nothing (use_regex=false)"
        return GPT2_PATTERN, ""
    if kind == "Sequence":
        steps = pre.get("pretokenizers") or []
        if len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel":
            split, level = steps
            regex = (split.get("pattern") or {}).get("Regex")
            if regex is None or split.get("behavior") != "Isolated" or split.get("invert"):
                return None, "its Split pre-tokenizer is not an isolated, non-inverted regex split"
            if level.get("add_prefix_space") or level.get("use_regex", True):
                return None, "its ByteLevel step adds a prefix space or splits again"
            return regex, ""
    return None, f"its pre-tokenizer {kind!r} is not a byte-level regex split"


def tiktoken_compatibility(hf_tokenizer, *, verify_tokens: bool = True) -> Compatibility:
    """Check whether tiktoken gives the ids of ``hf_tokenizer`` (a ``tokenizers.Tokenizer``).

    Args:
        hf_tokenizer: the reference tokenizer.
        verify_tokens: run every token through the BPE model (~1 CPU s for GPT-2's 50,257 tokens);
            executors skip it once the driver has checked the same tokenizer.

    Returns:
        A :class:`Compatibility`; ``reason`` says which condition of the module docstring failed.
    """
    spec = json.loads(hf_tokenizer.to_str())
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        return Compatibility(False, f"its model is {model.get('type')!r}, not BPE")
    if spec.get("normalizer") is not None:
        return Compatibility(False, "it has a normalizer")
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            return Compatibility(False, f"its BPE model sets {key}")
    if model.get("byte_fallback"):
        return Compatibility(False, "its BPE model uses byte_fallback")
    plain_added = [t["content"] for t in spec.get("added_tokens") or [] if not t.get("special")]
    if plain_added:
        return Compatibility(False, f"it has non-special added tokens (e.g. {plain_added[0]!r})")
    pattern, why = _pattern(spec.get("pre_tokenizer"))
    if pattern is None:
        return Compatibility(False, why)

    decoder = _byte_decoder()
    vocab: dict[str, int] = model.get("vocab") or {}
    if any(chr_ not in vocab for chr_ in decoder):
        return Compatibility(False, "its vocabulary lacks some of the 256 byte symbols")
    ranks = {bytes([decoder[c]]): vocab[c] for c in decoder}
    last = max(ranks.values())
    for merge in model.get("merges") or []:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        token = left + right
        rank = vocab.get(token)
        if rank is None:
            return Compatibility(False, f"merge {left!r} + {right!r} gives no vocabulary token")
        if rank <= last:
            return Compatibility(False, f"merge {left!r} + {right!r} has id {rank}, not above the earlier "
                                        "merges' (ids must follow merge priority)")
        last = rank
        ranks[bytes(decoder[c] for c in token)] = rank
    # Every token must come out of the BPE model as itself (tiktoken's whole-piece lookup and its
    # merging of unlisted pairs are then what tokenizers' merges would do).
    if not verify_tokens:
        return Compatibility(True, pattern=pattern, ranks=ranks)
    model_ = hf_tokenizer.model
    inverse = {v: k for k, v in vocab.items()}
    for rank in ranks.values():
        token = inverse[rank]
        got = [t.id for t in model_.tokenize(token)]
        if got != [rank]:
            return Compatibility(False, f"token {token!r} ({rank}) is not its own BPE encoding ({got})")
    return Compatibility(True, pattern=pattern, ranks=ranks)


SENTINEL = "\x00winnow:never-allowed\x00"
"""The one special token of every encoding :func:`build_encoding` builds; never allowed, so never emitted."""
SENTINEL_ID = 2**32 - 1
"""Its id: outside any vocabulary (the stage's range check would fail on it) and tiktoken's largest rank."""


def build_encoding(name: str, compat: Compatibility):
    """A ``tiktoken.Encoding`` with ``compat``'s ranks and pattern and one special token no call allows.

    GPT-2's pattern is given to tiktoken as :data:`GPT2_SPLIT`, which splits every text into the same pieces
    in less CPU; any other pattern as it is.

    Special-token strings in a document (a literal ``<|endoftext|>``) are ordinary text, as on the
    ``tokenizers`` path; the stage appends the EOS id itself. The encoding still holds one special token,
    :data:`SENTINEL`, because tiktoken's ``encode`` searches the text for the special-token regex before
    splitting it, and with no special token at all that regex is empty: it matches at every position and the
    search restarts at each one (``src/lib.rs`` ``encode``: ``start_find = m.start() + 1``), which made
    ``encode_to_numpy`` 1.3x slower than ``encode_ordinary`` here (bench/notes.md). Callers pass
    ``allowed_special=frozenset()`` and ``disallowed_special=()`` (:func:`udfs.tokenize.encode_ids`): a
    sentinel found in a document is then encoded as text too, exactly as ``encode_ordinary`` would.

    Raises:
        ValueError: ``compat`` is not ok.
    """
    if not compat.ok or compat.ranks is None:
        raise ValueError(f"tokenizer {name!r} cannot run on tiktoken: {compat.reason}")
    import tiktoken

    pattern = _TIKTOKEN_FORM.get(compat.pattern, compat.pattern)  # the same pieces, fewer regex hand-offs
    return tiktoken.Encoding(name=f"winnow:{name}", pat_str=pattern, mergeable_ranks=compat.ranks,
                             special_tokens={SENTINEL: SENTINEL_ID})


def resolve_engine(loaded, requested: str) -> tuple[str, str]:
    """The engine ``tokenize.engine = requested`` means for ``loaded`` (a ``LoadedTokenizer``).

    Returns:
        ``(engine, why)``: ``"tiktoken"`` or ``"hf"``, and for ``auto`` falling back to ``hf`` the
        reason tiktoken was not used ("" otherwise).

    Raises:
        TokenizerError: ``requested`` is not one of :data:`ENGINES`, or is ``tiktoken`` for a tokenizer
            tiktoken cannot run with identical ids (the message names ``tokenize.engine``).
    """
    if requested not in ENGINES:
        raise TokenizerError(f"tokenize.engine={requested!r}: allowed values {list(ENGINES)}")
    if requested == "hf":
        return "hf", ""
    compat = _compatibility(loaded, verify_tokens=True)
    if compat.ok:
        return "tiktoken", ""
    if requested == "tiktoken":
        raise TokenizerError(
            f"tokenize.engine='tiktoken' cannot run tokenizer {loaded.spec!r} with identical ids: "
            f"{compat.reason}; allowed for it: tokenize.engine=auto or hf"
        )
    return "hf", compat.reason


_COMPAT: dict[tuple[str, bool], Compatibility] = {}


def _compatibility(loaded, *, verify_tokens: bool) -> Compatibility:
    key = (loaded.spec, verify_tokens)
    with _LOCK:
        if key not in _COMPAT:
            _COMPAT[key] = tiktoken_compatibility(loaded.tokenizer, verify_tokens=verify_tokens)
        return _COMPAT[key]


def encoding_for(loaded):
    """The ``tiktoken.Encoding`` of ``loaded``, built once per process (no token-by-token re-check:
    :func:`resolve_engine` made it on the driver).

    Raises:
        ValueError: tiktoken cannot run this tokenizer.
    """
    key = (loaded.spec, False)
    with _LOCK:
        hit = _ENCODINGS.get(key)
    if hit is None:
        hit = build_encoding(loaded.spec, _compatibility(loaded, verify_tokens=False))
        with _LOCK:
            _ENCODINGS[key] = hit
    return hit
