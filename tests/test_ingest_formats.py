"""udfs/formats/: every input format and every bad input, parsed without Spark."""

from __future__ import annotations

import gzip
import io
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from udfs.formats import QUARANTINE_REASONS, ParseOptions, decompress, explode_file, gzip_error, split_name
from udfs.formats.compression import decompressed_chunks

OPTS = ParseOptions()


def _rows(path: str, data: bytes, opts: ParseOptions = OPTS) -> list[dict]:
    return pa.Table.from_batches(list(explode_file(path, data, opts))).to_pylist()


def _docs(rows):
    return [(r["record"], r["src_id"], r["text"]) for r in rows if r["kind"] == "doc"]


def _bad(rows):
    return [(r["record"], r["reason"]) for r in rows if r["kind"] == "quarantine"]


JSONL = b'{"id": "a", "text": "Alpha.", "url": "u1", "lang": "en", "meta": {"k": 1}}\n{"id": 7, "text": "Beta."}\n'


@pytest.mark.parametrize("name, data", [
    ("x.jsonl", JSONL),
    ("x.jsonl.gz", gzip.compress(JSONL)),
    ("x.jsonl.zst", zstandard.ZstdCompressor().compress(JSONL)),
    ("x.ndjson.gz", gzip.compress(JSONL[:40]) + gzip.compress(JSONL[40:])),  # two gzip members
])
def test_jsonl_plain_gz_zst(name, data):
    rows = _rows(name, data, ParseOptions(meta_fields=("lang", "meta")))
    assert _docs(rows) == [(1, "a", "Alpha."), (2, "7", "Beta.")]
    assert rows[0]["url"] == "u1" and rows[0]["source"] == "x"
    assert rows[0]["meta"] == [("lang", "en"), ("meta", '{"k": 1}')]
    assert rows[-1]["kind"] == "file" and rows[-1]["record"] == 2


def test_dotted_field_paths_reach_nested_objects():
    line = b'{"doc": {"body": "Nested."}, "metadata": {"url": "https://x"}, "source": "dolma"}\n'
    rows = _rows("n.jsonl", line, ParseOptions(text_field="doc.body", url_field="metadata.url"))
    assert (rows[0]["text"], rows[0]["url"], rows[0]["source"]) == ("Nested.", "https://x", "dolma")


def test_parquet():
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ["p1", "p2", "p3"], "text": ["One.", None, "Three."], "n": [1, 2, 3]}), buf)
    rows = _rows("t.parquet", buf.getvalue())
    assert _docs(rows) == [(1, "p1", "One."), (3, "p3", "Three.")]
    assert _bad(rows) == [(2, "text_missing")]
    # no text column: the detail named only the columns read ("fields: id"), not the one to set (body)
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ["p1"], "body": ["The text is here."]}), buf)
    (bad,) = [r for r in _rows("t.parquet", buf.getvalue()) if r["kind"] == "quarantine"]
    assert (bad["reason"], bad["detail"]) == ("text_missing", "field 'text' is absent (fields: id, body)")


@pytest.mark.parametrize("opts", [
    ParseOptions(batch_rows=4, max_doc_bytes=40), ParseOptions(id_field=None, source_field=None, url_field="absent"),
    ParseOptions(replacement_action="flag"),
])
def test_parquet_string_columns_give_what_the_row_path_gives(opts, monkeypatch):
    # Plain string columns go to the collector as Arrow columns (no Python object per row): the same
    # documents and quarantined rows, with the same excerpts and details, as row by row.
    from udfs.formats import parquet

    texts = ["One.", None, "", " \u200b ", "x" * 60, "caf\u00e9 e\u0301\r\n", "Seven.", "Eight \x07."] * 3
    table = pa.table({"id": [None if i % 5 == 0 else f"p{i % 7}" for i in range(24)], "text": texts,
                      "source": ([None, "", "s"] * 8), "n": list(range(24))})
    buf = io.BytesIO()
    pq.write_table(table.cast(table.schema.set(1, pa.field("text", pa.large_string()))), buf, row_group_size=10)
    assert parquet.is_columnar(opts, pq.ParquetFile(io.BytesIO(buf.getvalue())).schema_arrow)
    fast = _rows("t.parquet", buf.getvalue(), opts)
    monkeypatch.setattr(parquet, "is_columnar", lambda o, schema: False)
    key = lambda rows: sorted(rows, key=lambda r: (r["kind"], r["record"]))  # noqa: E731
    assert key(fast) == key(_rows("t.parquet", buf.getvalue(), opts))


