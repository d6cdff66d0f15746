"""udfs/formats/jats.py: JATS / PMC NXML articles, invented; the real PMC files when the shared data is there."""

from __future__ import annotations

import bz2

import pyarrow as pa
import pytest

from udfs.formats import ParseOptions, explode_file

ARTICLE = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving DTD v1.3//EN" "JATS-archivearticle1-3.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML">
<front><article-meta>
  <article-id pub-id-type="pmc">{pmc}</article-id>
  <article-id pub-id-type="doi">10.9999/bread.{pmc}</article-id>
  <title-group><article-title>Slow <italic>sourdough</italic> rising</article-title></title-group>
  <abstract><p>We study how bread rises overnight.</p></abstract>
</article-meta></front>
<body>
  <sec><label>1</label><title>Introduction</title>
    <p>Dough rises slowly (see <xref ref-type="table" rid="t1">Table 1</xref> and
       <xref ref-type="fig" rid="f1">Figure 1</xref>) as shown before <xref ref-type="bibr" rid="r1">[1]</xref>.</p>
    <sec><label>1.1</label><title>Kitchens</title><p>Cool kitchens help.</p></sec>
  </sec>
  <sec><title>Results</title>
    <p>The rise follows <xref ref-type="disp-formula" rid="e1">Eq. 1</xref>.</p>
    <disp-formula id="e1"><label>1</label><tex-math>h(t) = h_0 e^{{kt}}</tex-math></disp-formula>
    <table-wrap id="t1"><label>Table 1</label><caption><p>Rise per hour.</p></caption>
      <table><thead><tr><th>Hour</th><th>Height</th></tr></thead>
      <tbody><tr><td>1</td><td>2 cm</td></tr><tr><td>2</td><td>3 cm</td></tr></tbody></table>
    </table-wrap>
    <fig id="f1"><label>1</label><caption><title>Loaf.</title><p>A risen loaf.</p></caption></fig>
  </sec>
</body>
<back><ref-list><title>References</title>
  <ref id="r1"><label>1</label><mixed-citation>Baker A. Bread. 2001.</mixed-citation></ref>
</ref-list></back>
</article>
"""


def _rows(path, data, opts=None):
    return pa.Table.from_batches(list(explode_file(path, data, opts or ParseOptions()))).to_pylist()


def test_article_text_with_titles_tables_figures_references():
    rows = _rows("a.nxml", ARTICLE.format(pmc="PMC1").encode())
    doc = rows[0]
    assert doc["kind"] == "doc" and doc["src_id"] == "PMC1" and doc["url"] == "https://doi.org/10.9999/bread.PMC1"
    assert doc["text"] == (
        "Slow sourdough rising\n\nAbstract\n\nWe study how bread rises overnight.\n\n1 Introduction\n\n"
        "Dough rises slowly (see Table 1 and Figure 1) as shown before [1].\n\n1.1 Kitchens\n\nCool kitchens help."
        "\n\nResults\n\nThe rise follows Eq. 1.\n\nh(t) = h_0 e^{kt} (1)\n\nTable 1: Rise per hour.\n\n"
        "Hour\tHeight\n1\t2 cm\n2\t3 cm\n\nFigure 1: Loaf. A risen loaf.\n\nReferences\n\n[1] Baker A. Bread. 2001."
    )
    assert "dropped_structures" not in dict(doc["meta"])


def test_dropping_tables_figures_references_is_recorded_for_the_refs_stage():
    opts = ParseOptions(jats_tables="drop", jats_figures="drop", jats_references="drop")
    doc = _rows("a.nxml", ARTICLE.format(pmc="PMC1").encode(), opts)[0]
    assert "Rise per hour" not in doc["text"] and "A risen loaf" not in doc["text"] and "Baker" not in doc["text"]
    assert "see Table 1 and Figure 1" in doc["text"]  # the mentions stay
    assert dict(doc["meta"])["dropped_structures"] == "figure,reference,table"
    caption = _rows("a.nxml", ARTICLE.format(pmc="PMC1").encode(), ParseOptions(jats_tables="caption"))[0]
    assert "Table 1: Rise per hour." in caption["text"] and "2 cm" not in caption["text"]
    assert dict(caption["meta"])["dropped_structures"] == "table"


FLOATS_APART = """<article><front><article-meta><title-group><article-title>Crumb</article-title></title-group>
</article-meta></front>
<body><p>Holes grow (<xref ref-type="fig" rid="f1">Figure 1</xref>, <xref ref-type="table" rid="t1">Table 1</xref>).</p>
</body>
<back><ref-list><ref id="r1"><label>1</label><mixed-citation>Baker A. Crumb. 2003.</mixed-citation></ref></ref-list></back>
<floats-group>
  <fig-group><fig id="f1"><label>Figure 1</label><caption><p>Open crumb.</p></caption><graphic/></fig></fig-group>
  <table-wrap id="t1"><label>Table 1</label><caption><p>Hole size.</p></caption>
    <table><tr><th>Flour</th><th>mm</th></tr><tr><td>Rye</td><td>2</td></tr></table></table-wrap>
