"""Language ID with and without the confident-sample cascade (``filter.langid.confident_score``).

``python -m bench.langid_cascade [DEDUPED] [rows] [thresholds]`` prints, as JSON, per data set (the shared
web_crawl, wikipedia, scientific and multilingual_langid samples, and the first ``rows`` documents of the
Delta table ``DEDUPED`` when given): documents whose ``lang``, ``lang_score`` or ``lang_topk`` differ from
:func:`udfs.langid.identify` without the cascade, the share of documents the cascade reads once, and the
keep/drop decision of every document whose ``lang`` or ``lang_score`` differs (under the profile ``auto``
picks, :func:`bench.auto_profile.judge_auto`; a document whose ``lang`` and ``lang_score`` are equal is
decided alike, since no other signal changes). Each differing decision is listed with its reasons;
``first_lang_change`` is the highest threshold at which some ``lang`` would change (the largest sample
score of a several-slice document that its shares relabel). :func:`kernel_cpu` times ``identify`` alone.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.references import SHARED


def data_sets(shared: Path = SHARED, deduped: Path | None = None, rows: int = 20_000) -> dict[str, list[str]]:
    """Texts per data set (see the module docstring)."""
    from bench import auto_profile as ap
    from bench import filter_profiles as fp

    ml = shared / "multilingual_langid"
    with gzip.open(ml / "lingua_sentences_75langs_part_a.tsv.gz", "rt", encoding="utf-8") as fh:
        lingua = [line.rstrip("\n").split("\t", 1)[1] for line in fh if "\t" in line]
    with open(ml / "whatlang_examples.json", encoding="utf-8") as fh:
        whatlang = list(json.load(fh).values())
    out = {"web_crawl": list(ap._web_crawl(shared).values()), "wikipedia": list(fp.wiki_docs(shared).values()),
           "scientific": list(fp.science_docs(shared).values()), "lingua_sentences": lingua,
           "whatlang_paragraphs": whatlang}
    if deduped is not None:
        import pyarrow.parquet as pq

        from bench.common import delta_files

        texts: list[str] = []
        for f in delta_files(deduped):
            texts += pq.read_table(f, columns=["text"])["text"].to_pylist()
            if len(texts) >= rows:
                break
        out[f"deduped_first_{rows}"] = texts[:rows]
    return out


def compare(texts: list[str], threshold: float) -> dict[str, Any]:
    """Differences of the cascade at ``threshold`` against no cascade on ``texts``."""
    from bench.auto_profile import judge_auto
    from pipelines.filter.config import LangIdConfig
    from udfs import langid, langid_prose

    c = LangIdConfig()
    model = langid.load_model(langid.default_model_path())
    arr = pa.array(texts, pa.string())
    args = (c.max_chars, c.sample_windows, c.topk_max_chars, c.top_k)
    base = [a.to_pylist() for a in langid.identify(model, arr, *args)]
    got = [a.to_pylist() for a in langid.identify(model, arr, *args, confident=threshold)]
    sample_lang, sample_score = (a.to_pylist() for a in langid.identify(model, arr, *args, agree=False)[:2])
    pieces = langid_prose.spread_windows(langid_prose.prose(arr), c.max_chars, c.sample_windows)
    once = int(langid._confident(pa.array(sample_score, pa.float64()), threshold, pieces).sum())
    diff = {name: [i for i, (x, y) in enumerate(zip(b, g, strict=True)) if x != y]
            for name, b, g in zip(("lang", "lang_score", "lang_topk"), base, got, strict=True)}
    moved = sorted(set(diff["lang"]) | set(diff["lang_score"]))
    decisions = []
    if moved:
        sub = [texts[i] for i in moved]
        original = langid.identify

        def forced(confident: float | None):  # judge passes the config's value: replace it
            return lambda *a, **kw: original(*a, **{**kw, "confident": confident})
        try:
            langid.identify = forced(None)
            _, before = judge_auto(sub)
            langid.identify = forced(threshold)
            _, after = judge_auto(sub)
        finally:
            langid.identify = original
        decisions = [{"doc": i, "lang": [base[0][i], got[0][i]], "score": [round(base[1][i], 3), round(got[1][i], 3)],
                      "shares_before": [(s["lang"], round(s["score"], 2)) for s in base[2][i]],
                      "reasons": [b, a], "slices": len(pieces[i])}
                     for i, b, a in zip(moved, before, after, strict=True) if bool(b) != bool(a)]
    n = len(texts)
    # the cascade changes lang only where a sample of several slices is relabelled by its shares: the
    # highest such sample score is the threshold at and below which lang first changes
    relabelled = [s for s, a, b, p in zip(sample_score, base[0], sample_lang, pieces, strict=True) if a != b and len(p) > 1]
    return {"n": n, "read_once": round(once / n, 4), "first_lang_change": round(max(relabelled, default=0.0), 4), "lang_differs": len(diff["lang"]),
            "lang_score_differs": len(diff["lang_score"]), "lang_topk_differs": len(diff["lang_topk"]),
            "decided_alike": round(1 - len(decisions) / n, 5), "decisions_differ": decisions,
            "lang_changes": [{"doc": i, "lang": [base[0][i], got[0][i]], "score": [round(base[1][i], 3), round(got[1][i], 3)]}
                             for i in diff["lang"]][:40],
            "topk_changes": [{"doc": i, "before": [(s["lang"], round(s["score"], 2)) for s in base[2][i]],
                              "after": [(s["lang"], round(s["score"], 2)) for s in got[2][i]]}
                             for i in diff["lang_topk"]][:40]}


def kernel_cpu(texts: list[str], threshold: float | None, rounds: int = 3) -> float:
    """Least CPU-seconds of :func:`udfs.langid.identify` on ``texts`` over ``rounds`` calls (batches of 2,000)."""
    from pipelines.filter.config import LangIdConfig
    from udfs import langid

    c = LangIdConfig()
    model = langid.load_model(langid.default_model_path())
    arr = pa.array(texts, pa.string())
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for i in range(0, len(arr), 2000):
            langid.identify(model, arr.slice(i, 2000), c.max_chars, c.sample_windows, c.topk_max_chars, c.top_k,
                            confident=threshold)
        best = min(best, time.process_time() - t0)
    return best


def main(argv: list[str]) -> None:
    deduped = Path(argv[0]) if argv else None
    rows = int(argv[1]) if len(argv) > 1 else 20_000
    thresholds = [float(t) for t in argv[2].split(",")] if len(argv) > 2 else [0.9, 0.95]
    sets = data_sets(SHARED, deduped, rows)
    out: dict[str, Any] = {"utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    for t in thresholds:
        for name, texts in sets.items():
            out[f"{t}.{name}"] = compare(texts, t)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
