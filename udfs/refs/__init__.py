"""Broken-reference detection: mentions of tables, figures, equations, sections, ... whose target is gone.

Preprocessing strips tables, figures, equations and reference lists but keeps the sentences that point
at them ("as shown in table one", "see Fig. 3b", "Eq. (4) gives", "as reported in [12]"). This module
finds every such *mention* in a document, finds the *targets* the document still holds (captions,
tabular structure, numbered display equations, headings, reference-list entries, a bibliography), and
marks a mention *dangling* when nothing in the document resolves it.

Rules (each one tested in ``tests/test_refs_udf.py`` and ``tests/test_refs_structure.py``):

* A mention is a keyword of a kind (vocabulary per language, :mod:`udfs.refs.vocab`) followed by one
  or more labels: arabic (``1``, ``2.3``, ``4a``, ``S1``), roman (``IV``, ``iv``), spelled (``one`` ..
  ``twenty``), letters (``Appendix A``), parenthesised (``Eq. (3)``), lists and ranges (``Tables 1 and
  2``, ``Figures 3-5``, ``Eqs. (2)-(4)``); or an ordinal before the keyword ("in the second figure");
  or a numeric citation (``[12]``, ``[3, 7]``, ``[2-5]``); or an author-year citation ("(Smith et al.,
  2019)", "Smith and Lee (2020)"; a lone "(Smith, 2019)" only in text that also says "et al", because
  on the web "(Island, 1976)" is a record label); or a markdown footnote reference (``[^3]``).
* A converter placeholder as label (``Table REF``, ``Fig. ??``, ``Section <ref>``, ``[?]``, ``TABREF3``)
  is always dangling: the number it stood for is lost whatever the document still holds. A citation
  marker (``{{cite:<id>}}``, ``BIBREF3``, ``<cit.>``, ``@xcite``) resolves on any bibliography, as an
  author-year citation does (the converters: :data:`udfs.refs.mentions.CONVERTER_PLACEHOLDERS`).
* A mention is dangling only where the document's own structure could have held its target. A section
  mention needs numbered parts of the document's own (headings, clauses, appendices) or a paper-like
  document (a caption, two or more mentions of its own floats, equations, statements or appendices,
  "Subsection" / "Sec." forms); an author-year citation without a bibliography needs a paper-like
  document or a reference list that ingest dropped (``held``). Tables and figures keep the science rule:
  a missing one is dangling in any document.
* Numeric citations also resolve on a notes list under any heading: numbered lines 1, 2, ... with a wiki
  back-link ("1. ^"), under a heading with an edit link ("Note[modifica]"), at the end of the document, or
  3+ entries that read like references; and a range whose dash was lost ("[1113]" = 11-13) resolves when
  both ends are entries. ``[1]`` before ``\\end{`` or ``\\\\`` is an equation number, not a citation.
* External material is never dangling: labels ``S<n>`` that the document does not hold (supplementary
  tables by convention), a supplementary / online cue in the same sentence, or "of/in/from" followed by
  a citation, an author or a named law ("Table 2 of [5]", "Section 230 of the Communications Decency
  Act"). Section numbers >= 100 are statute sections, not document sections, and are not mentions.
* Theorem-like statements (Theorem, Lemma, Proposition, Corollary, Definition, Example, Remark,
  Property, Conjecture: one kind, ``theorem``) need a capitalised keyword; ``Subsection`` is a section
  keyword; a bare ``(REF)`` / ``(??)`` is an equation whose number was lost. A supplementary cue counts
  only for the kind it names: "Fig. 2 (Supplementary Table S3)" leaves Fig. 2 in the document.
* A place in another document is external: "section 3 of the GPL" (an acronym, a capitalised name that is
  not a part of this document, a law noun: "of both acts"), "[12, Theorem 3]", "Eq. (5) of the original
  paper", "chap. 2, sect. 22" and mentions followed by a page ("…, p. 61").
* Not mentions: a keyword right after a capitalised abbreviation or a code name (law reporters "45 Cal.
  App. 3d 123", statutes "Wis. Stat. § 19.35"); anything inside code blocks, inline code, verbatim /
  listing environments, ``thebibliography`` / ``\\bibitem`` lines, the entries of a reference list
  under a bibliography heading (a cited work's "algorithm (2014)" or "Table 3"), TeX math ``$...$`` /
  ``$$...$$``, wiki ``<ref>`` notes, citation templates and external-link labels; a quoted mention
  ('"[1]"', an example string); ``[1]`` after ``}`` (``\\newcommand{\\x}[1]``) or after "p." (a page),
  or followed by a digit; a year in parentheses after a keyword ("algorithm (2014)").
* A statement header followed by its sources ("Proposition A.1 [41, 40, 13]" on its own line) is the
  document's own statement, a target; "\\cite[Theorem 14.16]{key}" names a place in the cited work.
* Not mentions at all: "one table", "Figure skating", "[citation needed]", years in brackets
  ("[2019]"), array indices (``a[1]``), markdown links (``[1](url)``) and link definitions (``[1]: url``),
  page navigation ("[1] [2] [3] Next"), "Chapter 11 bankruptcy" / "Section 8 housing".
* A mention resolves when the document holds a caption line (``Table 1:``, ``TABLE I.``, ``Figure
  2.``), a heading with that label (``## 3 Methods``, ``3.2 Results``, ``Appendix A``), a numbered
  display equation (a math line ending in ``(3)``, ``\\tag{3}``), a numbered clause ("10. Automatic
  Licensing." opens section 10 of a licence; "Section 2(a)" resolves on it), a reference-list entry
  (``[12] ...`` or ``12. ...`` under a bibliography heading, a ``\\bibitem``), any bibliography
  (author-year citations), a LaTeX
  ``\\label`` for a ``\\ref``, or -- when the document has no labelled target of that kind -- enough
  unlabelled structures of the kind: markdown pipe tables, LaTeX ``tabular``/``table``, runs of >= 3
  lines with a consistent tab / multi-space column count, images, LaTeX equation environments and
  ``$$...$$`` display formulas on their own line. "Section V" resolves on the heading "5 ..." when the
  document numbers its headings in arabic.

Offsets are 0-based code-point offsets into the text, end exclusive (Python ``str`` indices; Spark's
``substring`` is 1-based over the same code points).

Source: the mention and caption conventions of the ACM, IEEE and Springer author guides and of LaTeX
(``\\ref``, ``\\label``, ``\\tag``, ``tabular``); placeholders as left by LaTeXML / unarXive (``REF``)
and LaTeX itself (``??``) and BibTeX (``[?]``). No reference implementation exists; the rules were
written against ``tests/data/refs/`` (labelled set) and checked on PMC and unarXive papers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from udfs.refs.matcher import PLACEHOLDERS, matcher, normalise_label
from udfs.refs.mentions import Mention, _analyse, find_mentions
from udfs.refs.repair import repair, sentence_spans, undo_repair
from udfs.refs.vocab import DEFAULT_VOCAB, KINDS

__all__ = [
    "MENTION_TYPE", "PLACEHOLDERS", "REPAIR_TYPE", "SIGNAL_SCHEMA", "Mention", "find_mentions", "matcher",
    "normalise_label", "refs_signals", "repair", "sentence_spans", "undo_repair",
]

MENTION_TYPE = pa.struct([("kind", pa.string()), ("label", pa.string()), ("start", pa.int32()),
                          ("end", pa.int32()), ("dangling", pa.bool_())])
REPAIR_TYPE = pa.struct([("start", pa.int32()), ("end", pa.int32()), ("text", pa.string())])
SIGNAL_SCHEMA = pa.schema([
    ("ref_mentions", pa.list_(MENTION_TYPE)),
    ("n_mentions", pa.int32()),
    ("n_dangling", pa.int32()),
    ("dangling_ratio", pa.float64()),
    ("mentions_by_kind", pa.map_(pa.string(), pa.int32())),
    ("dangling_by_kind", pa.map_(pa.string(), pa.int32())),
    ("repaired_text", pa.string()),
    ("refs_repairs", pa.list_(REPAIR_TYPE)),
])
"""Columns :func:`refs_signals` returns. ``repaired_text`` / ``refs_repairs`` are null unless ``repair``
is on and the document has a dangling mention; ``dangling_ratio`` = n_dangling / n_mentions (0.0 when
there are no mentions)."""


def refs_signals(
    texts: pa.Array | pa.ChunkedArray,
    langs: pa.Array | pa.ChunkedArray | None = None,
    vocabs: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    default_lang: str = "en",
    repair_sentences: bool = False,
    held: pa.Array | pa.ChunkedArray | None = None,
) -> pa.RecordBatch:
    """Reference signals of a batch of documents.

    Args:
        texts: string array, one document per row; null counts as empty text.
        langs: optional language codes per row (ISO 639-1, the filter stage's ``lang``); rows whose
            language has no vocabulary use ``default_lang``.
        vocabs: language -> vocabulary (default :data:`udfs.refs.vocab.DEFAULT_VOCAB`).
        default_lang: the vocabulary for rows without one of their own.
        repair_sentences: also compute ``repaired_text`` and ``refs_repairs``.
        held: optional list<string> per row: the mention kinds whose targets ingest dropped from the
            document (see :func:`udfs.refs.find_mentions`); null = none.

    Returns:
        A record batch with :data:`SIGNAL_SCHEMA`, one row per input row. Empty and whitespace-only
        text: no mentions, ``n_* = 0``, ratio 0.0, empty maps.

    Raises:
        ValueError: ``default_lang`` has no vocabulary.
    """
    vocabs = vocabs or DEFAULT_VOCAB
    if default_lang not in vocabs:
        raise ValueError(
            f"refs default language {default_lang!r} has no vocabulary; allowed: {sorted(vocabs)}"
        )
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    n = len(texts)
    lang_list = langs.to_pylist() if langs is not None else [None] * n
    py_texts = texts.to_pylist()
    held_list = [frozenset(h or ()) for h in held.to_pylist()] if held is not None else [frozenset()] * n
    results: list[list[Mention]] = [[] for _ in range(n)]
    groups: dict[str, list[int]] = {}
    for i, lang in enumerate(lang_list):
        groups.setdefault(lang if lang in vocabs else default_lang, []).append(i)
    for lang, idx in groups.items():
        m = matcher(vocabs[lang])
        sub = texts if len(idx) == n else texts.take(pa.array(idx, pa.int64()))
        hit = pc.fill_null(pc.match_substring_regex(sub, m.gate, ignore_case=True), False).to_pylist()
        for j, i in enumerate(idx):
            if hit[j]:
                results[i] = _analyse(py_texts[i], m, held_list[i])
    cols: dict[str, list] = {f.name: [] for f in SIGNAL_SCHEMA}
    for i, ms in enumerate(results):
        nd = sum(mt.dangling for mt in ms)
        cols["ref_mentions"].append([(mt.kind, mt.label, mt.start, mt.end, mt.dangling) for mt in ms])
        cols["n_mentions"].append(len(ms))
        cols["n_dangling"].append(nd)
        cols["dangling_ratio"].append(nd / len(ms) if ms else 0.0)
        by_kind: dict[str, int] = {}
        dang_kind: dict[str, int] = {}
        for mt in ms:
            by_kind[mt.kind] = by_kind.get(mt.kind, 0) + 1
            if mt.dangling:
                dang_kind[mt.kind] = dang_kind.get(mt.kind, 0) + 1
        cols["mentions_by_kind"].append(sorted(by_kind.items(), key=lambda kv: KINDS.index(kv[0])))
        cols["dangling_by_kind"].append(sorted(dang_kind.items(), key=lambda kv: KINDS.index(kv[0])))
        if repair_sentences and nd:
            lang = lang_list[i] if lang_list[i] in vocabs else default_lang
            new_text, removed = repair(py_texts[i] or "", ms, matcher(vocabs[lang]).abbreviations)
            cols["repaired_text"].append(new_text)
            cols["refs_repairs"].append(removed)
        else:
            cols["repaired_text"].append(None)
            cols["refs_repairs"].append(None)
    cols["ref_mentions"] = [
        [dict(zip(MENTION_TYPE.names, r, strict=True)) for r in row] for row in cols["ref_mentions"]
    ]
    cols["refs_repairs"] = [
        None if row is None else [dict(zip(REPAIR_TYPE.names, r, strict=True)) for r in row]
        for row in cols["refs_repairs"]
    ]
    return pa.record_batch([pa.array(cols[f.name], f.type) for f in SIGNAL_SCHEMA], schema=SIGNAL_SCHEMA)
