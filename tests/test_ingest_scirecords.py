"""udfs/formats/scirecords.py through the ingest reader, ``ingest.fields_by_input`` and skipped input files.

Invented records only, in the S2ORC (paragraph and annotated) and unarXive shapes; one Spark test (the ingest stage over two globs).
"""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from pipelines.core.config import ConfigError, load_config
from pipelines.core.runner import run_stage
from pipelines.ingest import stage as ingest
from udfs.formats import ParseOptions, explode_file
from udfs.formats import scirecords as S
from udfs.refs import refs_signals

U1, U2, U3, U4, U5 = (f"0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(1, 6))
UNARXIVE = {
    "paper_id": "2401.00001", "_source_hash": "abc", "metadata": {"title": "A  Made-up\n  Paper"},
    "abstract": {"section": "Abstract", "text": "We study $x$.", "cite_spans": [], "ref_spans": []},
    "body_text": [
        {"section": "Introduction", "sec_number": "1", "sec_type": "section", "text":
            f"Let {{{{formula:{U1}}}}}{{{{formula:{U1}}}}} be small {{{{cite:b1}}}}, {{{{cite:b2}}}}. See Section 2.\n"
            f"{{{{formula:{U2}}}}} \n", "cite_spans": [], "ref_spans": []},
        {"section": "Data", "sec_number": "1", "sec_type": "subsection", "text":
            f"Table 1 lists the data {{{{cite:b2}}}} and {{{{cite:gone}}}}.\n{{{{table:{U3}}}}}",
            "cite_spans": [], "ref_spans": []},
        {"section": "Method", "sec_number": "2", "sec_type": "section", "text":
            f"As in [1] we plot it.\n{{{{figure:{U4}}}}}\n{{{{formula:{U5}}}}}", "cite_spans": [], "ref_spans": []},
        {"section": "Acknowledgements", "sec_number": "-1", "sec_type": "section", "text": "Thanks.",
         "cite_spans": [], "ref_spans": []},
        {"section": "Proofs", "sec_number": "A", "sec_type": "section", "text": "Trivial.",
         "cite_spans": [], "ref_spans": []},
    ],
    "bib_entries": {"b1": {"bib_entry_raw": "A. Author. First work. 2001."},
                    "b2": {"bib_entry_raw": "B. Author. Second work. 2002."},
                    "b3": {"bib_entry_raw": "C. Author. Never cited. 2003."}},
    "ref_entries": {U1: {"type": "formula", "latex": "x_1"}, U2: {"type": "formula", "latex": "y = x^2"},
                    U3: {"type": "table", "caption": "Counts per split."},
                    U4: {"type": "figure", "caption": "Loss with {{formula:" + U1 + "}}."},
                    U5: {"type": "formula", "latex": "  "}},
}
UNARXIVE_TEXT = (
    "A Made-up Paper\n\nAbstract\n\nWe study $x$.\n\n1 Introduction\n\n"
    "Let $x_1$ $x_1$ be small [1, 2]. See Section 2.\n$$y = x^2$$\n\n"
    "1.1 Data\n\nTable 1 lists the data [2] and.\n\nTable 1: Counts per split.\n\n"
    "2 Method\n\nAs in [1] we plot it.\n\nFigure 1: Loss with $x_1$.\n\n"
    "Acknowledgements\n\nThanks.\n\nAppendix A: Proofs\n\nTrivial.\n\n"
    "References\n\n[1] A. Author. First work. 2001.\n[2] B. Author. Second work. 2002.\n"
    "[3] C. Author. Never cited. 2003."
)

S2ORC = {
    "paper_id": "s1", "abstract": [{"section": "Abstract", "text": "Short abstract.", "cite_spans": []}],
    "body_text": [
        {"section": "Intro", "sec_num": "1.", "text": "Prior work [7] and Smith et al. (2019) differ, see Fig. 3.",
         "cite_spans": [{"start": 11, "end": 14, "text": "[7]", "ref_id": "BIBREF1"},
                        {"start": 19, "end": 38, "text": "Smith et al. (2019)", "ref_id": "BIBREF0"}],
         "ref_spans": [{"start": 51, "end": 57, "text": "Fig. 3", "ref_id": "FIGREF0"}]},
        {"section": "Intro", "sec_num": "1.", "text": "EQUATION", "cite_spans": [], "ref_spans": [],
         "eq_spans": [{"start": 0, "end": 8, "text": "EQUATION", "latex": "a=b", "eq_num": "(1)"}]},
    ],
    "back_matter": [{"section": "Acknowledgments", "text": "We thank nobody.", "cite_spans": [], "ref_spans": []}],
    "bib_entries": {
        "BIBREF0": {"title": "A study", "authors": [{"first": "Ann", "middle": ["B"], "last": "Smith", "suffix": ""}],
                    "year": 2019, "venue": "J. Things"},
        "BIBREF1": {"title": "Prior work", "authors": [], "year": 2010, "venue": ""},
    },
    "ref_entries": {"FIGREF0": {"text": "Accuracy by size.", "type": "figure"}},
}
S2ORC_TEXT = (
    "Abstract\n\nShort abstract.\n\n1 Intro\n\nPrior work [1] and Smith et al. (2019) differ, see Fig. 3.\n\n"
    "a=b (1)\n\nAcknowledgments\n\nWe thank nobody.\n\nFigure 3: Accuracy by size.\n\n"
    "References\n\n[1] Prior work. 2010\n[2] Ann B Smith. A study. J. Things. 2019"
)


PAPERS = ParseOptions(id_field="paper_id")


def _rows(records: list[dict], opts: ParseOptions = PAPERS) -> list[dict]:
    data = "\n".join(json.dumps(r) for r in records).encode() + b"\n"
    return [r for b in explode_file("p.jsonl", data, opts) for r in b.to_pylist() if r["kind"] != "file"]


def test_unarxive_markers_resolved_headings_numbered_references_built():
    (doc,) = _rows([UNARXIVE])
    assert doc["text"] == UNARXIVE_TEXT
    assert doc["record_format"] == "unarxive" and not doc["meta"]
    assert dict(doc["markers_resolved"]) == {"cite": 3, "figure": 1, "formula": 4, "table": 1, "unresolved": 2}
    assert not S.MARKER.search(doc["text"])


def test_s2orc_spans_resolved_floats_after_the_body():
    (doc,) = _rows([S2ORC])
    assert doc["text"] == S2ORC_TEXT
    assert doc["record_format"] == "s2orc"
    assert dict(doc["markers_resolved"]) == {"cite": 2, "figure": 1, "formula": 1}


def test_resolved_text_gives_the_refs_stage_its_targets():
    """Citations, the section and the table resolve; a table the paper does not hold stays dangling."""
    rec = json.loads(json.dumps(UNARXIVE))
    rec["body_text"][3]["text"] = "Thanks. Table 4 is gone, Appendix A is there."
    (doc,) = _rows([rec])
    sig = refs_signals(pa.array([doc["text"]])).to_pylist()[0]
    dangling = [(m["kind"], m["label"]) for m in sig["ref_mentions"] if m["dangling"]]
    assert dangling == [("table", "4")]
    assert dict(sig["mentions_by_kind"])["citation"] >= 3


def _annotated() -> dict:
    """An invented record in the annotated S2ORC shape: one text, spans per kind as JSON strings."""
    parts: list[str] = []

    def add(piece: str) -> tuple[int, int]:
        start = sum(map(len, parts))
        parts.append(piece)
        return start, start + len(piece)

    title = add("Bread Under Pressure\n")
    add("Ann Baker\nBakery Institute\n")
    abstract = add("Abstract\nWe press dough hard.\n\n")
    h1 = add("Introduction\n")
    p1 = add("Dough rises [4] and, as Smith et al. (2019) show, falls (see Fig. 1, Table 2).\n")
    eq = add("E = m c^2 (1)\n")
    h2 = add("Results\n")
    p2 = add("It held, unlike [9].\n")
    fig = add("Figure 1: Crumb under\na lens.\n")
    tab = add("Table 2: Heights. ")
    cells = add("rye 2 wheat 3\n")
    add("References\n")
    b1 = add("[4] A. Smith. Prior loaves. 2001.\n")
    b2 = add("B. Jones. Rye. 2019.\n")
    text = "".join(parts)

    def at(span: tuple[int, int], sub: str = "", **attrs: str) -> dict:
        start = span[0] + (text[span[0]:span[1]].index(sub) if sub else 0)
        end = start + len(sub) if sub else span[1]
        return {"start": start, "end": end, **({"attributes": attrs} if attrs else {})}

    ann = {
        "title": [at(title, "Bread Under Pressure")], "abstract": [at(abstract)],
        "section_header": [at(h1, "Introduction", n="1"), at(h2, "Results", n="2")],
        "paragraph": [at(p1), at(p2)], "formula": [at(eq, id="formula_0")],
        "bib_ref": [at(p1, "[4]", ref_id="b0"), at(p1, "(2019)", ref_id="b1"), at(p2, "[9]")],
        "figureref": [at(p1, "Fig. 1", ref_id="fig_0")], "tableref": [at(p1, "Table 2", ref_id="tab_0")],
        "figure": [at(fig, id="fig_0"), {"start": tab[0], "end": cells[1], "attributes": {"id": "tab_0"}}],
        "table": [at(cells)], "bib_entry": [at(b1, id="b0"), at(b2, id="b1")], "venue": None,
    }
    return {"corpusid": 7, "content": {"source": {"pdfsha": "x"}, "text": text,
                                       "annotations": {k: json.dumps(v) for k, v in ann.items()}}}


ANNOTATED = _annotated()
ANNOTATED_TEXT = (
    "Bread Under Pressure\n\nAbstract\n\nWe press dough hard.\n\n1 Introduction\n\n"
    "Dough rises [1] and, as Smith et al. (2019) show, falls (see Fig. 1, Table 2).\n\nE = m c^2 (1)\n\n"
    "2 Results\n\nIt held, unlike [9].\n\nFigure 1: Crumb under a lens.\n\nTable 2: Heights.\nrye 2 wheat 3\n\n"
    "References\n\n[1] A. Smith. Prior loaves. 2001.\n[2] B. Jones. Rye. 2019."
)


def test_annotated_s2orc_read_as_paragraphs_headings_citations_floats():
    """Numbered citations renumbered in citation order (a year and an unlinked one stay as written),
    the display formula kept in place, floats after the body, the bibliography as References."""
    (doc,) = _rows([ANNOTATED], ParseOptions(id_field="corpusid"))
    assert doc["text"] == ANNOTATED_TEXT
    assert doc["record_format"] == "s2orc" and doc["src_id"] == "7"
    assert dict(doc["markers_resolved"]) == {"cite": 2, "figure": 1, "formula": 1, "table": 1}
    sig = refs_signals(pa.array([doc["text"]])).to_pylist()[0]
    # the figure, the table and the linked citation have their targets; the unlinked "[9]" has none
    assert [(m["kind"], m["label"]) for m in sig["ref_mentions"] if m["dangling"]] == [("citation", "9")]


def test_annotated_spans_may_be_lists_and_odd_ones_are_left_out():
    rec = json.loads(json.dumps(ANNOTATED))
    ann = rec["content"]["annotations"]
    ann.update({k: json.loads(v) for k, v in ann.items() if v})
    assert S.render(rec) == S.render(ANNOTATED)
    ann.update({"paragraph": "[{\"start\": 5", "figure": 3, "bibref": [{"start": -1, "end": 2}, "x"]})
    text, counts = S.render(rec)  # no paragraph span left: the text as it is, nothing added to it
    assert text == ANNOTATED["content"]["text"].strip() and counts == {}


@pytest.mark.parametrize("record, text_field, expected", [
    (UNARXIVE, "text", "unarxive"),
    (UNARXIVE, "body_text[].text", "unarxive"),
    (S2ORC, "text", "s2orc"),
    ({"pdf_parse": S2ORC}, "text", "s2orc"),
    ({"id": "p", "text": "peS2o is plain text", "body_text": S2ORC["body_text"]}, "text", None),
    (UNARXIVE, "abstract.text", None),
    ({"body_text": [{"section": "A", "text": "no spans"}]}, "text", None),
    ({"body_text": "not a list"}, "text", None),
    ({"text": "web page"}, "text", None),
    (ANNOTATED, "text", "s2orc"),
    (ANNOTATED, "content.text", "s2orc"),
    ({"content": {"text": "no annotations"}}, "text", None),
    ({"text": "own text", "content": ANNOTATED["content"]}, "text", None),
])
def test_detect(record, text_field, expected):
    assert S.detect(record, text_field) == expected


def test_flat_keeps_the_record_as_it_is_and_forcing_a_shape_quarantines_what_lacks_it():
    flat = ParseOptions(text_field="body_text[].text", id_field="paper_id", record_format="flat")
    (doc,) = _rows([UNARXIVE], flat)
    assert "{{cite:b1}}" in doc["text"] and doc["record_format"] is None and doc["markers_resolved"] is None
    forced = ParseOptions(record_format="unarxive")
    rows = _rows([{"id": "w", "text": "a web page"}], forced)
    assert [(r["kind"], r["reason"]) for r in rows] == [("quarantine", "invalid_record")]
    assert "record_format unarxive: no body_text list" in rows[0]["detail"]


@pytest.mark.parametrize("record, opts, detail", [
    ({"paper_id": "p1", "body_text": "Intro. We study rivers.", "bib_entries": {}}, {},
     "body_text holds str ('Intro. We study rivers.'), not a list of paragraphs (ingest.fields.text: body_text "
     "reads it as the text); field 'text' is absent"),
    ({"paper_id": "p2", "body_text": {"text": "x"}}, {"text_field": "body_text[].text"},
     "body_text holds dict ({'text': 'x'}), not a list of paragraphs; field 'body_text[].text' holds dict"),
    ({"paper_id": "p3", "pdf_parse": {"body_text": None}}, {},
     "pdf_parse.body_text holds null, not a list of paragraphs; field 'text' is absent"),
    ({"paper_id": "p4", "body_text": 7}, {"record_format": "s2orc"},
     "record_format s2orc: body_text holds int (7), not a list of paragraphs"),
])
def test_a_body_text_that_is_not_a_list_is_named_in_the_quarantine(record, opts, detail):
    (row,) = _rows([record], ParseOptions(**opts))
    assert (row["kind"], row["reason"], row["detail"]) == ("quarantine", "invalid_record", detail)


def test_a_record_without_body_text_or_text_is_still_text_missing():
    (row,) = _rows([{"paper_id": "p", "title": "Rivers"}], ParseOptions())
    assert (row["reason"], row["detail"]) == ("text_missing", "field 'text' is absent (fields: paper_id, title)")


@pytest.mark.parametrize("broken", [
    {"body_text": [None, 3, {"text": None, "cite_spans": None}], "bib_entries": [], "ref_entries": "x"},
    {"body_text": [{"text": "{{cite:x}} {{figure:y}} {{formula:z}} {{weird:}}", "cite_spans": [{"start": 99}],
                    "ref_spans": [], "sec_number": 3, "section": 5}], "ref_entries": {"y": 1, "z": {"latex": None}}},
    {"content": {"text": "", "annotations": {"paragraph": "[[[", "title": [{"start": 0, "end": 9}]}}},
    {"content": {"text": "abc", "annotations": {"paragraph": [{"start": 0, "end": 3}], "sectionheader": "{}",
                                               "figure": [{"start": 1, "end": 2, "attributes": {"id": 5}}]}}},
])
def test_odd_records_never_raise(broken):
    rows = _rows([broken], ParseOptions(record_format="s2orc"))
    assert all(not S.MARKER.search(r["text"] or "") for r in rows)
    assert [r["kind"] for r in rows] in (["doc"], ["quarantine"])


def test_parquet_rows_are_read_the_same():
    import io

    import pyarrow.parquet as pq

    rec = {k: json.dumps(v) if k in ("bib_entries", "ref_entries") else v for k, v in S2ORC.items()}
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{**rec, "bib_entries": None, "ref_entries": None}]), buf)
    (doc,) = [r for b in explode_file("p.parquet", buf.getvalue(), ParseOptions(id_field="paper_id"))
              for r in b.to_pylist() if r["kind"] == "doc"]
    assert doc["text"].startswith("Abstract\n\nShort abstract.\n\n1 Intro\n\nPrior work")
    buf = io.BytesIO()  # the annotated shape: content is a struct column, its span lists JSON strings
    pq.write_table(pa.Table.from_pylist([ANNOTATED]), buf)
    (doc,) = [r for b in explode_file("a.parquet", buf.getvalue(), ParseOptions(id_field="corpusid"))
              for r in b.to_pylist() if r["kind"] == "doc"]
    assert doc["text"] == ANNOTATED_TEXT and doc["record_format"] == "s2orc"


