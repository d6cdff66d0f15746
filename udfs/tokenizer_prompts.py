"""Prompt boundaries: does an evaluation prompt end on a token the training data never continues that way?

An evaluation harness encodes the prompt (context) and the answer (continuation) separately and joins the
ids (EleutherAI lm-evaluation-harness: ``context`` + ``target_delimiter`` + ``target``, the delimiter a
space by default). If the prompt ends in a bare space and the tokenizer merges a space into the next word
(GPT-2's split regex: ``' ?\\p{L}+'``), the model sees the bare-space id (GPT-2: 220) followed by a word
that has no leading space: a pair that tokenizing the training text never produces, and scores drop.

Two signals per prompt (:func:`prompt_boundaries`):

* ``canonical``: ``encode(prompt) + encode(answer) == encode(prompt + answer)``; False is the trailing-
  space failure itself, decided by the tokenizer alone.
* from the training data (the audit's ``id_counts`` and ``follow`` histograms, :mod:`udfs.tokenizer_audit`):
  how often the prompt's last id occurs, and how often it is followed by a token of the answer's first
  kind (``LETTER`` or ``SPACE_LETTER``). Rarely or never is a boundary the model never learnt.

The answer is the item's answer field when there is one, else :data:`PROBE_ANSWER`; it is joined as the
harness would: unchanged after a prompt that ends in whitespace, after one space otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from udfs import tokenize as tok_udfs
from udfs.tokenizer_audit import VocabTables

PROBE_ANSWER = "Paris"
"""Continuation used for items without an answer: a common word that starts with a letter."""


@dataclass(frozen=True)
class PromptSignal:
    """The boundary signals of one prompt.

    Attributes:
        last_id: the prompt's last content id (-1 for an empty prompt).
        next_kind: kind of the continuation's first token (:data:`udfs.tokenizer_audit.LETTER` ...).
        seen: occurrences of ``last_id`` in the training content.
        seen_then_kind: occurrences of ``last_id`` followed by a token of ``next_kind``.
        canonical: the separately encoded ids equal the ids of the joined text.
        ends_in_space: the prompt's last character is whitespace.
        ending: how the prompt ends, for a reader: the last word before its last token (with the
            whitespace after it; at most 30 characters), then the last token's text (() for an empty
            prompt): ``("Answer:", " ")``.
    """

    last_id: int
    next_kind: int
    seen: int
    seen_then_kind: int
    canonical: bool
    ends_in_space: bool
    ending: tuple[str, ...] = ()


def continuation(prompt: str, answer: str | None) -> str:
    """The text a harness appends to ``prompt``: the answer after one space, or as is after whitespace.

    >>> continuation("Answer:", "Paris"), continuation("Answer: ", " Paris")
    (' Paris', 'Paris')
    """
    text = (answer if answer is not None and answer.strip() else PROBE_ANSWER).lstrip()
    return text if prompt[-1:].isspace() else " " + text


def _ending(tok: tok_udfs.LoadedTokenizer, ids: list[int]) -> tuple[str, ...]:
    """:attr:`PromptSignal.ending` of a prompt's ids."""
    if not ids:
        return ()
    decode = tok.tokenizer.decode  # type: ignore[attr-defined]
    before = decode(ids[:-1], skip_special_tokens=False)
    word = re.search(r"(\S+\s*|\s+)$", before)
    return ((word.group(0)[-30:],) if word else ()) + (decode(ids[-1:], skip_special_tokens=False),)


def ending_text(texts: list[str]) -> str:
    """How a prompt ends, token by token, for a reader: each token's text as a Python string literal
    (spaces, tabs and newlines visible), joined by ``+``.

    >>> print(ending_text(["Answer:", " "]), ending_text(["\\n", "Q"]))
    'Answer:' + ' ' '\\n' + 'Q'
    """
    return " + ".join(repr(t) for t in texts)


def prompt_boundaries(
    tok: tok_udfs.LoadedTokenizer,
    tables: VocabTables,
    prompts: list[str],
    answers: list[str | None],
    id_counts: np.ndarray,
    follow: np.ndarray,
) -> list[PromptSignal]:
    """The :class:`PromptSignal` of every prompt.

    Args:
        tok: the run's tokenizer.
        tables: its :func:`udfs.tokenizer_audit.vocab_tables`.
        prompts: the prompt texts, exactly as the harness passes them (trailing whitespace kept).
        answers: the answer of each prompt, or None.
        id_counts: int64 [vocab], the audit's id histogram.
        follow: int64 [vocab, 3], the audit's next-kind histogram.

    Returns:
        One signal per prompt, in order.
    """
    conts = [continuation(p, a) for p, a in zip(prompts, answers, strict=True)]
    p_ids = tok_udfs.encode_ids(tok, prompts)
    c_ids = tok_udfs.encode_ids(tok, conts)
    j_ids = tok_udfs.encode_ids(tok, [p + c for p, c in zip(prompts, conts, strict=True)])
    out = []
    for p, pi, ci, ji in zip(prompts, p_ids, c_ids, j_ids, strict=True):
        pi, ci, ji = list(pi), list(ci), list(ji)
        last = int(pi[-1]) if pi else -1
        kind = int(tables.next_kind[ci[0]]) if ci else 0
        seen = int(id_counts[last]) if last >= 0 else 0
        then = int(follow[last, kind]) if last >= 0 else 0
        out.append(PromptSignal(last, kind, seen, then, pi + ci == ji, p[-1:].isspace(), _ending(tok, pi)))
    return out
