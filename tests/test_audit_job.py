"""The audit on Spark: filled by the tokenize stage as it encodes, then the audit job on the same run (the
same document), shown in the report; clean, then with a bad prompt file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.core.runner import run_stage
from tests.test_audit_kernels import english

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    trivia = REPO / "sample_data" / "evals" / "trivia.jsonl"
    cfg = load_config(overrides=[
        f"run.root={root}", "spark.shuffle_partitions=2", "pipeline.stages=[ingest, tokenize]", "audit.roundtrip_sample_fraction=1.0",
        f"decontam.eval_sets=[{{name: trivia, paths: ['{trivia}'], fields: [question, answer], id_field: id}}]",
    ])
    texts = english()[:120]
    rows = [(f"d{i:04d}", t, "web_a" if i % 2 else "web_b", "en") for i, t in enumerate(texts)]
    tables.write_table(spark.createDataFrame(rows, "doc_id string, text string, source string, lang string"),
                       cfg, "documents")
    report = run_stage(spark, cfg, "tokenize")
    inline = json.loads((root / "audit" / "audit.json").read_text())
    run_stage(spark, cfg, "report")
    stats = json.loads((Path(cfg.report_path) / "stats.json").read_text())
    page = (Path(cfg.report_path) / "report.html").read_text()
    from pipelines.audit import run

    return cfg, run(spark, cfg), len(texts), (report, inline, stats, page)


def test_the_tokenize_stage_fills_the_same_audit_as_the_job(audited):
    cfg, doc, n, (report, inline, _, _) = audited
    assert {k: v for k, v in inline.items() if k != "inputs"} == {
        k: v for k, v in doc.items() if k not in ("inputs", "path")}
    assert inline["inputs"]["documents_version"] == doc["inputs"]["documents_version"]
    summary = report.extra["audit"]
    assert summary["mode"] == "inline" and summary["documents"] == n and summary["flags"] == 0
    assert summary["findings"] == ["audit.undertrained"] and summary["path"].endswith("audit/audit.json")
    assert summary["worker_seconds"] > 0


def test_audit_inline_false_leaves_the_stage_without_audit(spark, audited):
    from pipelines.audit import begin

    cfg = audited[0].model_copy(update={"audit": audited[0].audit.model_copy(update={"inline": False})})
    assert begin(spark, cfg, None, 0, None, "hf", ["doc_id"]) is None


def test_the_clean_run_is_audited_and_flags_nothing(audited):
    cfg, doc, n, _ = audited
    assert doc["flags"] == 0, doc["findings"]
    assert [f["id"] for f in doc["findings"]] == ["audit.undertrained"]  # a small corpus: noted, not judged
    assert doc["inputs"]["tokenizer"] == "builtin:gpt2" and doc["inputs"]["documents"].endswith("documents")
    assert doc["roundtrip"]["checked"] == n and doc["roundtrip"]["ok"] == n
    assert [r["group"] for r in doc["cost"]["source"]] == ["web_a", "web_b"]
    assert [r["group"] for r in doc["cost"]["lang"]] == ["en"] and doc["cost"]["lang"][0]["docs"] == n
    sampled = doc["cost"]["lang"][0]["text_docs"]  # audit.text_sample_fraction = 0.05 of the documents
    assert 0 < sampled < n / 4 and doc["cost"]["lang"][0]["words"] > 0
    assert doc["prompts"][0]["set"] == "trivia" and doc["prompts"][0]["affected"] == 0
    assert doc["tokenizer"]["tiktoken_possible"] is True
    written = json.loads(Path(doc["path"]).read_text())
    assert written["findings"] == doc["findings"] and doc["path"].endswith("audit/audit.json")


def test_the_report_shows_the_audit_the_tokenize_stage_wrote(audited):
    _, doc, _, (_, _, stats, page) = audited
    assert stats["audit"]["findings"] == doc["findings"] and stats["audit"]["flags"] == doc["flags"]
    assert page.count("<h2>Tokenizer audit</h2>") == 1 and page.index("Tokenizer audit") < page.index("Sampled removed")


def test_the_command_checks_a_prompt_file_and_flags_trailing_spaces(audited, tmp_path, capsys):
    from jobs.audit import main

    cfg = audited[0]
    prompts = tmp_path / "qa.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Question: {q}\nAnswer: ", "answer": a}) + "\n"
                               for q, a in [("Who?", "Tamsin"), ("Where?", "Vellin"), ("What?", "A key")]))
    conf = tmp_path / "run.yaml"
    conf.write_text(json.dumps(json.loads(cfg.model_dump_json(by_alias=True))))
    assert main(["--conf", str(conf), "--prompts", str(prompts)]) == 0
    out = capsys.readouterr().out
    assert "audit: 0 errors, 1 warning" in out and "end on an unseen boundary" in out
    doc = json.loads((Path(cfg.run.root) / "audit" / "audit.json").read_text())
    flagged = next(r for r in doc["prompts"] if r["set"] == "qa")  # named by the file stem
    assert flagged["affected"] == 3 and flagged["last_tokens"] == [[" ", 3]]


def test_partials_that_miscount_the_written_rows_give_way_to_an_audit_of_the_table(spark, audited):
    from pipelines.audit import begin, end
    from udfs.tokenize import load_tokenizer

    cfg, doc, n, _ = audited
    audit = begin(spark, cfg, load_tokenizer("builtin:gpt2"), 50256, None, "tiktoken", ["doc_id", "lang"])
    # Nothing added: the partials count 0 documents against n written, as a lost or doubled task would.
    summary = end(spark, cfg, audit, cfg.table_path("tokenized"), "documents", None)
    assert summary["mode"] == "rerun" and summary["documents"] == n
    assert json.loads(Path(summary["path"]).read_text())["findings"] == doc["findings"]
