"""Tokenizer audit kernels and findings without Spark: each planted defect is flagged, the clean sample is not."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipelines.audit.config import AuditConfig
from pipelines.audit.findings import PromptSet, summarize, tokenizer_facts
from udfs import tokenize as tok_udfs
from udfs import tokenizer_audit as ta
from udfs.tokenizer_prompts import prompt_boundaries

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"


def _jsonl(path: Path) -> list[dict]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape") if path.suffix == ".gz" else open(path) as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the samples hold deliberately malformed lines
            if isinstance(row, dict) and isinstance(row.get("text"), str):
                row["text"] = row["text"].encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                rows.append(row)
    return rows


@cache
def english() -> list[str]:
    return [r["text"] for r in _jsonl(SAMPLE / "web_en-00000.jsonl.gz")]


@cache
def multi() -> list[dict]:
    return _jsonl(SAMPLE / "web_multi-00001.jsonl.gz")


@cache
def gpt2():
    tok = tok_udfs.load_tokenizer(tok_udfs.BUILTIN_GPT2)
    return tok, ta.vocab_tables(tok)


def _facts(tok, shard_dtype="auto"):
    eos = tok.token_id("<|endoftext|>")
    return tokenizer_facts(tok, eos_id=eos if eos is not None else 0, bos_id=None,
                           literals=("<|endoftext|>",), shard_dtype=shard_dtype)


def _audit(tok, tables, texts, sources, acfg=None, shard_dtype="auto", prompt_sets=(), langs=None):
    part, docs = ta.audit_texts(tok, tables, texts, sources, langs=langs, specials=("<|endoftext|>",))
    return summarize(part, _facts(tok, shard_dtype), acfg or AuditConfig(), list(prompt_sets)), docs


def _ids(report, severity=None):
    return sorted({f["id"] for f in report["findings"] if severity is None or f["severity"] == severity})


def _flags(report):
    return sorted({f["id"] for f in report["findings"] if f["severity"] != "info"})


def _word_level(texts, *, extra_vocab: int = 0):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>"]))
    if extra_vocab:
        tok.add_tokens([f"zzfill{i}" for i in range(extra_vocab)])
    tok.encode_special_tokens = True
    loaded = tok_udfs.LoadedTokenizer(tok, "test:wordlevel", tok.get_vocab_size(with_added_tokens=True))
    return loaded, ta.vocab_tables(loaded)


# ------------------------------------------------------------------------------------------ signals
def test_words_whitespace_and_digit_runs_are_counted_per_document():
    tok, tables = gpt2()
    texts = ["a  b\t\t\tc\n\n 123 4567", "", "   ", "中文字 ok"]
    part, docs = ta.audit_texts(tok, tables, texts, ["s"] * 4)
    assert docs.n_words.tolist() == [5, 0, 0, 5]  # 中文字 is one run plus three CJK characters
    assert docs.n_bytes.tolist() == [len(t.encode()) for t in texts]
    g = part.groups[("source", "s")]
    # spaces: "  " (2), " " before 123, " " before 4567, "   " (3), " " before ok
    assert g.ws_runs[ta.WS_KINDS.index("spaces")].tolist() == [3, 1, 1, 0, 0, 0]
    assert g.ws_runs[ta.WS_KINDS.index("tabs")].tolist() == [0, 0, 1, 0, 0, 0]
    assert g.ws_runs[ta.WS_KINDS.index("newlines")].tolist() == [0, 1, 0, 0, 0, 0]
    assert g.digit_runs.tolist() == [0, 0, 2, 0, 0, 0]
    assert g.total("docs") == 4 and g.total("tokens") == int(docs.n_tokens.sum())
    assert docs.roundtrip_kind == ["ok"] * 4


def test_partials_merge_to_the_whole_in_any_order():
    tok, tables = gpt2()
    texts = english()[:40]
    whole, _ = ta.audit_texts(tok, tables, texts, ["a", "b"] * 20)
    a, _ = ta.audit_texts(tok, tables, texts[:15], ["a", "b"] * 7 + ["a"])
    b, _ = ta.audit_texts(tok, tables, texts[15:], (["b", "a"] * 13)[:25], doc_ids=[f"{i:09d}" for i in range(15, 40)])
    merged = ta.merge(ta.merge(ta.Partial.empty(tables.vocab_size), b), a)
    assert np.array_equal(merged.id_counts, whole.id_counts) and np.array_equal(merged.follow, whole.follow)
    for key, g in whole.groups.items():
        for name in g.__dataclass_fields__:
            assert np.array_equal(getattr(merged.groups[key], name), getattr(g, name)), (key, name)
    assert merged.roundtrip == whole.roundtrip


def test_watched_ids_count_what_follows_them_as_the_full_histogram_does():
    tok, tables = gpt2()
    texts = english()[:40]
    ids = tok_udfs.encode_ids(tok, texts)
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    flat = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids])
    watched = (13, 11, int(flat[-1]), int(flat[0]))  # ".", ",", a document's last id, the batch's first
    kw = {"doc_ids": pa.array([f"{i}" for i in range(40)]), "sources": pa.array(["s"] * 40)}
    text = pa.array(texts)
    full, _ = ta.audit_batch(tok, tables, text, lengths, flat, **kw)
    part, _ = ta.audit_batch(tok, tables, text, lengths, flat, watch=ta.watch_table(tables.vocab_size, watched), **kw)
    assert np.array_equal(part.id_counts, full.id_counts)
    assert np.array_equal(part.follow[list(watched)], full.follow[list(watched)]) and full.follow[13].sum() > 0
    assert part.follow.sum() == full.follow[list(set(watched))].sum()  # nothing else is counted
    with pytest.raises(ValueError, match="ids outside"):
        ta.audit_batch(tok, tables, text, lengths, np.where(flat == 13, tables.vocab_size, flat), **kw)
    with pytest.raises(ValueError, match="ids outside"):
        ta.audit_batch(tok, tables, text, lengths, np.where(flat == 13, -1, flat), **kw)


def test_roundtrip_kinds():
    assert ta.roundtrip_kind("x", "x") == "ok"
    assert ta.roundtrip_kind("a, b", "a , b") == "whitespace"
    assert ta.roundtrip_kind("Ünïcode", "unicode") == "normalisation"
    assert ta.roundtrip_kind("abc", "ab\ufffd") == "lost_bytes"
    assert ta.roundtrip_kind("abc", "xyz") == "other"


# ------------------------------------------------------------------------------------------ clean run
def test_the_clean_sample_flags_nothing():
    tok, tables = gpt2()
    evals = _jsonl(SAMPLE / "web_evals-00002.jsonl.gz")
    texts = english() + [r["text"] for r in evals]
    sources = ["web_en"] * len(english()) + ["web_evals"] * len(evals)
    items = [json.loads(line) for line in (SAMPLE / "evals" / "trivia.jsonl").read_text().splitlines()]
    part, _ = ta.audit_texts(tok, tables, texts, sources, langs=["en"] * len(texts), specials=("<|endoftext|>",))
    signals = prompt_boundaries(tok, tables, [i["question"] for i in items], [i["answer"] for i in items],
                                part.id_counts, part.follow)
    report = summarize(part, _facts(tok), AuditConfig(),
                       [PromptSet("trivia", [i["id"] for i in items], [i["question"] for i in items], signals)])
    assert _flags(report) == []
    assert report["flags"] == 0
    # What is noted without a flag: the literal <|endoftext|> the sample holds on purpose (encoded as
    # text) and the vocabulary a corpus this small cannot judge.
    assert _ids(report, "info") == ["audit.special_literal", "audit.undertrained"]
    assert report["specials"]["<|endoftext|>"]["encoded_as"] == [27, 91, 437, 1659, 5239, 91, 29]
    assert report["roundtrip"]["checked"] == len(texts) and report["roundtrip"]["ok"] == len(texts)
    assert report["prompts"][0]["affected"] == 0 and report["prompts"][0]["prompts"] == len(items)


# ------------------------------------------------------------------------------------------ planted defects
def test_vocabulary_too_large_for_uint16_is_an_error_and_a_note_with_auto():
    tok, tables = _word_level(english()[:20], extra_vocab=70_000)
    assert tok.vocab_size > 65_536
    forced, _ = _audit(tok, tables, english()[:5], ["s"] * 5, shard_dtype="uint16")
    assert "audit.vocab_dtype" in _ids(forced, "error")
    auto, _ = _audit(tok, tables, english()[:5], ["s"] * 5, shard_dtype="auto")
    assert "audit.vocab_dtype" in _ids(auto, "info") and "audit.vocab_dtype" not in _flags(auto)


def test_tokenizer_without_byte_fallback_on_chinese_gives_unknown_tokens_and_lost_bytes():
    tok, tables = _word_level(english())
    zh = [r["text"] for r in multi() if r["lang"] == "zh"]
    en = english()[:30]
    report, docs = _audit(tok, tables, en + zh, ["en"] * len(en) + ["zh"] * len(zh),
                          langs=["en"] * len(en) + ["zh"] * len(zh))
    unknown = [f for f in report["findings"] if f["id"] == "audit.unknown_tokens"]
    assert {tuple(f["examples"]) for f in unknown} >= {("zh",)}
    assert all(f["severity"] == "error" for f in unknown)
    assert report["roundtrip"]["lost_bytes"] >= len(zh)
    assert report["findings"][0]["severity"] == "error"  # errors rank first


def test_a_decode_that_does_not_round_trip_is_flagged_with_its_kind():
    tok, tables = _word_level(english())  # WordLevel decodes by joining words with spaces
    report, docs = _audit(tok, tables, english()[:10], ["s"] * 10)
    rt = next(f for f in report["findings"] if f["id"] == "audit.roundtrip")
    assert report["roundtrip"]["whitespace"] == 10 and rt["severity"] == "warn"
    assert [e[2] for e in rt["examples"]] == ["whitespace"] * 5
    assert set(docs.roundtrip_kind) == {"whitespace"}


def test_mojibake_source_is_a_fertility_outlier():
    tok, tables = gpt2()
    mangled = [r["text"].encode("utf-8").decode("cp1252", "replace") for r in multi()
               if r["lang"] in ("ru", "ar", "hi", "ja", "zh")] * 6
    en = english()
    sources = ["web_a"] * 100 + ["web_b"] * (len(en) - 100) + ["mojibake"] * len(mangled)
    report, _ = _audit(tok, tables, en + mangled, sources, acfg=AuditConfig(min_group_words=500))
    outliers = [f for f in report["findings"] if f["id"] == "audit.fertility"]
    assert [f["examples"] for f in outliers] == [["mojibake"]]
    row = next(r for r in report["cost"]["source"] if r["group"] == "mojibake")
    assert row["tokens_per_word"] > 2 * next(r for r in report["cost"]["source"] if r["group"] == "web_a")["tokens_per_word"]


def test_fertility_threshold_just_inside_and_outside():
    tok, tables = gpt2()
    en = english()
    mangled = [r["text"].encode("utf-8").decode("cp1252", "replace") for r in multi() if r["lang"] == "ru"] * 20
    report, _ = _audit(tok, tables, en + mangled, ["en"] * len(en) + ["ru_moji"] * len(mangled),
                       acfg=AuditConfig(min_group_words=100))
    row = next(r for r in report["cost"]["source"] if r["group"] == "ru_moji")
    med = report["fertility_median"]
    ratio = max(row["tokens_per_word"] / med["tokens_per_word"], med["bytes_per_token"] / row["bytes_per_token"])
    assert "audit.fertility" in _ids(report) and ratio > 2
    inside, _ = _audit(tok, tables, en + mangled, ["en"] * len(en) + ["ru_moji"] * len(mangled),
                       acfg=AuditConfig(min_group_words=100, max_fertility_ratio=ratio * 1.01))
    outside, _ = _audit(tok, tables, en + mangled, ["en"] * len(en) + ["ru_moji"] * len(mangled),
                        acfg=AuditConfig(min_group_words=100, max_fertility_ratio=ratio * 0.99))
    assert row["words"] >= 100
    assert "audit.fertility" not in _ids(inside) and "audit.fertility" in _ids(outside)


def test_prompts_ending_in_a_bare_space_are_flagged_with_gpt2():
    tok, tables = gpt2()
    part, _ = ta.audit_texts(tok, tables, english(), ["web_en"] * len(english()))
    items = [json.loads(line) for line in (SAMPLE / "evals" / "trivia.jsonl").read_text().splitlines()]
    prompts = [f"Question: {i['question']}\nAnswer: " for i in items]
    signals = prompt_boundaries(tok, tables, prompts, [i["answer"] for i in items], part.id_counts, part.follow)
    assert {s.last_id for s in signals} == {220} and not any(s.canonical for s in signals)
    report = summarize(part, _facts(tok), AuditConfig(), [PromptSet("qa", [i["id"] for i in items], prompts, signals)])
    row = report["prompts"][0]
    assert row["affected"] == len(items) and row["last_tokens"] == [[" ", len(items)]]
    assert row["endings"] == [["'Answer:' + ' '", len(items)]]
    detail = next(f["detail"] for f in report["findings"] if f["id"] == "audit.prompt_boundary")
    assert detail.endswith(f"they end in 'Answer:' + ' ' ({len(items)} prompts)")
    assert "strip the trailing whitespace" in row["fix"]
    assert _flags(report) == ["audit.prompt_boundary"]
    fixed = [p.rstrip() for p in prompts]
    ok = prompt_boundaries(tok, tables, fixed, [i["answer"] for i in items], part.id_counts, part.follow)
    assert all(s.canonical for s in ok)
    report = summarize(part, _facts(tok), AuditConfig(), [PromptSet("qa", [i["id"] for i in items], fixed, ok)])
    assert report["prompts"][0]["affected"] == 0


def test_literal_endoftext_is_noted_as_text_and_an_error_when_it_becomes_the_control_id():
    tok, tables = gpt2()
    texts = english()[:20] + ["The forum printed <|endoftext|> after every post."]
    as_text, _ = _audit(tok, tables, texts, ["s"] * len(texts))
    assert "audit.special_literal" in _ids(as_text, "info")
    assert "audit.special_in_content" not in _ids(as_text)
    # A tokenizer that treats the string as its control token (encode_special_tokens off).
    raw = tok_udfs.build_gpt2()
    raw.add_special_tokens(["<|endoftext|>"])
    control = tok_udfs.LoadedTokenizer(raw, "test:gpt2-control", raw.get_vocab_size(with_added_tokens=True))
    report, _ = _audit(control, ta.vocab_tables(control), texts, ["s"] * len(texts))
    f = next(f for f in report["findings"] if f["id"] == "audit.special_in_content")
    assert f["severity"] == "error" and "<|endoftext|>" in f["detail"]


def test_engines_that_disagree_are_detected():
    pytest.importorskip("tiktoken")
    from udfs.tokenize_tiktoken import Compatibility, build_encoding, encoding_for

    tok, _ = gpt2()
    texts = english()[:20]
    assert not ta.engines_differ(tok, encoding_for(tok), texts).any()
    good = encoding_for(tok)
    wrong = build_encoding("wrong-split", Compatibility(True, pattern=r"\S+|\s+", ranks=good._mergeable_ranks))
    assert ta.engines_differ(tok, wrong, texts).sum() >= 15


def test_framed_batches_and_the_accumulator_param_give_the_texts_partial():
    import pyarrow as pa

    from udfs import tokenizer_audit_batch as tab

    tok, tables = gpt2()
    texts = english()[:30]
    tokens, _ = tok_udfs.encode_documents(tok, pa.array(texts), eos_id=50256, bos_id=50256)
    flags = pa.array([True] * 30)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([f"{i:09d}" for i in range(30)]), pa.array(["s"] * 30), pa.array(texts), tokens, flags, flags,
         pa.array([False] * 30)],
        names=["doc_id", "source", "text", "tokens", "_audit_rt_sample", "_text_sample", "_engine_sample"])
    spec = tab.AuditSpec(tok.spec, False, bos=True, specials=(), keep=5, engines=False)
    param = tab.PartialParam()
    acc = param.zero(ta.Partial.empty(tables.vocab_size))
    for part in (tab.audit_record_batch(batch.slice(0, 12), spec, tok, tables, None),
                 tab.audit_record_batch(batch.slice(12), spec, tok, tables, None, tokens=tokens.slice(12))):
        acc = param.addInPlace(acc, part)
    want, _ = ta.audit_texts(tok, tables, texts, ["s"] * 30)
    assert np.array_equal(acc.id_counts, want.id_counts) and np.array_equal(acc.follow, want.follow)
    assert np.array_equal(acc.groups[("source", "s")].totals, want.groups[("source", "s")].totals)
    assert acc.roundtrip == want.roundtrip


def test_tokenizer_facts_are_built_once_per_tokenizer_hash(monkeypatch):
    from pipelines.audit import findings

    tok, _ = gpt2()
    calls = []
    real = ta.token_texts
    monkeypatch.setattr(findings, "_VOCAB_FACTS", {})
    monkeypatch.setattr(ta, "token_texts", lambda t: calls.append(t.spec) or real(t))
    first = _facts(tok)
    again = _facts(tok_udfs.LoadedTokenizer(tok.tokenizer, "another:spec", tok.vocab_size))  # same hash
    other, _ = _word_level(["a b c"])
    assert calls == [tok.spec] and again.token_texts is first.token_texts
    assert _facts(other).vocab_size == other.vocab_size and calls == [tok.spec, "test:wordlevel"]
