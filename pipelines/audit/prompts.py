"""The evaluation prompts the audit checks: ``decontam.eval_sets`` and ``audit.prompt_sets``.

An item's prompt is its first field, exactly as stored (trailing whitespace matters here); its answer is
the second field when the set names one. Files are parsed as the decontam stage parses them
(:mod:`pipelines.core.eval_sets`); ``s3://`` files are read through the project's storage layer
(:func:`pipelines.core.files.read_bytes`), other URIs through Spark's filesystem, a Delta table set
through Spark when a session is given.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.config import EvalSetConfig, WinnowConfig
from pipelines.core.eval_sets import EvalSetError, file_format, file_records, local_files
from pipelines.core.preflight import local_path


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


def read_prompts(es: EvalSetConfig, key: str, spark: Any = None, cfg: WinnowConfig | None = None) -> Prompts:
    """The prompts of one set: local files (globs), files on an object store or a Hadoop filesystem (read
    through :func:`pipelines.core.files.read_bytes`: ``s3://`` with the project's storage settings), or a
    Delta table with ``spark``.

    Args:
        es: the set (``paths`` or ``table``, ``fields``: the prompt first, the answer second).
        key: the config key it came from, named in errors (``--prompts`` for the command's files).
        spark: the session, for Delta tables and Hadoop URIs.
        cfg: the run's config, for the storage settings of ``s3://`` files.

    Raises:
        EvalSetError: a file is missing or unreadable, or has records but none with the prompt field
            (the message names the file and the fields its records have); the message names ``key``.
    """
    out = Prompts(es.name, key)
    where = "--prompts " if key.startswith("--prompts") else f"{key}."
    if es.table is not None:
        if spark is not None:
            from pipelines.core import tables

            df = tables.read_path(spark, es.table)
            cols = [c for c in [*es.fields[:2], es.id_field] if c and c in df.columns]
            _add(out, es, os.path.basename(es.table.rstrip("/")), df.select(*cols).toArrow().to_pylist())
        return out
    try:
        for path, data in _files(es, spark, cfg):
            rows = file_records(path, data, file_format(path, es))
            _check_prompt_field(es, path, rows)
            _add(out, es, os.path.basename(path), rows)
    except EvalSetError as e:
        raise EvalSetError(str(e).replace("decontam.eval_sets[0].", where)) from None
    except Exception as e:  # a corrupt gzip / Parquet file, an unreachable object store: one line
        raise EvalSetError(f"{where}paths: cannot read prompts of {es.name!r}: {e}") from None
    return out


def _files(es: EvalSetConfig, spark: Any, cfg: WinnowConfig | None) -> list[tuple[str, bytes]]:
    """``(path, bytes)`` of every file of the set: local globs first, then each URI as one object."""
    from pipelines.core.files import read_bytes

    found = []
    for path in local_files(es, 0):
        with open(path, "rb") as fh:
            found.append((path, fh.read()))
    for uri in es.paths:
        if local_path(uri) is None:
            data = read_bytes(spark, uri, cfg)
            if data is None:
                raise EvalSetError(f"decontam.eval_sets[0].paths: {uri!r} does not exist (set {es.name!r})")
            found.append((uri, data))
    return found


def _check_prompt_field(es: EvalSetConfig, path: str, rows: list[Any]) -> None:
    """A file whose records all lack the prompt field is a mistake (another layout, a typo), not a set
    with no prompts: fail naming the file and the fields its records have."""
    records = [r for r in rows if isinstance(r, dict)]
    if records and not any(es.fields[0] in r for r in records):
        have = sorted({k for r in records for k in r})
        shown = ", ".join(have[:20]) + (f" (+{len(have) - 20} more)" if len(have) > 20 else "")
        raise EvalSetError(
            f"decontam.eval_sets[0].fields: {path!r} has no record with the prompt field {es.fields[0]!r}; "
            f"its records have: {shown or 'no fields'}"
        )


def prompt_file_sets(paths: list[str]) -> list[EvalSetConfig]:
    """The prompt sets of ``winnow audit --prompts FILE ...``: JSONL with ``prompt`` and optional ``answer``,
    each named by its file's stem as a set name allows (lower case, ``_`` for other characters: ``evals/
    MMLU-pro.jsonl.gz`` -> ``mmlu_pro``; a repeated name gets ``_2``, ``_3``).

    >>> paths = ["a/qa.jsonl", "b/qa.jsonl.gz", "s3://b/MMLU-pro.json", "2024.jsonl"]
    >>> [s.name for s in prompt_file_sets(paths)]
    ['qa', 'qa_2', 'mmlu_pro', 'p_2024']
    """
    sets: list[EvalSetConfig] = []
    seen: dict[str, int] = {}
    for path in paths:
        stem = re.sub(r"(\.(jsonl|json|ndjson|parquet))?(\.gz)?$", "", path.rstrip("/").rsplit("/", 1)[-1])
        stem = re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_")[:60] or "prompts"
        stem = stem if stem[0].isalpha() else f"p_{stem}"
        seen[stem] = seen.get(stem, 0) + 1
        name = stem if seen[stem] == 1 else f"{stem}_{seen[stem]}"
        sets.append(EvalSetConfig(name=name, paths=[path], fields=["prompt", "answer"]))
    return sets


def configured_prompt_sets(
    cfg: WinnowConfig, extra: list[EvalSetConfig] | None = None, spark: Any = None
) -> list[Prompts]:
    """Every prompt set the run knows: ``decontam.eval_sets``, ``audit.prompt_sets``, then ``extra``."""
    sets = [(f"decontam.eval_sets[{i}]", es) for i, es in enumerate(cfg.decontam.eval_sets)]
    sets += [(f"audit.prompt_sets[{i}]", es) for i, es in enumerate(cfg.audit.prompt_sets)]
    sets += [("--prompts", es) for es in extra or []]
    return [read_prompts(es, key, spark, cfg) for key, es in sets]


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
