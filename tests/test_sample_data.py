"""sample_data/generate.py: deterministic, committed files up to date, and the prose passes the filter (no Spark)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "sample_data"))
import check  # noqa: E402
import generate  # noqa: E402


def test_generator_is_deterministic_and_the_committed_files_are_its_output(tmp_path):
    digests = generate.generate(tmp_path / "a")
    assert generate.generate(tmp_path / "b") == digests
    for name in generate.EXPECTED:
        assert (tmp_path / "a" / name).read_bytes() == (REPO / "sample_data" / name).read_bytes(), (
            f"sample_data/{name} is stale: run python sample_data/generate.py")


def test_every_prose_document_passes_the_filter_and_each_deliberate_case_fails_as_meant():
    cases = generate.english_cases(random.Random(7))
    got = dict.fromkeys(c for c, _ in cases)
    texts = [t for _, t in cases]
    for (case, _), reasons in zip(cases, check.reasons(texts), strict=True):
        got[case] = (got[case] or set()) | {frozenset(reasons)}
    # table_present (a markdown pipe table) is dropped since the filter's spaCy-like word split counts each
    # `|` as a non-alphabetic word (gopher_quality.alpha_words), as datatrove does.
    kept = {"prose", "prose_pii", "prose_shared", "exact_dup", "near_dup", "prose_with_banner", "very_long", "table_stripped",
            "figure_missing", "eos_literal"}
    assert {c for c, r in got.items() if r == {frozenset()}} == kept
    assert got["lorem_ipsum"] == {frozenset({"c4.lorem_ipsum"})}
    assert "gopher_repetition.dup_line_frac" in next(iter(got["shop_page"]))
    assert "gopher_quality.symbol_word_ratio" in next(iter(got["hashtags"]))
    assert all("gopher_quality.word_count" in r for r in got["boilerplate"] | got["very_short"])
    assert sum(len(t.split()) for c, t in cases if c in ("prose", "prose_shared")) > 80_000
    assert min(len(t.split()) for c, t in cases if c == "prose") >= 80


def test_near_duplicates_are_near_and_other_languages_are_labelled():
    cases = generate.english_cases(random.Random(7))
    near = [t for c, t in cases if c == "near_dup"]
    assert [check.jaccard(near[0], t) >= 0.85 for t in near[1:]] == [True, True]
    rng = random.Random(1)
    texts = {lang: generate.multi_text(rng, lang) for lang in ("de", "es", "fr", "ja")}
    assert all(r == ["lang.allowed"] for lang, r in zip(texts, check.reasons(list(texts.values())), strict=True)
               if lang != "ja")
    import pyarrow as pa

    from udfs import langid
    model = langid.load_model(langid.default_model_path())
    lang, score, _ = langid.predict(model, langid.preprocess(pa.array(list(texts.values())), 1000))
    assert lang.to_pylist() == ["de", "es", "fr", "ja"]
    assert min(score.to_pylist()) >= 0.65
