"""jobs/inspect.py: seeded samples of removed/kept documents with signals, and one document's path."""

from __future__ import annotations

import pytest

from jobs import inspect as inspect_job
from pipelines.core import tables
from pipelines.core.config import load_config
from pipelines.tools import inspect

DOC_SCHEMA = (
    "doc_id string, text string, source string, url string, meta map<string,string>, input_file string, "
    "n_chars int, n_bytes int, n_replaced int"
)
FILT = f"{DOC_SCHEMA}, top_2gram_ratio double"
SET = ["--set", "spark.shuffle_partitions=4"]  # main() applies it to the suite's shared session


def _doc(doc_id: str, text: str) -> tuple:
    return (doc_id, text, "web", None, {}, "in.jsonl", len(text), len(text.encode()), 0)


@pytest.fixture(scope="module")
def run_root(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect") / "run"
    cfg = load_config(overrides=[f"run.root={root}"])
    docs = [_doc(f"d{i}", f"doc {i} " + "spam " * (50 * i)) for i in range(6)]
    tables.write_table(spark.createDataFrame(docs, DOC_SCHEMA), cfg, "documents")
    tables.write_table(spark.createDataFrame([(*docs[0], 0.0)], FILT), cfg, "filtered")
    removed = [(*docs[i], 0.3 + i / 10, ["gopher_repetition.top_2gram"]) for i in range(1, 5)]
    removed.append((*docs[5], 0.9, ["gopher_quality.word_count"]))
    tables.write_removed(spark.createDataFrame(removed, f"{FILT}, reason array<string>"), cfg, "filter")
    quarantine = [("file:/in/a.jsonl", 3, "malformed_json", '{"text": "oops', "Expecting ',' delimiter: line 1"),
                  ("file:/in/a.jsonl", 7, "text_missing", '{"title": "no text"}', None)]
    tables.write_table(spark.createDataFrame(quarantine, "input_file string, record bigint, reason string, excerpt string, "
                                                         "detail string"), cfg, "quarantine")
    return root


def test_sample_removed_by_reason_family(run_root, capsys):
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "filter", "--reason", "gopher_repetition", "-n", "3", "--chars", "40"]) == 0
    out = capsys.readouterr().out
    # a sample of 3 of the 4 documents of the family: the header says both
    assert out.startswith(f"3 of 4 documents removed by filter for gopher_repetition (seed 42) in {run_root}\n")
    shown = [ln.split()[2] for ln in out.splitlines() if ln.startswith("--- ")]
    assert len(shown) == 3 and set(shown) <= {"d1", "d2", "d3", "d4"}
    assert "reason: gopher_repetition.top_2gram" in out and "top_2gram_ratio=0." in out
    assert "chars cut] …" in out  # long text cut to head and tail
    # Seeded: the same command shows the same documents; another seed may not.
    inspect_job.main([*SET, "--run", str(run_root), "--stage", "filter", "--reason", "gopher_repetition", "-n", "3", "--chars", "40"])
    assert capsys.readouterr().out == out


def test_sample_kept_and_bad_arguments(run_root, capsys):
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "filter", "--kept", "-n", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 document kept by filter") and "--- 1. d0  reason: -  (6 chars)" in out
    with pytest.raises(SystemExit) as e:
        inspect_job.main([*SET, "--run", str(run_root), "--stage", "dedup", "--kept"])
    assert e.value.code == 1  # a missing table: 1, as for every job (2 is bad arguments or configuration)
    assert "Delta table 'deduped' not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        inspect_job.main(["--run", str(run_root)])
    assert "give --stage STAGE" in capsys.readouterr().err


def test_doc_path_through_every_stage(run_root, capsys):
    assert inspect_job.main([*SET, "--run", str(run_root), "--doc-id", "d5"]) == 0
    from pipelines.core import chain

    # The run holds ingest, dedup's absence and filter; every later stage with a table is "not run".
    later = [s for s in chain.CHAIN[chain.STAGES.index("refs"):] if s.main_table]
    assert capsys.readouterr().out.splitlines() == [
        "ingest    kept     documents",
        "dedup     not run  no deduped table",
        "passages  not run  no passages_deduped table",
        "filter    removed  gopher_quality.word_count",
        *(f"{s.name:<9} not run  no {s.main_table} table" for s in later),
    ]


