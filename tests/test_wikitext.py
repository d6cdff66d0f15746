"""udfs/formats/wikitemplates.py and wikifast.py: templates rendered or dropped with their holes
repaired, per-page counts, and the fast reader equal to the mwparserfromhell walk (invented wikitext)."""

from __future__ import annotations

import pytest

from udfs.formats import ParseOptions
from udfs.formats import mediawiki as M
from udfs.formats.wikifast import fast_render, strip_quotes
from udfs.formats.wikitemplates import HOLE, repair_holes


def _text(src: str, **opts) -> str:
    return M.wikitext_to_document(src, ParseOptions(**opts))[0]


@pytest.mark.parametrize("src, expected", [
    ("{{convert|5|mi|km}}", "5 miles (8.0 km)"),
    ("{{convert|12000|sqft|m2}}", "12,000 square feet (1,100 m2)"),
    ("{{convert|1|km|mi|abbr=on}}", "1 km (0.62 mi)"),
    ("{{convert|10|to|20|km}}", "10 to 20 kilometres (6.2 to 12 mi)"),
    ("{{convert|30|C}}", "30 degrees Celsius (86 °F)"),
    ("{{cvt|3|m}}", "3 m (9.8 ft)"),
    ("{{convert|7|furlong}}", "7 furlong"),
    ("{{birth date and age|1971|4|2}}", "April 2, 1971"),
    ("{{birth date and age|df=y|1971|4|2}}", "2 April 1971"),
    ("{{death date and age|2001|3|9|1930|5|1}}", "March 9, 2001 (aged 70)"),
    ("{{start date|2015|03}}", "March 2015"),
    ("{{dts|2008|6|22}}", "June 22, 2008"),
    ("{{formatdate|1999-12-31}}", "December 31, 1999"),
    ("{{as of|2012}}", "As of 2012"),
    ("{{as of|2012|alt=In 2012}}", "In 2012"),
    ("{{circa|1820}}", "c. 1820"),
    ("{{coord|12|30|0|N|45|15|0|E|display=inline}}", "12°30′0″N 45°15′0″E"),
    ("{{coord|-33.5|151.25}}", "33.5°S 151.25°E"),
    ("{{coord|1|2|N|3|4|E|display=title}}", ""),
    ("{{lang|fr|la vie}}", "la vie"),
    ("{{lang-de|Brot}}", "German: Brot"),
    ("{{langx|es|pan}}", "Spanish: pan"),
    ("{{IPA-es|pan}}", "Spanish pronunciation: [pan]"),
    ("{{IPAc-en|ˈ|b|r|ɛ|d}}", "/ˈbrɛd/"),
    ("{{nowrap|10 km}}", "10 km"),
    ("{{formatnum:1234567}}", "1,234,567"),
    ("{{sfrac|3|1|2}}", "3 1/2"),
    ("{{abbr|UN|United Nations}}", "UN"),
    ("{{abbrlink|WHO|World Health Organization}}", "WHO"),
    ("{{ISBN|0-00-000000-0}}", "ISBN 0-00-000000-0"),
    ("{{hlist|one|two}}", "one · two"),
    ("{{cite book|last=Baker|first=Ann|title=Loaves|year=1990|publisher=Crumb}}",
     "Baker, Ann (1990). Loaves. Crumb."),
    ("{{lang-ur|{{nastaliq|نان}}}}", "Urdu: نان"),
])
def test_value_templates_rendered(src, expected):
    assert _text(src) == expected


@pytest.mark.parametrize("src, expected", [
    ("Born {{birth date|1971|13|2}}, in Rye.", "Born, in Rye."),
    ("Born {{birth date and age|1971|4|31}} in Rye.", "Born in Rye."),
    ("Died ({{death date and age|2001|3|32|1930|5|1}}) in Rye.", "Died in Rye."),
    ("On {{dts|2023|2|29}} it rained.", "On it rained."),
    ("On {{dts|32|5|2020}} it rained.", "On it rained."),
    ("{{as of|2020|13}}, it rained.", "it rained."),
    ("Since {{start date|1999-00-10}} it rained.", "Since it rained."),
    ("On {{birth date|1971|April|0}} it rained.", "On it rained."),
])
@pytest.mark.parametrize("mode", ["drop", "params"])
def test_impossible_dates_are_dropped_and_counted(src, expected, mode):
    text, _, (rendered, dropped), repaired = M.wikitext_to_document(src, ParseOptions(mediawiki_templates=mode))
    assert (text, rendered, dropped, repaired) == (expected, 0, 1, {"invalid_date": 1})


