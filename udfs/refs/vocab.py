"""Reference vocabulary per language, as data: the words that name a table, figure, equation, ...

The refs stage reads this vocabulary through its config (``refs.vocab.<lang>``, mirrored in
``conf/default.yaml``); this module holds the built-in defaults so the config model and the unit tests
share one copy. A term ending in ``.`` is an abbreviation whose dot is optional in text (``fig.`` matches
"Fig. 2", "Fig 2" and "Fig.2"); other terms match whole words. Matching is case-insensitive.

Sources: the float and cross-reference names of LaTeX's babel language files (``\\tablename``,
``\\figurename``, ``\\appendixname`` in babel-english, babel-german, babel-french, babel-spanish) and the
abbreviations of the ACM, IEEE and Springer author guides (``Fig.``, ``Eq.``, ``Sec.``, ``Tab.``).
"""

from __future__ import annotations

KINDS: tuple[str, ...] = (
    "table",
    "figure",
    "equation",
    "section",
    "appendix",
    "algorithm",
    "listing",
    "theorem",
    "footnote",
    "citation",
)
"""Mention kinds, in the order reason ids and per-kind counts list them."""

KEYWORD_KINDS: tuple[str, ...] = KINDS[:-1]
"""Kinds named by a keyword ("Table 2"); citations are bracketed numbers or author-year groups."""

_EN_NUMBERS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
_DE_NUMBERS = (
    "eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn "
    "siebzehn achtzehn neunzehn zwanzig"
).split()
_FR_NUMBERS = (
    "un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze seize dix-sept "
    "dix-huit dix-neuf vingt"
).split()
_ES_NUMBERS = (
    "uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince dieciséis "
    "diecisiete dieciocho diecinueve veinte"
).split()

