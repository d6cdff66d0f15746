"""A synthetic 70,000-id byte-level BPE tokenizer (ids above 65535 in use), built offline with ``tokenizers``."""

from __future__ import annotations

from itertools import product
from pathlib import Path

VOCAB_SIZE = 70_000
EOS = "<|endoftext|>"


def build_70k_tokenizer(path: Path) -> Path:
    """Write ``tokenizer.json``: 256 byte symbols, all 65,536 byte pairs, then letter triples, then EOS.

    Three-letter lowercase words such as ``"aab"`` encode to ids >= 65,792, so uint16 cannot hold them.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [(a, b) for a, b in product(alphabet, alphabet)]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for x, y, z in product(letters, letters, letters):
        if len(vocab) == VOCAB_SIZE - 1:
            break
        merges.append((x + y, z))
        vocab[x + y + z] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    tok.save(str(path))
    return path
