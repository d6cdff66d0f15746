"""bench/filter_chain.py: the data files of a Delta table's latest version, read from its log."""

from __future__ import annotations

import json

from bench.filter_chain import _active_files


def test_active_files_are_the_adds_not_removed_later(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / "00000000000000000000.json").write_text(
        "\n".join(json.dumps(e) for e in ({"commitInfo": {}}, {"add": {"path": "a.parquet"}},
                                          {"add": {"path": "b.parquet"}})) + "\n")
    (log / "00000000000000000001.json").write_text(
        "\n".join(json.dumps(e) for e in ({"remove": {"path": "a.parquet"}}, {"add": {"path": "c.parquet"}})) + "\n")
    assert _active_files(tmp_path) == [tmp_path / "b.parquet", tmp_path / "c.parquet"]
