"""MediaWiki ingest: holes left where templates were, and speed, on the shared Wikipedia sample.

Data: ``$WINNOW_SHARED_DATA/wikipedia/wtf_wikipedia_wikitext_pages.jsonl`` (71 pages of raw wikitext,
field ``wikitext``), written into a MediaWiki XML dump (``<mediawiki>``, one ``<page>`` each, the
article namespace) and read through :func:`udfs.formats.explode_file`, the reader the ingest stage
runs on every split: what the MediaWiki reader does to a real dump.

Two readers of the same pages:

* ``winnow``: :func:`udfs.formats.mediawiki.wikitext_to_document` (templates that carry text rendered,
  holes repaired; the fast reader, mwparserfromhell for the pages it leaves);
* ``strip_code``: the reference, mwparserfromhell's ``strip_code`` after removing ``<ref>``, tables,
  File and Category links, as a plain mwparserfromhell reader does (templates removed with their
  values).

Holes, per 100 articles (regular expressions over the text; both readers measured the same way):

* ``empty_parens``: ``()`` with only spaces, commas or semicolons inside (``()``, ``( , )``, ``(;)``);
* ``paren_separator``: ``(`` followed by ``;`` or ``,`` (``(; born 1941``, ``(, also``);
* ``space_before_comma``: a space before a comma (``Theory , Continuum``);
* ``missing_value``: a word that a value must follow (of, at, approximately, covering, measuring,
  nearly, reaching) directly before ``,`` ``.`` ``;`` ``)`` (``At , Alabama``, ``an area of , all``,
  ``covering .``): a removed value, whether or not the punctuation around it was repaired.

Speed: MB of wikitext (UTF-8, SI) per CPU-second of this process for the kernel (wikitext to text) and
for ``explode_file`` on the dump (XML parse, kernel, normalisation, Arrow batches), best of
``repeat`` runs. ``python -m bench.mediawiki [repeat]``; ``python -m bench.mediawiki --dump PATH N``
writes the dump with the pages repeated ``N`` times (for ``bench/ingest_scale.py``, end to end on Spark).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bench.common import MB
from udfs.formats import ParseOptions, explode_file
from udfs.formats.mediawiki import wikitext_to_document
from udfs.formats.wikirepair import UNCLOSED_KINDS

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data"))
SAMPLE = SHARED / "wikipedia" / "wtf_wikipedia_wikitext_pages.jsonl"

HOLES = {
    "empty_parens": re.compile(r"\((?:\s|[,;])*\)"),
    "paren_separator": re.compile(r"\(\s*[;,]"),
    "space_before_comma": re.compile(r"(?<=\S) ,"),
    "missing_value": re.compile(r"\b(?:of|at|approximately|covering|measuring|nearly|reaching)\s?[,.;)]", re.I),
}


def load_pages(path: Path = SAMPLE) -> list[tuple[str, str]]:
    """``(title, wikitext)`` of each page of the sample (redirect pages included; the reader skips them)."""
    with open(path, encoding="utf-8") as fh:
        return [(r["id"], r["wikitext"]) for r in map(json.loads, fh)]


def dump_xml(pages: list[tuple[str, str]], repeat: int = 1) -> bytes:
    """A MediaWiki export of ``pages`` (repeated ``repeat`` times, titles numbered), UTF-8 bytes."""
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="en"><siteinfo>'
           "<base>https://en.example.org/wiki/Main_Page</base></siteinfo>"]
    n = 0
    for r in range(repeat):
        for title, text in pages:
            n += 1
            t = title if r == 0 else f"{title} {r}"
            out.append(f"<page><title>{escape(t)}</title><ns>0</ns><id>{n}</id><revision><id>{n}</id>"
                       f'<text xml:space="preserve">{escape(text)}</text></revision></page>\n')
    out.append("</mediawiki>\n")
    return "".join(out).encode("utf-8")


def strip_code_reference(source: str) -> str:
    """The reference reader: mwparserfromhell's ``strip_code`` after removing references, tables and
    File/Category links (templates removed with their values)."""
    import mwparserfromhell as mw

    code = mw.parse(source)
    for link in code.filter_wikilinks():
        title = str(link.title)
        if ":" in title and title.split(":", 1)[0].strip().lower() in ("file", "image", "category", "media"):
            _remove(code, link)
    for tag in code.filter_tags():
        if str(tag.tag).lower() in ("ref", "references"):
            _remove(code, tag)
    for tag in code.filter_tags(recursive=False, matches=lambda n: str(n.tag).lower() == "table"):
        _remove(code, tag)
    for h in code.filter_headings():
        code.replace(h, f"\n\n{h.title.strip_code().strip()}\n\n")
    text = code.strip_code(normalize=True, collapse=True)
    text = "\n".join(re.sub(r"[ \t]{2,}", " ", line).strip() for line in text.split("\n"))
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).strip()


def _remove(code: Any, node: Any) -> None:
    try:
        code.remove(node)
    except ValueError:  # inside a node removed already
        pass


def holes(texts: list[str], examples: int = 3) -> dict[str, Any]:
    """Hole counts per 100 texts by kind (:data:`HOLES`), with up to ``examples`` excerpts each."""
    res: dict[str, Any] = {}
    for kind, pat in HOLES.items():
        found = [(t, m) for t in texts for m in pat.finditer(t)]
        res[kind] = round(100 * len(found) / max(len(texts), 1), 1)
        res[f"{kind}_examples"] = [t[max(0, m.start() - 40) : m.end() + 25].replace("\n", " ")
                                   for t, m in found[:examples]]
    return res


def _cpu(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def run(n_docs: int = 0, seed: int = 0, repeat: int = 3) -> dict[str, Any]:
    """Holes and speed of both readers on the sample (``n_docs``, ``seed``: unused, the harness's
    signature).

    Returns:
        ``{"pages", "mb", "holes": {reader: ...}, "speed": {...}, "templates": {...}, "goals": {...}}``.
    """
    if not SAMPLE.exists():
        return {"skipped": f"{SAMPLE} not found"}
    pages = load_pages()
    articles = [(t, s) for t, s in pages if not s.lstrip().lower().startswith("#redirect")]
    mb = sum(len(s.encode("utf-8")) for _, s in articles) / MB
    opts = ParseOptions()
    docs = [wikitext_to_document(s, opts) for _, s in articles]
    ref = [strip_code_reference(s) for _, s in articles]
    kernel_s = _cpu(lambda: [wikitext_to_document(s, opts) for _, s in articles], repeat)
    ref_s = _cpu(lambda: [strip_code_reference(s) for _, s in articles], 1)
    dump = dump_xml(pages)
    explode_s = _cpu(lambda: list(explode_file("sample-pages-articles.xml", dump, opts)), repeat)
    rendered = sum(d[2][0] for d in docs)
    dropped = sum(d[2][1] for d in docs)
    repaired = Counter({k: 0 for k in (*(f"unclosed_{u}" for u in UNCLOSED_KINDS), "invalid_date")})
    for d in docs:
        repaired.update(d[3])
    return {
        "pages": len(articles), "mb": round(mb, 3),
        "holes": {"winnow": holes([d[0] for d in docs]), "strip_code": holes(ref)},
        "templates": {"rendered": rendered, "dropped": dropped,
                      "rendered_per_article": round(rendered / len(articles), 1)},
        "markup_repaired": dict(repaired),
        "speed": {
            "kernel_mb_per_cpu_s": round(mb / kernel_s, 2),
            "strip_code_mb_per_cpu_s": round(mb / ref_s, 2),
            "explode_file_mb_per_cpu_s": round(len(dump) / MB / explode_s, 2),
            "kernel_vs_strip_code": round(ref_s / kernel_s, 1),
        },
        "goals": {"mediawiki_kernel_mb_per_cpu_s": round(mb / kernel_s, 2)},
    }


def main(argv: list[str]) -> None:
    """``[repeat]``: print :func:`run`'s figures; ``--dump PATH N``: write the repeated dump."""
    if argv[:1] == ["--dump"]:
        Path(argv[1]).write_bytes(dump_xml(load_pages(), int(argv[2])))
        return
    print(json.dumps(run(repeat=int(argv[0]) if argv else 3), indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
