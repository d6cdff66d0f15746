"""udfs/text.py: UTF-8 repair with counts, and Arrow normalisation (no Spark)."""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pytest

from udfs import text as T


def _norm(*texts: str | None, **flags: bool) -> list[str | None]:
    return T.normalize(pa.array(list(texts), pa.string()), **flags).to_pylist()


def test_composed_and_decomposed_cafe_are_identical():
    nfd = unicodedata.normalize("NFD", "café")
    assert nfd != "café"
    assert _norm("café", nfd) == ["café", "café"]
    assert _norm(nfd, nfc=False) == [nfd]


def test_crlf_cr_and_lf_variants_are_identical():
    assert _norm("a\r\nb\r\n", "a\rb\r", "a\nb\n") == ["a\nb\n"] * 3
    assert _norm("a\r\n\r\nb") == ["a\n\nb"]  # a blank line survives


def test_zero_width_space_and_bom_removed_zwnj_zwj_kept():
    assert _norm("\ufeffzero\u200bwidth") == ["zerowidth"]
    family = "\U0001F468\u200D\U0001F469\u200D\U0001F467"  # one emoji: man ZWJ woman ZWJ girl
    persian = "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645"  # ZWNJ inside a Persian word
    assert _norm(family, persian) == [family, persian]
    assert _norm("a\u200bb", strip_invisible=False) == ["a\u200bb"]


def test_controls_removed_except_tab_and_newline():
    c0_c1 = "".join(chr(c) for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0)])
    assert _norm("a\tb\n" + c0_c1 + "c") == ["a\tb\nc"]
    assert _norm("a\x00b", strip_control=False) == ["a\x00b"]
    assert _norm("\xa0no-break space stays") == ["\xa0no-break space stays"]  # U+00A0 is just past C1


def test_normalisation_is_idempotent_and_keeps_nulls():
    once = _norm("e\u200b\u0301 x\r\n", None)
    assert once == ["é x\n", None]  # NFC runs last, so the accent composes once U+200B is gone
    assert _norm(*once) == once


def test_decode_counts_each_maximal_invalid_subpart():
    assert T.decode_utf8(b"ok") == ("ok", 0)
    assert T.decode_utf8(b"a\xff\xfeb") == ("a\ufffd\ufffdb", 2)
    assert T.decode_utf8(b"a\xe2\x82b") == ("a\ufffdb", 1)  # truncated 3-byte sequence = one subpart
    assert T.decode_utf8("\ufffd".encode() + b"\xff") == ("\ufffd\ufffd", 1)  # a real U+FFFD is not counted


@pytest.mark.parametrize(("raw", "expected"), [
    ("lone \ud83d high", ("lone \ufffd high", 1)),
    ("lone \ude00 low", ("lone \ufffd low", 1)),
    ("pair \U0001F600 ok", ("pair \U0001F600 ok", 0)),
    ("plain ascii", ("plain ascii", 0)),
])
def test_repair_lone_surrogates(raw, expected):
    assert T.repair_surrogates(raw) == expected


def test_repair_escaped_bytes_matches_decode():
    raw = b"x \xe2\x82 y \xff z"
    escaped, had_invalid = T.decode_utf8_escaped(raw)
    assert had_invalid
    assert T.repair_surrogates(escaped, escaped=True) == T.decode_utf8(raw) == ("x \ufffd y \ufffd z", 2)


def test_lengths_and_blank():
    texts = pa.array(["héllo", "", " \n\t\u3000", None, "日本"])
    n_chars, n_bytes = T.lengths(texts)
    assert n_chars.to_pylist() == [5, 0, 4, None, 2] and n_chars.type == pa.int32()
    assert n_bytes.to_pylist() == [6, 0, 6, None, 6]
    assert T.is_blank(texts).to_pylist() == [False, True, True, True, False]


def test_nfc_composes_even_where_arrow_does_not():
    # pyarrow 24-25's utf8_normalize("NFC") decomposes: a curly quote made "é" come out as "e" + U+0301.
    from udfs.text import normalize

    got = normalize(pa.array(["caf\u00e9 \u2019x\u2019", "cafe\u0301", "\ufb01 \uff21"]), nfc=True, newlines=True,
                    strip_invisible=True, strip_control=True).to_pylist()
    assert got == ["caf\u00e9 \u2019x\u2019", "caf\u00e9", "\ufb01 \uff21"]  # NFC, not NFKC: ligature, full-width kept


@pytest.mark.parametrize("rows, expected", [
    (["plain", "a\x85b", "c"], ["plain", "ab", "c"]),  # a C1 control (C2 85) among ASCII rows
    (["x\r\ny", "z"], ["x\ny", "z"]),  # CR is the only byte that needs work
    (["del\x7f", "\u00e9\u00a0"], ["del", "\u00e9\u00a0"]),  # DEL; NBSP (C2 A0) is no control
    (["\u00e9\u200b", None, ""], ["\u00e9", None, ""]),
])
def test_the_batch_byte_scan_skips_only_steps_no_row_needs(rows, expected):
    arr = pa.array(["pad\r\x01", *rows, "\x02"]).slice(1, len(rows))  # the neighbours' bytes are outside the slice
    assert T.normalize(arr).to_pylist() == expected
    assert T.ByteScan.of(pa.array(["ascii only\n\tand tabs"])).control is False
    n_chars, n_bytes = T.lengths(T.normalize(arr))
    assert n_chars.to_pylist() == [None if s is None else len(s) for s in expected]


def test_is_blank_looks_at_the_rows_that_do_not_start_with_a_printable_ascii_character():
    rows = ["word", " \t\n", "", None, "\u3000\u00a0", "\u00a0x", "!", "\x1c", "\x85", "  a"]
    arr = pa.array(["x", *rows, " "]).slice(1, len(rows))
    assert T.is_blank(arr).to_pylist() == [False, True, True, True, True, False, False, True, True, False]
    assert T.is_blank(pa.array(["a", "b"], pa.large_string())).to_pylist() == [False, False]