def test_doc_id_in_no_table_exits_1_with_one_line(run_root, capsys):
    assert inspect_job.main([*SET, "--run", str(run_root), "--doc-id", "nope/42"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"inspect.py: no table of {run_root} holds doc_id 'nope/42' "
                   "(looked in documents, filtered and removed)\n")


def test_a_stage_that_has_not_run_is_named_as_such(run_root, capsys):
    # The run stopped before refs: it printed "0 documents removed by refs", as if refs had kept everything.
    with pytest.raises(SystemExit) as e:
        inspect_job.main([*SET, "--run", str(run_root), "--stage", "refs"])
    assert e.value.code == 1
    assert capsys.readouterr().err == (f"inspect.py: refs has not run in {run_root} (no 'refs_checked' table); run it"
                                       " first (winnow run, or jobs/refs.py)\n")


def test_a_run_root_that_does_not_exist_is_named_before_spark_starts(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        inspect_job.main([*SET, "--run", str(tmp_path / "ot"), "--stage", "filter"])
    assert e.value.code == 1
    assert capsys.readouterr().err == (f"inspect.py: no run at {tmp_path / 'ot'}: the folder does not exist; --run"
                                       " takes the run.root of a run (out for `make run`)\n")


REFS = (f"{FILT}, ref_mentions array<struct<kind:string,label:string,start:int,end:int,dangling:boolean>>, "
        "refs_action string")


def test_doc_path_of_a_local_run_is_read_without_spark_and_shows_each_stages_notes(spark, tmp_path, capsys,
                                                                                   monkeypatch):
    # A kept document with a dangling "Table 2" (refs flags it): its mention shows, kept or not.
    root = tmp_path / "run"
    cfg = load_config(overrides=[f"run.root={root}"])
    doc = _doc("d0", "doc 0 see Table 2")
    tables.write_table(spark.createDataFrame([doc], DOC_SCHEMA), cfg, "documents")
    tables.write_table(spark.createDataFrame([(*doc, 0.0, [("table", "2", 10, 17, True)], "flag")], REFS), cfg,
                       "refs_checked")
    from pipelines.core import session

    def no_spark(*args, **kwargs):
        raise AssertionError("inspect --doc-id of a local run root started Spark")

    monkeypatch.setattr(session, "get_spark", no_spark)
    assert inspect_job.main(["--run", str(root), "--doc-id", "d0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("refs      kept     refs_checked")
    assert lines[at + 1:at + 3] == [" " * 19 + "refs: 1 mention, 1 dangling (action flag)",
                                    " " * 19 + "  table 2 at 10-17: dangling"]


def test_script_runs_without_shadowing_stdlib_and_fails_fast_on_bad_config():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "jobs" / "inspect.py"
    r = subprocess.run([sys.executable, str(script), "--set", "report.plot_format=gif", "--stage", "filter"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "report.plot_format" in r.stderr and "'gif'" in r.stderr, r.stderr


def test_ingest_removals_are_the_quarantined_records(run_root, capsys):
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "ingest", "-n", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 documents removed by ingest")
    assert "--- " in out and "file:/in/a.jsonl:3  reason: quarantine.malformed_json" in out
    assert "detail=Expecting ',' delimiter" in out and '| {"text": "oops' in out
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "ingest", "--reason", "quarantine.text_missing"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 document removed by ingest for quarantine.text_missing")
    assert "file:/in/a.jsonl:7" in out
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "ingest", "-n", "1"]) == 0
    assert capsys.readouterr().out.startswith("1 of 2 documents removed by ingest")


def test_reason_matching_nothing_lists_the_reasons_there_are(run_root, capsys):
    # It printed "(no documents match)": a misspelt reason looked like a stage that removed nothing.
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "filter", "--reason", "no_such_reason"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"inspect.py: no document removed by filter in {run_root} has reason 'no_such_reason' or one in "
                   "its family; its reasons: gopher_repetition.top_2gram (4), gopher_quality.word_count (1)\n")
    assert inspect_job.main([*SET, "--run", str(run_root), "--stage", "ingest", "--reason", "nope"]) == 1
    assert capsys.readouterr().err.endswith("its reasons: quarantine.malformed_json (1), quarantine.text_missing (1)\n")


def test_quarantine_detail_is_whole_and_control_characters_are_escaped():
    # The detail was cut at 60 characters, just before the limit it names; NUL and ESC of an excerpt
    # reached the terminal raw.
    detail = "6 of 6 characters are U+FFFD > max_replacement_fraction 0.25 (wrong or undeclared charset)"
    rows = [{"doc_id": "file:/in/b.jsonl:2", "reason": ["quarantine.too_many_replacements"], "duplicate_of": None,
             "signals": {"detail": detail, "note": "x" * 80}, "text": 'ok\x00\x1b[31mred\r\nnext\tline\r', "n_chars": 25}]
    out = inspect.format_sample(rows, "header")
    assert f"detail={detail}" in out
    assert f"note={'x' * 57}..." in out  # other signals keep their short cut
    assert "    | ok\\x00\\x1b[31mred\n    | next\tline\\x0d" in out
    assert not any(c in out for c in "\x00\x1b\r")


def test_a_row_without_signals_prints_no_blank_line_for_them():
    # A quarantined record with no detail (empty after normalisation) got an empty line between its header
    # and its text.
    rows = [{"doc_id": "file:/in/a.jsonl:1", "reason": ["quarantine.empty_after_normalization"], "duplicate_of": None,
             "signals": {}, "text": " \t", "n_chars": 2}]
    assert inspect.format_sample(rows, "header").splitlines() == [
        "header", "", "--- 1. file:/in/a.jsonl:1  reason: quarantine.empty_after_normalization  (2 chars)", "    |  \t"]