# ------------------------------------------------------------------------------------ config
def test_fields_by_input_lays_keys_over_fields():
    cfg = load_config(overrides=["ingest.inputs=['web/*.jsonl', 'papers/*.jsonl']", "ingest.fields.id=doc",
                                 "ingest.fields_by_input={'papers/*.jsonl': {'id': 'paper_id', 'record_format': 'unarxive'}}"])
    papers, web = cfg.ingest.fields_for("papers/*.jsonl"), cfg.ingest.fields_for("web/*.jsonl")
    assert (papers.id, papers.record_format, papers.text) == ("paper_id", "unarxive", "text")
    assert (web.id, web.record_format) == ("doc", "auto")


@pytest.mark.parametrize("value, message", [
    ("{'other/*.jsonl': {'id': 'x'}}", re.escape("'other/*.jsonl' is not one of ingest.inputs; allowed: ['a/*.jsonl']")),
    ("{'a/*.jsonl': {'txt': 'x'}}", r"ingest.fields_by_input.a/\*.jsonl.txt: unknown key; allowed: \['text'"),
    ("{'a/*.jsonl': {'record_format': 'pdf'}}", "record_format: Input should be 'auto', 'flat', 's2orc', 'unarxive' or 'mediawiki'"),
    ("{'a/*.jsonl': {'heading': 'x[].y'}}", "ingest.fields.heading 'x\\[\\].y' must iterate the same array"),
])
def test_fields_by_input_is_validated(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=["ingest.inputs=['a/*.jsonl']", f"ingest.fields_by_input={value}"])


