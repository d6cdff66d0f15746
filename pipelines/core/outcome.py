"""How a run ended when it was small: no document survived, or fewer documents than shards.

A chain that removes every document, or a tiny input with more shards configured than documents, is not
an error of the code, and the report of such a run is what the user needs to see (the funnel down to
zero). :func:`small_run` reads the stages' counts (their reports, or their completion records when
they were skipped) and returns the exit status and the one line that says what happened and what to
change; ``jobs/pipeline.py`` and ``jobs/<stage>.py`` print it last.

Exit statuses of the jobs (README "Small and empty runs"): 0 done (also when shards were capped to the
document count, with the line saying so), 1 error, 2 bad configuration or preflight, 3 no document
survived (the report, when configured, is still written; ``jobs/pipeline.py`` runs no other stage after
the one that left no document).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pipelines.core import hooks
from pipelines.core.chain import STAGES
from pipelines.core.config import WinnowConfig
from pipelines.core.words import plural

EXIT_EMPTY = 3
"""Exit status of a run in which no document survived."""

def counts(report_or_record: Any) -> dict[str, Any]:
    """``rows_in``, ``rows_out``, ``removed``, ``quarantined``, ``extra`` of a
    :class:`~pipelines.core.runner.StageReport` or of a completion record (``extra`` as JSON text)."""
    r = report_or_record
    get = r.get if isinstance(r, Mapping) else lambda k: getattr(r, k)
    extra = get("extra") or {}
    return {"rows_in": int(get("rows_in") or 0), "rows_out": int(get("rows_out") or 0),
            "removed": dict(get("removed") or {}), "quarantined": dict(get("quarantined") or {}),
            "extra": json.loads(extra) if isinstance(extra, str) else dict(extra)}


def small_run(cfg: WinnowConfig, stages: Mapping[str, Any]) -> tuple[int, str | None]:
    """The exit status and closing line of a run, from each stage's counts.

    Args:
        stages: stage name -> its :class:`~pipelines.core.runner.StageReport` or completion record, for the
            stages of this run that have one (any order); ``report`` among them means report.html exists.

    Returns:
        ``(0, None)`` for an ordinary run; ``(0, line)`` when the shard stage wrote fewer shards than
        configured; ``(EXIT_EMPTY, line)`` when a stage left no document.
    """
    seen = {name: counts(stages[name]) for name in STAGES if name in stages and name != "report"}
    if "report" in stages:  # it ran (or is complete from before): point at the file itself
        report = f"the report shows the funnel: {cfg.report_path}/report.html"
    else:
        report = f"the report shows the funnel ({cfg.report_path}/report.html when the report stage runs)"
    for name, c in seen.items():
        if c["rows_out"] == 0 and name != "shard":
            lost = sorted((c["removed"] or c["quarantined"]).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            why = f" ({', '.join(f'{k}={v}' for k, v in lost)})" if lost else ""
            what = f"{name} kept 0 of {c['rows_in']}{why}" if c["rows_in"] else f"{name} read no document"
            hint = hooks.hook(name, "EMPTY_HINT") or f"check {name}.*"
            if not c["rows_in"] and name != "ingest":
                # Its own settings cannot have emptied a table it read empty: the cause is upstream.
                hint = f"its input table was empty, so look at the stages before {name}"
            return EXIT_EMPTY, (f"winnow: no document survived: {what}; {report}. To change: {hint},"
                                " or give more input. Exit status 3.")
    shard = seen.get("shard")
    if shard is None:
        return 0, None
    if shard["extra"].get("empty"):
        return EXIT_EMPTY, (f"winnow: no document reached the shard stage, no shard written; {report}."
                            " Exit status 3.")
    extra = shard["extra"]
    by_split = extra.get("by_split") or {  # a record written before the per-set counts: the run's totals
        "train": {"requested": int(extra.get("shards_requested") or 0), "documents": shard["rows_in"],
                  "shards": int((extra.get("totals") or {}).get("shards") or 0)}}
    for name, c in by_split.items():
        requested, written = int(c["requested"]), int(c["shards"])
        if requested > written:
            key = c.get("setting") or "shard.num_shards"
            docs = plural(int(c["documents"]), "document")
            docs += "" if len(by_split) == 1 else f" in the {name} set"
            return 0, (f"winnow: only {docs} for {plural(requested, 'shard')}:"
                       f" wrote {plural(written, 'shard')}"
                       f" (at least one document each). To change: set {key} to {written} or fewer"
                       + (" (or use shard.tokens_per_shard)" if key == "shard.num_shards" else "")
                       + " for runs this small, or give more input.")
    return 0, None

