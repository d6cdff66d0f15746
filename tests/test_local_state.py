"""Reading one document of a local Delta table without Spark (delta-rs + Arrow), row group by row group."""

from __future__ import annotations

import pyarrow as pa

from pipelines.core.local_state import rows_where


def test_rows_where_reads_the_matching_rows_of_many_files_and_row_groups(tmp_path):
    from deltalake import WriterProperties, write_deltalake

    for part in range(3):  # three commits, three files; each file of several row groups
        ids = [f"d{part}-{i:04d}" for i in range(3000)]
        table = pa.table({"doc_id": ids, "text": [f"text of {i}" for i in ids],
                          "meta": pa.array([[("k", i)] for i in ids], pa.map_(pa.string(), pa.string()))})
        write_deltalake(str(tmp_path), table, mode="append",
                        writer_properties=WriterProperties(max_row_group_size=1000))
    rows = rows_where(str(tmp_path), "doc_id", "d1-2500")
    assert rows == [{"doc_id": "d1-2500", "text": "text of d1-2500", "meta": {"k": "d1-2500"}}]
    assert rows_where(str(tmp_path), "doc_id", "absent") == []
    assert rows_where(str(tmp_path / "no-table"), "doc_id", "d1-2500") is None
