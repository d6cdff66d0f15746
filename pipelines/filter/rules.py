"""The filter's rules, declared once: one row per (rule, threshold) with its reason id, signal, comparison,
config key and unit.

:func:`pipelines.filter.stage.decide` loops over :data:`RULES`, the config validates ``rule_actions`` /
``rule_languages`` against :func:`rule_names`, and the report draws each signal's thresholds from
:func:`thresholds`. Adding a rule: the signal in ``udfs/`` (a field of its family's struct column), the
config field with its YAML comment in ``conf/default.yaml``, and one row here.

A rule id with two rows (``gopher_quality.word_count``: too few or too many words) fails when any of its
rows fails. Row order is decision order: the reason ids of a document come in the order they first
appear here. A threshold set to ``null`` switches its row off (``false`` for a boolean ``drop_*`` key).

This module holds plain data and imports nothing from Winnow, so :mod:`pipelines.core.config` can read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Compare = Literal["min", "max", "true", "in"]
"""How a row fails: ``min``: signal < value (``min_*`` keeps >=); ``max``: signal > value (``max_*``
keeps <=); ``true``: the boolean signal is true while the ``drop_*`` key is true; ``in``: the signal
is not one of the listed values. A null signal never fails."""


LINES, WORDS, CHARS = "fraction of lines", "fraction of words", "fraction of chars"
PARAGRAPHS = "fraction of paragraphs"
"""Units of the ratio signals."""


@dataclass(frozen=True)
class Rule:
    """One threshold of one filter rule.

    Attributes:
        reason: the stable reason id written to ``removed.reason``, ``<family>.<rule>``.
        signal: the signal column: ``<struct column>.<field>`` or a top-level column.
        compare: see :data:`Compare`.
        key: the config key under ``filter`` holding the threshold.
        unit: the unit of the signal and its threshold.
        requires: a config key under ``filter`` that must be truthy for the row to apply (a model).
    """

    reason: str
    signal: str
    compare: Compare
    key: str
    unit: str
    requires: str | None = None

    @property
    def family(self) -> str:
        """The rule family (reason prefix), e.g. ``gopher_quality``."""
        return self.reason.partition(".")[0]

    @property
    def name(self) -> str:
        """The rule id within its family (what ``rule_actions`` keys), e.g. ``word_count``."""
        return self.reason.partition(".")[2]

    @property
    def section(self) -> str:
        """The config subsection under ``filter`` that holds the key, e.g. ``langid``."""
        return self.key.partition(".")[0]


def _gopher_quality() -> list[Rule]:
    # Rae et al. 2021, appendix A.1.1 (Gopher quality filters).
    f = "gopher_quality"
    return [
        Rule(f"{f}.word_count", f"{f}.word_count", "min", f"{f}.min_words", "words"),
        Rule(f"{f}.word_count", f"{f}.word_count", "max", f"{f}.max_words", "words"),
        Rule(f"{f}.mean_word_length", f"{f}.mean_word_length", "min", f"{f}.min_mean_word_length", "chars"),
        Rule(f"{f}.mean_word_length", f"{f}.mean_word_length", "max", f"{f}.max_mean_word_length", "chars"),
        # Gopher's symbol rule checks the hash and the ellipsis ratio against one threshold.
        *(Rule(f"{f}.symbol_word_ratio", f"{f}.{sig}", "max", f"{f}.max_symbol_word_ratio", "per word")
          for sig in ("hash_word_ratio", "ellipsis_word_ratio")),
        Rule(f"{f}.bullet_lines", f"{f}.bullet_lines_ratio", "max", f"{f}.max_bullet_lines_ratio", LINES),
        Rule(f"{f}.ellipsis_lines", f"{f}.ellipsis_lines_ratio", "max", f"{f}.max_ellipsis_lines_ratio",
             LINES),
        Rule(f"{f}.alpha_words", f"{f}.alpha_words_ratio", "min", f"{f}.min_alpha_words_ratio", WORDS),
        Rule(f"{f}.stop_words", f"{f}.stop_words", "min", f"{f}.min_stop_words", "distinct stop words"),
    ]


def _gopher_repetition() -> list[Rule]:
    # Rae et al. 2021, table A1 (Gopher repetition filters).
    f = "gopher_repetition"
    rows = [Rule(f"{f}.{n}", f"{f}.{n}", "max", f"{f}.max_{n}", unit)
            for n, unit in (("dup_line_frac", LINES), ("dup_para_frac", PARAGRAPHS),
                            ("dup_line_char_frac", CHARS), ("dup_para_char_frac", CHARS))]
    rows += [Rule(f"{f}.top_{k}gram", f"{f}.top_{k}gram_char_frac", "max", f"{f}.max_top_{k}gram_char_frac",
                  CHARS) for k in (2, 3, 4)]
    rows += [Rule(f"{f}.dup_{k}gram", f"{f}.dup_{k}gram_char_frac", "max", f"{f}.max_dup_{k}gram_char_frac",
                  CHARS) for k in range(5, 11)]
    return rows


def _c4() -> list[Rule]:
    # Raffel et al. 2020, section 2.2 (C4 page rules).
    return [
        Rule("c4.lorem_ipsum", "c4.has_lorem_ipsum", "true", "c4.drop_lorem_ipsum", "boolean"),
        Rule("c4.curly_bracket", "c4.has_curly_bracket", "true", "c4.drop_curly_bracket", "boolean"),
        Rule("c4.min_sentences", "c4.kept_sentences", "min", "c4.min_sentences", "sentences"),
    ]


def _fineweb() -> list[Rule]:
    # Penedo et al. 2024, section 3.3 (FineWeb quality filters; datatrove defaults).
    f = "fineweb"
    return [
        Rule(f"{f}.line_punct_ratio", f"{f}.line_punct_ratio", "min", f"{f}.min_line_punct_ratio", LINES),
        Rule(f"{f}.short_line_ratio", f"{f}.short_line_ratio", "max", f"{f}.max_short_line_ratio", LINES),
        Rule(f"{f}.char_dup_ratio", f"{f}.char_dup_ratio", "max", f"{f}.max_char_dup_ratio", CHARS),
        Rule(f"{f}.newline_ratio", f"{f}.newline_ratio", "max", f"{f}.max_newline_ratio",
             "newlines per word"),
    ]


RULES: tuple[Rule, ...] = (
    *_gopher_quality(),
    *_gopher_repetition(),
    *_c4(),
    *_fineweb(),
    Rule("lang.allowed", "lang", "in", "langid.allowed", "ISO 639-1 code", requires="langid.enabled"),
    Rule("lang.score", "lang_score", "min", "langid.min_score", "probability", requires="langid.enabled"),
    Rule("quality.score", "quality_score", "min", "quality_model.min_score", "probability",
         requires="quality_model.model"),
)
"""Every filter rule threshold, in decision order."""


def rule_names(section: str) -> list[str]:
    """Rule ids (after the family prefix) of the rules configured in subsection ``section``, in order.

    >>> rule_names("c4")
    ['lorem_ipsum', 'curly_bracket', 'min_sentences']
    """
    return list(dict.fromkeys(r.name for r in RULES if r.section == section))


def lookup(section: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` in a nested mapping (the ``filter`` section as a dict), or None.

    >>> lookup({"c4": {"min_sentences": 5}}, "c4.min_sentences")
    5
    """
    node: Any = section
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def thresholds(section: Mapping[str, Any], column: str) -> list[dict[str, Any]]:
    """Numeric thresholds configured for signal ``column``, null (disabled) ones left out.

    A signal no rule reads (a stage's own signal) is matched by ``min_<column>`` / ``max_<column>`` keys
    at the top level of ``section``.

    Args:
        section: the ``filter`` config section as a dict (``cfg.filter.model_dump(mode="json")``).
        column: a signal column, ``<struct>.<field>`` or top-level.

    Returns:
        ``[{key, value, keeps}]`` in rule order, ``keeps`` ``">="`` for ``min`` and ``"<="`` for ``max``
        rows; a key two rows share appears once.

    >>> thresholds({"fineweb": {"max_newline_ratio": 0.3}}, "fineweb.newline_ratio")
    [{'key': 'fineweb.max_newline_ratio', 'value': 0.3, 'keeps': '<='}]
    """
    keys = [(r.key, r.compare) for r in RULES if r.signal == column and r.compare in ("min", "max")]
    if "." not in column and not any(r.signal == column for r in RULES):
        keys = [(f"{b}_{column}", b) for b in ("min", "max")]
    out: list[dict[str, Any]] = []
    for key, compare in dict.fromkeys(keys):
        v = lookup(section, key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out.append({"key": key, "value": float(v), "keeps": ">=" if compare == "min" else "<="})
    return out


# ------------------------------------------------------------------------------------------ profiles
@dataclass(frozen=True)
class Override:
    """One difference of a built-in profile from ``web``: a key under ``filter``, its value, and why.

    Attributes:
        key: a dotted key under ``filter``: a rule's threshold key (a row of :data:`RULES`) or one of
            :data:`PROFILE_OPTIONS`.
        value: the value in this profile (``None`` switches a threshold's rule off).
        why: the reason for the difference, shown in the README and the report.
    """

    key: str
    value: Any
    why: str


PROFILE_OPTIONS: tuple[str, ...] = (
    "signals_from", "gopher_quality.alpha_words_reading",
    "c4.min_words_per_line", "c4.end_marks", "c4.page_checks", "c4.sentences_in", "c4.clean_lines",
)
"""Keys under ``filter`` that shape how a signal is computed (not a threshold); a profile may set them."""

_BRACES = Override("c4.drop_curly_bracket", False,
                   "`{` is LaTeX, templates or code here, not a sign of a broken page (the rule's target)")
_SENTENCES_IN_TEXT = Override("c4.sentences_in", "text",
                              "count sentences in the whole text: a paragraph that is one line without "
                              "final punctuation is prose, not a navigation line")
_NO_LINE_PUNCT = Override("fineweb.min_line_punct_ratio", None,
                          "equations, formulas, headings and list items are lines without final punctuation")
_NO_SHORT_LINES = Override("fineweb.max_short_line_ratio", None,
                           "short lines (headings, list items, formulas, dialogue, code) are the genre's "
                           "layout, not menu residue")

PROFILES: dict[str, tuple[Override, ...]] = {
    "web": (
        Override("gopher_quality.alpha_words_reading", "datatrove",
                 "today's web behaviour, datatrove-compatible (agreement test); on the DCLM human-labelled "
                 "set the paper's whitespace words keep more bad pages (precision 0.717 -> 0.674)"),
    ),
    "c4": (
        Override("c4.min_words_per_line", 5,
                 "TFDS c4_utils._MIN_WORDS_PER_LINE = 5 (the code that built C4)"),
        Override("c4.min_sentences", 3, "TFDS c4_utils._MIN_NUM_SENTENCES = 3 (the code that built C4)"),
        Override("c4.end_marks", ".?!\"", "TFDS c4_utils._END_MARKS = ('.', '?', '!', '\"'): no `'`"),
        Override("c4.page_checks", "kept_lines",
                 "TFDS clean_page looks for lorem ipsum and `{` only in lines that survived the line rules"),
        Override("c4.clean_lines", True, "C4 removed the lines its line rules reject and kept the rest"),
    ),
    "science": (
        Override("signals_from", "prose",
                 "LaTeX commands, math and code listings are not the paper's words (the rules read the "
                 "prose of udfs.langid_prose; the text itself is unchanged)"),
        _BRACES, _SENTENCES_IN_TEXT, _NO_LINE_PUNCT, _NO_SHORT_LINES,
        Override("gopher_repetition.max_dup_line_frac", None,
                 "display equations, formula placeholders and theorem labels repeat as lines"),
        *(Override(f"gopher_repetition.max_dup_{k}gram_char_frac", round(0.25 - (k - 5) * 0.01, 2),
                   "papers restate definitions, theorem statements and notation: the paper's values + 0.10")
          for k in range(5, 11)),
        Override("fineweb.max_char_dup_ratio", None,
                 "papers repeat short lines on purpose (equation labels, 'Table REF', section stubs)"),
    ),
    "wiki": (
        Override("signals_from", "prose",
                 "raw wikitext: templates, infoboxes, tables and ref tags are markup, not the article's "
                 "words (the rules read the prose of udfs.langid_prose; the text itself is unchanged)"),
        _BRACES, _SENTENCES_IN_TEXT, _NO_LINE_PUNCT, _NO_SHORT_LINES,
        Override("c4.min_sentences", 3, "a stub of three sentences is a complete article (TFDS's value)"),
        Override("fineweb.max_char_dup_ratio", None,
                 "infobox and navbox remnants repeat field lines ('|}' , '}}') in every article"),
    ),
    "code": (
        _BRACES, _SENTENCES_IN_TEXT, _NO_LINE_PUNCT, _NO_SHORT_LINES,
        Override("gopher_quality.min_alpha_words_ratio", 0.6,
                 "identifiers with digits, operators and literals are words without letters in code"),
        Override("gopher_repetition.max_dup_line_frac", None,
                 "closing braces and blank-ish lines repeat in code"),
        Override("gopher_repetition.max_dup_line_char_frac", None,
                 "closing braces and repeated calls repeat in code"),
        Override("fineweb.max_char_dup_ratio", None, "repeated short code lines (`}`, `end`, `return`)"),
    ),
    "books": (
        Override("gopher_quality.max_words", None, "a novel has more than 100,000 words"),
        _NO_SHORT_LINES,
        Override("fineweb.max_char_dup_ratio", None, "chapter separators and headings repeat"),
    ),
}
"""Built-in rule profiles: each is ``web`` (the defaults of :mod:`pipelines.core.config`) plus its overrides.

Source of the ``c4`` values: TFDS ``tensorflow_datasets/text/c4_utils.py`` (commit 0560e686), the code
that generated C4: constants ``_MIN_WORDS_PER_LINE``, ``_MIN_NUM_SENTENCES``, ``_END_MARKS`` and
``clean_page``."""


AUTO = "auto"
"""The profile choice that picks, per document, one of :data:`AUTO_CHOICES` from the document's form
(:mod:`udfs.quality.profile`); usable as ``default_profile`` and in ``profile_by_source``."""

AUTO_CHOICES: tuple[str, ...] = ("wiki", "science", "code", "books", "web")
"""The profiles ``auto`` picks among (``udfs.quality.profile.AUTO_PROFILES``, the order it checks them)."""


def profile_overrides(name: str) -> dict[str, Any]:
    """The built-in overrides of profile ``name`` as a nested mapping under ``filter`` ({} if unknown).

    >>> profile_overrides("c4")["c4"]["min_sentences"]
    3
    """
    out: dict[str, Any] = {}
    for o in PROFILES.get(name, ()):
        node = out
        *parents, last = o.key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = o.value
    return out


def profile_keys() -> set[str]:
    """Every key a profile may set: rule thresholds and :data:`PROFILE_OPTIONS`."""
    return {r.key for r in RULES} | set(PROFILE_OPTIONS)
