"""pipelines/core/eval_sets.py + preflight: bad evaluation sets fail before Spark, naming the key; bad rows are counted."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.core.config import ConfigError
from pipelines.core.eval_sets import EvalSetError, read_items
from pipelines.core.preflight import PreflightError, check


def _set(make_cfg, paths, fields=("question", "answer"), **extra):
    es = {"name": "qa", "paths": [str(p) for p in paths], "fields": list(fields), **extra}
    return make_cfg(f"decontam.eval_sets={json.dumps([es])}")


def _jsonl(path, rows):
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_rows_are_read_and_bad_rows_counted(make_cfg, tmp_path):
    p = _jsonl(tmp_path / "qa.jsonl", [
        {"question": "What is one plus one?", "answer": 2},
        {"question": "Pick one", "answer": ["red", "blue"]},
        {"question": "No answer field here"},
        {"question": "", "answer": ""},
        "{not json\n",
        "[1, 2]\n",
        {"question": {"nested": 1}},
    ])
    items = read_items(_set(make_cfg, [p]).decontam.eval_sets[0], 0)
    assert items.texts == ["What is one plus one?\n2", "Pick one\nred\nblue", "No answer field here"]
    assert items.ids == ["qa.jsonl:1", "qa.jsonl:2", "qa.jsonl:3"]
    assert items.rows == 7
    assert dict(items.skipped) == {"no_text": 1, "malformed_json": 1, "not_an_object": 1, "not_text": 1}
    assert dict(items.missing_fields) == {"answer": 2}


def test_gzip_parquet_and_id_field(make_cfg, tmp_path):
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(json.dumps({"id": "x1", "question": "q", "answer": "a"}).encode()))
    pqf = tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": ["y1"], "question": ["pq question"], "answer": [None]}), pqf)
    items = read_items(_set(make_cfg, [gz, pqf], id_field="id").decontam.eval_sets[0], 0)
    assert (items.ids, items.texts) == (["x1", "y1"], ["q\na", "pq question"])


@pytest.mark.parametrize("case, fragment", [
    ("missing", r"decontam.eval_sets\[0\].paths: .* matches no file \(eval set 'qa'\)$"),
    ("folder", r"decontam.eval_sets\[0\].paths: .* matches no file \(eval set 'qa'\); it is a folder: give its "
               r"files, e.g. '.*/qa.jsonl/\*.jsonl'$"),
    ("latin1", r"decontam.eval_sets\[0\].paths: .* is not UTF-8 text"),
    ("utf16", r"decontam.eval_sets\[0\].paths: .* is not UTF-8 text \(UTF-16 .*iconv -f UTF-16 -t UTF-8"),
    ("no_field", r"decontam.eval_sets\[0\].fields: \['answer'\] in no row"),
    # it ended "0 rows, skipped {}": a Python dict, and no word of what to do
    ("empty", r"eval set 'qa' \(decontam.eval_sets\[0\].paths\) has no item with text: 0 rows; point it at "
              r"the files of the set's items, or remove the set$"),
])
def test_preflight_names_the_key(make_cfg, tmp_path, case, fragment):
    path = tmp_path / "qa.jsonl"
    if case == "latin1":
        path.write_bytes('{"question": "caf\u00e9", "answer": "x"}\n'.encode("latin-1"))
    elif case == "utf16":
        path.write_bytes('{"question": "caf\u00e9", "answer": "x"}\n'.encode("utf-16"))
    elif case == "no_field":
        _jsonl(path, [{"question": "a question", "answers": "typo in the field name"}])
    elif case == "folder":
        path.mkdir()
    elif case == "empty":
        path.write_text("\n\n", encoding="utf-8")
    cfg = _set(make_cfg, [path])
    with pytest.raises(PreflightError, match=fragment):
        check(cfg, ["decontam"])
    with pytest.raises(EvalSetError, match=fragment):
        read_items(cfg.decontam.eval_sets[0], 0)
    check(cfg, ["refs"])  # only a run of the decontam stage reads the sets


def test_config_errors(make_cfg):
    with pytest.raises(ConfigError, match="exactly one of paths"):
        make_cfg('decontam.eval_sets=[{name: qa, fields: [q]}]')
    with pytest.raises(ConfigError, match="eval_sets.0.name"):
        make_cfg('decontam.eval_sets=[{name: Bad-Name, paths: [a.jsonl], fields: [q]}]')
    with pytest.raises(ConfigError, match="repeated: \\['qa'\\]"):
        make_cfg('decontam.eval_sets=[{name: qa, paths: [a.jsonl], fields: [q]}, {name: qa, paths: [b.jsonl], fields: [q]}]')
    with pytest.raises(ConfigError, match="decontam.action"):
        make_cfg("decontam.action=erase")


def test_an_edited_eval_set_is_a_changed_input_of_decontam(make_cfg, tmp_path, spark):
    # An item added to a set's file left the config as it was: the plan called decontam up to date and the
    # shards kept the documents the new item matches.
    import os

    from pipelines.core.runs import input_state

    path = _jsonl(tmp_path / "qa.jsonl", [{"question": "What is the capital of France?", "answer": "Paris"}])
    cfg = _set(make_cfg, [path])
    before = input_state(None, cfg, "decontam")["eval_set.qa"]
    assert before.startswith("sha256:") and input_state(spark, cfg, "decontam")["eval_set.qa"] == before
    _jsonl(path, [{"question": "What is the capital of France?", "answer": "Paris"},
                  {"question": "Which river runs through Rome?", "answer": "Tiber"}])
    os.utime(path, ns=(10**18, 10**18))
    assert input_state(None, cfg, "decontam")["eval_set.qa"] != before
    assert "eval_set.qa" not in input_state(None, make_cfg(), "decontam")
