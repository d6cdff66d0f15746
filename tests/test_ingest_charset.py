"""Charsets of WARC HTML (BOM, HTTP header, <meta>, detection), U+FFFD-heavy documents, mojibake repair.

Invented pages only; no Spark.
"""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from udfs.formats import ParseOptions, explode_file
from udfs.formats import charset as CS
from udfs.formats.mojibake import fix

# GBK-only characters (not in GB2312, so Python's strict gb2312 codec cannot decode them): 喆 镕 堃
ZH = "朱镕基和王喆在堃城讨论了面包的发酵方法。面包需要在凉爽的厨房里慢慢发酵一整夜才会好吃。" * 4
RU = "Хлеб на закваске медленно поднимается всю ночь на прохладной кухне, и это делает его вкус глубже. " * 4


def _page(body_text: str, head: str = "") -> str:
    paras = "".join(f"<p>{body_text}</p>" for _ in range(4))
    return f"<html><head>{head}<title>T</title></head><body><article><h1>H</h1>{paras}</article></body></html>"


def _warc(*responses: tuple[str, bytes]) -> bytes:
    out = b""
    for i, (ctype, body) in enumerate(responses):
        http = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n\r\n".encode() + body
        head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://e/{i}\r\n"
                f"WARC-Record-ID: <urn:uuid:{i}>\r\nContent-Type: application/http; msgtype=response\r\n")
        out += gzip.compress(f"{head}Content-Length: {len(http)}\r\n\r\n".encode() + http + b"\r\n\r\n")
    return out


def _rows(path, data, opts=None):
    return pa.Table.from_batches(list(explode_file(path, data, opts or ParseOptions()))).to_pylist()


def test_gbk_page_declared_gb2312_in_meta_is_decoded_without_replacements():
    body = _page(ZH, '<meta http-equiv="Content-Type" content="text/html; charset=gb2312">').encode("gbk")
    with pytest.raises(UnicodeDecodeError):
        body.decode("gb2312")  # the strict codec would turn the GBK-only characters into U+FFFD
    rows = _rows("c.warc.gz", _warc(("text/html", body)))
    doc = rows[0]
    assert doc["kind"] == "doc" and "朱镕基和王喆在堃城" in doc["text"] and doc["n_replaced"] == 0
    assert ("charset", "gb18030") in doc["meta"] and ("charset_source", "meta") in doc["meta"]
    assert ("count.charset_source.meta", "1") in rows[-1]["meta"]


def test_http_header_charset_wins_over_meta_and_bom_over_both():
    page = _page(RU, '<meta charset="utf-8">')
    rows = _rows("c.warc.gz", _warc(
        ("text/html; charset=windows-1251", page.encode("cp1251")),
        ("text/html; charset=windows-1251", b"\xef\xbb\xbf" + page.encode("utf-8")),
    ))
    docs = [r for r in rows if r["kind"] == "doc"]
    assert [dict(d["meta"])["charset_source"] for d in docs] == ["http", "bom"]
    assert all("Хлеб на закваске" in d["text"] and d["n_replaced"] == 0 for d in docs)


def test_undeclared_charset_is_detected():
    body = _page(RU).encode("cp1251")
    rows = _rows("c.warc.gz", _warc(("text/html", body)))
    doc = rows[0]
    assert doc["kind"] == "doc" and "Хлеб на закваске" in doc["text"]
    assert dict(doc["meta"])["charset_source"] == "detected"


def test_undeclared_valid_utf8_is_utf8_by_default():
    assert CS.decide(_page(ZH).encode(), "text/html", True) == ("utf-8", "default")


@pytest.mark.parametrize("label, codec", [
    ("GB2312", "gb18030"), ("gbk", "gb18030"), ("ISO-8859-1", "cp1252"), ("Shift_JIS", "cp932"),
    ("\"utf-8\"", "utf-8"), ("x-no-such-charset", None), ("", None),
])
def test_labels_map_as_browsers_map_them(label, codec):
    assert CS.codec_of(label) == codec


def test_unknown_http_charset_falls_through_to_meta():
    body = _page(ZH, '<meta charset="gbk">').encode("gbk")
    assert CS.decide(body, "text/html; charset=x-bogus", True) == ("gb18030", "meta")


def test_page_declared_utf8_but_in_gbk_is_quarantined_for_replacements():
    body = _page(ZH).encode("gbk")
    rows = _rows("c.warc.gz", _warc(("text/html; charset=utf-8", body)))
    assert [r["reason"] for r in rows if r["kind"] == "quarantine"] == ["too_many_replacements"]
    flagged = _rows("c.warc.gz", _warc(("text/html; charset=utf-8", body)), ParseOptions(replacement_action="flag"))
    assert flagged[0]["kind"] == "doc" and float(dict(flagged[0]["meta"])["replacement_fraction"]) > 0.25


def test_replacement_fraction_just_inside_and_just_outside():
    inside = _rows("a.txt", b"a" * 3 + b"\xff")  # 1 of 4 characters = 0.25: kept
    outside = _rows("b.txt", b"a" * 2 + b"\xff")  # 1 of 3 > 0.25: quarantined
    assert inside[0]["kind"] == "doc" and inside[0]["n_replaced"] == 1
    assert outside[0]["reason"] == "too_many_replacements"


# ------------------------------------------------------------------------------------------- ftfy
@pytest.mark.parametrize("broken, right", [
    ("Ä°stanbul", "İstanbul"),
    ("ðŸ˜Š great", "😊 great"),
    ("The cafÃ© is open", "The café is open"),
    ("â€œquotedâ€\x9d text", "“quoted” text"),
])
def test_mojibake_is_repaired(broken, right):
    assert fix(broken) == right


@pytest.mark.parametrize("text", [
    "“Curly quotes” and ‘single’ ones — with a dash…",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３",
    "The ﬁrst ﬂoor ﬀ ligatures",
    "Ünïcödé façade naïve",
    "東京の天気は晴れです。",
    "Привет, мир",
    "&amp; &lt;entities&gt; stay",
    "line one\r\nline two",
    "a lone Ã is ambiguous",
    "SÃO PAULO and GUIMARÃES",
    "Ã  la carte",
    "mixed: café and cafÃ©",  # right and broken accents in one text: ambiguous, left
    "¯\\_(ツ)_/¯",
])
def test_right_or_ambiguous_text_stays_byte_identical(text):
    assert fix(text) == text


def test_fix_mojibake_option_counts_per_document_and_file():
    data = '{"text": "Ä°stanbul is big."}\n{"text": "İstanbul is big."}\n{"text": "plain"}\n'.encode()
    rows = _rows("m.jsonl", data, ParseOptions(fix_mojibake=True))
    docs = [r for r in rows if r["kind"] == "doc"]
    assert [d["text"] for d in docs] == ["İstanbul is big."] * 2 + ["plain"]
    assert [dict(d["meta"]).get("mojibake_fixed") for d in docs] == ["true", None, None]
    assert ("count.mojibake_fixed", "1") in rows[-1]["meta"]
    off = _rows("m.jsonl", data)
    assert off[0]["text"] == "Ä°stanbul is big."
