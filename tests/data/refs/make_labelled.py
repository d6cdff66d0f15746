"""Generate ``labelled.jsonl``: documents with known dangling reference mentions, for precision/recall.

``python tests/data/refs/make_labelled.py`` rewrites ``labelled.jsonl`` next to this file (seeded, so the
output is byte-identical on every run; a test checks it is up to date). Each line holds ``id``,
``lang``, ``category``, ``text`` and ``dangling``: the list of ``{kind, label, start, end}`` that a
correct detector must flag (code-point offsets, end exclusive; ``label`` normalised: arabic numbers,
upper-case letters, ``REF`` / ``??`` / ``?`` for placeholders, ``"<Name> <year>"`` for author-year).

Documents are assembled from hand-written templates: prose filler, mention sentences of every kind and
label form, and targets (captions, markdown / LaTeX / whitespace-column tables, numbered equations,
headings, reference lists, bibliographies) that are included or left out at random. A mention whose
target is left out is dangling by construction, so the labels do not come from the detector. The hard
negatives the issue lists each get their own category.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20261129
OUT = Path(__file__).with_name("labelled.jsonl")

FILLER = [
    "The experiments were run on a single workstation over three days.",
    "We describe the setup before turning to the results.",
    "Participants were recruited from two regional clinics.",
    "The dataset covers the years between 2010 and 2018.",
    "All models were trained with the same learning-rate schedule.",
    "This choice keeps the comparison fair across conditions.",
    "Missing values were imputed with the median of each column.",
    "The protocol was approved by the local ethics committee.",
    "Each run was repeated five times with different seeds.",
    "We did not observe any effect of the order of presentation.",
    "Samples were stored at four degrees until analysis.",
    "The baseline is a simple majority classifier.",
    "Further work is needed to confirm these observations.",
    "Errors were estimated by bootstrap resampling.",
    "The survey was sent to every member of the association.",
]
SPELLED = "one two three four five six seven eight nine ten".split()
ROMAN = "I II III IV V VI VII VIII IX X".split()

# kind -> (keyword variants singular, plural keyword, sentence templates with {m})
KINDS = {
    "table": (["Table", "table", "Tab.", "TABLE"], "Tables",
              ["As shown in {m}, the error drops sharply.", "{m} lists the parameters of each model.",
               "The counts are summarised in {m}.", "Baseline scores appear in {m} for reference."]),
    "figure": (["Figure", "figure", "Fig.", "FIG."], "Figures",
               ["{m} plots the loss against the number of steps.", "The trend is visible in {m}.",
                "As {m} shows, the two curves cross early.", "See {m} for the distribution of lengths."]),
    "equation": (["Equation", "Eq.", "equation", "Eqn."], "Eqs.",
                 ["Substituting into {m} gives the bound.", "The update rule follows from {m}.",
                  "{m} defines the normalised score."]),
    "section": (["Section", "Sec.", "section", "§"], "Sections",
                ["The method is detailed in {m}.", "We return to this point in {m}.",
                 "{m} discusses the limitations."]),
    "appendix": (["Appendix"], "Appendices",
                 ["The proofs are given in {m}.", "Additional ablations are reported in {m}."]),
    "algorithm": (["Algorithm", "Alg."], "Algorithms",
                  ["{m} summarises the greedy packing procedure.", "The steps of {m} run in linear time."]),
    "listing": (["Listing"], "Listings", ["The parser shown in {m} handles nested quotes."]),
}
TABLE_BODIES = {
    "markdown": "| model | accuracy |\n|---|---|\n| base | 0.71 |\n| ours | 0.78 |",
    "latex": "\\begin{tabular}{lr}\nmodel & accuracy \\\\\nbase & 0.71 \\\\\nours & 0.78 \\\\\n\\end{tabular}",
    "columns": "model      accuracy   recall\nbase       0.71       0.65\nours       0.78       0.74\nlarge      0.80       0.77",
}
HARD_NEGATIVES = [
    ("one_table", "We bought one table and two chairs for the new office."),
    ("figure_skating", "Figure skating drew the largest crowds of the winter games."),
    ("figure_verb", "I figure I can finish the draft by Friday."),
    ("citation_needed", "The town was founded by fishermen.[citation needed] It grew quickly after the war."),
    ("year_brackets", "The statute was amended [2019] and again [2021] after public consultation."),
    ("section_230", "Section 230 of the Communications Decency Act shields platforms from liability."),
    ("section_law", "The court applied Section 1983 to the claims of the officers."),
    ("supplementary", "Detailed counts are given in Table S1 in the supplementary material."),
    ("supplemental_online", "See Supplemental Material, Table 3 (available online) for the full list."),
    ("array_index", "The loop reads x[1] and then y[2] before writing the result."),
    ("markdown_link", "Read the [1](https://example.org/guide) page before starting."),
    ("first_table", "Our first table was made of oak and lasted twenty years."),
    ("table_of_contents", "The table of contents lists every chapter of the report."),
    ("time_table", "The train timetable changed twice this winter."),
    ("chapter_11", "The airline filed for Chapter 11 bankruptcy protection in March."),
    ("book_chapter", "In chapter 6 of her memoir she describes the war years."),
    ("agreement_section", "The city argues that Section 13.3 of the Joint Use Agreement does not apply."),
    ("section_8", "Families may apply for Section 8 housing vouchers at the county office."),
    ("six_figure", "She left a six-figure salary to start the bakery."),
    ("appendix_organ", "The surgeon removed the appendix in under an hour."),
    ("pagination", "Pages: [1] [2] [3] Next"),
    ("wiki_see_also", "He also wrote poetry (see List of poems below) and essays."),
]
MULTI = {
    "de": ("Tabelle", "Abbildung", ["Wie {m} zeigt, sinkt der Fehler deutlich.", "Die Werte stehen in {m}."],
           ["Die Messungen dauerten drei Tage.", "Alle Modelle wurden gleich trainiert.",
            "Weitere Arbeiten sind nötig."]),
    "fr": ("Tableau", "Figure", ["Comme le montre le {m}, l'erreur diminue.", "Les valeurs figurent dans le {m}."],
           ["Les mesures ont duré trois jours.", "Tous les modèles ont été entraînés de la même façon.",
            "D'autres travaux sont nécessaires."]),
    "es": ("Tabla", "Figura", ["Como muestra la {m}, el error disminuye.", "Los valores aparecen en la {m}."],
           ["Las mediciones duraron tres días.", "Todos los modelos se entrenaron igual.",
            "Se necesita más trabajo."]),
}


class Doc:
    """Text assembled piece by piece, recording the offsets of gold dangling mentions."""

    def __init__(self, rng: random.Random, lang: str = "en") -> None:
        self.rng, self.lang, self.parts, self.pos, self.gold = rng, lang, [], 0, []
        self.trailer: list[str] = []

    def add(self, s: str) -> int:
        start = self.pos
        self.parts.append(s)
        self.pos += len(s)
        return start

    def para(self, k: int | None = None) -> None:
        pool = FILLER if self.lang == "en" else MULTI[self.lang][3]
        self.add(" ".join(self.rng.sample(pool, k or self.rng.randint(1, 3))) + "\n\n")

    def mention(self, template: str, pieces: list[tuple[str, str | None, list[str]]], dangling: bool) -> None:
        """``pieces``: (text, kind or None, labels); pieces with a kind are gold mentions when dangling."""
        before, after = template.split("{m}")
        if not before:
            pieces = [(pieces[0][0][:1].upper() + pieces[0][0][1:], *pieces[0][1:]), *pieces[1:]]
        self.add(before)
        for text, kind, labels in pieces:
            s = self.add(text)
            if dangling and kind:
                self.gold += [{"kind": kind, "label": lab, "start": s, "end": s + len(text)} for lab in labels]
        self.add(after + " ")

    def gold_piece(self, piece: str, kind: str, label: str, after: str = "") -> None:
        """Add ``piece`` as one gold dangling mention, then ``after``."""
        s = self.add(piece)
        self.gold.append({"kind": kind, "label": label, "start": s, "end": s + len(piece)})
        self.add(after)

    def text(self) -> str:
        return ("".join(self.parts) + "".join(self.trailer)).rstrip() + "\n"


def _label_form(rng: random.Random, n: int) -> str:
    form = rng.choice(["arabic", "arabic", "arabic", "roman", "spelled", "paren"])
    if form == "roman":
        return ROMAN[n - 1]
    if form == "spelled":
        return SPELLED[n - 1]
    return str(n)


def _target(doc: Doc, kind: str, n: int | str, rng: random.Random) -> None:
    """Append a target of ``kind`` number ``n`` in a random style (unlabelled styles only for n = 1)."""
    if kind == "table":
        style = rng.choice(["caption", "caption_md", "caption_bold"] + (["uncaptioned"] * 2 if n == 1 else []))
        if style == "uncaptioned":
            doc.add("\n" + TABLE_BODIES[rng.choice(list(TABLE_BODIES))] + "\n\n")
        elif style == "caption_md":
            doc.add(f"Table {n}: Accuracy of each model.\n{TABLE_BODIES['markdown']}\n\n")
        elif style == "caption_bold":
            doc.add(f"**Table {n}.** Accuracy of each model.\n\n")
        else:
            doc.add(f"{rng.choice(['Table', 'TABLE'])} {rng.choice([str(n), ROMAN[int(n) - 1]])}. Accuracy of each model.\n\n")
    elif kind == "figure":
        style = rng.choice(["caption"] + (["image", "latex"] if n == 1 else []))
        if style == "image":
            doc.add(f"![Loss curves](figures/loss{n}.png)\n\n")
        elif style == "latex":
            doc.add("\\begin{figure}\n\\includegraphics{loss.pdf}\n\\end{figure}\n\n")
        else:
            doc.add(f"{rng.choice(['Figure', 'Fig.'])} {n}: Loss against training steps.\n\n")
    elif kind == "equation":
        if rng.random() < 0.5:
            doc.add(f"$$ s = \\frac{{a}}{{b}} \\tag{{{n}}} $$\n\n")
        else:
            doc.add(f"    y = a x + b          ({n})\n\n")
    elif kind == "appendix":
        doc.trailer.append(f"\n\nAppendix {n}: Proofs\n\nThe proof is by induction.")
    elif kind == "section":
        doc.trailer.append(rng.choice([f"\n\n## {n} Discussion\n\nText.", f"\n\n{n}. Discussion\n\nText.",
                                       f"\n\n{n} Discussion\n\nText."]))
    elif kind == "algorithm":
        doc.add(f"Algorithm {n}: Greedy packing\n  for each document d: append d to the open bin\n\n")
    elif kind == "listing":
        doc.add(f"Listing {n}: Parser\n```\ndef parse(s):\n    return s.split()\n```\n\n")


def keyword_doc(rng: random.Random, i: int) -> dict:
    """1-3 mentions of distinct kinds, each dangling or resolved by a target at random."""
    doc = Doc(rng)
    doc.para()
    for kind in rng.sample(list(KINDS), rng.randint(1, 3)):
        singular, plural, templates = KINDS[kind]
        template = rng.choice(templates)
        dangling = rng.random() < 0.5
        if kind == "appendix":
            label = rng.choice("ABC")
            pieces, targets = [(f"Appendix {label}", kind, [label])], [label]
        elif kind in ("table", "figure", "equation") and rng.random() < 0.25:
            a = rng.randint(1, 3)
            b = a + rng.randint(1, 2)
            sep = rng.choice(["-", " and ", "–"])
            fmt = (lambda k: f"({k})") if kind == "equation" else str
            inner = [str(k) for k in range(a + 1, b)] if sep.strip() in ("-", "–") else []
            # the labels inside a range are mentions too; their gold span is the range's last label
            pieces = [(f"{plural} {fmt(a)}", kind, [str(a)]), (sep, None, []), (fmt(b), kind, [*inner, str(b)])]
            targets = [str(a), *inner, str(b)]
        else:
            n = rng.randint(1, 5 if kind in ("table", "figure", "equation") else 4)
            kw = rng.choice(singular)
            form = _label_form(rng, n) if kind in ("table", "figure") and kw[0].isupper() else str(n)
            if kind == "equation" and rng.random() < 0.5:
                form = f"({n})"
            sep = "" if kw == "§" else " "
            pieces, targets = [(f"{kw}{sep}{form}", kind, [str(n)])], [str(n)]
        doc.mention(template, pieces, dangling)
        doc.para(1)
        if not dangling:
            for t in targets:
                _target(doc, kind, t if kind == "appendix" else int(t) if len(targets) == 1 else str(t), rng)
    doc.para()
    return {"category": "keyword", "text": doc.text(), "dangling": doc.gold}


def placeholder_doc(rng: random.Random, i: int) -> dict:
    doc = Doc(rng)
    doc.para()
    kind, kw, ph = rng.choice([("table", "Table", "REF"), ("figure", "Fig.", "REF"), ("figure", "Figure", "??"),
                               ("table", "Table", "??"), ("section", "Section", "REF"), ("equation", "Eq.", "REF")])
    doc.mention(rng.choice(KINDS[kind][2]), [(f"{kw} {ph}", kind, [ph])], True)
    if rng.random() < 0.5:
        doc.add("Prior work agrees ")
        s = doc.add("[?]")
        doc.gold.append({"kind": "citation", "label": "?", "start": s, "end": s + 3})
        doc.add(". ")
    doc.para()
    if rng.random() < 0.5:  # a caption does not rescue a placeholder: the number is lost
        _target(doc, kind, 1, rng)
    return {"category": "placeholder", "text": doc.text(), "dangling": doc.gold}


def citation_doc(rng: random.Random, i: int) -> dict:
    doc = Doc(rng)
    doc.para()
    n_refs = rng.randint(3, 8)
    with_list = rng.random() < 0.5
    style = rng.choice(["single", "list", "range"])
    if style == "single":
        nums = [rng.randint(1, n_refs)]
        s = f"[{nums[0]}]"
    elif style == "list":
        nums = sorted(rng.sample(range(1, n_refs + 1), 2))
        s = f"[{nums[0]}, {nums[1]}]"
    else:
        a = rng.randint(1, n_refs - 2)
        nums = list(range(a, a + 3))
        s = f"[{a}-{a + 2}]"
    doc.add(rng.choice(["As reported in ", "Earlier studies ", "This follows prior work "]))
    start = doc.add(s)
    if not with_list:
        doc.gold += [{"kind": "citation", "label": str(v), "start": start, "end": start + len(s)} for v in nums]
    doc.add(". ")
    doc.para()
    if with_list:
        head = rng.choice(["References", "## References", "Bibliography", "REFERENCES"])
        entries = "\n".join(
            (f"[{k}] A. Author{k}. A study of things. Journal {k}, 2019." if rng.random() < 0.5 else
             f"{k}. Author{k} A. A study of things. Journal {k}; 2019.") for k in range(1, n_refs + 1))
        doc.trailer.append(f"\n\n{head}\n{entries}")
    return {"category": "citation", "text": doc.text(), "dangling": doc.gold}


def author_year_doc(rng: random.Random, i: int) -> dict:
    doc = Doc(rng)
    doc.para()
    name = rng.choice(["Smith", "Garcia", "Okafor", "Nakamura", "Weber", "Dubois"])
    year = rng.randint(1995, 2023)
    form = rng.choice([f"({name} et al., {year})", f"({name}, {year})", f"{name} and Lee ({year})",
                       f"({name} & Lee, {year}; Chen, 2011)"])
    with_bib = rng.random() < 0.5
    doc.add("This effect was described before ")
    s = doc.add(form)
    if not with_bib:
        doc.gold.append({"kind": "citation", "label": f"{name} {year}", "start": s, "end": s + len(form)})
    doc.add(". ")
    doc.para()
    if with_bib:
        doc.trailer.append(f"\n\nReferences\n{name}, J., & Lee, K. ({year}). A study of things. Journal, 3, 1-9.")
    return {"category": "author_year", "text": doc.text(), "dangling": doc.gold}


def footnote_doc(rng: random.Random, i: int) -> dict:
    doc = Doc(rng)
    doc.add("The estimate is conservative")
    s = doc.add("[^1]")
    doc.add(". ")
    doc.para()
    if rng.random() < 0.5:
        doc.trailer.append("\n\n[^1]: Computed on the held-out split.")
    else:
        doc.gold.append({"kind": "footnote", "label": "1", "start": s, "end": s + 4})
    return {"category": "footnote", "text": doc.text(), "dangling": doc.gold}


def hard_negative_doc(rng: random.Random, i: int) -> dict:
    doc = Doc(rng)
    name, sentence = HARD_NEGATIVES[i % len(HARD_NEGATIVES)]
    doc.para()
    doc.add(sentence + " ")
    doc.para()
    return {"category": f"negative.{name}", "text": doc.text(), "dangling": []}


def table_present_doc(rng: random.Random, i: int) -> dict:
    """Tables present without captions (markdown / LaTeX / whitespace columns): "Table 1" resolves."""
    doc = Doc(rng)
    doc.para()
    style = ["markdown", "latex", "columns"][i % 3]
    doc.mention(rng.choice(KINDS["table"][2]), [("Table 1", "table", ["1"])], False)
    doc.add("\n\n" + TABLE_BODIES[style] + "\n\n")
    doc.para()
    return {"category": f"negative.table_{style}", "text": doc.text(), "dangling": doc.gold}


def external_doc(rng: random.Random, i: int) -> dict:
    """"Table 2 of [5]": the table is in the cited work; the citation resolves in the reference list."""
    doc = Doc(rng)
    doc.para()
    doc.add(rng.choice(["We reuse the splits listed in Table 2 of [5]. ", "Compare Figure 4 in [5]. ",
                        "The setting follows Table 3 of Smith et al. (2019). "]))
    doc.para()
    doc.trailer.append("\n\nReferences\n" + "\n".join(f"[{k}] Author{k}, B. Title. 2018." for k in range(1, 7))
                       + "\nSmith, A., Jones, B., & Lee, C. (2019). Title. Journal.")
    return {"category": "negative.external", "text": doc.text(), "dangling": []}


def multilingual_doc(rng: random.Random, i: int) -> dict:
    lang = ["de", "fr", "es"][i % 3]
    table_kw, fig_kw, templates, _ = MULTI[lang]
    doc = Doc(rng, lang)
    doc.para()
    kind, kw = rng.choice([("table", table_kw), ("figure", fig_kw)])
    n = rng.randint(1, 4)
    dangling = rng.random() < 0.5
    doc.mention(rng.choice(templates), [(f"{kw} {n}", kind, [str(n)])], dangling)
    doc.para()
    if not dangling:
        doc.add(f"{kw} {n}: {'Ergebnisse' if lang == 'de' else 'Résultats' if lang == 'fr' else 'Resultados'}.\n\n")
    return {"category": f"multilingual.{lang}", "text": doc.text(), "dangling": doc.gold, "lang": lang}


VARIED = [
    # (sentence with {m}, mention text, kind, label, target that resolves it)
    ("The gain is plotted in {m}.", "Fig.~3", "figure", "3", "Figure 3: Gain of each stage."),
    ("The values are listed in {m}.", "Table\u00a02", "table", "2", "Table 2. Values."),
    ("Both regimes appear in {m}.", "Figs. 2 and 3", "figure", "2,3", "Fig. 2: Regime A.\n\nFig. 3: Regime B."),
    ("The subgroup is in {m}.", "Table 4a", "table", "4a", "Table 4a: Subgroup."),
    ("The estimator is described in {m}.", "Section 2.3", "section", "2.3", "2.3 Estimation"),
    ("We return to this in {m}.", "Sec. 3", "section", "3", "III. RESULTS"),
    ("The proof of {m} is short.", "Eq. (7)", "equation", "7", "    f(x) = x^2 + 1      (7)"),
    ("Details are in {m}.", "Appendix B.2", "appendix", "B.2", "B.2 Hyper-parameters"),
    ("Pseudo-code is given in {m}.", "Algorithm 2", "algorithm", "2", "Algorithm 2 Beam search"),
    ("The question is discussed in {m}.", "section 4", "section", "4", "# 4 The question"),
]


def varied_doc(rng: random.Random, i: int) -> dict:
    """Harder label forms and target styles: ``Fig.~3``, no-break space, ``Table 4a``, ``Sec. 3`` vs ``III.``."""
    template, m, kind, labels, target = VARIED[i % len(VARIED)]
    doc = Doc(rng)
    doc.para()
    dangling = (i // len(VARIED)) % 2 == 0
    parts = m.split(" and ")
    if len(parts) == 2:  # "Figs. 2 and 3"
        pieces = [(parts[0], kind, [labels.split(",")[0]]), (" and ", None, []), (parts[1], kind, [labels.split(",")[1]])]
    else:
        pieces = [(m, kind, [labels])]
    doc.mention(template, pieces, dangling)
    doc.para()
    if not dangling:
        doc.trailer.append("\n\n" + target + "\n\nText.")
    return {"category": "varied", "text": doc.text(), "dangling": doc.gold}


# ------------------------------------------------------------------ mention kinds beyond tables and figures (science, legal, ...)
THEOREM_KW = ["Theorem", "Lemma", "Proposition", "Corollary", "Definition", "Example", "Remark", "Property",
              "Thm.", "Prop."]
THEOREM_SENTENCES = ["By {m}, the sum is bounded.", "The claim follows from {m}.", "{m} gives the base case.",
                     "Combining {m} with the estimate above, we conclude."]


def science_doc(rng: random.Random, i: int) -> dict:
    """Scientific kinds: theorem-like statements, subsections, bare ``(REF)``, a figure next to a
    supplementary table, and places in a cited work (never dangling)."""
    doc = Doc(rng)
    doc.para()
    variant = ["theorem", "theorem", "subsection", "bare_ref", "supp_figure", "cited"][i % 6]
    if variant == "theorem":
        kw = rng.choice(THEOREM_KW)
        lab = rng.choice(["2", "3", "2.1", "REF"])
        dangling = lab == "REF" or rng.random() < 0.5
        doc.mention(rng.choice(THEOREM_SENTENCES), [(f"{kw} {lab}", "theorem", [lab])], dangling)
        doc.para(1)
        if not dangling:
            word = {"Thm.": "Theorem", "Prop.": "Proposition"}.get(kw, kw)
            doc.add(rng.choice([f"**{word} {lab}.** Let x be a positive integer.\n\n",
                                f"{word} {lab} (Main bound). Every finite set is bounded.\n\n",
                                f"{word} {lab}. Let f be continuous.\n\n"]))
    elif variant == "subsection":
        lab = rng.choice(["2.1", "3.2", "REF"])
        dangling = lab == "REF" or rng.random() < 0.5
        doc.mention("The estimator is described in {m}.", [(f"Subsection {lab}", "section", [lab])], dangling)
        if not dangling:
            doc.trailer.append(f"\n\n{lab} Estimation\n\nText.")
    elif variant == "bare_ref":
        doc.add("Substituting ")
        doc.gold_piece("(REF)", "equation", "REF", " into the update and using ")
        doc.gold_piece("(REF )", "equation", "REF", " gives the bound. The three cases are (1) empty, (2) small and (3) large. ")
    elif variant == "supp_figure":
        n = rng.randint(1, 4)
        dangling = rng.random() < 0.6
        doc.mention(rng.choice(["{m} shows the trend, and the counts are in Supplementary Table S2.",
                                "The counts (Supplementary Table S3) agree with {m}."]),
                    [(f"Fig. {n}", "figure", [str(n)])], dangling)
        if not dangling:
            doc.add(f"\n\nFigure {n}: Trend of the counts.\n\n")
    else:
        doc.add(rng.choice([
            "The bound is Theorem 3.2 of [4], applied twice. ", "We use [4, Lemma 2.1] and [7, Eq. (3)]. ",
            "As in Section 4.2 of Knuth's book, the tree is balanced. ",
            "Eq. (5) of the original paper has a sign error. ",
            "The constant is taken from Proposition 6 in [2]. ",
        ]))
        doc.trailer.append("\n\nReferences\n" + "\n".join(f"[{k}] Author{k}, B. Title. 2018." for k in range(1, 9)))
    doc.para()
    return {"category": f"science.{variant}", "text": doc.text(), "dangling": doc.gold}


CLAUSE_TITLES = ["Definitions", "Grant of Rights", "Fees and Payment", "Confidentiality", "Term and Termination",
                 "Warranties", "Limitation of Liability", "Governing Law", "Notices", "Miscellaneous"]


def _clauses(doc: Doc, rng: random.Random, n: int, inline: bool) -> None:
    for k in range(1, n + 1):
        body = rng.choice(["Each party shall keep the other informed.", "Payments are due within thirty days.",
                           "This obligation survives the end of the agreement."])
        sep = " " if inline else "\n"
        doc.add(f"{k}. {CLAUSE_TITLES[k - 1]}.{sep}{body}\n\n")


def legal_doc(rng: random.Random, i: int) -> dict:
    """Contracts and legal prose: numbered clauses that define sections, statutes, law reporters."""
    doc = Doc(rng)
    variant = ["clause", "clause", "statute", "reporter", "cited_book", "schedule"][i % 6]
    if variant == "clause":
        n = rng.randint(6, 10)
        _clauses(doc, rng, n, inline=rng.random() < 0.5)
        a, b = rng.sample(range(1, n + 1), 2)
        doc.add(rng.choice([f"Nothing in Section {a} limits the rights under Section {b}. ",
                            f"Subject to section {a}(b), the terms of section {b} apply. ",
                            f"The obligations in Sections {a} and {b} survive termination. "]))
    elif variant == "statute":
        doc.add(rng.choice([
            "The agency relied on section 5 of the FTC Act and section 12(b) of the Securities Exchange Act. ",
            "Records are open under Wis. Stat. § 19.35 unless an exception applies. ",
            "The claim arises under Penal Code § 12 and Section 3 of Article II of the state charter. ",
            "Section 2 of the Sherman Act forbids monopolisation. ",
            "The tenant invoked section 8 of the Residential Tenancies Act. ",
        ]))
    elif variant == "reporter":
        doc.add(rng.choice([
            "See Miller v. Stone, 45 Cal. App. 3d 123, 130 (1975). ",
            "The rule was restated in Doe v. Board, 512 F.2d 88 (D.C. Cir. 1975), 96 U.S. App. D.C. 14. ",
            "Compare Hart v. Lane, 7 Ill. App. 2d 301 (1955), with the later cases. ",
        ]))
    elif variant == "cited_book":
        doc.add(rng.choice([
            "The doctrine is traced in Wright, Federal Courts, chap. 4, sect. 12, p. 61. ",
            "See the treatise's Section 4.2 of Hale's Commentaries for the history. ",
            "Section 1.3 of the Restatement takes the opposite view. ",
        ]))
    else:  # a schedule table stripped from a contract: the mention dangles
        _clauses(doc, rng, 4, inline=True)
        n = rng.randint(1, 3)
        dangling = rng.random() < 0.5
        doc.mention("The fees are set out in {m}.", [(f"Table {n}", "table", [str(n)])], dangling)
        if not dangling:
            doc.add(f"\n\nTable {n}: Fees.\n{TABLE_BODIES['markdown']}\n\n")
    doc.add("\n")
    return {"category": f"legal.{variant}", "text": doc.text(), "dangling": doc.gold}


LICENCE_TITLES = ["Definitions", "Source Code", "Basic Permissions", "Protecting Users", "Conveying Copies",
                  "Additional Terms", "Termination", "Acceptance Not Required", "Automatic Licensing",
                  "Patents", "Disclaimer of Warranty", "Interpretation"]


def licence_doc(rng: random.Random, i: int) -> dict:
    """An invented copyleft licence: "N. Title." clauses (GPL style, numbered from 0) referring to each
    other, and sections of other licences ("section 3 of the GPL")."""
    doc = Doc(rng)
    doc.add("SAMPLE PUBLIC LICENSE\nVersion 2, June 2026\n\nTERMS AND CONDITIONS\n\n")
    n = rng.randint(8, 12)
    for k in range(n):
        doc.add(f"{k}. {LICENCE_TITLES[k]}.\n\n")
        a = rng.randrange(n)
        doc.add(rng.choice([f"You may convey copies only under the conditions of section {a} of this License. ",
                            f"The requirements of Section {a} do not apply to system libraries. ",
                            "You may not impose any further restrictions on the recipients. ",
                            "Compatible terms are those of section 3 of the GPL and Section 4 of the Apache License. ",
                            "The notice may follow section 7 of the MPL or section 2(c) of the LGPL. "]) + "\n\n")
    if i % 4 == 0:  # a reference to a clause the copy lost: dangling by construction
        doc.mention("The exception is described in {m}.", [(f"Section {n + 3}", "section", [str(n + 3)])], True)
    doc.add("END OF TERMS AND CONDITIONS\n")
    return {"category": "licence.clause", "text": doc.text(), "dangling": doc.gold}


def wiki_doc(rng: random.Random, i: int) -> dict:
    """Wiki-like text: citation markers, wikitext notes and templates, a references section."""
    doc = Doc(rng)
    doc.para()
    variant = ["markers", "wikitext", "author_year", "link"][i % 4]
    if variant == "markers":  # the reference list was stripped: markers dangle
        doc.add("The harbour was rebuilt after the storm.")
        doc.gold_piece("[3]", "citation", "3", " Trade recovered within a decade.")
        doc.gold_piece("[4]", "citation", "4", " ")
    elif variant == "wikitext":
        doc.add("The population grew quickly.<ref>National Office, Yearbook, Table 3, p. 12.</ref> "
                "It peaked in 1950.{{cite book |title=Demographic Yearbook – Table 3: Population |year=1952}} "
                "Compare to section 1 of both acts.<ref group=note>See note 18 of the report.</ref> ")
    elif variant == "author_year":
        doc.add("The theory was popularised later (e.g., Moreau, 1993), and critics replied (Lindqvist, 2011). ")
        doc.trailer.append("\n\n== References ==\n* Moreau, A. (1993). A book. Press.\n"
                           "* Lindqvist, B. (2011). An article. Journal.")
    else:
        doc.add("The group answered the question in [http://example.org/faq/secG.html Section G – Is it new?] "
                "and in its published ''Journeys Through Italy, India and Indonesia'' (2006). ")
    doc.para()
    return {"category": f"wiki.{variant}", "text": doc.text(), "dangling": doc.gold}


def latex_doc(rng: random.Random, i: int) -> dict:
    """LaTeX sources: macro definitions, example strings, thebibliography, \\ref without a label."""
    doc = Doc(rng)
    variant = ["newcommand", "bibitem", "example", "ref"][i % 4]
    if variant == "newcommand":
        doc.add("\\newcommand{\\norm}[1]{\\lVert #1 \\rVert}\n\\renewcommand{\\vec}[2]{(#1, #2)}\n"
                "\\newcommand{\\pair}[2][0]{#1 + #2}\n\n")
        doc.para()
    elif variant == "bibitem":
        doc.para()
        doc.add("This extends earlier work \\cite{smith19,lee20}.\n\n")
        doc.add("\\begin{thebibliography}{9}\n"
                "\\bibitem[Smith et al.(2019)]{smith19} Smith, J., Lee, K. and Park, M. (2019). A study, Table 4.\n"
                "\\bibitem[Lee and Kim(2020)]{lee20} Lee, K. and Kim, H. (2020). Another study [2].\n"
                "\\end{thebibliography}\n")
    elif variant == "example":
        doc.add("To cite a source, type `\\cite{key}`; the numeric styles print \"[1]\" in the text, and "
                "a cross-reference such as `Figure~\\ref{fig:loss}` becomes \"Figure 1\".\n\n"
                "```latex\nAs shown in Table~\\ref{tab:main} and [2], ...\n```\n\n")
        doc.para()
    else:
        dangling = rng.random() < 0.5
        doc.para()
        doc.mention("The results are listed in {m}.", [("Table~\\ref{tab:main}", "table", ["\\ref{tab:main}"])],
                    dangling)
        if not dangling:
            doc.add("\n\n\\begin{table}\n\\caption{Results}\\label{tab:main}\n\\end{table}\n\n")
    doc.add("\n")
    return {"category": f"latex.{variant}", "text": doc.text(), "dangling": doc.gold}


PLAN = [
    (keyword_doc, 150), (placeholder_doc, 25), (citation_doc, 40), (author_year_doc, 20), (footnote_doc, 10),
    (hard_negative_doc, 60), (varied_doc, 40), (table_present_doc, 15), (external_doc, 9), (multilingual_doc, 24),
    (science_doc, 60), (legal_doc, 36), (licence_doc, 16), (wiki_doc, 24), (latex_doc, 24),
]


def generate(seed: int = SEED) -> list[dict]:
    """All labelled documents, deterministic for ``seed``."""
    rng = random.Random(seed)
    docs = []
    for make, count in PLAN:
        for i in range(count):
            d = make(rng, i)
            docs.append({"id": f"{d['category']}-{len(docs):04d}", "lang": d.get("lang", "en"),
                         "category": d["category"], "text": d["text"], "dangling": d["dangling"]})
    return docs


def render(docs: list[dict]) -> str:
    return "".join(json.dumps(d, ensure_ascii=False, sort_keys=True) + "\n" for d in docs)


if __name__ == "__main__":
    OUT.write_text(render(generate()), encoding="utf-8")
    print(f"wrote {OUT} ({len(generate())} documents)")
