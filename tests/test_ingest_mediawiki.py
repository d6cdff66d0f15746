"""udfs/formats/mediawiki.py: an invented MediaWiki dump; the shared wikitext sample when present."""

from __future__ import annotations

import bz2
import json

import pyarrow as pa
import pytest

from udfs.formats import ParseOptions, explode_file
from udfs.formats.mediawiki import wikitext_to_text

BREAD = """'''Bread''' is a food.<ref name="a">Smith 2001.</ref> See [[Dough|dough]] and [[Datei:Loaf.jpg|thumb|A loaf]] \
{{Infobox food|name=Bread|region=World}}.

== History ==
Bread is old.{{cn}}
{| class="wikitable"
|+ Prices
! Year !! Price
|-
| 1900 || 2 pence
|}

=== Today ===
It is [https://example.org sold] everywhere.
[[Category:Foods]]
[[Kategorie:Essen]]
"""


def _page(i, title, text, ns=0, redirect=False):
    red = f'<redirect title="{title}" />' if redirect else ""
    return (f"<page><title>{title}</title><ns>{ns}</ns><id>{i}</id>{red}<revision><id>{100 + i}</id>"
            f"<text xml:space=\"preserve\">{text}</text></revision></page>")


def _dump(*pages):
    return ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="de"><siteinfo>'
            "<base>https://de.example.org/wiki/Hauptseite</base><namespaces>"
            '<namespace key="6" case="first-letter">Datei</namespace>'
            '<namespace key="14" case="first-letter">Kategorie</namespace></namespaces></siteinfo>'
            + "".join(pages) + "</mediawiki>")


def _esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _rows(path, data, opts=None):
    return pa.Table.from_batches(list(explode_file(path, data, opts or ParseOptions()))).to_pylist()


def test_articles_only_redirects_and_other_namespaces_skipped_and_counted():
    dump = _dump(_page(1, "Bread", _esc(BREAD)), _page(2, "Loaf", "#REDIRECT [[Bread]]", redirect=True),
                 _page(3, "Talk:Bread", "Talk text.", ns=1), _page(4, "Template:Cn", "x", ns=10),
                 _page(5, "Rye", "Rye is a grain."))
    rows = _rows("dewiki-pages-articles.xml.bz2", bz2.compress(dump.encode()))
    docs = [r for r in rows if r["kind"] == "doc"]
    assert [(d["record"], d["src_id"], d["url"]) for d in docs] == [
        (1, "1", "https://de.example.org/wiki/Bread"), (5, "5", "https://de.example.org/wiki/Rye")]
    assert docs[0]["text"] == (
        "Bread\n\nBread is a food. See dough and.\n\nHistory\n\nBread is old.\n\nToday\n\nIt is sold everywhere.")
    meta = dict(docs[0]["meta"])
    assert meta["dropped_structures"] == "reference,table"
    assert (meta["templates_rendered"], meta["templates_dropped"]) == ("0", "2")  # Infobox food, cn
    summary = dict(rows[-1]["meta"])
    assert (summary["skipped.mediawiki_redirect"], summary["skipped.mediawiki_namespace_1"],
            summary["skipped.mediawiki_namespace_10"]) == ("1", "1", "1")


def test_references_tables_and_template_params_kept_by_config():
    opts = ParseOptions(mediawiki_references="keep", mediawiki_tables="keep", mediawiki_templates="params")
    text, dropped = wikitext_to_text(BREAD, opts, {"datei", "kategorie"})
    assert "Bread is a food. (Smith 2001.)" in text
    assert "Prices\nYear\tPrice\n1900\t2 pence" in text
    assert "Bread" in text and "World" in text and dropped == set()


def test_broken_dump_keeps_the_pages_before_the_error():
    dump = _dump(_page(1, "Rye", "Rye is a grain."), _page(2, "Oat", "Oats."))[:-60]
    rows = _rows("cut.xml", dump.encode())
    assert [r["src_id"] for r in rows if r["kind"] == "doc"] == ["1"]
    assert [(r["record"], r["reason"]) for r in rows if r["kind"] == "quarantine"] == [(2, "malformed_xml")]


def test_real_wikitext_never_crashes(shared_data):
    path = shared_data / "wikipedia" / "wtf_wikipedia_wikitext_pages.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    n = 0
    for line in path.read_text().splitlines()[:40]:
        rec = json.loads(line)
        src = next((v for v in rec.values() if isinstance(v, str) and len(v) > 200), None)
        if src:
            text, _ = wikitext_to_text(src, ParseOptions())
            assert "{{" not in text and "[[" not in text
            n += 1
    assert n > 0


def test_wikitext_in_a_record_field_is_rendered_with_record_format_mediawiki():
    """A JSONL of pages (``id``, ``wikitext``) read with ``record_format: mediawiki`` gives the text a
    dump's page gives, without the title line; read flat, the markup stays."""
    wikitext = "'''Bread''' ({{lang-de|Brot}}) is food.{{citation needed}}<ref>A note.</ref>\n\n== Uses ==\n[[Toast]]."
    data = (json.dumps({"id": "Bread", "wikitext": wikitext}) + "\n").encode()
    opts = ParseOptions(text_field="wikitext", record_format="mediawiki")
    (doc,) = [r for r in _rows("pages.jsonl", data, opts) if r["kind"] == "doc"]
    expected, dropped = wikitext_to_text(wikitext, opts)
    assert doc["text"] == expected and "{{" not in doc["text"] and "[[" not in doc["text"]
    assert doc["record_format"] == "mediawiki" and doc["markers_resolved"] is None
    assert doc["src_id"] == "Bread" and dict(doc["meta"])["dropped_structures"] == ",".join(sorted(dropped))
    assert {"templates_rendered", "templates_dropped"} <= set(dict(doc["meta"]))
    (flat,) = [r for r in _rows("pages.jsonl", data, ParseOptions(text_field="wikitext")) if r["kind"] == "doc"]
    assert flat["text"] == wikitext and flat["record_format"] is None


def test_wikitext_field_that_is_not_a_string_is_quarantined():
    data = (json.dumps({"id": "x", "wikitext": {"a": 1}}) + "\n" + json.dumps({"id": "y"}) + "\n").encode()
    rows = _rows("pages.jsonl", data, ParseOptions(text_field="wikitext", record_format="mediawiki"))
    assert [r["reason"] for r in rows if r["kind"] == "quarantine"] == ["text_not_string", "text_missing"]


def test_a_redirect_record_is_skipped_and_counted_as_in_a_dump():
    data = "".join(json.dumps({"id": i, "wikitext": w}) + "\n" for i, w in
                   (("Loaf", "#REDIRECT [[Bread]]"), ("Rye", "Rye is a grain."))).encode()
    rows = _rows("pages.jsonl", data, ParseOptions(text_field="wikitext", record_format="mediawiki"))
    assert [r["src_id"] for r in rows if r["kind"] == "doc"] == ["Rye"]
    assert dict(rows[-1]["meta"])["skipped.mediawiki_redirect"] == "1"