def test_an_impossible_date_inside_a_dropped_template_is_not_counted():
    _, _, counts, repaired = M.wikitext_to_document("A{{Infobox|born={{dts|2023|2|30}}}} b.", ParseOptions())
    assert (counts, repaired) == ((0, 1), {})
    text, _, _, repaired = M.wikitext_to_document("{{lang|fr|le {{dts|2023|2|30}}}} b.", ParseOptions())
    assert repaired == {"invalid_date": 1} and "30" not in text


def test_possible_dates_just_inside_the_calendar():
    assert _text("{{birth date|2000|2|29}} {{dts|1900|2|28}} {{dts|2023|12|31}} {{dts|2023|1|1}}") == (
        "February 29, 2000 February 28, 1900 December 31, 2023 January 1, 2023")
    assert _text("{{dts|1900|2|29}}") == ""
    assert M.wikitext_to_document("{{dts|2020|Spring|3}}", ParseOptions())[3] == {}


def test_fast_reader_and_mwparserfromhell_give_the_same_text_and_counts():
    src = (
        "{{Infobox town|name=Rye|area={{convert|2|km2}}}}\n"
        "'''Rye''' ({{lang-de|Roggen}}; {{IPA-de|ˈʁɔɡn̩}}) is a town<ref>{{cite web|title=Rye}}</ref> of "
        "{{convert|5000|ft|m}} in [[Examplia|the valley]].{{citation needed|date=May 2020}}\n\n"
        "== History ==\n* It was founded {{circa|1200}}.<ref name=a/>\n"
        "{| class=\"wikitable\"\n|-\n| a || b\n|}\n"
        "See [http://example.org the site] and [[File:Rye.jpg|thumb|A [[mill]]]] &ndash; "
        "{{As of|2020|lc=y}}, <span title=x>it</span> has {{formatnum:12000}} people.\n"
        "[[Category:Towns]]\n"
    )
    opts = ParseOptions()
    fast_page, mw_page = M._Page(opts, set(M._MEDIA_NS)), M._Page(opts, set(M._MEDIA_NS))
    fast = fast_render(strip_quotes(src), fast_page)
    assert fast is not None
    assert M.finish(fast) == M.finish(M.mw_render(strip_quotes(src), mw_page))
    assert (fast_page.rendered, fast_page.dropped_templates, fast_page.dropped) == (
        mw_page.rendered, mw_page.dropped_templates, mw_page.dropped)
    text, dropped, counts, _ = M.wikitext_to_document(src, opts)
    assert text == (
        "Rye (German: Roggen; German pronunciation: [ˈʁɔɡn̩]) is a town of 5,000 feet (1,500 m) in the valley.\n\n"
        "History\n\nIt was founded c. 1200.\n\nSee the site and – as of 2020, it has 12,000 people.")
    assert dropped == {"reference", "table"}
    # rendered: lang-de, IPA-de, convert, circa, As of, formatnum; dropped: Infobox (its nested convert
    # not counted), citation needed, and cite web inside the dropped <ref> is not read
    assert counts == (6, 2)


def test_pages_the_fast_reader_leaves_to_mwparserfromhell():
    page = M._Page(ParseOptions(), set(M._MEDIA_NS))
    assert fast_render("A {{{1|default}}} argument.", page) is None
    assert fast_render("An <unknowntag>x</unknowntag>.", page) is None
    assert fast_render("Kept\n{|\n|a\n|}", M._Page(ParseOptions(mediawiki_tables="keep"), set())) is None
    assert _text("A {{{1|default}}} argument.") == "A default argument."