DEFAULT_VOCAB: dict[str, dict[str, list[str]]] = {
    "en": {
        "table": ["table", "tables", "tab.", "tabs."],
        "figure": ["figure", "figures", "fig.", "figs.", "fig.s"],
        "equation": ["equation", "equations", "eq.", "eqs.", "eqn.", "eqns."],
        "section": ["section", "sections", "sec.", "secs.", "sect.", "subsection", "subsections", "subsec.", "§",
                    "§§"],
        "appendix": ["appendix", "appendices", "app."],
        "algorithm": ["algorithm", "algorithms", "alg.", "algo."],
        "listing": ["listing", "listings", "lst."],
        "theorem": ["theorem", "theorems", "thm.", "lemma", "lemmas", "lemmata", "lem.", "proposition",
                    "propositions", "prop.", "corollary", "corollaries", "cor.", "definition", "definitions",
                    "def.", "defn.", "example", "examples", "remark", "remarks", "rem.", "property", "properties",
                    "conjecture", "conjectures"],
        "footnote": ["footnote", "footnotes", "fn.", "note"],
        "numbers": _EN_NUMBERS,
        "ordinals": "first second third fourth fifth sixth seventh eighth ninth tenth".split(),
        "conjunctions": ["and", "or", "to", "through"],
        "prepositions": ["of", "in", "from"],
        "external": [
            "supplementary", "supplemental", "supplement", "supporting information", "additional file",
            "online", "electronic", "appendix of", "et al.",
        ],
        "bibliography": [
            "references", "reference list", "bibliography", "works cited", "literature cited",
            "literature", "sources", "citations", "notes and references",
        ],
    },
    "de": {
        "table": ["tabelle", "tabellen", "tab."],
        "figure": ["abbildung", "abbildungen", "abb.", "bild", "grafik"],
        "equation": ["gleichung", "gleichungen", "gl.", "formel"],
        "section": ["abschnitt", "abschnitte", "abschnitten", "abschn.", "§", "§§"],
        "appendix": ["anhang", "anh."],
        "algorithm": ["algorithmus", "algorithmen"],
        "listing": ["listing", "quelltext"],
        "theorem": ["satz", "lemma", "lemmata", "proposition", "korollar", "folgerung", "definition", "beispiel",
                    "bemerkung", "eigenschaft", "vermutung"],
        "footnote": ["fußnote", "fussnote", "fn.", "anmerkung"],
        "numbers": _DE_NUMBERS,
        "ordinals": "erste zweite dritte vierte fünfte sechste siebte achte neunte zehnte".split(),
        "conjunctions": ["und", "oder", "bis"],
        "prepositions": ["von", "in", "aus", "der", "des"],
        "external": ["zusatzmaterial", "ergänzend", "ergänzenden", "supplement", "online", "et al."],
        "bibliography": ["literatur", "literaturverzeichnis", "quellen", "quellenverzeichnis", "referenzen",
                         "einzelnachweise"],
    },
    "fr": {
        "table": ["tableau", "tableaux", "tab.", "table"],
        "figure": ["figure", "figures", "fig.", "figs."],
        "equation": ["équation", "équations", "éq.", "eq.", "éqs."],
        "section": ["section", "sections", "sect.", "§", "§§"],
        "appendix": ["annexe", "annexes", "appendice"],
        "algorithm": ["algorithme", "algorithmes", "algo."],
        "listing": ["listing", "listage"],
        "theorem": ["théorème", "théorèmes", "lemme", "lemmes", "proposition", "propositions", "corollaire",
                    "corollaires", "définition", "définitions", "exemple", "exemples", "remarque", "remarques",
                    "propriété", "propriétés", "conjecture"],
        "footnote": ["note"],
        "numbers": _FR_NUMBERS,
        "ordinals": "premier deuxième troisième quatrième cinquième sixième septième huitième neuvième dixième".split(),
        "conjunctions": ["et", "ou", "à"],
        "prepositions": ["de", "du", "dans"],
        "external": ["supplémentaire", "supplémentaires", "complémentaire", "complémentaires", "en ligne",
                     "et al."],
        "bibliography": ["références", "bibliographie", "références bibliographiques", "sources", "notes"],
    },
    "es": {
        "table": ["tabla", "tablas", "tab.", "cuadro", "cuadros"],
        "figure": ["figura", "figuras", "fig.", "figs."],
        "equation": ["ecuación", "ecuaciones", "ec.", "ecs."],
        "section": ["sección", "secciones", "secc.", "sec.", "§", "§§"],
        "appendix": ["apéndice", "apéndices", "anexo", "anexos"],
        "algorithm": ["algoritmo", "algoritmos"],
        "listing": ["listado", "listados"],
        "theorem": ["teorema", "teoremas", "lema", "lemas", "proposición", "proposiciones", "corolario",
                    "corolarios", "definición", "definiciones", "ejemplo", "ejemplos", "observación",
                    "observaciones", "propiedad", "propiedades", "conjetura"],
        "footnote": ["nota"],
        "numbers": _ES_NUMBERS,
        "ordinals": "primero segundo tercero cuarto quinto sexto séptimo octavo noveno décimo".split(),
        "conjunctions": ["y", "o", "a"],
        "prepositions": ["de", "del", "en"],
        "external": ["suplementario", "suplementaria", "complementario", "complementaria", "en línea",
                     "et al."],
        "bibliography": ["referencias", "bibliografía", "fuentes", "obras citadas"],
    },
}
"""language code (ISO 639-1) -> vocabulary field -> terms. "Chapter" is deliberately no section keyword:
on the web it names a book's or a story's chapter, or a statute's ("Chapter 11"), far more often than a
part of the document itself. ``theorem`` covers the numbered statements of mathematical writing (amsthm's
``\\newtheorem`` environments: theorem, lemma, proposition, corollary, definition, example, remark,
property, conjecture); they often share one counter, so they share one kind, and a theorem keyword must
be capitalised ("Lemma 3", not "a lemma 3 ..."). "Claim" is left out: patents say "claim 1" for the
numbered claims they list. Fields other than the keyword kinds:

* ``numbers``: spelled cardinals, value = position + 1 (``one`` .. ``twenty``).
* ``ordinals``: ``first`` .. ``tenth``; "the second table" points at table 2.
* ``conjunctions``: join labels of one plural mention; the first two list labels ("Tables 1 and 2"),
  the others make ranges ("Figs. 3 to 5").
* ``prepositions``: "Table 2 *of* [5]" points outside the document when a citation or a named work follows.
* ``external``: cues near a mention that it points outside the document ("Table S1 in the
  *supplementary* material").
* ``bibliography``: headings that open a reference list.
"""

VOCAB_FIELDS: tuple[str, ...] = (*KEYWORD_KINDS, "numbers", "ordinals", "conjunctions", "prepositions", "external",
                                 "bibliography")
