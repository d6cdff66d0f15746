"""The evaluation prompts the audit checks: ``decontam.eval_sets`` and ``audit.prompt_sets``.

An item's prompt is its first field, exactly as stored (trailing whitespace matters here); its answer is
the second field when the set names one. Files are read as the decontam stage reads them
(:mod:`pipelines.core.eval_sets`); a Delta table set is read through Spark when a session is given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.config import EvalSetConfig, WinnowConfig
from pipelines.core.eval_sets import EvalSetError, file_format, file_records, local_files


@dataclass
class Prompts:
    """The prompts of one set.

    Attributes:
        name: the set's name.
        key: the config key it came from (``decontam.eval_sets[0]``, ``audit.prompt_sets[1]``).
        ids: item ids (``id_field``, else ``<file>:<row>``).
        prompts: the prompt texts.
        answers: the answer of each item, or None.
    """

    name: str
    key: str
    ids: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    answers: list[str | None] = field(default_factory=list)


def _text(v: Any) -> str | None:
    return (
        v
        if isinstance(v, str)
        else (str(v) if isinstance(v, int | float) and not isinstance(v, bool) else None)
    )


def _add(out: Prompts, es: EvalSetConfig, source: str, rows: list[Any]) -> None:
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            continue
        prompt = _text(row.get(es.fields[0]))
        if prompt is None or not prompt.strip():
            continue
        rid = row.get(es.id_field) if es.id_field else None
        out.ids.append(str(rid) if rid is not None else f"{source}:{n}")
        out.prompts.append(prompt)
        out.answers.append(_text(row.get(es.fields[1])) if len(es.fields) > 1 else None)


def read_prompts(es: EvalSetConfig, key: str, spark: Any = None) -> Prompts:
    """The prompts of one set (local files, or a Delta table with ``spark``).

    Raises:
        EvalSetError: a local glob matches no file or a file cannot be read; the message names ``key``.
    """
    out = Prompts(es.name, key)
    if es.table is not None:
        if spark is not None:
            from pipelines.core import tables

            df = tables.read_path(spark, es.table)
            cols = [c for c in [*es.fields[:2], es.id_field] if c and c in df.columns]
            _add(out, es, os.path.basename(es.table.rstrip("/")), df.select(*cols).toArrow().to_pylist())
        return out
    try:
        for path in local_files(es, 0):
            with open(path, "rb") as fh:
                _add(out, es, os.path.basename(path), file_records(path, fh.read(), file_format(path, es)))
    except EvalSetError as e:
        where = "--prompts " if key.startswith("--prompts") else f"{key}."
        raise EvalSetError(str(e).replace("decontam.eval_sets[0].", where)) from None
    return out


def configured_prompt_sets(
    cfg: WinnowConfig, extra: list[EvalSetConfig] | None = None, spark: Any = None
) -> list[Prompts]:
    """Every prompt set the run knows: ``decontam.eval_sets``, ``audit.prompt_sets``, then ``extra``."""
    sets = [(f"decontam.eval_sets[{i}]", es) for i, es in enumerate(cfg.decontam.eval_sets)]
    sets += [(f"audit.prompt_sets[{i}]", es) for i, es in enumerate(cfg.audit.prompt_sets)]
    sets += [("--prompts", es) for es in extra or []]
    return [read_prompts(es, key, spark) for key, es in sets]


def boundary_ids(tok: Any, sets: list[Prompts]) -> tuple[int, ...]:
    """The distinct last ids of every prompt of ``sets``, sorted: the ids whose next token the audit's pass
    counts (:attr:`udfs.tokenizer_audit.Partial.follow`), encoded as :func:`udfs.tokenizer_prompts.
    prompt_boundaries` encodes them.

    Args:
        tok: the run's tokenizer (:class:`udfs.tokenize.LoadedTokenizer`).
        sets: the prompt sets the audit checks.
    """
    from udfs.tokenize import encode_ids

    prompts = [p for s in sets for p in s.prompts]
    return tuple(sorted({int(ids[-1]) for ids in encode_ids(tok, prompts) if len(ids)}))