# ------------------------------------------------------------------------------------ the stage
def test_two_globs_two_field_sets_and_skipped_files_named(spark, tmp_path, capsys):
    (tmp_path / "web").mkdir()
    (tmp_path / "papers").mkdir()
    (tmp_path / "web" / "a.jsonl").write_text(json.dumps({"doc": "w1", "content": "A web page."}) + "\n")
    (tmp_path / "web" / "_SUCCESS").write_text("")
    (tmp_path / "web" / ".draft.jsonl").write_text("{}")
    (tmp_path / "papers" / "p.jsonl").write_text(json.dumps(UNARXIVE) + "\n")
    web, papers = f"{tmp_path}/web/*", f"{tmp_path}/papers/*.jsonl"
    cfg = load_config(overrides=[
        f"run.root={tmp_path / 'out'}", f"ingest.inputs=['{web}', '{papers}']", "ingest.fields.text=content",
        "ingest.fields.id=doc", f"ingest.fields_by_input={{'{papers}': {{'text': 'body_text[].text', 'id': 'paper_id'}}}}",
    ])
    report = run_stage(spark, cfg, "ingest")
    docs = {r["doc_id"]: r for r in spark.read.format("delta").load(cfg.table_path("documents")).collect()}
    assert sorted(docs) == ["a/w1", "p/2401.00001"]
    assert docs["a/w1"]["text"] == "A web page." and docs["p/2401.00001"]["text"] == UNARXIVE_TEXT
    assert (docs["a/w1"]["record_format"], docs["a/w1"]["markers_resolved"]) == (None, None)
    assert docs["p/2401.00001"]["record_format"] == "unarxive"
    assert docs["p/2401.00001"]["markers_resolved"]["cite"] == 3
    assert report.notes["skipped_files"] == 2
    assert [p.rsplit("/", 1)[-1] for p in report.extra["skipped_files"]] == [".draft.jsonl", "_SUCCESS"]
    err = capsys.readouterr().err
    assert re.search(r"ingest: skipped 2 input file\(s\) whose names start with '_' or '\.' .*: \.draft\.jsonl, _SUCCESS", err)
    assert "skipped_files=2" in report.summary_line()


