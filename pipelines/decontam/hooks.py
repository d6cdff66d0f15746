"""What the decontam stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check of
the local evaluation sets, and their state as inputs of its completion record."""

from __future__ import annotations

from typing import Any

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import when_running

EMPTY_HINT = "set decontam.action: cut or check decontam.eval_sets and decontam.ngram_size"


def check_eval_sets(cfg: WinnowConfig) -> None:
    """Every local evaluation set of ``decontam.eval_sets`` exists, is UTF-8 (JSONL) or Parquet, has
    each field in some row and at least one item with text (:func:`pipelines.core.eval_sets.check_local`).

    Raises:
        PreflightError: names the key (``decontam.eval_sets[i].paths`` / ``.fields``).
    """
    from pipelines.core.eval_sets import check_local

    check_local(cfg.decontam.eval_sets)


preflight = when_running("decontam", check_eval_sets)
"""The preflight hook: :func:`check_eval_sets` when decontam runs."""


def extra_inputs(spark: Any, cfg: WinnowConfig) -> dict[str, str]:
    """The state of the evaluation sets, ``eval_set.<name> -> state``: a digest of the files of its
    ``paths`` (path, size, modification time, :func:`pipelines.core.runs.input_files_digest`) or its
    ``table``'s Delta version. An item added to a set's file left its paths, and so the config, as they
    were: the plan called decontam up to date and the shards kept the documents the new item matches.

    Args:
        spark: the session; None lists local paths without Spark.

    Raises:
        pipelines.core.local_state.NeedsSpark: ``spark`` is None and a set is not local files.
    """
    from pipelines.core import local_state
    from pipelines.core.files import delta_version, is_table_name
    from pipelines.core.runs import input_files_digest

    out: dict[str, str] = {}
    for es in cfg.decontam.eval_sets:
        where = [es.table] if es.table is not None else list(es.paths)
        named = es.table is not None and is_table_name(es.table)  # a metastore table: the catalog knows where
        if spark is None and (named or not all(local_state.is_local_glob(p) for p in where)):
            raise local_state.NeedsSpark(f"eval set {es.name!r}: {where} is not local files")
        if es.table is not None:
            version = delta_version(spark, es.table)
            out[f"eval_set.{es.name}"] = "missing" if version is None else f"v{version}"
            continue
        local = [p for p in es.paths if local_state.is_local_glob(p)]
        files = local_state.input_files(local) if local else []
        if remote := [p for p in es.paths if p not in local]:
            # Spark's binaryFile source lists (path, length, modification time) without reading the bytes
            # when the content column is not selected
            try:
                rows = (spark.read.format("binaryFile").load(remote)
                        .select("path", "length", "modificationTime").collect())
            except Exception:  # noqa: BLE001  a path that does not exist: the stage itself says so, in one line
                rows = []
                files.append(("unlisted:" + ",".join(remote), 0, 0))
            files += [(r["path"], int(r["length"]), int(r["modificationTime"].timestamp() * 1000))
                      for r in rows]
        out[f"eval_set.{es.name}"] = input_files_digest(sorted(files))
    return out


def inspect_view(spark: Any, cfg: WinnowConfig, *, reason: str | None, kept: bool, n: int,
                 text_chars: int) -> str | None:
    """``jobs/inspect.py --stage decontam`` without ``--reason`` or ``--kept``: documents matching an
    evaluation item, the matched spans marked (:mod:`pipelines.decontam.report`); None otherwise (the
    generic sample of removals or kept documents)."""
    if kept or reason:
        return None
    from pipelines.decontam.report import format_matches, matched_samples

    rows = matched_samples(spark, cfg, n=n, text_chars=text_chars)
    noun = "document" if len(rows) == 1 else "documents"
    return format_matches(rows, f"{len(rows)} {noun} matching an evaluation item (seed {cfg.run.seed}) "
                                f"in {cfg.run.root}")


def inspect_annotations(row: dict[str, Any]) -> list[str]:
    """``jobs/inspect.py --doc-id``: the evaluation items the document matched (kept or removed), the
    action taken and the spans cut.

    Args:
        row: the document's row in ``decontaminated`` or ``removed`` (``decontam_items``: ``set_name``,
            ``item_id``, ``n_ngrams``; ``decontam_cuts``: ``start``, ``end`` in code points of the stage's
            input text; ``decontam_action``).

    Returns:
        Lines, ``[]`` when the document matched no item.

    >>> inspect_annotations({"decontam_items": [{"set_name": "trivia", "item_id": "t-4", "n_ngrams": 2}],
    ...     "decontam_cuts": [{"start": 10, "end": 50}], "decontam_action": "cut"})
    ['decontam: matches trivia/t-4 (2 n-grams); action cut', '  cut 10-50 (40 chars)']
    """
    from pipelines.core.words import plural

    items = row.get("decontam_items") or []
    if not items:
        return []
    matched = ", ".join(f"{i['set_name']}/{i['item_id']} ({plural(i['n_ngrams'], 'n-gram')})" for i in items)
    lines = [f"decontam: matches {matched}; action {row.get('decontam_action') or '-'}"]
    lines += [f"  cut {c['start']}-{c['end']} ({c['end'] - c['start']} chars)"
              for c in row.get("decontam_cuts") or []]
    return lines

