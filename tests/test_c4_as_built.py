"""The ``c4`` profile keeps what the code that built C4 keeps (TFDS ``tensorflow_datasets/text/c4_utils.py``
``clean_page``), and its line cleaning leaves the text that code leaves, on the shared web_crawl sample.

The reference below restates ``clean_page`` (lines stripped; a word over 1,000 characters, no end mark
``.?!"`` or an ellipsis end, fewer than 5 words, "javascript", policy phrases drop the line; "lorem ipsum"
or ``{`` in a surviving line drop the page; fewer than 3 sentences drop the page). TFDS counts sentences
with NLTK's punkt model, which needs a download, so the reference splits sentences after ``.!?`` before
whitespace (what punkt does outside abbreviations).
"""

from __future__ import annotations

import re

import pyarrow as pa

from tests.test_quality_crosscheck import _docs
from udfs import quality as q
from udfs.quality.c4 import (
    C4_POLICY_SUBSTRINGS,
    TFDS_END_MARKS,
    TFDS_MIN_NUM_SENTENCES,
    TFDS_MIN_WORDS_PER_LINE,
)

_CITE = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")


def _reference(text: str) -> str | None:
    kept, sentences = [], 0
    for raw in text.split("\n"):
        line = raw.strip()
        if any(len(w) > 1000 for w in line.split()):
            continue
        line = _CITE.sub("", line).strip()
        if not line.endswith(tuple(TFDS_END_MARKS)) or line.endswith("..."):
            continue
        if len(line.split()) < TFDS_MIN_WORDS_PER_LINE:
            continue
        low = line.lower()
        if "lorem ipsum" in low:
            return None
        if "javascript" in low:
            continue
        if "{" in line:
            return None
        if any(p in low for p in C4_POLICY_SUBSTRINGS):
            continue
        sentences += len(re.findall(r"[.!?]+[\"')\]]*(?:\s|$)", line)) or 1
        kept.append(line)
    return "\n".join(kept).strip() if sentences >= TFDS_MIN_NUM_SENTENCES else None


def test_c4_profile_keeps_what_tfds_keeps(shared_data):
    texts = _docs(shared_data)
    opts = q.C4Options(TFDS_MIN_WORDS_PER_LINE, TFDS_END_MARKS, "kept_lines")
    page = q.parse(pa.array(texts))
    signals = q.c4(page, opts).to_pylist()
    cleaned = q.c4_clean(page, opts)[0].to_pylist()
    ours = [not s["has_lorem_ipsum"] and not s["has_curly_bracket"] and s["kept_sentences"] >= TFDS_MIN_NUM_SENTENCES
            for s in signals]
    ref = [_reference(t) for t in texts]
    agree = sum(o == (r is not None) for o, r in zip(ours, ref, strict=True)) / len(texts)
    same_text = [c == r for c, r, o in zip(cleaned, ref, ours, strict=True) if o and r is not None]
    print(f"c4 as built: keep/drop agreement {agree:.4f} on {len(texts)} docs, kept {sum(ours)}; "
          f"cleaned text identical {sum(same_text)}/{len(same_text)}")
    assert agree >= 0.99
    assert sum(same_text) / len(same_text) >= 0.99
