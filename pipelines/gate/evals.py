"""The gate's evaluations, fixed before training: bits per byte on held-out text, multiple-choice accuracy.

Every model of a gate is scored on the same text: the evaluation sets (``gate.eval_sets`` and, with
``gate.use_decontam_sets``, ``decontam.eval_sets``, read by :mod:`pipelines.core.eval_sets`), each variant's
``validation/`` split (decoded to count its bytes) and an optional reference folder (``*.txt``/``*.md``,
one document per file). Bits per byte = total negative log2-likelihood of a text's tokens / its UTF-8
bytes, tokenizer-independent (Gao et al. 2020, The Pile, section 5.1). A document is scored after an EOS
(the separator the model saw between training documents), in windows of ``gate.seq_len``.

Multiple choice: the likelihood of each choice (``" " + choice``) after the item's ``fields`` text; the
choice with the highest total log-likelihood is the model's answer (EleutherAI lm-evaluation-harness,
``acc``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.core import eval_sets
from pipelines.core.section import EvalSetConfig
from pipelines.gate.shards import GateInputError, Variant, documents
from pipelines.gate.vocab import CompactVocab

LN2 = math.log(2.0)


@dataclass
class TextSet:
    """Held-out text for bits per byte.

    Attributes:
        name: the set's name in outputs (``eval:<name>``, ``validation:<variant>``, ``reference``).
        docs: token ids per document (full vocabulary, no EOS).
        n_bytes: UTF-8 bytes of the scored text.
        ranked: False for a variant's own validation split (reported, never used to rank).
        owner: the variant a validation split belongs to.
        mc: multiple-choice items ``(context ids, [choice ids...], answer index)``.
    """

    name: str
    docs: list[np.ndarray]
    n_bytes: int
    owner: str | None = None
    mc: list[tuple[np.ndarray, list[np.ndarray], int]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Tokens scored."""
        return int(sum(len(d) for d in self.docs))


def _cap(texts: list[str], ids: list[np.ndarray], max_tokens: int) -> tuple[list[str], list[np.ndarray]]:
    kept, total = 0, 0
    for d in ids:
        if kept and total + len(d) > max_tokens:
            break
        kept, total = kept + 1, total + len(d)
    return texts[:kept], ids[:kept]


