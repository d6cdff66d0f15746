"""The ``auto`` profile choice measured: agreement with the profile a person gives each document, and
what ``auto`` as the default keeps of the shared scientific and Wikipedia samples.

``python -m bench.auto_profile`` prints the figures as JSON; :func:`run` returns them.

How the person's profile was judged: by the form of the text, the profile whose rules were written for
it: raw MediaWiki markup -> ``wiki``; a research paper or thesis (LaTeX source, a converted paper, a
publisher's page holding the paper's sections and citations) -> ``science``; source code or an API
listing -> ``code``; a book-length narrative in chapters -> ``books``; anything else, Wikipedia as
extracted from HTML by a crawler included (it reads as a web page) -> ``web``. Every document of the
shared scientific set is a paper and of the Wikipedia set raw wikitext; the Common Crawl, DCLM and
multilingual documents are ``web`` except those listed in :data:`WEB_CRAWL_JUDGED` (each read whole);
:func:`invented` documents carry the kind they were written as.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.references import SHARED

WEB_CRAWL_JUDGED: dict[str, str] = {
    # a MediaWiki diff page: the article's raw wikitext, side by side
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:44": "wiki",
    # a MediaWiki template's documentation page, made of wikitext examples
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:310": "wiki",
    # journal articles on publishers' pages (a Chinese engineering journal, IJDDR, two BMC articles):
    # abstract, sections, citations, figure references
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:61": "science",
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:201": "science",
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:394": "science",
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:407": "science",
    # an Android API reference page: class and method signatures
    "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz:316": "code",
}
"""Documents of the shared web_crawl files a person gives another profile than ``web`` (file:line)."""

_NOUNS = ("river", "village", "engine", "garden", "market", "teacher", "bridge", "harbour", "library", "orchard",
          "council", "festival", "railway", "museum", "forest", "kitchen", "island", "factory", "choir", "letter")
_VERBS = ("visited", "described", "repaired", "opened", "studied", "painted", "crossed", "measured", "built",
          "followed", "remembered", "sold", "planted", "carried", "watched", "named")
_ADJS = ("old", "quiet", "busy", "narrow", "famous", "small", "distant", "green", "wooden", "northern", "new")


def _prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        a, b = rng.sample(_NOUNS, 2)
        out.append(f"The {rng.choice(_ADJS)} {a} {rng.choice(_VERBS)} the {rng.choice(_ADJS)} {b} "
                   f"because the {rng.choice(_NOUNS)} was {rng.choice(_ADJS)} that {rng.choice(('year', 'week', 'day'))}.")
    return " ".join(out)


def _paras(rng: random.Random, n: int, sentences: int = 6) -> list[str]:
    return [_prose(rng, sentences) for _ in range(n)]


def invented(seed: int = 0) -> list[tuple[str, str, str]]:
    """Invented documents of every kind: ``(id, profile a person gives it, text)``."""
    rng = random.Random(seed)
    p = lambda n=1, s=6: "\n\n".join(_paras(rng, n, s))  # noqa: E731
    docs = [
        ("wiki_article", "wiki", "{{Infobox settlement\n| name = Example Town\n| population = 12,000\n}}\n"
         f"'''Example Town''' is a town in [[Northshire]].{p()}\n\n== History ==\n{p()} It was founded by "
         f"[[John Example]].<ref>{{{{cite book|title=Towns}}}}</ref>\n\n== Geography ==\n{p()}\n\n"
         "== References ==\n{{Reflist}}\n[[Category:Towns]]"),
        ("wiki_stub", "wiki", f"'''Fenwick Mill''' was a [[watermill]] on the [[River Lune]]. {p(1, 3)}\n\n"
         "== See also ==\n* [[List of mills]]\n\n{{mill-stub}}"),
        ("wiki_redirect", "wiki", "#REDIRECT [[Example Town]]"),
        ("wiki_list", "wiki", "{{Use dmy dates}}\n'''List of bridges''' over the [[River Lune]].\n\n"
         + "\n".join(f"* [[{n.title()} Bridge]] ({1800 + i})" for i, n in enumerate(_NOUNS)) + "\n\n== Notes ==\n<references/>"),
        ("science_latex", "science", "\\documentclass{article}\n\\usepackage{amsmath}\n\\begin{document}\n"
         f"\\section{{Introduction}}\n{p()} as shown by \\cite{{smith20}}.\n\\section{{Method}}\\label{{sec:m}}\n"
         f"{p()} We minimise $E = \\frac{{1}}{{2}} m v^2$, see Section~\\ref{{sec:m}}.\n"
         "\\begin{equation}\nE = mc^2\n\\end{equation}\n\\bibliography{refs}\n\\end{document}"),
        ("science_plain", "science", f"Abstract\n\n{p(1, 4)}\n\n1 Introduction\n\n{p()} [1, 2]. Earlier work [3] "
         f"measured the same effect (Smith et al., 2019).\n\n2 Methods\n\n{p()} as in Fig. 1 and Table 2 [4].\n\n"
         f"3 Results\n\n{p()} Table 3 lists the values [5-7].\n\n4 Discussion\n\n{p()} [8].\n\nReferences\n\n"
         "[1] A. Smith. Rivers. 2019.\n[2] B. Jones. Towns. 2020."),
        ("science_markers", "science", f"Introduction\n\n{p()} {{{{cite:0a1b}}}} and {{{{cite:2c3d}}}}. The energy "
         f"{{{{formula:9f8e}}}} grows.\n\nResults\n\n{p()} as Figure REF shows {{{{cite:4e5f}}}}. "
         f"{{{{figure:7a7a}}}}\n\nConclusion\n\n{p(1, 4)} {{{{cite:0a1b}}}}."),
        ("science_math", "science", f"1 Introduction\n\n{p()} following Brown et al. [2].\n\n2 Preliminaries\n\n"
         f"{p()} Definition 2.1 fixes the notation.\n\nTheorem 1 holds for every $x \\in X$.\n\n3 Main result\n\n"
         f"{p()} Lemma 3.2 and Eq. 4 give the bound [5].\n\n4 Proofs\n\n{p()}\n\n5 Conclusion\n\n{p(1, 3)}"),
        ("science_review_response", "science", f"Response to Reviewers\n\nReviewer 1\n\n{p(1, 3)}\n\nResponse:\n\n"
         f"{p(1, 3)} We moved the proof to Section 3.2 of the revised manuscript, as in Table 2 [4].\n\n"
         f"Reviewer 2\n\n{p(1, 3)} Eq. 5 is unclear.\n\nResponse:\n\n{p(1, 3)} Figure 3 now shows it [7]."),
        ("code_python", "code", "import os\nimport sys\n\n\ndef mean(values):\n    \"\"\"Average.\"\"\"\n"
         "    return sum(values) / len(values)\n\n\nclass Store:\n    def __init__(self, path):\n        self.path = path\n\n"
         "    def read(self):\n        with open(self.path) as fh:\n            return fh.read()\n\n\n"
         "if __name__ == \"__main__\":\n    print(mean([1, 2, 3]))\n"),
        ("code_c", "code", "#include <stdio.h>\n#include <stdlib.h>\n\n/* sum of an array */\nint sum(int *a, int n) {\n"
         "    int s = 0;\n    for (int i = 0; i < n; i++) {\n        s += a[i];\n    }\n    return s;\n}\n\n"
         "int main(void) {\n    int a[3] = {1, 2, 3};\n    printf(\"%d\\n\", sum(a, 3));\n    return 0;\n}\n"),
        ("code_js", "code", "const express = require('express');\nconst app = express();\n\n"
         "function handler(req, res) {\n  res.send('ok');\n}\n\napp.get('/', handler);\n"
         "app.listen(3000, () => {\n  console.log('listening');\n});\n"),
        ("code_readme", "code", "# tool\n\nInstall it:\n\n```bash\npip install tool\ntool --init\n```\n\nUse it:\n\n"
         "```python\nfrom tool import run\nresult = run(\"input.txt\", workers=4)\nfor row in result:\n"
         "    print(row.name, row.size)\nresult.save(\"out.json\")\n```\n"),
        ("books_novel", "books", "\n\n".join(f"Chapter {i}\n\n" + p(12, 8) for i in range(1, 7))),
        ("books_roman", "books", "\n\n".join(f"CHAPTER {r}\n\n" + p(12, 8) for r in ("I", "II", "III", "IV", "V"))),
        ("web_news", "web", f"Council approves new bridge\n\nPosted 3 May 2024\n\n{p(3)}\n\nShare this article"),
        ("web_recipe", "web", "Apple cake\n\nIngredients\n\n- 3 apples\n- 200 g flour\n- 2 eggs\n\nMethod\n\n"
         f"{p(2, 4)}\n\nServes 6. Prep time 20 minutes."),
        ("web_forum", "web", f"Re: which train to take?\n\n{p(1, 3)}\n\nQuote from harbourfan: {p(1, 2)}\n\n"
         f"{p(1, 3)}\n\nReply | Report"),
        ("web_legal", "web", "Terms of use\n\nThe user shall:\n" + "\n".join(
            f"{i}) keep the {n} in good order (see section {i});" for i, n in enumerate(_NOUNS[:8], 1)) + f"\n\n{p(2)}"),
        ("web_blog_snippet", "web", f"How I back up my photos\n\n{p(3)}\n\nThe command I use:\n\n"
         f"```\nrsync -a photos/ backup/\n```\n\n{p(2)}"),
        ("web_wikipedia_extracted", "web", "Example Town\n\nFrom Wikipedia, the free encyclopedia\nJump to navigation "
         f"Jump to search\n\n{p()}[1] {p()}[2]\n\nHistory\n\n{p()}[3]\n\nReferences\n\n1. ^ Towns of the North.\n"),
        ("web_science_news", "web", f"Rivers are getting warmer, study finds\n\n{p(2)} The team, led by Smith et al., "
         f"published the results in a journal. {p(2)} Figure 1 in the paper shows the trend."),
        ("web_product", "web", "Wooden garden bench\n\n$129.00\n\nAdd to cart\n\nDescription\n\n"
         f"{p(1, 4)}\n\nDimensions: 120 x 45 x 80 cm\nWeight: 14 kg\n\nReviews (3)"),
        ("web_multilingual", "web", "Le petit village au bord de la rivière accueille chaque été un festival de "
         "musique. Les habitants préparent des repas pour les visiteurs venus de loin. " * 3),
    ]
    return docs


def _web_crawl(shared: Path) -> dict[str, str]:
    out = {}
    for f in sorted((shared / "web_crawl").glob("*.jsonl*")):
        with (gzip.open(f, "rt", encoding="utf-8") if f.suffix == ".gz" else open(f, encoding="utf-8")) as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    out[f"{f.name}:{i}"] = json.loads(line)["text"]
    return out


def labelled(shared: Path = SHARED) -> dict[str, list[tuple[str, str, str]]]:
    """Per data set, ``(id, person's profile, text)`` (see the module docstring for how it was judged)."""
    from bench import filter_profiles as fp

    with open(shared / "multilingual_langid" / "whatlang_examples.json", encoding="utf-8") as fh:
        whatlang = json.load(fh)
    return {
        "scientific": [(k, "science", t) for k, t in fp.science_docs(shared).items()],
        "wikipedia": [(k, "wiki", t) for k, t in fp.wiki_docs(shared).items()],
        "web_crawl": [(k, WEB_CRAWL_JUDGED.get(k, "web"), t) for k, t in _web_crawl(shared).items()],
        "multilingual": [(k, "web", t) for k, t in sorted(whatlang.items())],
        "invented": invented(),
    }


def judge_auto(texts: list[str]) -> tuple[list[str], list[list[str]]]:
    """The profile ``auto`` picks for each text and its drop reasons under that profile."""
    from bench import filter_profiles as fp
    from udfs.quality.profile import auto_profile

    picks = auto_profile(pa.array(texts, pa.string())).to_pylist()
    reasons: list[list[str]] = [[] for _ in texts]
    for name in dict.fromkeys(picks):
        idx = [i for i, p in enumerate(picks) if p == name]
        for i, r in zip(idx, fp.judge([texts[i] for i in idx], name), strict=True):
            reasons[i] = r
    return picks, reasons


def run(shared: Path = SHARED) -> dict[str, Any]:
    """Agreement with the person's profile per data set (and the disagreements), and documents kept by
    ``auto`` against their own profile on the scientific and Wikipedia samples."""
    from bench import filter_profiles as fp
    from udfs.quality.profile import auto_profile

    out: dict[str, Any] = {}
    total = agree = 0
    for name, docs in labelled(shared).items():
        picks = auto_profile(pa.array([t for *_, t in docs], pa.string())).to_pylist()
        wrong = {i: f"{want} -> {got}" for (i, want, _), got in zip(docs, picks, strict=True) if want != got}
        out[f"agreement.{name}"] = {"n": len(docs), "agree": len(docs) - len(wrong), "disagree": wrong}
        total, agree = total + len(docs), agree + len(docs) - len(wrong)
    out["agreement.all"] = {"n": total, "agree": agree, "share": round(agree / total, 4)}
    for name, docs, own in (("scientific", fp.science_docs(shared), "science"),
                            ("wikipedia", fp.wiki_docs(shared), "wiki")):
        ids, texts = list(docs), list(docs.values())
        mine = fp.judge(texts, own)
        picks, auto = judge_auto(texts)
        out[f"kept.{name}"] = {"n": len(ids), own: sum(1 for r in mine if not r), "auto": sum(1 for r in auto if not r),
                               "differ": {i: {"auto": p, own: m, "auto_reasons": a}
                                          for i, p, m, a in zip(ids, picks, mine, auto, strict=True)
                                          if bool(m) != bool(a)}}
    return out


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]) if len(sys.argv) > 1 else SHARED), indent=1, sort_keys=True))