def test_text_file_is_one_document():
    rows = _rows("notes.txt", "Line one.\r\nLine two \xe9.".encode() + b"\xff")
    assert [(r["record"], r["src_id"], r["text"], r["n_replaced"]) for r in rows[:1]] == [
        (1, None, "Line one.\nLine two \xe9.\ufffd", 1)]


def _warc_record(headers: dict[str, str], payload: bytes) -> bytes:
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return gzip.compress(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload + b"\r\n\r\n")


def test_wet_gzip_per_record_with_multibyte_utf8():
    texts = ["Grüße aus Köln — schön!", "東京の天気は晴れです。", "Plain ASCII text."]
    data = _warc_record({"WARC-Type": "warcinfo", "WARC-Record-ID": "<urn:uuid:0>"}, b"software: test\r\n")
    for i, t in enumerate(texts):
        data += _warc_record({"WARC-Type": "conversion", "WARC-Target-URI": f"https://e/{i}",
                              "WARC-Record-ID": f"<urn:uuid:{i + 1}>", "WARC-Date": "2024-01-01T00:00:00Z",
                              "WARC-Identified-Content-Language": "deu", "Content-Type": "text/plain"}, t.encode())
    rows = _rows("CC-1.warc.wet.gz", data)
    assert _docs(rows) == [(2, "urn:uuid:1", texts[0]), (3, "urn:uuid:2", texts[1]), (4, "urn:uuid:3", texts[2])]
    assert rows[0]["url"] == "https://e/0" and ("language", "deu") in rows[0]["meta"]
    assert rows[0]["source"] == "CC-1"
    assert ("skipped.warc_warcinfo", "1") in rows[-1]["meta"]


@pytest.mark.parametrize("gz", [True, False])
def test_wet_truncated_mid_record_quarantines_the_partial_record(gz):
    # A download cut short: the last record's payload is shorter than its Content-Length. Keeping the
    # partial text as a document would silently ship a truncated page; the records before it are whole.
    texts = ["First whole record.", "Second record, cut after this sentence. The rest never arrived."]
    recs = [_warc_record({"WARC-Type": "conversion", "WARC-Record-ID": f"<urn:uuid:{i}>"}, t.encode())
            for i, t in enumerate(texts)]
    whole = recs[0] if gz else gzip.decompress(recs[0])
    last = gzip.decompress(recs[1])
    cut = last[: last.index(b"this sentence") + 4]
    data = whole + (gzip.compress(last)[:-40] if gz else cut)
    rows = _rows("CC-1.warc.wet" + (".gz" if gz else ""), data)
    assert _docs(rows) == [(1, "urn:uuid:0", texts[0])]
    assert _bad(rows) == [(2, "unreadable_file")]
    assert "truncated" in next(r["detail"] for r in rows if r["kind"] == "quarantine")


def _response(url: str, ctype: str, body: bytes) -> bytes:
    http = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    return _warc_record({"WARC-Type": "response", "WARC-Target-URI": url, "WARC-Record-ID": f"<urn:uuid:{url}>",
                         "Content-Type": "application/http; msgtype=response"}, http)


ARTICLE = ("<html><head><title>T</title></head><body><nav>Home | About</nav><article><h1>Bread</h1>"
           + "".join(f"<p>Paragraph {i} explains how sourdough bread rises slowly overnight in a cool kitchen.</p>"
                     for i in range(6))
           + "</article><footer>Copyright</footer></body></html>").encode()


