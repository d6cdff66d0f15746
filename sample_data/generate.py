"""Write Winnow's sample input files, deterministically from a seed; all text is written here.

    python sample_data/generate.py [--seed 7] [--out sample_data]

Files (small, byte-identical for a given seed: gzip headers carry no time or name):

* ``web_en-00000.jsonl.gz``: English prose on six topics (recombined from the hand-written phrases of
  :mod:`lexicon`, long and varied enough to pass the Gopher, C4 and FineWeb rules at their paper
  thresholds), plus the deliberate cases every stage must act on: exact and near duplicates (a few
  edits, Jaccard >= 0.85 on word 5-grams), cookie / navigation / shop boilerplate, a lorem-ipsum
  placeholder, a hashtag page, very short documents, one very long document, texts citing tables and
  figures with the table present and with it stripped (dangling), a literal ``<|endoftext|>`` inside a
  document, and malformed lines (truncated JSON, ``"text": null``, ``"text": 5``, no text, invalid UTF-8
  bytes, a lone ``\\ud83d`` escape, a zero-width-only text, a JSON list).
* ``web_multi-00001.jsonl.gz``: prose in German, French, Spanish and Japanese (long enough for fastText
  LID to label it), and shorter Russian, Chinese, Arabic and Hindi texts; decomposed accents, CRLF line
  ends, zero-width spaces, emoji ZWJ sequences.
* ``crawl-00000.warc.wet.gz``: a Common Crawl style WET file, one gzip member per record: a
  ``warcinfo`` record and ``conversion`` records with multibyte UTF-8 (Content-Length in bytes).

:data:`EXPECTED` lists what ingest must make of them; tests assert it. ``python sample_data/check.py``
shows what the filter rules make of every document (no Spark needed).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lexicon import ADJECTIVES, LEXICON, MULTI, PEOPLE, SHAPES, TIMES  # noqa: E402

N_PROSE = 262
"""Ordinary English prose documents in ``web_en`` (the bulk of what survives the filter)."""

EXPECTED = {
    "web_en-00000.jsonl.gz": {"records": 292, "documents": 286, "quarantine": {
        "malformed_json": 1, "text_missing": 2, "text_not_string": 1, "empty_after_normalization": 1, "invalid_record": 1,
    }, "n_replaced": 3},
    "web_multi-00001.jsonl.gz": {"records": 32, "documents": 32, "quarantine": {}, "n_replaced": 0},
    "crawl-00000.warc.wet.gz": {"records": 12, "documents": 12, "quarantine": {}, "n_replaced": 0},
    "web_evals-00002.jsonl.gz": {"records": 4, "documents": 4, "quarantine": {}, "n_replaced": 0},
}
"""Per file: records read, documents written, quarantined by reason, total U+FFFD substitutions."""

BOILERPLATE = [
    "We use cookies to improve your experience. By continuing to browse you accept our cookie policy. "
    "Accept all | Reject | Settings",
    "Home | About us | Products | Contact | Login | Register | Privacy policy | Terms of use",
    "Subscribe to our newsletter! Enter your email address to receive weekly updates. Subscribe now.",
    "Copyright 2024. All rights reserved. Powered by an open source content management system.",
]

TABLE_MD = ("| Variety | Days to harvest | Yield per plant |\n|---|---|---|\n| Early Red | 55 | 3.1 kg |\n"
            "| Long Keeper | 78 | 4.4 kg |\n| Garden Gold | 64 | 3.8 kg |")


class _Pools:
    """Phrase pools drawn without replacement (refilled, reshuffled, only when one runs dry)."""

    def __init__(self, rng: random.Random, topics: list[str]):
        self.rng = rng
        lex = [LEXICON[t] for t in topics]
        self.source = {
            "S": [s for x in lex for s in x["subjects"]], "P": [s for x in lex for s in x["predicates"]],
            "A": [s for x in lex for s in x["advice"]], "L": [s for x in lex for s in x["places"]],
            "F": [s for x in lex for s in x["facts"]], "T": TIMES, "W": PEOPLE, "J": ADJECTIVES, "shape": SHAPES,
        }
        self.left: dict[str, list[str]] = {k: [] for k in self.source}

    def draw(self, kind: str) -> str:
        if not self.left[kind]:
            self.left[kind] = self.rng.sample(self.source[kind], len(self.source[kind]))
        return self.left[kind].pop()


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _sentence(pools: _Pools) -> str:
    shape = pools.draw("shape")
    out = shape
    for slot in ("S2", "P2", "A2", "S", "P", "A", "L", "T", "W", "J", "F"):
        for form, fn in ((f"{{{slot}_cap}}", _cap), (f"{{{slot}}}", str)):
            if form in out:
                out = out.replace(form, fn(pools.draw(slot[0])), 1)
    return out


def prose(rng: random.Random, topics: list[str], n_sentences: int) -> str:
    """``n_sentences`` sentences on ``topics`` in paragraphs of 3 to 6 sentences separated by a blank line."""
    pools = _Pools(rng, topics)
    sentences = [_sentence(pools) for _ in range(n_sentences)]
    paras, i = [], 0
    while i < len(sentences):
        k = rng.randint(3, 6)
        paras.append(" ".join(sentences[i:i + k]))
        i += k
    return "\n\n".join(paras)


def _edit(rng: random.Random, text: str, n_edits: int) -> str:
    """A near copy: ``n_edits`` single-word substitutions, deletions or insertions at seeded positions."""
    words = text.split(" ")
    for _ in range(n_edits):
        i = rng.randrange(1, len(words) - 1)
        op = rng.choice(("sub", "del", "ins"))
        if op == "sub":
            words[i] = rng.choice(("really", "often", "simply", "also", "quite"))
        elif op == "del" and not words[i].endswith((".", "\n")):
            del words[i]
        else:
            words.insert(i, rng.choice(("indeed", "usually", "certainly")))
    return " ".join(words)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def english_cases(rng: random.Random) -> list[tuple[str, str]]:
    """The well-formed English records of ``web_en`` as ``(case, text)``, in file order."""
    topics = sorted(LEXICON)
    docs: list[tuple[str, str]] = []
    for i in range(N_PROSE):  # ordinary prose, about 120 to 450 words
        docs.append(("prose", prose(rng, [topics[i % len(topics)]], rng.randint(9, 28))))
    base = prose(rng, ["cycling"], 20)
    docs += [("exact_dup", base)] * 3  # the first copy is kept, the other two are exact duplicates
    near = prose(rng, ["gardening"], 24)
    docs += [("near_dup", near), ("near_dup", _edit(rng, near, 3)), ("near_dup", _edit(rng, near, 4))]
    docs += [("boilerplate", b) for b in BOILERPLATE]
    docs.append(("prose_with_banner", prose(rng, ["cooking"], 12) + "\n\n" + BOILERPLATE[0]))
    shop = "\n".join(f"{item} - {price} EUR - Add to cart" for item, price in
                     (("Garden gloves", "9.90"), ("Pruning shears", "24.50"), ("Watering can", "14.00")) * 6)
    docs.append(("shop_page", "Our bestsellers this week\n" + shop))
    docs.append(("lorem_ipsum", "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " + prose(rng, ["woodworking"], 10)))
    docs.append(("hashtags", " ".join(f"#{w}" for w in "garden tomato harvest compost organic summer veggies growyourown "
                                      "allotment seeds plants green nature homegrown".split()) + " Loved today in the garden!"))
    docs += [("very_short", "ok"), ("very_short", "Yes.")]
    docs.append(("very_long", prose(rng, topics, 160)))  # about 2,700 words: longer repeats the lexicon
    # Tables and figures: cited with the table present, and cited with the table (or figure) missing.
    docs.append(("table_present", "Table 1 compares three tomato varieties grown in the same raised bed.\n\n" + TABLE_MD
                 + "\n\nAs Table 1 shows, Long Keeper gives the largest yield but takes the longest to ripen.\n\n"
                 + prose(rng, ["gardening"], 10)))
    docs.append(("table_stripped", "The harvest dates are listed in Table 2, and Figure 3 shows the rainfall in each week. "
                 + prose(rng, ["gardening"], 10) + " See Table 2 for the full results."))
    docs.append(("figure_missing", "Figure 1 shows the route profile, with the long climb after the village. "
                 + prose(rng, ["cycling"], 10)))
    docs.append(("table_stripped", "The star counts per night are summarised in Table 4 below.\n\n" + prose(rng, ["astronomy"], 10)))
    docs.append(("eos_literal", prose(rng, ["woodworking"], 6) + " The forum software printed the marker <|endoftext|> "
                 "after every post, which confused the readers of this thread. " + prose(rng, ["woodworking"], 6)))
    # Invented personal data and secrets for the pii stage, appended to a few prose documents without
    # drawing from rng, so every other document (and the other files) stays byte-identical.
    for i, extra in PII_SENTENCES.items():
        docs[i] = ("prose_pii", docs[i][1] + " " + extra)
    # Text that distinct pages share, for the passages stage, again without drawing from rng: a club
    # footer paragraph (exact on most pages, lightly edited on two), and one passage reused mid-paragraph.
    for k, i in enumerate(SHARED_FOOTER_DOCS):
        footer = SHARED_FOOTER if k < len(SHARED_FOOTER_DOCS) - 2 else SHARED_FOOTER_EDITED[k % 2]
        docs[i] = ("prose_shared", docs[i][1] + "\n\n" + footer)
    for i in REUSED_PASSAGE_DOCS:
        paras = docs[i][1].split("\n\n")
        paras[0] = paras[0] + " " + REUSED_PASSAGE
        docs[i] = ("prose_shared", "\n\n".join(paras))
    return docs


SHARED_FOOTER = ("About this page: the articles here are written by members of the Riverside Hobby Club, who meet "
                 "every second Tuesday, and you may share them if you name the author.")
SHARED_FOOTER_EDITED = (SHARED_FOOTER.replace("name the author.", "name the author too."),
                        SHARED_FOOTER.replace("About this page:", "About this page -").replace("Club,", "Club"))
SHARED_FOOTER_DOCS = (40, 47, 54, 61, 68, 75, 82, 89)
"""Prose documents ending with the club footer: the first copy is kept, later ones are cut (the last
two are near copies: one word added at the end; punctuation changed)."""
REUSED_PASSAGE = (
    "The rules of the allotment committee say that every plot holder keeps the shared paths clear, takes "
    "green waste to the compost bays rather than the car park, waters only in the early morning or the "
    "evening during a dry spell, and brings any dispute about boundaries to the committee before the "
    "autumn meeting, where the minutes are read aloud and the next year's fees are agreed by a show of hands."
)
"""About 75 words inserted at the end of the first paragraph of two documents (ExactSubstr-style reuse)."""
REUSED_PASSAGE_DOCS = (100, 130)


PII_SENTENCES = {
    5: "For bookings write to mirel.tovu@kalodar-post.net or call +44 20 7946 0321.",
    11: "The club server at 84.17.32.9 keeps the photos, and the caretaker answers on +1 415-555-0142.",
    17: "The refund goes to IBAN DE89 3704 0044 0532 0130 00, paid by card 4111 1111 1111 1111.",
    23: "The old wiki still shows password=Tomato2024! on its admin page, next to release 2.4.1.",
}
"""Document index -> sentence with invented values (the documentation card and IBAN numbers, a UK
drama-range and a US 555-01xx phone number); the pii stage finds 7 values in these 4 documents."""


def web_en(rng: random.Random) -> bytes:
    lines = [_line({"id": f"en-{i:04d}", "url": f"https://example.org/{case}/{i}", "text": text})
             for i, (case, text) in enumerate(english_cases(rng))]
    # Malformed or bad records (their ids are never used).
    lines.append(b'{"id": "bad-1", "text": "This line was cut off in the midd')
    lines.append(_line({"id": "bad-2", "text": None}))
    lines.append(_line({"id": "bad-3", "text": 5}))
    lines.append(_line({"id": "bad-4", "body": "The text is under the wrong key."}))
    lines.append(_line({"id": "bad-5", "text": "\u200b\u200b \ufeff"}))  # nothing left after normalisation
    lines.append(b'["a JSON list", "not an object"]')
    lines.append(b'{"id": "en-bytes", "text": "Invalid bytes \xff\xfe in the middle of a sentence about bread."}')
    lines.append(b'{"id": "en-surrogate", "text": "A lone high surrogate \\ud83d here, and a pair \\ud83d\\ude00 there."}')
    lines.insert(20, b"")  # a blank line in the middle: skipped, counted
    return _gz(b"\n".join(lines) + b"\n")


def multi_text(rng: random.Random, lang: str) -> str:
    """Sentences of :data:`lexicon.MULTI` ``[lang]`` in seeded order: 6 to 9 for de/fr/es/ja, 3 otherwise."""
    pool = MULTI[lang]
    k = rng.randint(6, 9) if len(pool) > 4 else 3
    sents = rng.sample(pool, k)
    sep = "" if lang in ("ja", "zh") else " "
    return sep.join(sents[: k // 2]) + "\n" + sep.join(sents[k // 2:])


def web_multi(rng: random.Random) -> bytes:
    lines = []
    langs = [lang for lang in sorted(MULTI) for _ in range(6 if len(MULTI[lang]) > 4 else 2)]
    for i, lang in enumerate(langs):
        text = multi_text(rng, lang)
        if i % 3 == 1:
            text = text.replace("\n", "\r\n")  # Windows line ends
        if i % 4 == 2:
            text = text.replace(" ", " \u200b", 2)  # zero-width spaces from a web editor
        if lang == "fr" and i % 2 == 0:
            text = text.replace("é", "e\u0301")  # decomposed accents (NFD)
        if i % 5 == 0:
            text += " \U0001F468\u200D\U0001F469\u200D\U0001F467"  # an emoji ZWJ sequence: kept whole
        lines.append(_line({"id": f"{lang}-{i:03d}", "url": f"https://example.{lang}/p/{i}", "lang": lang, "text": text}))
    return _gz(b"\n".join(lines) + b"\n")


def _wet_record(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + f"Content-Length: {len(payload)}\r\n\r\n"
    return _gz(head.encode("utf-8") + payload + b"\r\n\r\n")


def wet_texts(rng: random.Random) -> list[str]:
    """The 12 ``conversion`` payloads: English prose (odd records) and de/es/fr/ja prose (even records)."""
    out = []
    for i in range(12):
        if i % 2:
            out.append(prose(rng, [sorted(LEXICON)[i % len(LEXICON)]], rng.randint(10, 20)))
        else:
            out.append(multi_text(rng, ("de", "es", "fr", "ja")[(i // 2) % 4]))  # multibyte UTF-8
    return out


def wet(rng: random.Random) -> bytes:
    def rid() -> str:
        return f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}>"

    info = b"software: winnow sample_data/generate.py\r\nformat: WARC File Format 1.0\r\n"
    out = [_wet_record([("WARC-Type", "warcinfo"), ("WARC-Date", "2024-01-01T00:00:00Z"),
                        ("WARC-Filename", "crawl-00000.warc.wet.gz"), ("WARC-Record-ID", rid()),
                        ("Content-Type", "application/warc-fields")], info)]
    for i, text in enumerate(wet_texts(rng)):
        payload = text.encode("utf-8")
        out.append(_wet_record([
            ("WARC-Type", "conversion"), ("WARC-Target-URI", f"https://crawl.example/{i}"),
            ("WARC-Date", f"2024-01-01T00:{i:02d}:00Z"), ("WARC-Record-ID", rid()), ("WARC-Refers-To", rid()),
            ("WARC-Block-Digest", "sha1:" + hashlib.sha1(payload).hexdigest()), ("Content-Type", "text/plain"),
        ], payload))
    return b"".join(out)


EVAL_ITEMS = [
    {"id": "trivia-1", "question": "Which lighthouse keeper on the island of Marrowby logged forty storms in a single "
     "winter and then painted the tower blue?", "answer": "Old Tamsin Greave, in the winter the harbour froze"},
    {"id": "trivia-2", "question": "In the board game Quarrels of Ashfen, how many copper tokens does a player collect "
     "after crossing the marsh bridge twice?", "answer": "Seven copper tokens and one river card"},
    {"id": "trivia-3", "question": "What did the clockmakers of Vellin hide inside the great bell before the flood of "
     "the eleventh year?", "answer": "A brass key wrapped in waxed linen and a letter to the mayor"},
    {"id": "trivia-4", "question": "Who founded Corrowmere?", "answer": "Ysolde Pell"},
    {"id": "trivia-5", "question": "What colour is the Drennick moth?", "answer": "Pale green"},
]
"""An invented evaluation set (``evals/trivia.jsonl``, ``decontam.eval_sets`` in conf/local.yaml): three long
items and two shorter than 13 words."""


def evals() -> bytes:
    """``evals/trivia.jsonl``: :data:`EVAL_ITEMS`, one JSON object per line (not an ingest input)."""
    return b"".join(_line(r) + b"\n" for r in EVAL_ITEMS)


def web_evals(rng: random.Random) -> bytes:
    """``web_evals-00002.jsonl.gz``: four prose documents that hold evaluation items (decontam cuts three
    and drops one, whose text is little more than the item)."""
    it = EVAL_ITEMS
    q1 = it[0]["question"] + " " + it[0]["answer"] + "."
    w2 = (it[1]["question"] + " " + it[1]["answer"]).lower().split(" ")
    q2 = "\n    ".join(" ".join(w2[i:i + 8]) for i in range(0, len(w2), 8))  # re-wrapped, lowercased
    q4 = f"Pub quiz, round two: {it[3]['question']} {it[3]['answer']}."
    q3 = it[2]["question"] + " " + it[2]["answer"] + "."
    docs = [
        ("quiz_verbatim", prose(rng, ["cooking"], 12) + "\n\n" + q1 + "\n\n" + prose(rng, ["cooking"], 10)),
        ("quiz_rewrapped", prose(rng, ["gardening"], 12) + "\n\n" + q2 + "\n\n" + prose(rng, ["gardening"], 10)),
        ("quiz_short_item", prose(rng, ["cycling"], 12) + " " + q4 + "\n\n" + prose(rng, ["cycling"], 10)),
        ("quiz_mostly_item", prose(rng, ["cooking"], 3) + "\n\n" + q3 + "\n\n" + prose(rng, ["cooking"], 3)),
    ]
    return _gz(b"".join(_line({"id": k, "text": t, "source": "web_evals"}) + b"\n" for k, t in docs))


def generate(out: Path, seed: int = 7) -> dict[str, str]:
    """Write the sample files into ``out``; returns file name -> sha256 of its bytes."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    files = {"web_en-00000.jsonl.gz": web_en(rng), "web_multi-00001.jsonl.gz": web_multi(rng),
             "crawl-00000.warc.wet.gz": wet(rng),
             # its own seed, so that adding it left the files above byte-identical
             "web_evals-00002.jsonl.gz": web_evals(random.Random(seed + 16)), "evals/trivia.jsonl": evals()}
    (out / "evals").mkdir(exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    a = ap.parse_args()
    for name, digest in generate(a.out, a.seed).items():
        print(f"{digest[:16]}  {name}")
