"""What the filter stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check of the
LID and quality models."""

from __future__ import annotations

import os

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import PreflightError, when_running

EMPTY_HINT = ("loosen the thresholds of the rules named, set filter.<family>.action or "
              "filter.<family>.rule_actions to flag, or widen filter.langid.allowed where the reason is a "
              "lang.* one (jobs/inspect.py --stage filter --reason R)")


def check_filter_models(cfg: WinnowConfig) -> None:
    """The LID and quality models exist, ``filter.langid.allowed`` names languages the LID model knows
    and ``filter.quality_model.positive_label`` is one of the classifier's labels.

    An unknown code in ``allowed`` (``xx``, ``eng``, ``english``) would silently drop every document.

    Raises:
        PreflightError: names the key and shows what the model knows.
    """
    from udfs import langid

    f = cfg.filter
    if not f.enabled:
        return
    lid = f.langid
    if lid.enabled:
        path = lid.model or langid.default_model_path()
        if not os.path.isfile(path):
            raise PreflightError(f"filter.langid.model={path!r}: no such file")
        if lid.allowed:
            labels = langid.load_model(path).get_labels()
            known = {langid.canonical_code(lab, lid.label_prefix, lid.aliases) for lab in labels}
            unknown = sorted(set(lid.allowed) - known)
            if unknown:
                raise PreflightError(
                    f"filter.langid.allowed: {unknown} not among the {len(known)} languages of the LID model "
                    f"{os.path.basename(path)!r} (codes as the filter writes them, e.g. "
                    f"{sorted(known)[:12]}...)"
                )
    qm = f.quality_model
    if qm.model:
        if not os.path.isfile(qm.model):
            raise PreflightError(f"filter.quality_model.model={qm.model!r}: no such file")
        labels = langid.load_model(qm.model).get_labels()
        if qm.positive_label not in labels:
            raise PreflightError(
                f"filter.quality_model.positive_label={qm.positive_label!r} is not a label of {qm.model!r}; "
                f"its labels: {labels}"
            )


preflight = when_running("filter", check_filter_models)
"""The preflight hook: :func:`check_filter_models` when filter runs."""


def inspect_annotations(row: dict) -> list[str]:
    """``jobs/inspect.py --doc-id``: what the filter noted on the document (kept or removed): the profile it
    was judged with, its language and score, flags of rules set to ``flag``, lines cleaned away.

    Args:
        row: the document's row in ``filtered`` or ``removed`` (``filter_profile``, ``lang``,
            ``lang_score``, ``quality_score``, ``filter_flags``, ``line_cleaning``).

    Returns:
        Lines, ``[]`` when the row holds none of these columns.

    >>> inspect_annotations({"filter_profile": "web", "lang": "en", "lang_score": 0.96123, "filter_flags": [],
    ...     "line_cleaning": {"lines_removed": 2, "chars_removed": 40}})
    ['filter: profile web, lang en (score 0.9612)', '  line cleaning removed 2 lines (40 chars)']
    """
    parts = []
    if row.get("filter_profile"):
        parts.append(f"profile {row['filter_profile']}")
    if row.get("lang"):
        score = row.get("lang_score")
        parts.append(f"lang {row['lang']}" + (f" (score {score:.4g})" if score is not None else ""))
    if row.get("quality_score") is not None:
        parts.append(f"quality score {row['quality_score']:.4g}")
    if not parts:
        return []
    lines = ["filter: " + ", ".join(parts)]
    if row.get("filter_flags"):
        lines.append("  flagged: " + ", ".join(row["filter_flags"]))
    cleaning = row.get("line_cleaning") or {}
    if cleaning.get("lines_removed"):
        lines.append(f"  line cleaning removed {cleaning['lines_removed']} lines"
                     f" ({cleaning['chars_removed']} chars)")
    return lines