</floats-group></article>"""


def test_floats_group_is_rendered_like_body_floats_before_the_references():
    doc = _rows("f.nxml", FLOATS_APART.encode())[0]
    assert doc["text"] == (
        "Crumb\n\nHoles grow (Figure 1, Table 1).\n\nFigure 1: Open crumb.\n\n"
        "Table 1: Hole size.\n\nFlour\tmm\nRye\t2\n\nReferences\n\n[1] Baker A. Crumb. 2003."
    )
    assert "dropped_structures" not in dict(doc["meta"])
    opts = ParseOptions(jats_tables="caption", jats_figures="drop")
    dropped = _rows("f.nxml", FLOATS_APART.encode(), opts)[0]
    assert "Open crumb" not in dropped["text"] and "Rye" not in dropped["text"]
    assert "Table 1: Hole size." in dropped["text"]
    assert dict(dropped["meta"])["dropped_structures"] == "figure,table"


def test_article_set_in_xml_bz2_gives_one_document_per_article():
    one = ARTICLE.split("\n", 2)[2]  # without the XML declaration and doctype
    data = "<pmc-articleset>" + one.format(pmc="PMC1") + one.format(pmc="PMC2") + "</pmc-articleset>"
    rows = _rows("set.xml.bz2", bz2.compress(data.encode()))
    assert [(r["record"], r["src_id"]) for r in rows if r["kind"] == "doc"] == [(1, "PMC1"), (2, "PMC2")]


def test_broken_xml_keeps_articles_before_the_error():
    one = ARTICLE.split("\n", 2)[2]
    data = "<pmc-articleset>" + one.format(pmc="PMC1") + one.format(pmc="PMC2")[:400]
    rows = _rows("set.xml", data.encode())
    assert [r["src_id"] for r in rows if r["kind"] == "doc"] == ["PMC1"]
    assert [(r["record"], r["reason"]) for r in rows if r["kind"] == "quarantine"] == [(2, "malformed_xml")]


def test_other_xml_is_unsupported_naming_what_it_looks_like():
    rows = _rows("feed.xml", b'<?xml version="1.0"?>\n<rss><channel><title>X</title></channel></rss>')
    bad = [r for r in rows if r["kind"] == "quarantine"]
    assert [b["reason"] for b in bad] == ["unsupported_format"] and "looks like" in bad[0]["detail"]


def test_external_entities_are_not_expanded():
    xxe = ('<?xml version="1.0"?><!DOCTYPE article [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
           "<article><body><p>Safe &x; text.</p></body></article>")
    rows = _rows("x.nxml", xxe.encode())
    assert all("root:" not in (r["text"] or "") for r in rows)


def test_real_pmc_files(shared_data):
    files = sorted((shared_data / "scientific").glob("*.nxml"))
    if not files:
        pytest.skip("no .nxml file in the shared data")
    for p in files:
        raw = p.read_bytes()
        docs = [r for r in _rows(p.name, raw) if r["kind"] == "doc"]
        assert len(docs) == 1 and len(docs[0]["text"]) > 5000, p.name
        if b"<table-wrap" in raw:  # kept: caption lines start a paragraph; dropped: said so in meta
            assert "\n\nTable " in docs[0]["text"], p.name
            dropped = _rows(p.name, raw, ParseOptions(jats_tables="drop"))[0]
            assert "table" in dict(dropped["meta"])["dropped_structures"].split(","), p.name
        if b"<floats-group>" in raw and b"<fig " in raw:  # figures kept apart from the body are read too
            assert "\n\nFigure 1: " in docs[0]["text"], p.name
