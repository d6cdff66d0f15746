"""udfs/refs without Spark: a mention is dangling only where the document's own structure could have held
its target; converter placeholders are mentions. Invented documents only."""

from __future__ import annotations

import pyarrow as pa
import pytest

from udfs.refs import find_mentions, refs_signals
from udfs.refs.mentions import CONVERTER_PLACEHOLDERS


def dangling(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.label) for m in find_mentions(text) if m.dangling]


PAPER = "Results are in Table 1 and Fig. 2; Eq. (3) bounds them.\n\n"
"""Two or more own floats / equations: the document is structured like a paper."""
HEADINGS = "1. Scope\nThis part covers the scope.\n\n2. Terms\nThis part covers the terms.\n\n"
"""Numbered headings of the document's own."""


# ------------------------------------------------------------------------------------------ placeholders
@pytest.mark.parametrize(("text", "expected"), [
    ("As described in Section <ref>, it holds.", [("section", "REF")]),
    ("The values in Table <ref> agree.", [("table", "REF")]),
    ("Tables <ref> and <ref> agree.", [("table", "REF"), ("table", "REF")]),
    ("Substituting (<ref>) gives the bound.", [("equation", "REF")]),
    ("This follows earlier work <cit.>.", [("citation", "REF")]),
    ("This follows {{cite:6f1c2a90-77aa}} closely.", [("citation", "REF")]),
    ("This follows BIBREF3 closely.", [("citation", "REF")]),
    ("As shown in Table TABREF9 and FIGREF0.", [("table", "REF"), ("figure", "REF")]),
    ("We return to it in SECREF2 using EQREF5.", [("section", "REF"), ("equation", "REF")]),
    ("earlier studies @xcite found it.", [("citation", "REF")]),
    ("As shown in [?].", [("citation", "?")]),
    ("Table REF lists them; see Fig. ??.", [("table", "REF"), ("figure", "??")]),
])
def test_converter_placeholders_are_dangling_mentions(text, expected):
    assert dangling(text) == expected
    assert refs_signals(pa.array([text])).column("n_dangling").to_pylist() == [len(expected)]


def test_every_listed_converter_placeholder_is_read():
    for converter, forms in CONVERTER_PLACEHOLDERS.items():
        for form in forms:
            text = f"The result in {form} holds." if form.startswith(("Table", "Section", "Fig")) else f"It holds {form}."
            assert dangling(text), (converter, form)


def test_citation_markers_resolve_on_a_bibliography_but_bibtex_misses_do_not():
    bib = "\n\nReferences\n\n[1] A. Author. A title. 2019.\n[2] B. Author. Another title. 2020.\n"
    assert dangling("As in {{cite:ab12}} and <cit.> and BIBREF0." + bib) == []
    assert dangling("As in [?]." + bib) == [("citation", "?")]


def test_float_markers_are_no_mentions():
    assert find_mentions("The set-up {{figure:9a7e}} and {{formula:1c2d}} and {{table:33ff}}.") == []


def test_a_closed_wiki_note_is_skipped_but_a_placeholder_ref_is_read():
    text = "Mild.<ref>Smith 2001, Table 3.</ref> Then Section <ref> and Table <ref> give it."
    assert dangling(text) == [("section", "REF"), ("table", "REF")]
    assert dangling('Mild.<ref name="a"/> Cold.<ref>Lee, Figure 4.</ref>') == []


# ------------------------------------------------------------------------------------------ sections
def test_sections_of_another_document_are_not_dangling_in_an_unstructured_page():
    news = "The league says that neither Section 4.2 nor Section 9.1 applies to the sale. Talks go on."
    assert dangling(news) == []
    assert dangling("A guide to the rules. As defined in Section 1 of this License, you may copy it.") == []


def test_sections_are_dangling_where_the_document_has_numbered_parts():
    assert dangling(HEADINGS + "Section 4 gives the fees.") == [("section", "4")]
    assert dangling(HEADINGS + "Section 2 gives the fees.") == []


def test_sections_are_dangling_in_a_paper_without_headings():
    assert dangling(PAPER + "Section 4 discusses the limits.") == [
        ("table", "1"), ("figure", "2"), ("equation", "3"), ("section", "4")]
    assert dangling("The estimator is described in Subsection 3.2.") == [("section", "3.2")]
    assert dangling("We return to this point in Sec. 4.") == [("section", "4")]


