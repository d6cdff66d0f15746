"""What the filter makes of every sample document, without Spark: ``python sample_data/check.py [--seed 7]``.

Computes the heuristic signals with :func:`udfs.quality.quality_signals` and fastText LID with
:mod:`udfs.langid` on the texts :mod:`generate` writes, applies the default ``filter`` rules of
:class:`pipelines.filter.config.FilterConfig` (same thresholds and comparisons as ``pipelines/filter/stage.py``
``_rules``), and prints the reasons per case, the Jaccard similarity (word 5-grams) of the near
duplicates, and the number of English prose documents that fail any rule (0 expected).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import generate  # noqa: E402

from pipelines.filter.config import FilterConfig  # noqa: E402
from udfs import langid, quality  # noqa: E402


def reasons(texts: list[str], cfg: FilterConfig | None = None) -> list[list[str]]:
    """The failing ``drop`` rules of the filter for each text, as ``<family>.<rule>`` ids."""
    cfg = (cfg or FilterConfig()).profile_config("web")  # the profile auto picks for every sample_data document
    sig = quality.quality_signals(pa.array(texts, pa.string()),
                                  alpha_words_reading=cfg.gopher_quality.alpha_words_reading).to_pylist()
    model = langid.load_model(langid.default_model_path())
    lang, score, _ = langid.predict(model, langid.preprocess(pa.array(texts), cfg.langid.max_chars))
    g, r, c, w, lid = cfg.gopher_quality, cfg.gopher_repetition, cfg.c4, cfg.fineweb, cfg.langid
    out = []
    for s, la, sc in zip(sig, lang.to_pylist(), score.to_pylist(), strict=True):
        q, rep, c4, fw = s["gopher_quality"], s["gopher_repetition"], s["c4"], s["fineweb"]
        fails = {
            "gopher_quality.word_count": not g.min_words <= q["word_count"] <= g.max_words,
            "gopher_quality.mean_word_length": not g.min_mean_word_length <= q["mean_word_length"] <= g.max_mean_word_length,
            "gopher_quality.symbol_word_ratio": max(q["hash_word_ratio"], q["ellipsis_word_ratio"]) > g.max_symbol_word_ratio,
            "gopher_quality.bullet_lines": q["bullet_lines_ratio"] > g.max_bullet_lines_ratio,
            "gopher_quality.ellipsis_lines": q["ellipsis_lines_ratio"] > g.max_ellipsis_lines_ratio,
            "gopher_quality.alpha_words": q["alpha_words_ratio"] < g.min_alpha_words_ratio,
            "gopher_quality.stop_words": la == "en" and q["stop_words"] < g.min_stop_words,
            **{f"gopher_repetition.{k}": rep[k] > getattr(r, f"max_{k}")
               for k in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac")},
            **{f"gopher_repetition.top_{k}gram": rep[f"top_{k}gram_char_frac"] > getattr(r, f"max_top_{k}gram_char_frac")
               for k in (2, 3, 4)},
            **{f"gopher_repetition.dup_{k}gram": rep[f"dup_{k}gram_char_frac"] > getattr(r, f"max_dup_{k}gram_char_frac")
               for k in range(5, 11)},
            "c4.lorem_ipsum": c4["has_lorem_ipsum"], "c4.curly_bracket": c4["has_curly_bracket"],
            "c4.min_sentences": c4["kept_sentences"] < c.min_sentences,
            "fineweb.line_punct_ratio": fw["line_punct_ratio"] < w.min_line_punct_ratio,
            "fineweb.short_line_ratio": fw["short_line_ratio"] > w.max_short_line_ratio,
            "fineweb.char_dup_ratio": fw["char_dup_ratio"] > w.max_char_dup_ratio,
            "fineweb.newline_ratio": fw["newline_ratio"] > w.max_newline_ratio,
            "lang.allowed": la not in lid.allowed, "lang.score": sc < lid.min_score,
        }
        out.append([k for k, v in fails.items() if v])
    return out


def jaccard(a: str, b: str, n: int = 5) -> float:
    """Jaccard similarity of the lower-cased word ``n``-gram sets of two texts."""
    def grams(t: str) -> set[tuple[str, ...]]:
        w = t.lower().split()
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y)


def main(seed: int = 7) -> int:
    rng = random.Random(seed)
    cases = generate.english_cases(rng)
    multi_rng = random.Random(seed + 1)
    cases += [(f"multi_{lang}", generate.multi_text(multi_rng, lang)) for lang in sorted(generate.MULTI) for _ in range(3)]
    got = reasons([t for _, t in cases])
    by_case: dict[str, Counter] = {}
    words = Counter()
    for (case, text), rs in zip(cases, got, strict=True):
        by_case.setdefault(case, Counter())[", ".join(rs) or "KEPT"] += 1
        if not rs:
            words[case] += len(text.split())
    for case, c in by_case.items():
        print(f"{case:18s} {dict(c)}")
    near = [t for c, t in cases if c == "near_dup"]
    print("near-duplicate Jaccard:", [round(jaccard(near[0], t), 3) for t in near[1:]])
    prose = [t for c, t in cases if c == "prose"]
    print("max Jaccard between prose neighbours:", round(max(jaccard(a, b) for a, b in zip(prose[:-6], prose[6:], strict=True)), 3))
    print("kept words:", sum(words.values()), dict(words))
    bad = sum(1 for (c, _), rs in zip(cases, got, strict=True) if c == "prose" and rs)
    print("prose documents failing a rule:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    sys.exit(main(ap.parse_args().seed))
