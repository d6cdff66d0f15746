"""Structured scientific records read flat and resolved: converter markers kept, dangling references.

Reads the real unarXive sample (``$WINNOW_SHARED_DATA/scientific/unarxive_*.jsonl.gz``) twice through the
ingest reader (:func:`udfs.formats.explode_file`, no Spark):

* ``flat``: ``ingest.fields.text: body_text[].text`` with ``heading: body_text[].section`` and
  ``record_format: flat`` (paragraphs and section titles as the record holds them);
* ``resolved``: the defaults (``record_format: auto``, :mod:`udfs.formats.scirecords`).

For each: the share of the documents' characters that are ``{{kind:id}}`` converter markers, and the
refs stage's detector (:func:`udfs.refs.refs_signals`, English vocabulary) on the texts: mentions and
dangling mentions by kind, and per paper the dangling labels of the kinds asked for (``--paper``).

Run: ``python -m bench.scirecords [--paper 2212.11791]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from udfs.formats import ParseOptions, explode_file
from udfs.refs import refs_signals

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data")) / "scientific"
MARKER = re.compile(r"\{\{\w+:[^{}\s]*\}\}")
VIEWS = {
    "flat": ParseOptions(text_field="body_text[].text", heading_field="body_text[].section", id_field="paper_id",
                         record_format="flat"),
    "resolved": ParseOptions(id_field="paper_id"),
}


def documents(path: Path, opts: ParseOptions) -> tuple[list[dict], float]:
    """The document rows ingest's reader gives for ``path`` and the seconds it took."""
    t0 = time.perf_counter()
    rows = [r for b in explode_file(str(path), path.read_bytes(), opts) for r in b.to_pylist()]
    return [r for r in rows if r["kind"] == "doc"], time.perf_counter() - t0


def measure(path: Path, papers: list[str]) -> dict:
    """Per view: documents, characters, marker share, mentions and dangling mentions by kind, the
    dangling mentions of ``papers`` and the reading time."""
    out = {}
    for name, opts in VIEWS.items():
        docs, secs = documents(path, opts)
        texts = [d["text"] for d in docs]
        chars = sum(len(t) for t in texts)
        markers = sum(len(m) for t in texts for m in MARKER.findall(t))
        sig = refs_signals(pa.array(texts, pa.string())).to_pylist()
        mentions: Counter = Counter()
        dangling: Counter = Counter()
        per_paper = {}
        for d, s in zip(docs, sig, strict=True):
            mentions.update(s["mentions_by_kind"] and dict(s["mentions_by_kind"]))
            dangling.update(s["dangling_by_kind"] and dict(s["dangling_by_kind"]))
            if d["src_id"] in papers:
                per_paper[d["src_id"]] = sorted(f"{m['kind']} {m['label']}" for m in s["ref_mentions"] if m["dangling"])
        out[name] = {"documents": len(docs), "chars": chars, "marker_chars": markers,
                     "marker_share": round(markers / max(chars, 1), 4), "mentions": dict(sorted(mentions.items())),
                     "dangling": dict(sorted(dangling.items())), "dangling_in": per_paper, "seconds": round(secs, 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper", action="append", default=["2212.11791"], help="paper ids whose dangling mentions to list")
    args = ap.parse_args()
    path = next(iter(sorted(SHARED.glob("unarxive_*.jsonl.gz"))))
    print(json.dumps({"file": path.name, **measure(path, args.paper)}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
