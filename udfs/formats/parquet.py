"""Parquet reader: a split owns the row groups that start in its byte range (as Spark's reader does).

Row numbers are file row numbers (the rows of earlier row groups are counted from the footer), so
they do not depend on the splitting. Rows are read ``batch_rows`` at a time, only the columns the
configured fields need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow as pa

from udfs.formats import scirecords
from udfs.formats.collector import Collector
from udfs.formats.jsonl import from_mapping
from udfs.formats.records import ParseOptions


class FooterError(Exception):
    """The file's footer cannot be read: not Parquet, or damaged."""


def _row_group_start(rg: Any) -> int:
    col = rg.column(0)
    offs = [col.data_page_offset]
    if col.has_dictionary_page and col.dictionary_page_offset:
        offs.append(col.dictionary_page_offset)
    return min(offs)


def owned_row_groups(meta: Any, start: int, end: int | None) -> list[tuple[int, int]]:
    """``(row_group, first_row)`` of the row groups whose first page starts in ``[start, end)``;
    ``first_row`` is 0-based in the file."""
    out, first = [], 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        at = _row_group_start(rg) if rg.num_columns else 0
        if start <= at and (end is None or at < end):
            out.append((i, first))
        first += rg.num_rows
    return out


def read_parquet(
    c: Collector, f: BinaryIO, start: int = 0, end: int | None = None
) -> Iterator[pa.RecordBatch]:
    """Parse the rows of the row groups a split owns into ``c``, yielding full batches.

    Raises:
        FooterError: the footer cannot be read (the caller reports it once per file).
    """
    import pyarrow.parquet as pq

    o = c.opts
    try:
        pf = pq.ParquetFile(f)
    except Exception as e:  # ArrowInvalid on a bad magic/footer, OSError on a short file
        raise FooterError(f"{type(e).__name__}: {e}") from None
    names = pf.schema_arrow.names
    c.file_columns = list(names)
    fields = (o.text_field, o.heading_field, o.id_field, o.url_field, o.source_field, *o.meta_fields)
    wanted = [x for x in fields if x]
    if o.record_format not in ("flat", "mediawiki"):  # structured scientific records read these too
        wanted += [x for x in scirecords.COLUMNS if x not in wanted]
    tops = sorted({x.split(".")[0].split("[]")[0] if x not in names else x for x in wanted} & set(names))
    columnar = is_columnar(o, pf.schema_arrow)
    for rg, first in owned_row_groups(pf.metadata, start, end):
        record = first
        for batch in pf.iter_batches(batch_size=o.batch_rows, row_groups=[rg], columns=tops):
            if columnar:
                got = batch.schema.names
                col = {k: batch.column(k) for k in (o.id_field, o.url_field, o.source_field) if k in got}
                c.doc_columns(record + 1, batch.column(o.text_field), col.get(o.id_field),
                              col.get(o.url_field), col.get(o.source_field),
                              lambda i, b=batch: b.slice(i, 1).to_pylist()[0])
                record += batch.num_rows
            else:
                for row in batch.to_pylist():
                    record += 1
                    from_mapping(c, record, row, _excerpt_of(row, 4 * o.excerpt_chars), False)
            if c.full():
                yield from c.flush()
    yield from c.flush()


def is_columnar(o: ParseOptions, schema: pa.Schema) -> bool:
    """True when a file's rows can go to the collector as Arrow columns (:meth:`Collector.doc_columns`),
    with the result :func:`from_mapping` gives row by row: the text, id, url and source fields are
    plain column names (no dotted path, no ``[]``, no heading), the text column is present, every one
    present is a string column (no ``as_str`` of numbers or nested values), and neither ``meta``
    fields, the mojibake repair nor a structured record format (or wikitext) are asked for."""
    names = [x for x in (o.text_field, o.id_field, o.url_field, o.source_field) if x]
    if o.heading_field or o.meta_fields or o.fix_mojibake or o.text_field not in schema.names \
            or o.record_format in (*scirecords.STRUCTURED, "mediawiki"):
        return False
    for name in names:
        if "." in name or "[]" in name:
            return False
        if name in schema.names and not _is_string(schema.field(name).type):
            return False
    return True


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _excerpt_of(row: dict, n: int):
    # Rendered only when the row is quarantined: most rows never need their JSON.
    return lambda: json.dumps(row, ensure_ascii=False, default=repr)[:n]
