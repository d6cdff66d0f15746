"""Write Winnow's sample input files, deterministically from a seed; all text is written here.

    python sample_data/generate.py [--seed 7] [--out sample_data]

Files (small, byte-identical for a given seed: gzip headers carry no time or name):

* ``web_en-00000.jsonl.gz``: English prose on several topics, exact and near duplicates, cookie and
  navigation boilerplate, very short and very long documents, texts that cite tables and figures
  with and without the table present, and malformed lines (truncated JSON, ``"text": null``,
  ``"text": 5``, no text, invalid UTF-8 bytes, a lone ``\\ud83d`` escape, a zero-width-only text).
* ``web_multi-00001.jsonl.gz``: prose in German, French, Spanish, Russian, Chinese, Japanese, Arabic
  and Hindi; decomposed accents, CRLF line ends, zero-width spaces, emoji ZWJ sequences.
* ``crawl-00000.warc.wet.gz``: a Common Crawl style WET file, one gzip member per record: a
  ``warcinfo`` record and ``conversion`` records with multibyte UTF-8 (Content-Length in bytes).

:data:`EXPECTED` lists what ingest must make of them; tests assert it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import uuid
from pathlib import Path

EXPECTED = {
    "web_en-00000.jsonl.gz": {"records": 62, "documents": 56, "quarantine": {
        "malformed_json": 1, "text_missing": 2, "text_not_string": 1, "empty_after_normalization": 1, "invalid_record": 1,
    }, "n_replaced": 3},
    "web_multi-00001.jsonl.gz": {"records": 24, "documents": 24, "quarantine": {}, "n_replaced": 0},
    "crawl-00000.warc.wet.gz": {"records": 12, "documents": 12, "quarantine": {}, "n_replaced": 0},
}
"""Per file: records read, documents written, quarantined by reason, total U+FFFD substitutions."""

TOPICS = {
    "gardening": [
        "Tomatoes grow best when the soil stays warm and evenly moist through the summer.",
        "A thin layer of straw mulch keeps the roots cool and slows the loss of water on hot afternoons.",
        "Most gardeners start their seeds indoors about six weeks before the last spring frost.",
        "Pinching off the side shoots directs more of the plant's energy into the main stem and its fruit.",
        "Compost made from kitchen scraps and fallen leaves feeds the soil slowly over several seasons.",
        "Beans and peas add nitrogen to the ground, so they make good neighbours for hungry leafy crops.",
        "Watering early in the morning gives the leaves time to dry before the evening air turns damp.",
        "A raised bed drains quickly after heavy rain and warms up sooner in the spring.",
    ],
    "cycling": [
        "The route follows the old railway line along the river for almost forty kilometres.",
        "Riders should check their tyre pressure before every long trip, since a soft tyre wastes energy.",
        "A steady cadence on the climbs is easier on the knees than pushing a heavy gear.",
        "The village at the halfway point has a bakery that opens at seven and sells excellent bread.",
        "Strong headwinds are common in the afternoon, so many cyclists prefer to set out at dawn.",
        "Lights and a reflective vest are required by law when riding after sunset on country roads.",
        "The last section climbs gently through pine forest before dropping into the harbour town.",
        "Spare tubes, a small pump and a multi-tool fit easily into a saddle bag.",
    ],
    "cooking": [
        "Toast the spices in a dry pan until they smell fragrant, then grind them while still warm.",
        "A pinch of salt in the pasta water seasons the noodles from the inside as they cook.",
        "Let the dough rest for an hour so the gluten relaxes and the bread rises evenly.",
        "Onions cooked slowly over low heat turn sweet and golden after about forty minutes.",
        "Fresh herbs lose their colour quickly, so add them at the very end of cooking.",
        "The soup tastes even better on the second day, once the flavours have had time to blend.",
        "Resting a roast for ten minutes before carving keeps the juices in the meat.",
        "Lemon juice brightens a heavy sauce and balances the richness of butter and cream.",
    ],
    "astronomy": [
        "On clear winter nights the constellation Orion rises in the east soon after dark.",
        "A small pair of binoculars reveals the moons of Jupiter as tiny points of light in a line.",
        "Light pollution from cities hides all but the brightest stars from most people today.",
        "The Moon always shows the same face to the Earth because its rotation is locked to its orbit.",
        "Meteor showers happen when the Earth passes through the trail of dust left by a comet.",
        "Saturn's rings are made of countless pieces of ice, from grains of sand to blocks as large as houses.",
        "Observers let their eyes adapt to the dark for twenty minutes before looking for faint galaxies.",
        "The planet Venus is often called the evening star when it shines low in the west after sunset.",
    ],
}

MULTI = {
    "de": ["Der Zug nach Hamburg fährt jeden Morgen um acht Uhr vom Hauptbahnhof ab.",
           "Im Herbst färben sich die Blätter der Buchen im Wald gelb und rot.",
           "Die Bibliothek der Stadt bleibt am Sonntag geschlossen, öffnet aber am Montag früh.",
           "Viele Familien verbringen ihre Ferien an der Küste der Ostsee."],
    "fr": ["Le marché du samedi propose des fromages, du pain frais et des légumes de saison.",
           "La rivière traverse la vieille ville sous sept ponts de pierre.",
           "Après la pluie, l'air du jardin sent la terre mouillée et le café chaud.",
           "Les élèves préparent une pièce de théâtre pour la fête de l'école."],
    "es": ["El autobús hacia la playa sale cada media hora desde la plaza mayor.",
           "En verano las tardes son largas y la gente cena muy tarde en las terrazas.",
           "La abuela guarda las recetas de la familia en un cuaderno viejo.",
           "El museo ofrece visitas guiadas gratuitas los miércoles por la mañana."],
    "ru": ["Поезд до Москвы отправляется каждый вечер в девять часов.",
           "Зимой озеро замерзает, и дети катаются на коньках до самой темноты.",
           "В библиотеке можно взять книги на две недели бесплатно.",
           "Летом в парке играет оркестр по субботам."],
    "zh": ["每天早上，公园里有很多老人在打太极拳。", "这家小店的面条很好吃，价格也不贵。",
           "下雨的时候，街上的行人都撑着伞匆匆走过。", "图书馆周末开放到晚上九点。"],
    "ja": ["駅の前に新しいパン屋ができて、朝から行列ができています。", "秋になると山の木々が赤や黄色に色づきます。",
           "この町の祭りは毎年八月に行われます。", "雨の日は家で本を読むのが好きです。"],
    "ar": ["يفتح السوق القديم أبوابه كل صباح قبل شروق الشمس.", "يحب الأطفال اللعب في الحديقة بعد المدرسة.",
           "تقع المكتبة العامة بالقرب من محطة القطار.", "في الصيف يسافر كثير من الناس إلى البحر."],
    "hi": ["हर सुबह बाज़ार में ताज़ी सब्ज़ियाँ आती हैं।", "बारिश के मौसम में पहाड़ बहुत सुंदर लगते हैं।",
           "पुस्तकालय रविवार को बंद रहता है।", "बच्चे शाम को मैदान में क्रिकेट खेलते हैं।"],
}

BOILERPLATE = [
    "We use cookies to improve your experience. By continuing to browse you accept our cookie policy. "
    "Accept all | Reject | Settings",
    "Home | About us | Products | Contact | Login | Register | Privacy policy | Terms of use",
    "Subscribe to our newsletter! Enter your email address to receive weekly updates. Subscribe now.",
    "Copyright 2024. All rights reserved. Powered by an open source content management system.",
]

TABLE_MD = ("| Variety | Days to harvest | Yield per plant |\n|---|---|---|\n| Early Red | 55 | 3.1 kg |\n"
            "| Long Keeper | 78 | 4.4 kg |\n| Garden Gold | 64 | 3.8 kg |")


def _paragraph(rng: random.Random, sentences: list[str], k: int) -> str:
    return " ".join(rng.sample(sentences, k))


def _prose(rng: random.Random, topic: str, n_paras: int) -> str:
    return "\n\n".join(_paragraph(rng, TOPICS[topic], rng.randint(3, 5)) for _ in range(n_paras))


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def web_en(rng: random.Random) -> bytes:
    docs: list[bytes] = []

    def add(text: str, **extra) -> None:
        docs.append(_line({"id": f"en-{len(docs):04d}", "url": f"https://example.org/{len(docs)}", "text": text, **extra}))

    topics = sorted(TOPICS)
    for i in range(36):  # ordinary prose, one to four paragraphs
        add(_prose(rng, topics[i % len(topics)], rng.randint(1, 4)))
    base = _prose(rng, "cycling", 3)
    add(base)
    add(base)  # exact duplicate
    add(base)  # and a third copy
    near = _prose(rng, "gardening", 4)
    add(near)
    add(near.replace("summer", "warm season", 1) + " Thanks for reading.")  # near duplicate
    add(near.replace("Most gardeners", "Many gardeners", 1))  # another near duplicate
    for b in BOILERPLATE:
        add(b)
    add(_prose(rng, "cooking", 2) + "\n\n" + BOILERPLATE[0])  # prose with a cookie banner
    add("ok")  # very short
    add("Yes.")
    add("\n\n".join(_prose(rng, t, 8) for t in topics * 6))  # very long (about 60 KB)
    # Tables and figures: cited with the table present, and cited with the table missing.
    add("Table 1 compares three tomato varieties grown in the same raised bed.\n\n" + TABLE_MD
        + "\n\nAs Table 1 shows, Long Keeper gives the largest yield but takes the longest to ripen.")
    add("The harvest dates are listed in Table 2, and Figure 3 shows the rainfall in each week. "
        + _prose(rng, "gardening", 1) + " See Table 2 for the full results.")
    add("Figure 1 shows the route profile, with the long climb after the village. " + _prose(rng, "cycling", 1))
    add("The star counts per night are summarised in the table below.\n\n" + _prose(rng, "astronomy", 1))
    # Malformed or bad records (their ids are never used).
    docs.append(b'{"id": "bad-1", "text": "This line was cut off in the midd')
    docs.append(_line({"id": "bad-2", "text": None}))
    docs.append(_line({"id": "bad-3", "text": 5}))
    docs.append(_line({"id": "bad-4", "body": "The text is under the wrong key."}))
    docs.append(_line({"id": "bad-5", "text": "\u200b\u200b \ufeff"}))  # nothing left after normalisation
    docs.append(b'["a JSON list", "not an object"]')
    docs.append(b'{"id": "en-bytes", "text": "Invalid bytes \xff\xfe in the middle of a sentence about bread."}')
    docs.append(b'{"id": "en-surrogate", "text": "A lone high surrogate \\ud83d here, and a pair \\ud83d\\ude00 there."}')
    docs.insert(20, b"")  # a blank line in the middle: skipped, counted
    return _gz(b"\n".join(docs) + b"\n")


def web_multi(rng: random.Random) -> bytes:
    lines = []
    for i, lang in enumerate(sorted(MULTI) * 3):
        text = "\n".join(rng.sample(MULTI[lang], 3))
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


def wet(rng: random.Random) -> bytes:
    def rid() -> str:
        return f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}>"

    info = b"software: winnow sample_data/generate.py\r\nformat: WARC File Format 1.0\r\n"
    out = [_wet_record([("WARC-Type", "warcinfo"), ("WARC-Date", "2024-01-01T00:00:00Z"),
                        ("WARC-Filename", "crawl-00000.warc.wet.gz"), ("WARC-Record-ID", rid()),
                        ("Content-Type", "application/warc-fields")], info)]
    langs = sorted(MULTI)
    for i in range(12):
        if i % 2:
            text = _prose(rng, sorted(TOPICS)[i % 4], 2)
        else:
            text = "\n".join(rng.sample(MULTI[langs[i % len(langs)]], 3))  # multibyte UTF-8
        payload = text.encode("utf-8")
        out.append(_wet_record([
            ("WARC-Type", "conversion"), ("WARC-Target-URI", f"https://crawl.example/{i}"),
            ("WARC-Date", f"2024-01-01T00:{i:02d}:00Z"), ("WARC-Record-ID", rid()), ("WARC-Refers-To", rid()),
            ("WARC-Block-Digest", "sha1:" + hashlib.sha1(payload).hexdigest()), ("Content-Type", "text/plain"),
        ], payload))
    return b"".join(out)


def generate(out: Path, seed: int = 7) -> dict[str, str]:
    """Write the sample files into ``out``; returns file name -> sha256 of its bytes."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    files = {"web_en-00000.jsonl.gz": web_en(rng), "web_multi-00001.jsonl.gz": web_multi(rng),
             "crawl-00000.warc.wet.gz": wet(rng)}
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