def test_warc_response_html_through_trafilatura():
    data = (_response("https://a", "text/html; charset=utf-8", ARTICLE)
            + _response("https://b", "image/png", b"\x89PNG....")
            + _response("https://c", "text/html", b"<html><body></body></html>"))
    rows = _rows("crawl.warc.gz", data)
    docs = [r for r in rows if r["kind"] == "doc"]
    assert len(docs) == 1 and "Paragraph 0 explains how sourdough" in docs[0]["text"]
    assert "Home | About" not in docs[0]["text"] and ("http_status", "200") in docs[0]["meta"]
    assert _bad(rows) == [(2, "unsupported_content_type"), (3, "extraction_failed")]
    none = _rows("crawl.warc.gz", data, ParseOptions(html_extractor="none"))
    assert _bad(none) == [(1, "extraction_failed"), (2, "unsupported_content_type"), (3, "extraction_failed")]


def test_bad_jsonl_lines_each_get_their_reason():
    lines = [b'{"text": "cut', b'{"text": null}', b'{"text": 5}', b'{"other": "x"}', b'[1, 2]', b"  ",
             b'{"text": "\\u200b \\ufeff"}', b'{"text": "' + b"y" * 101 + b'"}', b'{"text": "' + b"\xc3\xa9" * 51 + b'"}',
             b'{"text": "' + b"z" * 100 + b'"}']
    rows = _rows("b.jsonl", b"\n".join(lines), ParseOptions(max_doc_bytes=100))
    assert sorted(_bad(rows)) == [(1, "malformed_json"), (2, "text_missing"), (3, "text_not_string"), (4, "text_missing"),
                                  (5, "invalid_record"), (7, "empty_after_normalization"), (8, "too_large"), (9, "too_large")]
    assert _docs(rows) == [(10, None, "z" * 100)]  # exactly max_doc_bytes is kept
    assert ("skipped.blank_line", "1") in rows[-1]["meta"]
    # what a blank text held, which its excerpt cannot show
    blank = next(r for r in rows if r["reason"] == "empty_after_normalization")
    assert blank["detail"] == "3 characters, none but whitespace once normalised: U+200B x1, U+0020 x1, U+FEFF x1"
    assert {r["reason"] for r in rows if r["reason"]} <= set(QUARANTINE_REASONS)


def test_raw_nul_byte_in_a_json_string_is_removed_not_fatal():
    rows = _rows("n.jsonl", b'{"text": "a\x00b"}\n')
    assert _docs(rows) == [(1, None, "ab")]


@pytest.mark.parametrize("name, data, reason", [
    ("e.jsonl", b"", "empty_file"),
    ("e.jsonl.gz", b"", "empty_file"),
    ("e.jsonl.gz", gzip.compress(b""), "empty_file"),
    ("e.jsonl", b"\n\n", "empty_file"),
    ("x.parquet", b"PAR1 not really", "unreadable_file"),
    ("x.jsonl.gz", b"\x1f\x8b\x08\x00garbage", "unreadable_file"),
    ("x.warc.gz", b"\x1f\x8b\x08\x00garbage", "unreadable_file"),
    ("README.md", b"# hi", "unsupported_format"),
    # not WARC at all: one row for the file, not one `unsupported_content_type` per line
    ("notes.warc", b"plain words on a line\n" * 50, "unreadable_file"),
    ("notes.warc.gz", gzip.compress(b"plain words on a line\n" * 50), "unreadable_file"),
])
def test_bad_files(name, data, reason):
    rows = _rows(name, data)
    assert [r["reason"] for r in rows if r["kind"] == "quarantine"] == [reason]
    assert rows[-1]["kind"] == "file" and rows[-1]["record"] == 1
    if name.startswith("notes.warc"):
        assert "not a WARC file" in rows[0]["detail"] and "plain text" in rows[0]["detail"]


