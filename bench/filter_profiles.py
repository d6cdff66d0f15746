"""Filter profiles on real text: what each profile keeps of the shared scientific, Wikipedia and DCLM sets.

``python -m bench.filter_profiles`` prints, per data set and profile, documents kept and every removal
with its reasons; :func:`run` returns the figures as a dict (``tests/test_filter_profiles_real.py``
asserts the goals of the filter profiles on them).

Data (``$WINNOW_SHARED_DATA``, see its README):

* scientific: the 25 unarXive papers (body text, float markers replaced by their caption, ``\\ref`` left
  as ``REF``) and the 6 PMC articles (JATS body and references as text), converted as
  :mod:`bench.refs` does (``kept`` view);
* wikipedia: the 71 raw wikitext pages as they are (templates, infoboxes and tables included);
* DCLM: 246 Common Crawl documents with a human quality label (1 good / 0 bad).

Decisions are taken by the filter's own rule rows (:data:`pipelines.filter.rules.RULES`) on the
signals :mod:`udfs.quality` and :mod:`udfs.langid` compute, with each profile's complete rule set
(:meth:`pipelines.filter.config.FilterConfig.profile_config`), outside Spark.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.references import SHARED
from pipelines.filter import rules as filter_rules
from pipelines.filter.config import FilterConfig


def science_docs(shared: Path = SHARED) -> dict[str, str]:
    """id -> text of every shared scientific paper (unarXive and PMC, ``kept`` view)."""
    from bench.refs import pmc_views, unarxive_views

    sci = shared / "scientific"
    out = {}
    for p in sorted(sci.glob("pmc_*.nxml")):
        out[p.stem] = pmc_views(p)["kept"]["text"]
    for f in sorted(sci.glob("unarxive_*.jsonl.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    v = unarxive_views(line)["kept"]
                    out[v["id"].split(":")[0]] = v["text"]
    return out


def wiki_docs(shared: Path = SHARED) -> dict[str, str]:
    """id -> raw wikitext of every shared Wikipedia page."""
    with open(shared / "wikipedia" / "wtf_wikipedia_wikitext_pages.jsonl", encoding="utf-8") as fh:
        return {d["id"]: d["wikitext"] for d in map(json.loads, fh)}


def dclm_docs(shared: Path = SHARED) -> list[dict]:
    """The DCLM human-labelled documents (``id``, ``label``, ``annotators_agreed``, ``text``)."""
    with open(shared / "web_crawl" / "dclm_human_quality_labels_A.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _fails(rule: filter_rules.Rule, value: Any, signal: Any) -> bool:
    if signal is None:
        return False
    if rule.compare == "min":
        return signal < value
    if rule.compare == "max":
        return signal > value
    if rule.compare == "in":
        return signal not in value
    return bool(signal)


def reasons(row: dict, cfg: FilterConfig) -> list[str]:
    """The ``drop`` reason ids of one document's signals under a complete rule set (rule order)."""
    section = cfg.model_dump()
    out: list[str] = []
    for rule in filter_rules.RULES:
        value = filter_rules.lookup(section, rule.key)
        if value is None or value is False or (rule.requires and not filter_rules.lookup(section, rule.requires)):
            continue
        sub = getattr(cfg, rule.section)
        action = getattr(sub, "rule_actions", {}).get(rule.name, sub.action)
        langs = getattr(sub, "rule_languages", {}).get(rule.name, getattr(sub, "languages", None))
        if action != "drop" or (langs is not None and row.get("lang") not in (None, *langs)):
            continue
        struct, _, field = rule.signal.partition(".")
        signal = row[struct][field] if field else row.get(struct)
        if _fails(rule, value, signal) and rule.reason not in out:
            out.append(rule.reason)
    return out


def judge(texts: list[str], profile: str, base: FilterConfig | None = None) -> list[list[str]]:
    """Drop reasons of each text under ``profile`` (line cleaning and LID as the stage does them)."""
    from udfs import langid, langid_prose, quality

    cfg = (base or FilterConfig()).profile_config(profile)
    c = cfg.c4
    opts = quality.C4Options(c.min_words_per_line, c.end_marks, c.page_checks, c.sentences_in)
    arr = pa.array(texts, pa.string())
    c4_page = None
    if c.clean_lines:
        page = quality.parse(arr)
        c4_page = quality.c4(page, opts).to_pylist()
        arr = quality.c4_clean(page, opts)[0]
    sig = quality.quality_signals(langid_prose.prose(arr) if cfg.signals_from == "prose" else arr,
                                  alpha_words_reading=cfg.gopher_quality.alpha_words_reading,
                                  c4_options=opts).to_pylist()
    if c4_page is not None:
        sig = [{**s, "c4": c} for s, c in zip(sig, c4_page, strict=True)]
    lid = cfg.langid
    model = langid.load_model(langid.default_model_path())
    lang, score, _ = langid.identify(model, arr, lid.max_chars, lid.sample_windows, lid.topk_max_chars, lid.top_k,
                                     confident=lid.confident_score)
    rows = [{**s, "lang": la, "lang_score": sc} for s, la, sc in zip(sig, lang.to_pylist(), score.to_pylist(), strict=True)]
    return [reasons(r, cfg) for r in rows]


def precision_recall(labels: list[int], kept: list[bool]) -> dict[str, float]:
    """Precision and recall of "kept" against label 1 (good)."""
    tp = sum(1 for y, k in zip(labels, kept, strict=True) if k and y == 1)
    return {"precision": round(tp / max(1, sum(kept)), 4), "recall": round(tp / max(1, sum(labels)), 4),
            "kept": sum(kept), "n": len(kept)}


def run(shared: Path = SHARED) -> dict:
    """Keep rates and removals per data set and profile; DCLM precision/recall under ``web``."""
    out: dict[str, Any] = {}
    for name, docs, profiles in (("scientific", science_docs(shared), ("web", "science")),
                                 ("wikipedia", wiki_docs(shared), ("web", "wiki"))):
        ids, texts = list(docs), list(docs.values())
        for profile in profiles:
            rs = judge(texts, profile)
            out[f"{name}.{profile}"] = {"n": len(ids), "kept": sum(1 for r in rs if not r),
                                        "removed": {i: r for i, r in zip(ids, rs, strict=True) if r}}
    dclm = dclm_docs(shared)
    labels = [d["label"] for d in dclm]
    texts = [d["text"] for d in dclm]
    for profile in ("web", "c4"):
        out[f"dclm.{profile}"] = precision_recall(labels, [not r for r in judge(texts, profile)])
    paper = FilterConfig(profiles={"web": {"gopher_quality": {"alpha_words_reading": "whitespace"}}})
    out["dclm.web_whitespace_words"] = precision_recall(labels, [not r for r in judge(texts, "web", paper)])
    return out


if __name__ == "__main__":
    res = run(Path(sys.argv[1]) if len(sys.argv) > 1 else SHARED)
    print(json.dumps(res, indent=1, sort_keys=True))