@pytest.mark.parametrize("src, expected", [
    ("Snowdon ({{unknown|x}}) is high.", "Snowdon is high."),
    ("Kay ({{unknown}}; born 1941) wrote.", "Kay (born 1941) wrote."),
    ("Kay (born 1941; {{unknown}}) wrote.", "Kay (born 1941) wrote."),
    ("Oslo ({{unknown}}, {{unknown}}) is a city.", "Oslo is a city."),
    ("An area of {{unknown}}, all land.", "An area of, all land."),
    ("{{unknown}}, 87 % of people agree.", "87 % of people agree."),
    ("Boats: {{unknown|a}}, {{unknown|b}} and {{unknown|c}} sail.", "Boats: sail."),
    ("It is {{unknown}} here.", "It is here."),
    ("An empty () stays when the author wrote it.", "An empty () stays when the author wrote it."),
])
def test_holes_of_dropped_templates_repaired(src, expected):
    assert _text(src) == expected


def test_repair_leaves_text_without_holes_alone():
    s = "Spaces , as written ( ) stay."
    assert repair_holes(s) == s
    assert repair_holes(f"a {HOLE} b") == "a b"


def test_template_counts_and_params_mode_in_the_dump_reader():
    text, _, counts, _ = M.wikitext_to_document("A {{convert|1|m}} wall{{cn}}.{{Navbox|x}}", ParseOptions())
    assert (text, counts) == ("A 1 metre (3.3 ft) wall.", (1, 2))
    text, _, _, _ = M.wikitext_to_document("Rye {{Infobox|region=North}}.", ParseOptions(mediawiki_templates="params"))
    assert text == "Rye North."


def test_quotes_removed_as_mediawiki_reads_them():
    assert strip_quotes("''Star'''s and '''bold''' and l''''x''' <nowiki>''kept''</nowiki>") == (
        "Star's and bold and l'x <nowiki>''kept''</nowiki>")


def test_empty_and_whitespace_pages():
    assert M.wikitext_to_document("", ParseOptions()) == ("", set(), (0, 0), {})
    assert M.wikitext_to_document(" \n\t", ParseOptions()) == ("", set(), (0, 0), {})


def test_same_text_twice():
    src = "{{convert|3|mi}} and {{coord|1|2}} and {{unknown}}."
    assert _text(src) == _text(src)


def test_token_soup_never_crashes_and_never_leaves_a_hole_mark():
    import random

    toks = ["{{", "}}", "[[", "]]", "[", "]", "|", "=", "\n", "<ref>", "</ref>", "<ref name=a/>", "<!--", "-->",
            "''", "'" * 3, "a", " ", "==", "*", ";", ":", "{|", "|}", "&amp;", "http://example.org", "<br>",
            "<span>", "</span>", "<nowiki>", "</nowiki>", "convert", "lang-de", "File:x", "1", "(", ")", ",",
            "{{{", "}}}", "<math>", "</math>"]
    rng = random.Random(7)
    for _ in range(400):
        src = "".join(rng.choice(toks) for _ in range(rng.randint(1, 30)))
        for opts in (ParseOptions(), ParseOptions(mediawiki_references="keep", mediawiki_templates="params")):
            text, _, (rendered, dropped), _ = M.wikitext_to_document(src, opts)
            assert HOLE not in text and rendered >= 0 and dropped >= 0


def test_deep_nesting_falls_back_and_reads():
    src = "a " + "{{lang|fr|" * 400 + "x" + "}}" * 400 + " b"
    text, _, _, _ = M.wikitext_to_document(src, ParseOptions())
    assert text.startswith("a ") and text.endswith(" b")


@pytest.mark.parametrize("src, expected", [
    ("{{convert|nan|mi|km}}", "nan miles"),
    ("{{convert|inf|mi|km}}", "inf miles"),
    ("{{convert|1e400|mi|km}}", "1e400 miles"),
    ("{{convert|1.7e308|mi|m}}", "1.7e308 miles"),
    ("{{convert|-1e308|F|C}}", "-1e308 degrees Fahrenheit"),
    ("{{formatnum:" + "1" * 5000 + "}}", "11" + ",111" * 1666),
])
def test_numbers_a_float_cannot_hold_are_written_as_they_are(src, expected):
    """A value that is not a finite float, or an integer longer than Python's int() reads, is written
    as it stands (digits grouped), never an error that would quarantine the whole page."""
    text, _ = M.wikitext_to_text(f"It is {src} long.", ParseOptions())
    assert text == f"It is {expected} long."
