from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc

from udfs import langid_prose


def _all_passes(texts: pa.Array) -> pa.Array:
    out = pc.fill_null(texts, "")
    for pattern, repl, _ in langid_prose._PASSES:
        out = pc.replace_substring_regex(out, pattern, repl)
    return out


def test_passes_on_their_trigger_texts_only_give_every_pass_on_every_text():
    texts = ["```py\nx = 1\n``` Prose here.", "~~~\ncode\n~~~ after", "<pre>a</pre> text <b>bold</b>",
             "<ref>note</ref> words", "math $x^2$ and $$y$$ and \\[z\\] and \\(w\\)", "[[Target|label]] text",
             "plain prose only, no markup.", "", None, "a {{tmpl}} b {| t |} c ''it'' d",
             "mixed ``` and ~~~ ``` fences ~~~ end", "\\documentclass{article}\\begin{document}Hi $a$"]
    rng = random.Random(0)
    alphabet = "ab <>/$\\[]{}|`~'\n=-;"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(400)]
    arr = pa.array(texts, pa.string())
    assert langid_prose.prose(arr).to_pylist() == _all_passes(arr).to_pylist()


def test_a_pass_never_matches_a_text_without_its_trigger():
    rng = random.Random(1)
    for pattern, _, trigger in langid_prose._PASSES:
        if not trigger:
            continue
        alphabet = "".join(c for c in "ab <>/$\\[]{}|`~'\n=-;prefcodPRE" if c not in trigger)
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))) for _ in range(300)]
        assert not any(pc.match_substring_regex(pa.array(texts), pattern).to_pylist()), pattern
