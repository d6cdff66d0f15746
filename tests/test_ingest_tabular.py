"""udfs/formats/tabular.py and nested field paths: .json files, CSV/TSV, body_text[].text, bad files.

Invented inputs only; no Spark except the one end-to-end check of ingest.max_quarantine_fraction.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections import Counter

import pyarrow as pa
import pytest
import zstandard

from pipelines.core.config import ConfigError, load_config
from pipelines.ingest.stage import bad_files
from udfs.formats import ParseOptions, explode_file
from udfs.formats.records import looks_like
from udfs.formats.tabular import MAX_JSON_DEPTH, DepthGuard


def _rows(path: str, data: bytes, opts: ParseOptions | None = None) -> list[dict]:
    return pa.Table.from_batches(list(explode_file(path, data, opts or ParseOptions()))).to_pylist()


def _docs(rows):
    return [(r["record"], r["src_id"], r["text"]) for r in rows if r["kind"] == "doc"]


def _bad(rows):
    return [(r["record"], r["reason"]) for r in rows if r["kind"] == "quarantine"]


# ------------------------------------------------------------------------------------------ .json
ARRAY = json.dumps([{"id": "a", "text": "Alpha one."}, {"id": "b", "text": "Beta two."}], indent=2).encode()


@pytest.mark.parametrize("name, data", [
    ("x.json", ARRAY),
    ("x.json.gz", gzip.compress(ARRAY)),
    ("x.json.bz2", bz2.compress(ARRAY)),
    ("x.json.xz", lzma.compress(ARRAY)),
    ("x.json.zst", zstandard.ZstdCompressor().compress(ARRAY)),
    ("x.json", b"\xef\xbb\xbf" + ARRAY),  # a BOM (Windows tools)
    # concatenated pretty-printed objects, and JSONL named .json
    ("x.json", json.dumps({"id": "a", "text": "Alpha one."}, indent=4).encode() + b"\n"
     + json.dumps({"id": "b", "text": "Beta two."}, indent=4).encode()),
    ("x.json", b'{"id": "a", "text": "Alpha one."}\n{"id": "b", "text": "Beta two."}\n'),
])
def test_json_array_or_objects_pretty_printed_any_compression(name, data):
    rows = _rows(name, data)
    assert _docs(rows) == [(1, "a", "Alpha one."), (2, "b", "Beta two.")]
    assert _bad(rows) == []
    assert rows[-1]["kind"] == "file" and rows[-1]["record"] == 2


def test_json_single_object_is_one_document():
    data = json.dumps({"id": "only", "text": "Just one\ndocument.", "url": "https://e/x"}, indent=2).encode()
    rows = _rows("one.json", data)
    assert _docs(rows) == [(1, "only", "Just one\ndocument.")] and rows[0]["url"] == "https://e/x"


def test_json_syntax_error_keeps_values_before_it_and_quarantines_the_rest_once():
    rows = _rows("cut.json", b'[{"id": "a", "text": "ok"},\n {"id": "b", "text": "brok')
    assert _docs(rows) == [(1, "a", "ok")]
    assert _bad(rows) == [(2, "malformed_json")]
    # it went on over three lines with yajl's "(right here) ------^" pointer, and said "the 1 values"
    detail = rows[1]["detail"]
    assert detail.startswith("array item 2: IncompleteJSONError: ") and "\n" not in detail and "right here" not in detail
    assert detail.endswith("; the 1 value before it was kept, the rest of the file is not read")


def test_invalid_utf8_in_json_and_csv_costs_a_character_not_the_file():
    for name, data in (("u.json", '[{"text": "bad \xff byte, Grüße"}, {"text": "fine"}]'.encode("latin-1")),
                       ("u.csv", 'text\n"bad \xff byte, Grüße"\nfine\n'.encode("latin-1"))):
        rows = _rows(name, data.replace("Grüße".encode("latin-1"), "Grüße".encode()))
        assert [(r["text"], r["n_replaced"]) for r in rows if r["kind"] == "doc"] == [
            ("bad \ufffd byte, Grüße", 1), ("fine", 0)], name


def test_json_items_that_are_not_objects_are_invalid_records():
    rows = _rows("mixed.json", b'[{"text": "fine"}, 3, "str", null]')
    assert _docs(rows)[0][2] == "fine"
    assert _bad(rows) == [(2, "invalid_record"), (3, "invalid_record"), (4, "invalid_record")]


def test_json_value_over_the_limit_is_too_large_without_being_held():
    big = json.dumps([{"text": "x" * 300_000}, {"text": "y" * 50}]).encode()  # over the cap + read buffers
    rows = _rows("big.json", big, ParseOptions(max_doc_bytes=100))
    assert _docs(rows) == [] and _bad(rows) == [(1, "too_large")]


def test_empty_json_file_and_empty_array():
    assert _bad(_rows("e.json", b"")) == [(0, "empty_file")]
    assert _bad(_rows("e.json", b"  [ ]\n")) == [(0, "empty_file")]


# --------------------------------------------------------------------------------------- CSV/TSV
def test_csv_quoted_fields_with_newlines_commas_and_quotes():
    data = b'id,text,lang\r\n1,"Hello, ""world""\r\nsecond line",en\r\n2,Plain,de\r\n\r\n3,,fr\r\n4\r\n'
    rows = _rows("x.csv", data, ParseOptions(meta_fields=("lang",)))
    assert _docs(rows) == [(1, "1", 'Hello, "world"\nsecond line'), (2, "2", "Plain")]
    assert rows[0]["meta"] == [("lang", "en")]
    # an empty text field normalises to nothing; a short row lacks the text column
    assert sorted(_bad(rows)) == [(3, "empty_after_normalization"), (4, "text_missing")]
    assert dict(rows[-1]["meta"])["skipped.blank_line"] == "1"


def test_csv_quote_left_open_is_quarantined_not_merged_with_the_rows_after_it():
    data = b'id,text\n1,Kept.\n2,"unterminated\n3,swallowed\n4,too\n'
    rows = _rows("x.csv", data)
    assert _docs(rows) == [(1, "1", "Kept."), (3, "3", "swallowed"), (4, "4", "too")]
    assert _bad(rows) == [(2, "malformed_csv")]
    (bad,) = [r for r in rows if r["kind"] == "quarantine"]
    assert bad["excerpt"] == '2,"unterminated\n'
    assert "(line 3)" in bad["detail"] and "not closed before the end of the file" in bad["detail"]
    assert "lines 3-5 would be one field" in bad["detail"]
    assert rows[-1]["record"] == 4
    # a field that spans lines and closes, and a bare quote inside a field, stay documents
    ok = b'id,text\n1,"two\nlines"\n2,a"b\n3,"c" d\n'
    assert _docs(_rows("x.csv", ok)) == [(1, "1", "two\nlines"), (2, "2", 'a"b'), (3, "3", "c d")]


def test_csv_row_longer_than_the_header_is_quarantined_not_cut():
    # unquoted commas in the text: the text column would hold "Hello" and the rest would go unread
    data = b'id,text\n1,"Quoted, as it should be."\n2,Hello, world, unquoted.\n3,Trailing empty field,\n'
    rows = _rows("x.csv", data)
    assert _docs(rows) == [(1, "1", "Quoted, as it should be."), (3, "3", "Trailing empty field")]
    assert _bad(rows) == [(2, "malformed_csv")]
    (bad,) = [r for r in rows if r["kind"] == "quarantine"]
    assert "(line 3): 4 fields, the header has 2" in bad["detail"] and "must be quoted" in bad["detail"]
    tsv = b'id\ttext\n1\tfirst part\tsecond part\n'
    assert _bad(_rows("x.tsv", tsv)) == [(1, "malformed_csv")]
    # a header without the text column: the columns it has are named
    (bad,) = _rows("x.csv", b'id,body\n1,Some text.\n')[:1]
    assert (bad["reason"], bad["detail"]) == ("text_missing", "field 'text' is absent (fields: id, body)")


def test_csv_quote_left_open_and_closed_rows_later_costs_one_row():
    # the lenient reader closed the open quote at the next row's quote: three rows merged into one
    data = b'id,text\n1,"Open quote.\n2,Second.\n3,"Third."\n4,Fourth.\n'
    rows = _rows("x.csv", data)
    assert _docs(rows) == [(2, "2", "Second."), (3, "3", "Third."), (4, "4", "Fourth.")]
    assert _bad(rows) == [(1, "malformed_csv")]
    (bad,) = [r for r in rows if r["kind"] == "quarantine"]
    assert "(line 2)" in bad["detail"] and "closed by a quote that text follows" in bad["detail"]
    # a TSV the same way; the line numbers of later errors count each line once
    tsv = b'a\t"open\nb\tfine\nc\t"x\ny"z\nd\tlast\n'
    rows = _rows("x.tsv", tsv, ParseOptions(csv_header=False, text_field="1", id_field="0"))
    assert _docs(rows) == [(2, "b", "fine"), (5, "d", "last")]
    assert sorted(_bad(rows)) == [(1, "malformed_csv"), (3, "malformed_csv"), (4, "text_missing")]
    details = [r["detail"] for r in rows if r["reason"] == "malformed_csv"]
    assert [d.split(":")[0] for d in details] == ["row 1 (line 1)", "row 3 (line 3)"]


def test_tsv_by_column_index_without_header_and_gz():
    data = gzip.compress(b"a\tFirst text.\tx\nb\t\"Quoted\ttab\"\ty\n")
    rows = _rows("x.tsv.gz", data, ParseOptions(csv_header=False, text_field="1", id_field="0", meta_fields=("2",)))
    assert _docs(rows) == [(1, "a", "First text."), (2, "b", "Quoted\ttab")]
    assert rows[1]["meta"] == [("2", "y")]


def test_column_indices_given_as_numbers_name_the_columns():
    # `--set ingest.fields.text=1` parses as YAML's integer: it names column 1 of a headerless file
    fields = load_config(overrides=["ingest.csv_header=false", "ingest.fields.text=1", "ingest.fields.id=0",
                                    "ingest.fields.meta=[2, lang]"]).ingest.fields
    assert (fields.text, fields.id, fields.meta) == ("1", "0", ["2", "lang"])
    with pytest.raises(ConfigError, match="ingest.fields.text"):
        load_config(overrides=["ingest.fields.text=true"])


def test_csv_header_names_and_indices_both_work_and_bom_is_dropped():
    data = "\ufeffdoc,body\nd1,Über alles.\n".encode()
    assert _docs(_rows("x.csv", data, ParseOptions(text_field="body", id_field="doc"))) == [(1, "d1", "Über alles.")]
    assert _docs(_rows("x.csv", data, ParseOptions(text_field="1", id_field="0"))) == [(1, "d1", "Über alles.")]


def test_csv_field_over_the_limit_is_quarantined_and_the_rest_is_read():
    data = b"id,text\n1," + b"x" * 3000 + b"\n2,Fine.\n"
    rows = _rows("x.csv", data, ParseOptions(max_doc_bytes=100))
    assert _docs(rows) == [(2, "2", "Fine.")]
    assert [r for _, r in _bad(rows)] in (["malformed_csv"], ["too_large"])


def test_csv_quote_left_open_past_the_field_limit_loses_no_line():
    # the open field reaches csv's field limit before the end of the file: the lines it swallowed are
    # read again as rows instead of vanishing inside one quarantined record
    import csv

    before = csv.field_size_limit(2000)  # process-wide and only ever raised by read_csv: pin it small
    try:
        body = b"".join(b"%d,Line %d.\n" % (i, i) for i in range(3, 400))
        rows = _rows("x.csv", b'id,text\n1,Kept.\n2,"open quote\n' + body + b"400,Last.\n",
                     ParseOptions(max_doc_bytes=100))
    finally:
        csv.field_size_limit(before)
    docs = _docs(rows)
    assert [d[1] for d in docs] == ["1"] + [str(i) for i in range(3, 401)]
    (bad,) = [r for r in rows if r["kind"] == "quarantine"]
    assert (bad["record"], bad["reason"], bad["excerpt"]) == (2, "malformed_csv", '2,"open quote\n')
    assert "still open at line" in bad["detail"] and "field limit" in bad["detail"]
    assert rows[-1]["record"] == 400


# ---------------------------------------------------------------------------------- nested paths
S2ORC = {"paper_id": "p1", "body_text": [
    {"section": "Introduction", "text": "First paragraph."},
    {"section": "Introduction", "text": "Second paragraph."},
    {"section": "Methods", "text": "Third paragraph."},
    {"text": "No section."},
]}


def test_body_text_paragraphs_joined_with_blank_lines():
    rows = _rows("s.jsonl", json.dumps(S2ORC).encode(), ParseOptions(text_field="body_text[].text", id_field="paper_id"))
    assert _docs(rows) == [(1, "p1", "First paragraph.\n\nSecond paragraph.\n\nThird paragraph.\n\nNo section.")]


def test_section_headings_kept_once_per_section_when_a_path_names_them():
    opts = ParseOptions(text_field="body_text[].text", heading_field="body_text[].section", id_field="paper_id")
    rows = _rows("s.json", json.dumps([S2ORC]).encode(), opts)
    assert _docs(rows)[0][2] == (
        "Introduction\n\nFirst paragraph.\n\nSecond paragraph.\n\nMethods\n\nThird paragraph.\n\nNo section."
    )


def test_list_of_strings_field_and_nested_lists():
    rows = _rows("p.jsonl", b'{"paragraphs": ["One.", null, "Two."]}\n{"paragraphs": [["A."], ["B."]]}\n'
                 b'{"paragraphs": ["One.", 3]}\n', ParseOptions(text_field="paragraphs"))
    assert [t for _, _, t in _docs(rows)] == ["One.\n\nTwo.", "A.\n\nB."]
    assert _bad(rows) == [(3, "text_not_string")]


def test_nested_path_in_parquet_reads_the_top_column():
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([S2ORC]), buf)
    rows = _rows("s.parquet", buf.getvalue(), ParseOptions(text_field="body_text[].text", id_field="paper_id"))
    assert _docs(rows)[0][2].startswith("First paragraph.\n\nSecond")


def test_heading_must_share_the_text_array():
    with pytest.raises(ConfigError, match="ingest.fields.heading"):
        load_config(overrides=["ingest.fields.text=body_text[].text", "ingest.fields.heading=sections[].title"])
    load_config(overrides=["ingest.fields.text=body_text[].text", "ingest.fields.heading=body_text[].section"])


# ------------------------------------------------------------------------- mostly quarantined files
@pytest.mark.parametrize("head, expected", [
    (b'{\n  "id": 1,\n  "text": "a"\n}', "json (a pretty-printed object"),
    (b'[\n {"text": "a"}]', "json (an array"),
    (b'{"text": "a"}\n{"text": "b"}\n', "jsonl"),
    (b"id\ttext\n1\ta\n2\tb\n", "tsv"),
    (b"id,text\n1,a\n2,b\n", "csv"),
    (b"\x1f\x8b\x08\x00", "gzip-compressed data"),
    (b"PAR1\x15\x04", "parquet"),
    (b"WARC/1.0\r\n", "warc"),
    (b"<mediawiki xmlns=", "mediawiki xml"),
    (b"Just some words.", "plain text"),
    (b"Caf\xe9 cr\xe8me, na\xefve text in Latin-1.", "plain text"),  # a few undecodable bytes: still text
    (bytes(range(256)) * 4, "binary data (not text)"),
    (b"\x89PNG\r\n\x1a\n", "binary data (a PNG image)"),
    ('{"text": "a"}\n'.encode("utf-16"), "UTF-16 (little-endian, byte-order mark) text, not UTF-8"),
    ('{"text": "a"}\n{"text": "b"}\n'.encode("utf-16-be"), "UTF-16BE text, not UTF-8"),
    ('{"text": "a"}\n{"text": "b"}\n'.encode("utf-32-le"), "UTF-32LE text, not UTF-8"),
])
def test_looks_like(head, expected):
    assert looks_like(head).startswith(expected)


def _cfg(**kw):
    return load_config(overrides=[f"ingest.{k}={v}" for k, v in kw.items()]).ingest


def _summary(path, fmt="jsonl", looks="json (a pretty-printed object)"):
    return {"input_file": path, "split_start": 0, "meta": [("format", fmt), ("looks_like", looks)]}


def test_bad_file_just_over_and_just_under_the_fraction():
    over = [("f.jsonl", None, 9), ("f.jsonl", "malformed_json", 10), ("f.jsonl", "text_missing", 1)]  # 11/20
    under = [("g.jsonl", None, 10), ("g.jsonl", "malformed_json", 10)]  # 10/20, not over 0.5
    lines = bad_files(over + under, [_summary("f.jsonl"), _summary("g.jsonl")], _cfg())
    assert lines == [
        "ingest: f.jsonl: 11 of 20 records quarantined (> ingest.max_quarantine_fraction 0.5), mostly "
        "malformed_json (10); read as jsonl, looks like json (a pretty-printed object)"
    ]


def test_a_parquet_file_without_the_text_column_is_reported_with_its_columns():
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"body": ["Some words."] * 30, "id": [str(i) for i in range(30)]}), buf)
    rows = _rows("x.parquet", buf.getvalue())
    assert _bad(rows) == [(i, "text_missing") for i in range(1, 31)]
    (summary,) = [r for r in rows if r["kind"] == "file"]
    assert dict(summary["meta"])["columns"] == "body, id"
    (line,) = bad_files([("x.parquet", "text_missing", 30)], [summary], _cfg())
    assert line.endswith("mostly text_missing (30); read as parquet, its columns: body, id")


def test_a_binary_file_named_jsonl_is_described_as_binary():
    import random

    data = bytes(random.Random(7).randrange(256) for _ in range(3000))
    rows = _rows("x.jsonl", data)
    (summary,) = [r for r in rows if r["kind"] == "file"]
    assert dict(summary["meta"])["looks_like"] == "binary data (not text)"
    (line,) = bad_files([("x.jsonl", "malformed_json", 40)], [summary], _cfg())
    assert line.endswith("read as jsonl, looks like binary data (not text)")


def test_a_small_gzip_file_named_jsonl_is_named_with_the_suffix_to_give_it():
    import gzip

    data = gzip.compress(b'{"text": "One."}\n{"text": "Two."}\n{"text": "Three."}\n', mtime=0)
    rows = _rows("x.jsonl", data)
    (summary,) = [r for r in rows if r["kind"] == "file"]
    counts = [("x.jsonl", reason, n) for reason, n in Counter(r for _, r in _bad(rows)).items()]
    assert counts and sum(n for _, _, n in counts) < _cfg().quarantine_min_records
    (line,) = bad_files(counts, [summary], _cfg())
    assert line.endswith("read as jsonl, looks like gzip-compressed data (a file's compression is read "
                         "from its name: name it with .gz at the end)"), line


def test_a_small_file_named_with_its_compression_is_judged_by_its_records():
    from pathlib import Path

    # a .jsonl.gz: the head described is the decompressed text, and 2 bad lines of 3 stay under the floor
    data = gzip.compress(b'{"text": "One."}\n{"text": \n[1]\n', mtime=0)
    rows = _rows("x.jsonl.gz", data)
    (summary,) = [r for r in rows if r["kind"] == "file"]
    assert dict(summary["meta"])["looks_like"] == "jsonl"
    assert bad_files([("x.jsonl.gz", r, 1) for _, r in _bad(rows)], [summary], _cfg()) == []
    # a .warc.wet.gz is read from its raw bytes: they are not described as a misnamed gzip file
    wet = Path(__file__).resolve().parents[1] / "sample_data" / "crawl-00000.warc.wet.gz"
    (summary,) = [r for r in _rows("crawl.warc.wet.gz", wet.read_bytes()) if r["kind"] == "file"]
    assert "gzip" not in str(dict(summary["meta"]).get("looks_like"))


def test_bad_file_needs_min_records():
    few = [("f.jsonl", "malformed_json", 19)]
    assert bad_files(few, [_summary("f.jsonl")], _cfg()) == []
    assert len(bad_files(few, [_summary("f.jsonl")], _cfg(quarantine_min_records=19))) == 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32-le"])
def test_a_small_utf16_file_is_named_with_its_encoding_under_min_records(encoding):
    data = '{"text": "One."}\n{"text": "Two."}\n'.encode(encoding)
    rows = _rows("x.jsonl", data)
    assert _docs(rows) == [] and {r for _, r in _bad(rows)} == {"malformed_json"}
    assert all("the file looks like UTF-16 or UTF-32 text" in r["detail"] for r in rows if r["kind"] == "quarantine")
    # one record per record of the file: the NUL bytes left after a little-endian file's last line break
    # are no third record
    assert [n for n, _ in _bad(rows)] == [1, 2]
    (summary,) = [r for r in rows if r["kind"] == "file"]
    counts = [("x.jsonl", "malformed_json", len(_bad(rows)))]
    (line,) = bad_files(counts, [summary], _cfg())
    assert f"quarantined (> ingest.max_quarantine_fraction 0.5), mostly malformed_json ({len(_bad(rows))})" in line
    assert "text, not UTF-8 (re-encode it, e.g. iconv -f UTF-" in line
    # a small UTF-8 file with as many bad lines stays under the floor
    assert bad_files(counts, [_summary("x.jsonl", looks="jsonl")], _cfg()) == []


def test_mostly_quarantined_file_fails_the_job_after_writing_the_tables(spark, make_cfg, tmp_path, capsys):
    from pipelines.core import tables
    from pipelines.core.runner import run_stage
    from pipelines.ingest.stage import BadInputFileError

    d = tmp_path / "in"
    d.mkdir()
    pretty = json.dumps([{"id": i, "text": f"Document {i}."} for i in range(6)], indent=2)  # 26 lines
    (d / "pretty.jsonl").write_text(pretty)
    (d / "good.csv").write_text("id,text\n" + "".join(f"{i},Row {i}.\n" for i in range(30)))
    cfg = make_cfg(f"ingest.inputs=['{d}/*']")
    with pytest.raises(BadInputFileError, match=r"tables written: 30 documents, 26 records quarantined\).*"
                                                r"ingest.on_bad_file=continue"):
        run_stage(spark, cfg, "ingest")
    err = capsys.readouterr().err
    assert "pretty.jsonl: 26 of 26 records quarantined" in err and "mostly malformed_json" in err
    assert "looks like json (an array" in err and "good.csv" not in err
    assert tables.read_path(spark, f"{cfg.run.root}/tables/documents").count() == 30

    ok = make_cfg(f"ingest.inputs=['{d}/*']", "ingest.on_bad_file=continue", root=tmp_path / "run2")
    report = run_stage(spark, ok, "ingest")
    assert len(report.extra["bad_files"]) == 1 and report.rows_out == 30
    right = make_cfg(f"ingest.inputs=['{d}/*']", "ingest.format=json", root=tmp_path / "run3")
    (d / "good.csv").unlink()
    assert run_stage(spark, right, "ingest").rows_out == 6


def _big_file(tmp_path, name: str, head: bytes, item, sep: bytes, tail: bytes, n: int):
    p = tmp_path / name
    with open(p, "wb") as f:
        f.write(head)
        for i in range(n):
            f.write((sep if i else b"") + item(i))
        f.write(tail)
    return p


@pytest.mark.parametrize("name, head, item, sep, tail", [
    ("big.json", b"[\n", lambda i: json.dumps({"id": i, "text": f"Document {i} " + "word " * 200}, indent=2).encode(),
     b",\n", b"\n]\n"),
    ("big.csv", b"id,text\n", lambda i: f'{i},"Document {i}\n{"word " * 200}"\n'.encode(), b"", b""),
    ("big.xml", b"<mediawiki>", lambda i: (f"<page><title>P{i}</title><ns>0</ns><id>{i}</id><revision><text>"
                                          f"Document {i} {'word ' * 200}</text></revision></page>").encode(), b"",
     b"</mediawiki>"),
])
def test_large_files_are_streamed_in_bounded_memory(tmp_path, name, head, item, sep, tail):
    import tracemalloc

    from udfs.formats import explode_split

    small = _big_file(tmp_path, "small-" + name, head, item, sep, tail, 10)
    path = _big_file(tmp_path, name, head, item, sep, tail, 6000)  # ~6-8 MB
    size = path.stat().st_size
    opts = ParseOptions(batch_rows=256, read_bytes=256 << 10)
    for _ in explode_split(str(small), lambda: open(small, "rb"), small.stat().st_size, opts):
        pass  # imports and caches first: they are not the file's memory
    tracemalloc.start()
    docs = 0
    for batch in explode_split(str(path), lambda: open(path, "rb"), size, opts):
        docs += batch.num_rows if batch.column("kind")[0].as_py() == "doc" else 0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert docs == 6000
    assert peak < 2_500_000, f"peak {peak} bytes of Python memory for a {size}-byte file"


# ------------------------------------------------------------------------- .json nesting depth guard
def test_json_nested_200000_levels_is_malformed_quickly_and_the_items_before_it_are_kept():
    import time

    deep = b'[{"text": "a"}, {"text": "b"}, {"text": "y", "meta": ' + b"[" * 200_000 + b"]" * 200_000 + b"}]"
    t = time.perf_counter()
    rows = _rows("deep.json", deep)
    assert time.perf_counter() - t < 1.0
    assert [t for *_, t in _docs(rows)] == ["a", "b"]
    assert _bad(rows) == [(3, "malformed_json")]
    detail = [r["detail"] for r in rows if r["kind"] == "quarantine"][0]
    assert f"nesting deeper than {MAX_JSON_DEPTH} levels" in detail
    assert "the 2 values before it were kept, the rest of the file is not read" in detail


@pytest.mark.parametrize("read_bytes", [1, 999, 1 << 16, 4 << 20])
def test_json_depth_exactly_at_the_limit_parses_and_one_more_does_not(read_bytes):
    opts = ParseOptions(read_bytes=read_bytes)
    inner = MAX_JSON_DEPTH - 1  # the object itself is level 1
    at = b'{"text": "y", "meta": ' + b"[" * inner + b"]" * inner + b"}"
    assert [t for *_, t in _docs(_rows("at.json", at, opts))] == ["y"]
    over = b'{"text": "y", "meta": ' + b"[" * (inner + 1) + b"]" * (inner + 1) + b"}"
    assert _bad(_rows("over.json", over, opts)) == [(1, "malformed_json")]


def _feed(data: bytes, piece: int, limit: int = 10**9):
    g = DepthGuard(limit)
    for i in range(0, len(data), piece):
        if (cut := g.feed(data[i:i + piece])) is not None:
            return i + cut
    return g.depth, g.in_string, g.odd_backslashes


def test_depth_guard_ignores_brackets_in_strings_and_escaped_quotes_in_any_piece_size():
    doc = rb'[{"t": "a \" [[[[", "u": "\\", "v": ["\\\"[{", {"w": "}}]]"}], "x": "\\"}]'
    json.loads(doc)  # valid: an escaped quote, even and odd backslash runs before quotes
    for piece in (1, 2, 3, 5, len(doc)):
        assert _feed(doc, piece) == (0, False, False), piece
        assert _feed(doc, piece, 4) == (0, False, False)  # [ { [ { is 4 levels
        assert _feed(doc, piece, 3) == doc.index(b'{"w"')
    # a run of backslashes that ends exactly at a piece boundary: odd escapes the quote, even does not
    for run in range(1, 7):
        data = b'["' + b"\\" * run + b'"[["]'
        expected = (0, False) if run % 2 else (3, True)  # even: the string closes, [[ open, "] opens one
        for cut in range(len(data) + 1):
            g = DepthGuard(10**9)
            assert g.feed(data[:cut]) is None and g.feed(data[cut:]) is None
            assert (g.depth, g.in_string) == expected, (run, cut)


def test_depth_guard_one_byte_pieces_match_the_whole_buffer_on_random_input():
    import random

    rnd = random.Random(7)
    for _ in range(150):
        data = bytes(rnd.choice(b'[]{}"\\ab') for _ in range(rnd.randint(0, 60)))
        for limit in (2, 10**9):
            whole = _feed(data, max(len(data), 1), limit)
            assert _feed(data, 1, limit) == whole and _feed(data, 3, limit) == whole, (data, limit)


def test_json_guard_sees_the_repaired_utf8_and_a_normal_file_is_unchanged():
    # a BOM and invalid UTF-8 before brackets in strings: counted after the repair, as ijson reads them
    data = b'\xef\xbb\xbf[{"text": "bad \xff [[[ {{ \\" ]]", "m": [[1], {"a": [2]}]}, {"text": "fine"}]'
    rows = _rows("u.json", data, ParseOptions(read_bytes=3))
    assert [r["text"] for r in rows if r["kind"] == "doc"] == ['bad \ufffd [[[ {{ " ]]', "fine"]
    assert _bad(rows) == []
    assert _docs(_rows("x.json", ARRAY, ParseOptions(read_bytes=1))) == [(1, "a", "Alpha one."), (2, "b", "Beta two.")]