def encode(tokenizer: Any, texts: list[str]) -> list[np.ndarray]:
    """Token ids of texts (no special tokens added), int64 arrays."""
    return [np.array(e.ids, dtype=np.int64) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def from_texts(name: str, texts: list[str], tokenizer: Any, max_tokens: int) -> TextSet:
    """A :class:`TextSet` of texts, the first ones up to ``max_tokens`` tokens."""
    texts, ids = _cap(texts, encode(tokenizer, texts), max_tokens)
    return TextSet(name, ids, sum(len(t.encode("utf-8")) for t in texts))


def eval_set(es: EvalSetConfig, i: int, key: str, tokenizer: Any, max_tokens: int) -> TextSet:
    """Read one evaluation set (local files) as a :class:`TextSet`, with its multiple-choice items.

    Raises:
        GateInputError: a file is missing or unreadable, or the set has no text; names ``key[i]``.
    """
    try:
        items = eval_sets.read_items(es, i)
    except eval_sets.EvalSetError as e:
        raise GateInputError(str(e).replace("decontam.eval_sets", key)) from None
    ts = from_texts(f"eval:{es.name}", items.texts, tokenizer, max_tokens)
    if getattr(es, "choices", None):
        ts.mc = _choice_items(es, i, key, tokenizer)
    return ts


def _answer_index(ans: Any, choices: list[str]) -> int | None:
    if isinstance(ans, int) and not isinstance(ans, bool):
        return ans if 0 <= ans < len(choices) else None
    if isinstance(ans, str):
        a = ans.strip()
        if len(a) == 1 and a.isalpha() and ord(a.upper()) - 65 < len(choices):
            return ord(a.upper()) - 65
        return choices.index(ans) if ans in choices else None
    return None


def _choice_items(
    es: Any, i: int, key: str, tokenizer: Any
) -> list[tuple[np.ndarray, list[np.ndarray], int]]:
    out = []
    for path in eval_sets.local_files(es, i):
        for line in Path(path).read_text("utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(row, dict) or not isinstance(row.get(es.choices), list):
                continue
            choices = [str(c) for c in row[es.choices]]
            ans = _answer_index(row.get(es.answer), choices)
            context = "\n".join(str(row[f]) for f in es.fields if isinstance(row.get(f), str | int | float))
            if ans is None or not choices or not context:
                continue
            ids = encode(tokenizer, [context, *(" " + c for c in choices)])
            out.append((ids[0], ids[1:], ans))
    if not out:
        raise GateInputError(
            f"{key}[{i}] ({es.name!r}): no row has a list in {es.choices!r} and a valid "
            f"{es.answer!r} (an index, a letter or the text of a choice)"
        )
    return out


def validation(v: Variant, tokenizer: Any, eos: int, max_tokens: int) -> TextSet | None:
    """A variant's ``validation/`` split as a :class:`TextSet` (None when it has none)."""
    docs = [
        np.asarray(d[:-1] if len(d) and d[-1] == eos else d, dtype=np.int64)
        for d in documents(v, "validation")
    ]
    docs = [d for d in docs if d.size]
    if not docs:
        return None
    texts = [tokenizer.decode(d.tolist()) for d in docs]
    texts, docs = _cap(texts, docs, max_tokens)
    return TextSet(f"validation:{v.name}", docs, sum(len(t.encode("utf-8")) for t in texts), owner=v.name)


def reference(folder: str, tokenizer: Any, max_tokens: int) -> TextSet:
    """The reference folder's ``*.txt`` and ``*.md`` files (sorted), one document each.

    Raises:
        GateInputError: the folder is missing or holds no such file with text (names ``gate.reference``).
    """
    p = Path(folder)
    files = (
        sorted(f for f in p.rglob("*") if f.suffix in (".txt", ".md") and f.is_file()) if p.is_dir() else []
    )
    texts = [t for t in (f.read_text("utf-8", errors="replace") for f in files) if t.strip()]
    if not texts:
        raise GateInputError(f"gate.reference={folder!r}: no folder, or no .txt/.md file with text in it")
    return from_texts("reference", texts, tokenizer, max_tokens)


def windows(docs: list[np.ndarray], eos: int, seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut documents (each after an EOS) into scoring windows.

    Returns:
        (inputs, targets, mask): int64 / int64 / bool arrays [windows, seq_len] of full ids; ``mask`` marks
        the target positions that belong to the text.

    >>> x, y, m = windows([np.array([1, 2, 3])], eos=0, seq_len=2)
    >>> x.tolist(), y.tolist(), m.tolist()
    ([[0, 1], [2, 0]], [[1, 2], [3, 0]], [[True, True], [True, False]])
    """
    xs, ys, ms = [], [], []
    for d in docs:
        seq = np.concatenate([[eos], d]).astype(np.int64)
        for j in range(0, len(seq) - 1, seq_len):
            x, y = seq[j : j + seq_len], seq[j + 1 : j + seq_len + 1]
            pad = seq_len - len(y)
            xs.append(np.pad(x[: len(y)], (0, pad)))
            ys.append(np.pad(y, (0, pad)))
            ms.append(np.arange(seq_len) < len(y))
    if not xs:
        z = np.zeros((0, seq_len), np.int64)
        return z, z, z.astype(bool)
    return np.stack(xs), np.stack(ys), np.stack(ms)


def total_bits(nll_nats: np.ndarray, targets: np.ndarray, mask: np.ndarray, vocab: CompactVocab) -> float:
    """Total bits of the masked targets, an OOV target charged ``ln(ids it stands for)`` more."""
    extra = np.where(vocab.map(targets) == vocab.oov, vocab.oov_nats, 0.0)
    return float(((nll_nats + extra) * mask).sum() / LN2)


def choice_windows(
    items: list[tuple[np.ndarray, list[np.ndarray], int]], eos: int, seq_len: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One window per (item, choice): ``[EOS] + context + choice``, cut from the left to fit; the mask marks
    the choice's tokens. Shapes as :func:`windows`."""
    xs, ys, ms = [], [], []
    for ctx, choices, _ in items:
        for c in choices:
            seq = np.concatenate([[eos], ctx, c]).astype(np.int64)[-(seq_len + 1) :]
            n = len(seq) - 1
            pad = seq_len - n
            xs.append(np.pad(seq[:-1], (0, pad)))
            ys.append(np.pad(seq[1:], (0, pad)))
            ms.append((np.arange(seq_len) < n) & (np.arange(seq_len) >= n - min(len(c), n)))
    return np.stack(xs), np.stack(ys), np.stack(ms)


def accuracy(bits_per_window: np.ndarray, items: list[tuple[np.ndarray, list[np.ndarray], int]]) -> float:
    """Share of items whose right choice has the fewest bits (highest likelihood); ties go to the first."""
    right, k = 0, 0
    for _, choices, ans in items:
        scores = bits_per_window[k : k + len(choices)]
        right += int(int(np.argmin(scores)) == ans)
        k += len(choices)
    return right / len(items) if items else 0.0
