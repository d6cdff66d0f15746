"""udfs/refs on papers as ingest resolves them (S2ORC / unarXive records, JATS): reference-list entries,
TeX math and statement headers hold no mentions of the document's parts. Invented documents only."""

from __future__ import annotations

import pytest

from udfs.refs import find_mentions


def dangling(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.label) for m in find_mentions(text) if m.dangling]


def mentions(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.label) for m in find_mentions(text)]


BODY = ("1 Introduction\n\nWe follow earlier work; Table 1 lists the runs.\n\n"
        "Table 1: Runs per setting.\n\n2 Method\n\nThe bound of Section 1 holds.\n\n")
"""A resolved paper's body: numbered headings, a caption and the mentions they resolve."""


# ------------------------------------------------------------------------------------------ bibliography
@pytest.mark.parametrize("heading", ["References", "Bibliography", "REFERENCES", "Literature Cited", "5 References"])
def test_mentions_inside_reference_list_entries_are_not_read(heading):
    refs = (f"{heading}\n"
            "[1] A. Quill and B. Rook, A fast sampling algorithm (2014).\n"
            "[2] C. Wren, Bounds on mixing, see Table 4 and Section 7 therein, J. Inv. Math. 3 (2019).\n")
    text = BODY + "As shown in [1] and [2], it is fast.\n\n" + refs
    assert dangling(text) == []
    assert ("algorithm", "2014") not in mentions(text) and ("table", "4") not in mentions(text)


def test_a_reference_list_in_the_jats_reader_shape():
    text = ("Intro\n\nAs found before [1], Table 2 holds the doses.\n\nReferences\n"
            "[1] Fenn D Lark E Trial of doses: Table 3 of the protocol Journal of Invented Trials 2011 4 1 9\n")
    assert dangling(text) == [("table", "2")]  # the body's own Table 2 is still checked


def test_wrapped_entries_continue_until_a_blank_line_and_body_text_after_is_read():
    text = (BODY + "References\n[1] A. Quill, A long title that wraps\n  onto a line with Figure 9 in it, 2014.\n"
            "[2] C. Wren, Another title, 2019.\n\nAppendix A: Extra\n\nFigure 5 shows the extra runs.\n")
    assert dangling(text) == [("figure", "5")]


def test_without_a_bibliography_heading_entry_like_lines_are_still_read():
    text = "Notes\n[1] see Table 3 for the doses.\n"
    assert ("table", "3") in mentions(text)


def test_a_year_in_parentheses_is_no_label():
    assert mentions("The classic sampling algorithm (2014) is fast; Algorithm (2) is ours.") == [("algorithm", "2")]


# ------------------------------------------------------------------------------------------ math
@pytest.mark.parametrize("formula", [
    r"$x \le y$ (see, e.g., \cite [Theorem 14.16]{kall})$",
    r"$$\frac{1}{n}\sum_z \varphi(z) \to 0 \text{ in probability (see \cite [Theorem 14.16]{kall})}$$",
    "$$a = b \\\\$$ and Lemma 9 gives $$c = d \\text{by Lemma 8}$$",
    "$f(x) = \\text{Eq. (7)}$",
])
def test_mentions_inside_tex_math_are_not_read(formula):
    text = BODY + "We have " + formula + " as required.\n"
    inside = [(k, lab) for k, lab in dangling(text) if lab in ("14.16", "7", "8")]
    assert inside == []


def test_a_display_formula_ending_in_a_line_break_closes():
    text = BODY + "$$a = b \\\\$$\n\nFigure 3 shows it.\n"
    assert dangling(text) == [("figure", "3")]


def test_dollar_amounts_are_not_math():
    text = "It costs $5 and Table 3 lists the $10 items.\n"
    assert dangling(text) == [("table", "3")]
    assert dangling("Between $5-$10, see Table 3.") == [("table", "3")]


def test_a_long_display_formula_is_one_span():
    formula = "$$" + " + ".join(f"a_{{{i}}}" for i in range(1500)) + "$$"
    text = BODY + formula + "\n\nAs Figure 8 shows, $x$ is small.\n"
    assert dangling(text) == [("figure", "8")]


def test_cite_optional_note_names_a_place_in_the_cited_work():
    text = BODY + "By \\cite[Theorem 14.16]{kall} and \\citep[Section 9]{hk}, the claim holds.\n"
    assert [x for x in dangling(text) if x[0] in ("theorem", "section")] == []


# ------------------------------------------------------------------------------------------ statement headers
@pytest.mark.parametrize("header", [
    "Proposition A.1 [41, 40, 13]",
    "Theorem 3.2 [12]",
    "Lemma 4 [Quill 2014].",
])
def test_a_statement_header_with_its_sources_is_a_target(header):
    label = header.split()[1]
    text = (BODY + "Appendix A: Tools\n\n" + header + "\n\nLet $A$ be a square matrix.\n\n"
            f"By {header.split()[0]} {label} the claim follows.\n")
    assert [m for m in find_mentions(text) if m.kind == "theorem" and m.dangling] == []


def test_a_statement_mention_followed_by_a_citation_in_a_sentence_is_still_read():
    text = BODY + "As Theorem 5 [1] shows, the bound is tight.\n"
    assert ("theorem", "5") in dangling(text)


# ------------------------------------------------------------------------------------------ section numbers
def test_a_roman_section_number_resolves_on_an_arabic_heading():
    text = BODY + "5 Scans\n\nThe scans.\n\nAs for the first pair in Section V, the second is symmetric.\n"
    assert [x for x in dangling(text) if x[0] == "section"] == []
    assert ("section", "X") in dangling(text.replace("Section V", "Section X"))


# ------------------------------------------------------------------------------------------ equations
def test_an_equation_number_resolves_on_display_formulas_without_numbers():
    text = BODY + "The loss is\n$$L = \\sum_i (y_i - f(x_i))^2$$\n\nAs in Eq. (1), the error is squared.\n"
    assert dangling(text) == []
    assert ("equation", "2") in dangling(text + "Eq. (2) adds a penalty.\n")
    assert ("equation", "1") in dangling(BODY + "As in Eq. (1), the error is squared.\n")


# ------------------------------------------------------------------------------------------ replies
LETTER = ("1 Reviewer 1\n\nThe discussion of Tables 3 and 4 misses points, and Appendix B is unclear.\n\n"
          "Response:\n\nTables 3 and 4 are now Tables 1 and 2 of the revised manuscript; see Figure 2.\n\n"
          "Response:\n\nCorrected.\n")


def test_a_reply_to_reviewers_keeps_its_dangling_tables():
    """A letter that points at tables it does not hold teaches the same dangling text as a stripped paper."""
    assert ("table", "3") in dangling(LETTER)


def test_one_response_line_in_a_paper_changes_nothing():
    text = BODY + "Response:\n\nThe reviewer asked for Figure 4, which shows the response time.\n"
    assert ("figure", "4") in dangling(text)


def test_a_table_of_contents_ending_in_references_does_not_hide_the_body():
    text = ("Contents\n1. Introduction\n2. Method\nReferences\n\n"
            "1. Introduction\nThe runs are listed in Table 3, which the text lost.\n\n2. Method\nWe sample.\n")
    assert dangling(text) == [("table", "3")]
