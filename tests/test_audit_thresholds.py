"""Each audit threshold just inside and just outside, the text sample, and byte fallback."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipelines.audit.config import AuditConfig
from pipelines.audit.findings import PromptSet, summarize
from tests.test_audit_kernels import _audit, _facts, _ids, _word_level, english, gpt2, multi
from udfs import tokenize as tok_udfs
from udfs import tokenizer_audit as ta
from udfs.tokenizer_prompts import PromptSignal


def _byte_fallback_bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    chars = sorted({c for t in english()[:50] for c in t if c.isascii() and c.isprintable() and c != " "})
    vocab = {"<unk>": 0, **{f"<0x{i:02X}>": 1 + i for i in range(256)}}
    for c in ["\u2581", *chars]:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    loaded = tok_udfs.LoadedTokenizer(tok, "test:bpe-byte-fallback", tok.get_vocab_size(with_added_tokens=True))
    return loaded, ta.vocab_tables(loaded)


def test_byte_fallback_on_chinese_is_flagged_and_english_is_not():
    tok, tables = _byte_fallback_bpe()
    zh = [r["text"] for r in multi() if r["lang"] == "zh"]
    en = english()[:20]
    report, _ = _audit(tok, tables, en + zh, ["en"] * len(en) + ["zh"] * len(zh))
    fb = [f for f in report["findings"] if f["id"] == "audit.byte_fallback"]
    assert [f["examples"] for f in fb] == [["zh"]] and fb[0]["severity"] == "warn"
    row = next(r for r in report["cost"]["source"] if r["group"] == "zh")
    share = row["byte_fallback_share"]
    assert share > 0.5 and row["unknown"] == 0
    inside, _ = _audit(tok, tables, en + zh, ["en"] * len(en) + ["zh"] * len(zh),
                       acfg=AuditConfig(max_byte_fallback_share=share))
    assert "audit.byte_fallback" not in _ids(inside)
    off, _ = _audit(tok, tables, en + zh, ["en"] * len(en) + ["zh"] * len(zh),
                    acfg=AuditConfig(max_byte_fallback_share=None))
    assert "audit.byte_fallback" not in _ids(off)


def test_unknown_share_just_inside_and_outside():
    tok, tables = _word_level(english())
    zh = [r["text"] for r in multi() if r["lang"] == "zh"]
    texts, sources = english()[:10] + zh, ["en"] * 10 + ["zh"] * len(zh)
    report, _ = _audit(tok, tables, texts, sources)
    share = next(r for r in report["cost"]["source"] if r["group"] == "zh")["unknown_share"]
    inside, _ = _audit(tok, tables, texts, sources, acfg=AuditConfig(max_unknown_share=share))
    outside, _ = _audit(tok, tables, texts, sources, acfg=AuditConfig(max_unknown_share=share * 0.999))
    assert "audit.unknown_tokens" not in _ids(inside) and "audit.unknown_tokens" in _ids(outside)


def _prompt_report(signal: PromptSignal, acfg: AuditConfig):
    tok, tables = gpt2()
    part = ta.Partial.empty(tables.vocab_size)
    return summarize(part, _facts(tok), acfg, [PromptSet("p", ["i1"], ["Q?"], [signal])])["prompts"][0]["affected"]


def test_prompt_follow_share_and_min_count_just_inside_and_outside():
    sig = PromptSignal(last_id=30, next_kind=ta.SPACE_LETTER, seen=100, seen_then_kind=1, canonical=True,
                       ends_in_space=False)  # followed that way in 1 % of its occurrences
    assert _prompt_report(sig, AuditConfig(min_follow_share=0.0101)) == 1
    assert _prompt_report(sig, AuditConfig(min_follow_share=0.01)) == 0
    assert _prompt_report(sig, AuditConfig(min_follow_share=0.5, prompt_min_count=100)) == 1
    assert _prompt_report(sig, AuditConfig(min_follow_share=0.5, prompt_min_count=101)) == 0  # too rare to judge
    assert _prompt_report(sig, AuditConfig(min_follow_share=None)) == 0
    noncanonical = PromptSignal(220, ta.LETTER, 0, 0, canonical=False, ends_in_space=True)
    assert _prompt_report(noncanonical, AuditConfig(min_follow_share=None)) == 1


def test_coverage_is_judged_only_with_enough_tokens_per_id():
    tok, tables = gpt2()
    texts = english()[:50]
    small, _ = _audit(tok, tables, texts, ["s"] * 50)
    judged, _ = _audit(tok, tables, texts, ["s"] * 50, acfg=AuditConfig(min_tokens_per_id=0.0))
    assert "audit.undertrained" in _ids(small, "info")
    assert "audit.undertrained" in _ids(judged, "warn")
    assert judged["coverage"]["judged"] and not small["coverage"]["judged"]
    listed = judged["coverage"]["never_seen_tokens"]
    assert len(listed) == 50 and all(isinstance(i, int) and isinstance(s, str) for i, s in listed)


def test_words_and_runs_come_from_the_text_sample_only():
    tok, tables = gpt2()
    texts = english()[:40]
    sample = np.arange(40) % 4 == 0
    part, docs = ta.audit_batch(
        tok, tables, pa.array(texts), *_ids_of(tok, texts),
        doc_ids=pa.array([str(i) for i in range(40)]),
        sources=pa.array(["s"] * 40), text_sample=sample)
    full, full_docs = ta.audit_texts(tok, tables, texts, ["s"] * 40)
    assert (docs.n_words[~sample] == -1).all() and (docs.n_words[sample] == full_docs.n_words[sample]).all()
    g, f = part.groups[("source", "s")], full.groups[("source", "s")]
    assert g.total("text_docs") == 10 and g.total("docs") == 40 and g.total("tokens") == f.total("tokens")
    assert g.total("words") == int(full_docs.n_words[sample].sum())
    assert g.total("text_tokens") == int(full_docs.n_tokens[sample].sum())


def _ids_of(tok, texts):
    ids = tok_udfs.encode_ids(tok, texts)
    return np.array([len(i) for i in ids]), np.concatenate([np.asarray(i) for i in ids])


def test_bad_audit_settings_fail_at_load_naming_the_key():
    import pytest

    from pipelines.core.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"audit\.max_fertility_ratio"):
        load_config(overrides=["audit.max_fertility_ratio=0.5"])
    with pytest.raises(ConfigError, match=r"audit\.text_sample_fraction"):
        load_config(overrides=["audit.text_sample_fraction=1.5"])
    with pytest.raises(ConfigError, match=r"audit\.bogus"):
        load_config(overrides=["audit.bogus=1"])
    assert load_config(overrides=["audit.max_unknown_share=null"]).audit.max_unknown_share is None
