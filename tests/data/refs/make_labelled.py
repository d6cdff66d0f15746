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


PLAN = [
    (keyword_doc, 150), (placeholder_doc, 25), (citation_doc, 40), (author_year_doc, 20), (footnote_doc, 10),
    (hard_negative_doc, 60), (varied_doc, 40), (table_present_doc, 15), (external_doc, 9), (multilingual_doc, 24),
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
