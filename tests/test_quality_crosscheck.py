"""Cross-check: our Gopher quality/repetition, C4 and FineWeb decisions vs datatrove 0.10.1 on web_crawl."""

from __future__ import annotations

import gzip
import json
import warnings

import pyarrow as pa
import pytest

from pipelines.config import FilterConfig
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


@pytest.mark.slow
def test_agreement_with_datatrove(shared_data):
    warnings.filterwarnings("ignore")
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    texts = _docs(shared_data)
    filters = {"gopher_quality": GopherQualityFilter(), "gopher_repetition": GopherRepetitionFilter(),
               "c4": C4QualityFilter(), "fineweb": FineWebQualityFilter()}
    cfg = FilterConfig()
    ours = [_ours(s, cfg) for s in q.quality_signals(pa.array(texts)).to_pylist()]
    agree = {}
    for name, f in filters.items():
        pairs = []
        for i, t in enumerate(texts):
            res = f.filter(Document(text=t, id=str(i)))
            if name == "c4" and ours[i]["c4"] is False and "{" in t and res is True:
                continue  # documented paper deviation: C4 drops any page with "{" (TFDS: kept lines only)
            if name == "gopher_repetition" and not t:
                continue  # documented: datatrove drops empty text here; ours leaves it to word_count
            pairs.append((res is True) == ours[i][name])
        agree[name] = sum(pairs) / len(pairs)
    print("agreement with datatrove:", {k: round(v, 4) for k, v in agree.items()})
    # measured on the 963 web_crawl documents: gopher_quality 0.973, gopher_repetition 0.972 (non-empty),
    # c4 0.979 (0.988 without the curly-bracket deviation), fineweb 0.997
    assert agree["fineweb"] >= 0.98 and agree["c4"] >= 0.98
    assert agree["gopher_quality"] >= 0.97 and agree["gopher_repetition"] >= 0.97