def test_decompress_salvages_the_prefix_of_a_truncated_gzip():
    payload = b"".join(b"%08d\n" % i for i in range(200_000))
    blob = gzip.compress(payload)
    out, err = decompress(blob[: len(blob) // 2], "gz")
    assert err is not None and "truncated" in err and payload.startswith(out) and len(out) > 0


@pytest.mark.parametrize("codec", ["bz2", "xz"])
def test_decompress_salvages_the_prefix_of_a_truncated_bz2_or_xz(codec):
    # BZ2File/LZMAFile.read(n) lost every byte it had decompressed when the stream ended early: a cut
    # .jsonl.xz kept no record though "records before the damage are kept".
    import bz2
    import lzma

    payload = b"".join(b"%08d\n" % i for i in range(200_000))
    blob = (bz2 if codec == "bz2" else lzma).compress(payload)
    out, err = decompress(blob[: len(blob) // 2], codec)
    assert err is not None and "EOFError" in err and payload.startswith(out) and len(out) > len(payload) // 4
    assert decompress(blob, codec) == (payload, None)
    # chunks of at most `chunk` bytes as before, and nothing lost between them
    chunks = list(decompressed_chunks(io.BytesIO(blob), codec, chunk=1 << 16))
    assert b"".join(chunks) == payload and max(map(len, chunks)) < 2 << 16



def test_decompress_reads_gzip_members_that_span_several_input_chunks():
    # `cat a.jsonl.gz b.jsonl.gz`: each member over the 1 MiB read chunk, so the second one starts in
    # the middle of a chunk and runs past it; nothing may be lost and the file is not "damaged".
    member = random.Random(0).randbytes(1_200_000)  # incompressible: the member stays over 1 MiB
    blob = gzip.compress(member, compresslevel=1, mtime=0)
    assert len(blob) > 1 << 20
    out, err = decompress(blob + gzip.compress(b"x\n") + blob + b"\0" * 64, "gz")
    assert (err, out) == (None, member + b"x\n" + member)
    assert gzip_error(io.BytesIO(blob + blob)) is None and "truncated" in gzip_error(io.BytesIO(blob + blob[:-100]))

@pytest.mark.parametrize("path, expected", [
    ("s3://b/CC-MAIN-x-00001.warc.wet.gz", ("CC-MAIN-x-00001", "wet", "gz")),
    ("a/part-0.jsonl.zst", ("part-0", "jsonl", "zst")),
    ("a/b.PARQUET", ("b", "parquet", None)),
    ("a/c.warc.gz", ("c", "warc", "gz")),
    ("a/d.gz", ("d", None, "gz")),
])
def test_split_name(path, expected):
    assert split_name(path) == expected


def test_excerpt_is_truncated_and_detail_names_the_problem():
    rows = _rows("b.jsonl", b'{"text": 5, "pad": "' + b"p" * 1000 + b'"}\n', ParseOptions(excerpt_chars=20))
    assert rows[0]["excerpt"] == '{"text": 5, "pad": "' and rows[0]["detail"] == "field 'text' holds int"
    assert json.loads(b'{"a": 1}')  # sanity: json module in use
    listed = _rows("l.jsonl", b'{"text": ["One.", "Two.", 3]}\n{"text": ["One.", null, "Two."]}\n')
    assert listed[1]["detail"] == ("field 'text' holds a list whose item [2] is int (paragraphs must be strings; "
                                   "null items are left out)")
    assert _docs(listed) == [(2, None, "One.\n\nTwo.")]


def test_plain_jsonl_named_gz_is_read_and_labelled():
    from udfs.formats import ParseOptions, explode_file

    content = b'{"id": "a", "text": "first document"}\n{"id": "b", "text": "second document"}\n'
    rows = [r for b in explode_file("in/x.jsonl.gz", content, ParseOptions()) for r in b.to_pylist()]
    assert [r["text"] for r in rows if r["kind"] == "doc"] == ["first document", "second document"]
    summary = dict(next(r for r in rows if r["kind"] == "file")["meta"])
    assert summary["format"] == "jsonl (plain, named .gz)"


def test_leading_utf8_bom_is_not_part_of_the_first_record():
    from udfs.formats import ParseOptions, explode_file

    content = b'\xef\xbb\xbf{"text": "first"}\r\n{"text": "second"}\r\n'
    rows = [r for b in explode_file("in/bom.jsonl", content, ParseOptions()) for r in b.to_pylist()]
    assert [r["text"] for r in rows if r["kind"] == "doc"] == ["first", "second"]
