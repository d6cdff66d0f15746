"""udfs/formats/wikirepair.py: unclosed comments, templates and tables, on invented wikitext (and
impossible dates counted alike by both readers)."""

from __future__ import annotations

import bz2
import json

import pyarrow as pa
import pytest

from udfs.formats import ParseOptions, explode_file
from udfs.formats import mediawiki as M
from udfs.formats.wikifast import fast_render, strip_quotes
from udfs.formats.wikirepair import close_unclosed

PROSE = "Rye is a small town on the river. It has a market and a mill."


def _doc(src: str, **opts):
    text, _, _, unclosed = M.wikitext_to_document(src, ParseOptions(**opts))
    return text, unclosed


def test_closed_markup_is_left_as_it_is():
    src = f"{{{{Infobox town\n| name = Rye\n}}}}\n<!-- note -->{PROSE}\n{{|\n| a || b\n|}}\n"
    assert close_unclosed(src) == (src, {})
    assert close_unclosed("") == ("", {})


def test_an_unclosed_comment_hides_the_rest_of_the_page():
    src = f"{PROSE}\n<!-- a closed one --> More.\n\n== Draft ==\n<!-- never closed\n{{{{convert|3|km}}}} hidden text"
    text, unclosed = _doc(src)
    assert text == f"{PROSE}\nMore.\n\nDraft"
    assert unclosed == {"unclosed_comment": 1}


def test_an_unclosed_infobox_is_removed_with_its_parameter_lines():
    src = f"{{{{Infobox town\n| name = Rye\n | population = {{{{formatnum:12000}}}}\n'''Rye''' is a town. {PROSE}"
    text, unclosed = _doc(src)
    assert text == f"Rye is a town. {PROSE}"
    assert unclosed == {"unclosed_template": 1}


def test_an_unclosed_inline_template_is_removed_to_the_end_of_its_line():
    src = f"{PROSE} It is {{{{convert|5|km long and wide.\n\nThe mill is old."
    text, unclosed = _doc(src)
    assert text == f"{PROSE} It is\n\nThe mill is old."
    assert "{{" not in text and unclosed == {"unclosed_template": 1}


def test_nested_unclosed_templates_count_each_and_cut_once():
    src = "Before.\n{{Outer|a={{Inner|b\n| c = d\nAfter."
    assert close_unclosed(src) == ("Before.\n\nAfter.", {"template": 2})


def test_a_stray_closing_brace_pair_opens_nothing():
    assert close_unclosed("A }} b {{x}}.")[1] == {}


def test_braces_pair_before_tables():
    src = f"{{{{Infobox album\n| Name = Tour\n|}}}}\n{PROSE}"
    assert close_unclosed(src) == (src, {})


@pytest.mark.parametrize("tables", ["drop", "keep"])
def test_an_unclosed_table_is_closed_before_the_next_paragraph(tables):
    src = f"Intro.\n{{| class=\"wikitable\"\n|-\n| 1900 || 2 pence\n|-\n| 1950 || 5 pence\n\n{PROSE}\n\n== Later ==\nEnd."
    fixed, unclosed = close_unclosed(src)
    assert unclosed == {"table": 1} and "5 pence\n|}\n\n" in fixed
    text, _ = _doc(src, mediawiki_tables=tables)
    assert "{|" not in text and "|-" not in text and text.endswith(f"{PROSE}\n\nLater\n\nEnd.")
    assert ("1950\t5 pence" in text) == (tables == "keep")


def test_braces_in_math_nowiki_and_comments_are_not_templates():
    src = "Let <math>x_{{i}j}</math> be <nowiki>{{literal</nowiki> and <!-- {{ --> the sum. <pre>{|</pre>"
    assert close_unclosed(src) == (src, {})


def test_a_page_with_template_arguments_keeps_its_braces():
    src = "A {{{1|x}}} argument and {{unclosed"
    assert close_unclosed(src) == (src, {})


def test_the_fast_reader_and_mwparserfromhell_read_the_repaired_page_alike():
    src = (f"{{{{Infobox town\n| name = Rye\n{PROSE} {{{{lang|fr|Seigle}}}} ({{{{dts|2023|2|30}}}}).\n"
           "{|\n| a || b\n\nEnd.<!-- open")
    fixed, unclosed = close_unclosed(src)
    assert unclosed == {"comment": 1, "template": 1, "table": 1}
    opts = ParseOptions()
    fast_page, mw_page = M._Page(opts, set(M._MEDIA_NS)), M._Page(opts, set(M._MEDIA_NS))
    fast = fast_render(strip_quotes(fixed), fast_page)
    assert fast is not None
    assert M.finish(fast) == M.finish(M.mw_render(strip_quotes(fixed), mw_page)) == f"{PROSE} Seigle.\n\nEnd."
    assert fast_page.invalid_dates == mw_page.invalid_dates == 1


def test_same_output_twice_and_token_soup_never_crashes():
    import random

    toks = ["{{", "}}", "{|", "|}", "\n", "|", "<!--", "-->", "<math>", "</math>", "a ", "{{{", "=="]
    rng = random.Random(3)
    for _ in range(300):
        src = "".join(rng.choice(toks) for _ in range(rng.randint(1, 25)))
        out = close_unclosed(src)
        assert out == close_unclosed(src)
        M.wikitext_to_document(src, ParseOptions())


def test_the_count_reaches_meta_in_a_dump_and_in_a_record_field():
    src = "{{Infobox town\n| name = Rye\n'''Rye''' is a town on the river with a market and a mill."
    page = (f"<page><title>Rye</title><ns>0</ns><id>1</id><revision><id>2</id><text>{src.replace('<', '&lt;')}"
            "</text></revision></page>")
    dump = f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/">{page}</mediawiki>'
    rows = pa.Table.from_batches(list(explode_file("w.xml.bz2", bz2.compress(dump.encode()), ParseOptions()))).to_pylist()
    (doc,) = [r for r in rows if r["kind"] == "doc"]
    assert dict(doc["meta"])["markup_repaired"] == "unclosed_template=1" and "{{" not in doc["text"]
    data = (json.dumps({"id": "Rye", "wikitext": src}) + "\n").encode()
    opts = ParseOptions(text_field="wikitext", record_format="mediawiki")
    (doc,) = [r for r in pa.Table.from_batches(list(explode_file("p.jsonl", data, opts))).to_pylist()
              if r["kind"] == "doc"]
    assert dict(doc["meta"])["markup_repaired"] == "unclosed_template=1" and "| name" not in doc["text"]
