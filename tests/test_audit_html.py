"""The audit's report section: findings first and ranked, every value escaped, stats.json part compact."""

from __future__ import annotations

import pytest

from pipelines.audit.config import AuditConfig
from pipelines.audit.findings import summarize
from pipelines.audit.html import render_section, report_stats
from tests.test_audit_kernels import _facts, _word_level, english, multi
from udfs import tokenizer_audit as ta


def _doc():
    tok, tables = _word_level(english())
    zh = [r["text"] for r in multi() if r["lang"] == "zh"]
    texts = english()[:20] + zh
    part, _ = ta.audit_texts(tok, tables, texts, ["<script>x</script>"] * 20 + ["zh"] * len(zh))
    return summarize(part, _facts(tok, "uint16"), AuditConfig())


def test_section_lists_errors_first_and_escapes_every_value():
    doc = _doc()
    html = render_section(doc)
    assert html.startswith("<h2>Tokenizer audit</h2>")
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    severities = [f["severity"] for f in doc["findings"]]
    assert severities == sorted(severities, key=("error", "warn", "info").index)
    first = doc["findings"][0]
    assert html.index(first["title"].replace("'", "&#x27;")) < html.index("Cost per source")


def test_stats_part_leaves_the_token_listings_in_audit_json():
    doc = _doc()
    stats = report_stats(doc)
    assert stats["flags"] == doc["flags"] > 0
    assert "never_seen_tokens" not in stats["coverage"] and "never_seen" in stats["coverage"]


def test_a_missing_prompt_file_names_its_key():
    import pytest

    from pipelines.audit.prompts import read_prompts
    from pipelines.core.config import EvalSetConfig
    from pipelines.core.eval_sets import EvalSetError

    es = EvalSetConfig(name="qa", paths=["/nonexistent/qa.jsonl"], fields=["prompt", "answer"])
    with pytest.raises(EvalSetError, match=r"^audit\.prompt_sets\[2\]\.paths: '/nonexistent/qa.jsonl' matches no file"):
        read_prompts(es, "audit.prompt_sets[2]")
    with pytest.raises(EvalSetError, match=r"^--prompts paths: "):
        read_prompts(es, "--prompts")


def test_a_prompt_file_without_the_prompt_field_fails_naming_the_file_and_its_fields(tmp_path):
    import pytest

    from pipelines.audit.prompts import prompt_file_sets, read_prompts
    from pipelines.core.eval_sets import EvalSetError

    path = tmp_path / "trivia.jsonl"
    path.write_text('{"question": "Who?", "answer": "x"}\n{"question": "Where?", "id": 2}\n')
    (es,) = prompt_file_sets([str(path)])
    assert es.name == "trivia"
    with pytest.raises(EvalSetError, match=r"^--prompts fields: '.*trivia.jsonl' has no record with the prompt "
                                           r"field 'prompt'; its records have: answer, id, question$"):
        read_prompts(es, "--prompts")


def test_the_command_exits_2_on_a_prompt_file_without_prompts(tmp_path, capsys):
    from jobs.audit import main

    path = tmp_path / "qa.jsonl"
    path.write_text('{"q": "Who?"}\n')
    with pytest.raises(SystemExit) as e:
        main(["--conf", "conf/local.yaml", "--prompts", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "has no record with the prompt field 'prompt'" in err[0]


def test_a_prompt_file_on_s3_is_read_through_the_storage_layer(monkeypatch):
    from pipelines.audit.prompts import prompt_file_sets, read_prompts
    from pipelines.core import storage
    from pipelines.core.config import load_config

    asked = []

    def get_bytes(root, rel, scfg):
        asked.append((root, rel))
        return b'{"prompt": "Question: Who?\\nAnswer: ", "answer": "Tamsin"}\n'

    monkeypatch.setattr(storage, "get_bytes", get_bytes)
    (es,) = prompt_file_sets(["s3://bucket/evals/qa.jsonl"])
    got = read_prompts(es, "--prompts", None, load_config())
    assert asked == [("s3://bucket/evals", "qa.jsonl")]
    assert got.name == "qa" and got.prompts == ["Question: Who?\nAnswer: "] and got.answers == ["Tamsin"]


def test_the_stats_part_draws_the_whole_section():
    doc = _doc()
    assert render_section(report_stats(doc)) == render_section(doc)


def test_the_report_leaves_the_audit_out_until_it_ran(tmp_path):
    import json

    from pipelines.core.config import load_config
    from pipelines.report.stage import package_parts

    cfg = load_config(overrides=[f"run.root={tmp_path}"])
    assert package_parts(None, cfg) == {}
    doc = _doc()
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "audit.json").write_text(json.dumps(doc))
    assert package_parts(None, cfg) == {"audit": json.loads(json.dumps(report_stats(doc)))}
