"""Language ID before and after ``lang`` agrees with its shares (:func:`udfs.langid.agree_with_shares`).

``python -m bench.langid_shares`` prints, as JSON: per-language accuracy on the shared lingua sentences
(75 languages, 500 a language) and whatlang paragraphs, before (the sample's top language) and after
(the language with the largest share of the prose); and on the shared Common Crawl documents, the pages
whose largest share is English that the sample labels as another language (removed as that language
under ``filter.langid.allowed: [en]`` before) and what becomes of them.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.references import SHARED


def _both(texts: list[str]) -> tuple[list[str], list[str], list[float], list[list[dict]]]:
    """Sample top language (before), agreed language (after), its score, and the shares of each text."""
    from pipelines.filter.config import LangIdConfig
    from udfs import langid

    c = LangIdConfig()
    model = langid.load_model(langid.default_model_path())
    arr = pa.array(texts, pa.string())
    args = (c.max_chars, c.sample_windows, c.topk_max_chars, c.top_k)
    before = langid.identify(model, arr, *args, agree=False)[0].to_pylist()
    after, score, topk = langid.identify(model, arr, *args)
    return before, after.to_pylist(), score.to_pylist(), topk.to_pylist()


def _accuracy(gold: list[str], before: list[str], after: list[str]) -> dict[str, Any]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for g, b, a in zip(gold, before, after, strict=True):
        per[g][0] += 1
        per[g][1] += b == g
        per[g][2] += a == g
    changed = {g: {"n": n, "before": round(b / n, 4), "after": round(a / n, 4)}
               for g, (n, b, a) in sorted(per.items()) if b != a}
    n = len(gold)
    return {"n": n, "before": round(sum(v[1] for v in per.values()) / n, 4),
            "after": round(sum(v[2] for v in per.values()) / n, 4), "languages_changed": changed}


def run(shared: Path = SHARED) -> dict[str, Any]:
    """The figures described in the module docstring."""
    ml = shared / "multilingual_langid"
    with gzip.open(ml / "lingua_sentences_75langs_part_a.tsv.gz", "rt", encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t", 1) for line in fh if "\t" in line]
    out: dict[str, Any] = {}
    b, a, _, _ = _both([t for _, t in rows])
    out["lingua_sentences"] = _accuracy([g for g, _ in rows], b, a)
    from udfs.langid import canonical_code

    with open(ml / "whatlang_examples.json", encoding="utf-8") as fh:
        wl = json.load(fh)
    gold = [canonical_code("__label__" + k) for k in wl]
    b, a, _, _ = _both(list(wl.values()))
    out["whatlang_paragraphs"] = _accuracy(gold, b, a)
    texts = []
    for f in sorted((shared / "web_crawl").glob("*.jsonl*")):
        with (gzip.open(f, "rt", encoding="utf-8") if f.suffix == ".gz" else open(f, encoding="utf-8")) as fh:
            texts += [json.loads(line)["text"] for line in fh if line.strip()]
    b, a, score, topk = _both(texts)
    pages = [{"before": bb, "after": aa, "score": round(s, 3), "en_share": round(t[0]["score"], 3)}
             for bb, aa, s, t in zip(b, a, score, topk, strict=True) if t and t[0]["lang"] == "en" and bb != "en"]
    out["web_crawl_english_majority_labelled_other"] = {
        "n": len(pages), "lang_en_after": sum(p["after"] == "en" for p in pages),
        "kept_by_lang_score_0.65_after": sum(p["after"] == "en" and p["score"] >= 0.65 for p in pages), "pages": pages}
    out["web_crawl_lang_changed"] = sum(bb != aa for bb, aa in zip(b, a, strict=True))
    return out


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]) if len(sys.argv) > 1 else SHARED), indent=1, sort_keys=True))
