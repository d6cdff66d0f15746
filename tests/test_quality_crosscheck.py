"""Cross-check: our Gopher quality/repetition, C4 and FineWeb decisions vs datatrove 0.10.1 on web_crawl."""

from __future__ import annotations

import gzip
import json
import warnings

import pyarrow as pa
import pytest

from pipelines.filter.config import FilterConfig
from udfs import quality as q

pytest.importorskip("datatrove")


def _docs(shared_data):
    texts = []
    for f in sorted((shared_data / "web_crawl").glob("*.jsonl*")):
        with (gzip.open(f, "rt") if f.suffix == ".gz" else open(f)) as fh:
            texts += [json.loads(line)["text"] for line in fh]
    return texts


def _ours(s: dict, cfg: FilterConfig) -> dict[str, bool]:
    g, r, c, w = s["gopher_quality"], s["gopher_repetition"], s["c4"], s["fineweb"]
    gq, gr, cc, fw = cfg.gopher_quality, cfg.gopher_repetition, cfg.c4, cfg.fineweb
    keep_g = (gq.min_words <= g["word_count"] <= gq.max_words
              and gq.min_mean_word_length <= g["mean_word_length"] <= gq.max_mean_word_length
              and max(g["hash_word_ratio"], g["ellipsis_word_ratio"]) <= gq.max_symbol_word_ratio
              and g["bullet_lines_ratio"] <= gq.max_bullet_lines_ratio
              and g["ellipsis_lines_ratio"] <= gq.max_ellipsis_lines_ratio
              and g["alpha_words_ratio"] >= gq.min_alpha_words_ratio and g["stop_words"] >= gq.min_stop_words)
    limits = {"dup_line_frac": gr.max_dup_line_frac, "dup_para_frac": gr.max_dup_para_frac,
              "dup_line_char_frac": gr.max_dup_line_char_frac, "dup_para_char_frac": gr.max_dup_para_char_frac,
              **{f"top_{k}gram_char_frac": getattr(gr, f"max_top_{k}gram_char_frac") for k in (2, 3, 4)},
              **{f"dup_{k}gram_char_frac": getattr(gr, f"max_dup_{k}gram_char_frac") for k in range(5, 11)}}
    keep_r = all(r[k] <= v for k, v in limits.items())
    keep_c = not c["has_lorem_ipsum"] and not c["has_curly_bracket"] and c["kept_sentences"] >= cc.min_sentences
    keep_w = (w["line_punct_ratio"] >= fw.min_line_punct_ratio and w["short_line_ratio"] <= fw.max_short_line_ratio
              and w["char_dup_ratio"] <= fw.max_char_dup_ratio and w["newline_ratio"] <= fw.max_newline_ratio)
    return {"gopher_quality": keep_g, "gopher_repetition": keep_r, "c4": keep_c, "fineweb": keep_w}


def _paper_dup_ngram_chars(words: list[str], n: int) -> int:
    """Characters of the words covered by an n-gram occurrence after its first, each word once (paper)."""
    seen, covered = set(), [False] * len(words)
    for i in range(len(words) - n + 1):
        g = tuple(words[i : i + n])
        if g in seen:
            covered[i : i + n] = [True] * n
        seen.add(g)
    return sum(len(w) for w, c in zip(words, covered, strict=True) if c)


@pytest.mark.slow
def test_agreement_with_datatrove(shared_data):
    """Keep/drop agreement with datatrove 0.10.1 per rule set on the 963 web_crawl documents (>= 98%).

    Word splits differ a little (spaCy there, RE2 kernels here; see ``udfs.quality.tokenize_spacing``)
    and count as disagreements. Two classes are excluded as documented deviations from datatrove where
    we follow the paper: C4 drops any page holding ``{`` (TFDS/datatrove: only kept lines), and Gopher's
    duplicated 5..10-gram fraction counts every word covered by a repeated n-gram once (datatrove's
    greedy scan jumps n words after each repeat and misses overlapping ones): a document is excluded
    when datatrove's decision changes with the paper's count patched into its filter. An empty text
    is dropped either way (``gopher_quality.word_count`` here, ``empty`` in datatrove's repetition
    filter), so it agrees.
    """
    warnings.filterwarnings("ignore")
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.filters import gopher_repetition_filter as grf

    texts = _docs(shared_data)
    filters = {"gopher_quality": GopherQualityFilter(), "gopher_repetition": GopherRepetitionFilter(),
               "c4": C4QualityFilter(), "fineweb": FineWebQualityFilter()}
    cfg = FilterConfig().profile_config("web")  # the datatrove-compatible word reading
    reading = cfg.gopher_quality.alpha_words_reading
    assert reading == "datatrove"
    ours = [_ours(s, cfg) for s in q.quality_signals(pa.array(texts), alpha_words_reading=reading).to_pylist()]
    dropped_empty = [not ours[i]["gopher_quality"] and not t for i, t in enumerate(texts)]
    agree, excluded = {}, {}
    for name, f in filters.items():
        pairs, skipped = [], 0
        for i, t in enumerate(texts):
            res = f.filter(Document(text=t, id=str(i))) is True
            if res != ours[i][name] and name == "c4" and "{" in t and res:
                skipped += 1  # paper: C4 drops any page with "{"
                continue
            if res != ours[i][name] and name == "gopher_repetition" and t:
                original = grf.find_all_duplicate
                grf.find_all_duplicate = _paper_dup_ngram_chars
                try:
                    paper = f.filter(Document(text=t, id=str(i))) is True
                finally:
                    grf.find_all_duplicate = original
                if paper != res:
                    skipped += 1  # paper: overlapping duplicated n-grams are counted
                    continue
            # dropped either way: datatrove's repetition filter as "empty", ours by gopher_quality.word_count
            pairs.append(res == ours[i][name] or (name == "gopher_repetition" and dropped_empty[i] and not res))
        agree[name], excluded[name] = sum(pairs) / len(pairs), skipped
    print("agreement with datatrove:", {k: round(v, 4) for k, v in agree.items()}, "excluded:", excluded)
    # measured on the 963 web_crawl documents: gopher_quality 0.984, gopher_repetition 0.992 (10 excluded),
    # c4 0.987 (8 excluded), fineweb 1.0
    assert all(v >= 0.98 for v in agree.values()), agree