def test_skipped_line_names_the_first_ten():
    line = ingest.skipped_line([f"file:/d/_part{i}" for i in range(12)])
    assert line.startswith("ingest: skipped 12 input file(s)") and line.endswith("_part9 and 2 more")


def test_folders_inside_an_input_folder_are_named_not_read(spark, tmp_path, capsys):
    for sub in ("", "2024", "_tmp"):
        (tmp_path / "in" / sub).mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / sub / "a.jsonl").write_text(json.dumps({"id": f"d{sub}", "text": "A page."}) + "\n")
    cfg = load_config(overrides=[f"run.root={tmp_path / 'out'}", f"ingest.inputs=['{tmp_path / 'in'}']"])
    report = run_stage(spark, cfg, "ingest")
    assert report.rows_in == 1
    assert re.search(r"ingest: not read: 1 folder\(s\) inside input folders .*'DIR/\*/\*'.*: 2024\n",
                     capsys.readouterr().err)


def test_a_float_without_caption_is_its_label_and_an_odd_num_is_not_written():
    """unarXive writes ``NO_CAPTION`` for a float that has none: the text keeps the label alone; a
    ``num`` that is not a string or number does not reach the text."""
    rec = json.loads(json.dumps(UNARXIVE))
    rec["ref_entries"][U4]["caption"] = "NO_CAPTION"
    (doc,) = _rows([rec])
    assert "NO_CAPTION" not in doc["text"] and "\n\nFigure 1\n\n" in doc["text"]
    s2 = json.loads(json.dumps(S2ORC))
    s2["ref_entries"]["FIGREF0"]["num"] = {"a": 1}
    (doc,) = _rows([s2])
    assert "Figure 3: Accuracy by size." in doc["text"] and "{" not in doc["text"]


@pytest.mark.parametrize("text, expected", [
    ("See {{formula:gone}} and the rest.", "See and the rest."),
    ("Prior work ({{cite:gone}}) agrees.", "Prior work agrees."),
    ("We cite {{cite:gone}}, {{cite:gone2}}.", "We cite."),
    ("Both {{cite:b1}} and {{cite:gone}}.", "Both [1] and."),
])
def test_a_marker_without_target_takes_the_punctuation_that_framed_it(text, expected):
    rec = {"body_text": [{"section": "", "text": text, "cite_spans": [], "ref_spans": []}],
           "bib_entries": {"b1": {"bib_entry_raw": "A. Author. Work."}}, "ref_entries": {}}
    text_out, counts = S.render(rec)
    assert text_out.split("\n\nReferences")[0] == expected and counts["unresolved"] >= 1
