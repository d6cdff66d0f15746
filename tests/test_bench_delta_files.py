"""bench.common.delta_files: the data files of a Delta table's latest version."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from bench.common import delta_files


def test_delta_files_are_the_latest_versions_files(tmp_path):
    write_deltalake(str(tmp_path), pa.table({"a": [1, 2]}))
    write_deltalake(str(tmp_path), pa.table({"a": [3]}), mode="overwrite")
    files = delta_files(tmp_path)
    assert len(files) == 1 and files[0].is_file()
    assert pq.read_table(files[0])["a"].to_pylist() == [3]