@pytest.mark.parametrize("text", [
    "Table 2 of Smith et al. lists the doses.",
    "See Section 4 of the Handbook for the rules.",
    "The curve in Figure 3 of [12] is steeper.",
    "Section 230 of the Communications Decency Act shields hosts.",
    "The claim arises under § 1983 of the code.",
    "Licensees must keep the notice required by Section 4(d) of the License.",
])
def test_places_in_other_works_are_not_dangling_even_in_a_structured_document(text):
    assert [d for d in dangling(HEADINGS + text) if d[0] != "citation"] == []  # "[12]" itself has no list


def test_a_licence_that_holds_its_clauses_resolves_them_and_flags_a_missing_one():
    licence = ("0. Definitions.\nTerms used here.\n\n1. Grant of Copyright License. Subject to these terms...\n\n"
               "2. Redistribution. You may copy it.\n\n")
    assert dangling(licence + "As defined in Section 1 of this License, and Section 2(a).") == []
    assert dangling(licence + "The limits of Section 7 apply.") == [("section", "7")]


# ------------------------------------------------------------------------------------------ citations
def test_author_year_in_a_page_without_bibliography_or_paper_structure_is_not_dangling():
    post = "Recent experiments by Hoyle et al. (2022) agree; earlier work (Wallach et al., 2009) too."
    assert dangling(post) == []
    assert dangling(PAPER + post) == [("table", "1"), ("figure", "2"), ("equation", "3"),
                                      ("citation", "Hoyle 2022"), ("citation", "Wallach 2009")]


@pytest.mark.parametrize("notes", [
    "Note[modifica | modifica wikitesto]\n\n  1. Rossi, Storia, p. 4.\n  2. Bianchi, Atlante.\n",
    "Notae\n\n  1. ^ Rossi, Storia.\n  2. ^ Bianchi, Atlante.\n\nVide etiam\n",
    "Fonti\n\n  1. Rossi, Storia.\n  2. Bianchi, Atlante.\n",
    "Quellen\n\n  1. Rossi 2001.\n  2. Bianchi 1999, online.\n  3. Verdi.\n\nWeblinks: none.\n",
])
def test_a_notes_list_under_any_heading_holds_numeric_citations(notes):
    text = f"Il borgo ha 300 abitanti.[1] La chiesa è antica.[2]\n\n{notes}"
    assert dangling(text) == []


def test_a_numbered_list_of_steps_is_no_notes_list():
    text = "Mix it.[2]\n\n  1. Heat the pan.\n  2. Add the oil.\n\nServe warm with bread and salad."
    assert dangling(text) == [("citation", "2")]


def test_a_citation_range_whose_dash_was_lost_resolves_on_the_list():
    refs = "\n\nReferences\n\n" + "".join(f"  {k}. Author {k}. Title. 2001.\n" for k in range(1, 16))
    assert dangling("As found before [1113] and [610]." + refs) == []
    assert dangling("As found before [1113]." + refs.replace("  13.", "  xx.")) == [("citation", "1113")]


def test_a_bracketed_equation_number_is_no_citation():
    text = "\\begin{equation} F(x) = \\int f \\ \\ \\ [1] \\end{equation} and \\begin{align} a &= b \\ [2] \\\\ c &= d\\end{align}"
    assert dangling(text) == []


def test_a_bilingual_caption_line_holds_its_figure():
    text = "如图 1所示。\n\n图 1 转子截面 Fig. 1 Rotor section\n\nThe rotor in Fig. 1 is cooled."
    assert dangling(text) == []


def test_a_reference_list_dropped_at_ingest_makes_author_year_citations_dangling():
    page = "Kristeva's chora was read as a maternal space (Lee, 2011; Park et al., 2003)."
    assert dangling(page) == []
    assert [(m.kind, m.label) for m in find_mentions(page, held={"citation"}) if m.dangling] == [
        ("citation", "Lee 2011")]
    held = pa.array([["citation"], None], pa.list_(pa.string()))
    assert refs_signals(pa.array([page, page]), held=held).column("n_dangling").to_pylist() == [1, 0]


def test_a_dropped_reference_list_does_not_make_a_statute_section_the_pages_own():
    page = "The club argues that Section 13.3 does not apply to the sale, and that Section 2 neither."
    assert [(m.kind, m.label) for m in find_mentions(page, held={"citation"}) if m.dangling] == []
