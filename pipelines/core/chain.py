"""The chain of stages, declared once: order, input table, output tables, marker files, removals.

Everything that needs the chain reads :data:`CHAIN`: the stage names and their order
(:data:`STAGES`, ``pipeline.stages`` validation, ``jobs/pipeline.py --from``), the completion records
(:mod:`pipelines.core.runs`: what each stage writes, what is upstream of it), the report's funnel, the table
tokenize reads, the stage named in a "missing table" error, ``jobs/inspect.py``, the config assembly
(:mod:`pipelines.core.config`: one section per row) and the stage hooks (:mod:`pipelines.core.hooks`).

Adding a stage: its package ``pipelines/<stage>/`` (``config.py`` with ``<Stage>Config``, ``__init__.py``
exporting ``run(spark, cfg)`` and its transforms, optionally ``hooks.py``), one :class:`Stage` row here
at its place in the chain, ``jobs/<stage>.py``, its section in ``conf/default.yaml`` and a task in
``conf/databricks/databricks.yml``. A job beside the chain with a config section is one
:class:`Beside` row instead.

This module holds plain data and imports nothing from Winnow at run time, so the config can read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from pipelines.core.config import WinnowConfig

PREVIOUS = "<previous>"
"""Input of a stage that reads the document table of the last stage before it in ``pipeline.stages``
(tokenize: whatever document table the configured chain ends with)."""

MANIFEST = "manifest.json"
"""Name of the shard manifest, written last under the shard root (:attr:`WinnowConfig.shard_root`)."""

STATS = "stats.json"
"""Name of the report's machine-readable statistics, written last under ``<run.root>/report``."""


@dataclass(frozen=True)
class Marker:
    """A file a stage writes last, whose presence and sha256 stand for all its file outputs.

    Attributes:
        label: the name its state goes under in a completion record (e.g. ``manifest.json``).
        folder: the :class:`~pipelines.core.config.WinnowConfig` property holding its folder.
        name: the file name in that folder.
    """

    label: str
    folder: str
    name: str


@dataclass(frozen=True)
class Stage:
    """One stage of the chain.

    Attributes:
        name: the stage name; also its config section, package ``pipelines/<name>/`` and ``jobs/<name>.py``.
        input: the table it reads; None when it reads no table of the chain (ingest: raw files; report:
            every table), :data:`PREVIOUS` for the document table of the last configured stage before it.
        outputs: the Delta tables it replaces, its main table first (the one a later stage reads).
        removes: it writes its own slice of the shared ``removed`` table.
        markers: files it writes last, standing for its file outputs (shards, report).
        documents: its main table holds document text (a table :data:`PREVIOUS` may resolve to).
        summary: what it does, in one line (``winnow --help`` lists the stages with it).
        also_reads: tables it reads beyond its input that no earlier stage declares as an output (the
            report: the shared ``removed`` table), part of its input state in a completion record.
        switch: a boolean key of its own config section that turns it on (``enabled``); while it is
            false the stage writes no table, and a later stage reading :data:`PREVIOUS` reads the
            table before it (:func:`switched_on`). None: the stage always writes its tables.
    """

    name: str
    input: str | None
    outputs: tuple[str, ...] = ()
    removes: bool = False
    markers: tuple[Marker, ...] = ()
    documents: bool = True
    summary: str = ""
    also_reads: tuple[str, ...] = ()
    switch: str | None = None

    @property
    def main_table(self) -> str | None:
        """The table a later stage reads (its first output), or None when it writes no table."""
        return self.outputs[0] if self.outputs else None


CHAIN: tuple[Stage, ...] = (
    Stage("ingest", input=None, outputs=("documents", "quarantine"),
          summary="raw files (JSONL, JSON, CSV/TSV, Parquet, text, WET/WARC, JATS, LaTeX, MediaWiki) -> "
                  "normalised documents; bad ones quarantined"),
    Stage("dedup", input="documents", outputs=("deduped", "dup_clusters", "dedup_bands"), removes=True,
          summary="exact (MD5) and near (MinHash-LSH + connected components) duplicates removed"),
    Stage("passages", input="deduped", outputs=("passages_deduped",), removes=True, switch="enabled",
          summary="repeated paragraphs (exact and BFF-style near) and reused passages cut across documents"),
    # PREVIOUS: passages_deduped when the passages stage is configured and enabled, else deduped.
    Stage("filter", input=PREVIOUS, outputs=("filtered",), removes=True,
          summary="Gopher/C4/FineWeb quality rules and fastText language ID"),
    Stage("refs", input="filtered", outputs=("refs_checked",), removes=True,
          summary="dangling Table/Figure references flagged or removed"),
    # eval_ngrams: the evaluation sets' n-gram hashes, rebuilt only when the sets or settings change.
    Stage("decontam", input="refs_checked", outputs=("decontaminated", "eval_ngrams"), removes=True,
          summary="evaluation-set n-gram overlap cut or removed"),
    Stage("pii", input=PREVIOUS, outputs=("pii_redacted",), removes=True,
          summary="personal data and secrets redacted"),
    Stage("tokenize", input=PREVIOUS, outputs=("tokenized",), removes=True, documents=False,
          summary="token ids with the model's tokenizer"),
    Stage("shard", input="tokenized", markers=(Marker(MANIFEST, "shard_root", MANIFEST),), documents=False,
          summary="seeded global shuffle into token-balanced Megatron + MDS shards, manifest.json last"),
    Stage("report", input=None, markers=(Marker(f"report/{STATS}", "report_path", STATS),), documents=False,
          also_reads=("removed",),
          summary="report.html + stats.json: funnel, removals, histograms, shard balance"),
)
"""The stages in chain order. ``pipeline.stages`` must be a subsequence of it."""



@dataclass(frozen=True)
class Beside:
    """A job users run beside the chain (not a stage of it) that has a config section of its own.

    Attributes:
        name: its config section and package, ``pipelines/<name>/`` (section ``<Name>Config`` in
            ``pipelines/<name>/config.py``), and its job ``jobs/<name>.py``.
        summary: what it does, in one line.
    """

    name: str
    summary: str = ""


BESIDE: tuple[Beside, ...] = (
    Beside("audit", summary="check that the tokenizer fits the data (cost, round trip, coverage, prompts): "
                            "audit.json"),
    Beside("gate", summary="train small models on two or more shard sets and compare them: "
                           "gate --variant A --variant B"),
)
"""Jobs beside the chain with a config section; the config assembly reads them after :data:`CHAIN`."""

STAGES: tuple[str, ...] = tuple(s.name for s in CHAIN)
"""Stage names in chain order."""

PACKAGES: tuple[str, ...] = (*STAGES, *(b.name for b in BESIDE))
"""Every package the chain declares, the stages in chain order then the jobs beside the chain (the
packages whose hooks the framework asks, :mod:`pipelines.core.hooks`)."""

_BY_NAME = {s.name: s for s in CHAIN}


def stage(name: str) -> Stage:
    """The declaration of stage ``name``.

    Raises:
        ValueError: not a stage of the chain (lists the allowed ones).
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; allowed: {list(STAGES)}") from None


def switched_on(cfg: WinnowConfig | None, stages: Iterable[str] = STAGES) -> list[str]:
    """The stages of ``stages`` whose :attr:`Stage.switch` is on in ``cfg`` (every stage without one).

    Args:
        cfg: the config; None keeps every stage.
        stages: stage names.

    Returns:
        Those names, in the order given.
    """
    if cfg is None:
        return list(stages)
    out = []
    for name in stages:
        key = stage(name).switch
        if key is None or bool(getattr(getattr(cfg, name), key)):
            out.append(name)
    return out


def before(name: str, stages: Iterable[str] = STAGES) -> list[Stage]:
    """The stages of ``stages`` that come before ``name`` in the chain, in chain order."""
    pos = STAGES.index(stage(name).name)
    return [stage(s) for s in stages if STAGES.index(s) < pos]


def document_tables_before(name: str, stages: Iterable[str] = STAGES) -> list[str]:
    """Main tables holding document text written by the stages of ``stages`` before ``name``, in order.

    >>> document_tables_before("tokenize")
    ['documents', 'deduped', 'passages_deduped', 'filtered', 'refs_checked', 'decontaminated', 'pii_redacted']
    >>> document_tables_before("tokenize", ["ingest", "filter", "shard"])
    ['documents', 'filtered']
    """
    return [s.main_table for s in before(name, stages) if s.documents and s.main_table]


def main_tables(cfg: WinnowConfig | None = None) -> list[tuple[str, str]]:
    """``(stage, main table)`` of every stage that writes a table, in chain order (the report's funnel);
    with ``cfg``, only the stages switched on in it (:func:`switched_on`: a table left by an earlier run
    of a stage now off is not this run's).

    >>> main_tables()[-1]
    ('tokenize', 'tokenized')
    """
    on = set(switched_on(cfg))
    return [(s.name, s.main_table) for s in CHAIN if s.main_table and s.name in on]


def writer_of(table: str) -> str | None:
    """The stage that writes Delta table ``table``, or None (``removed``: every stage; ``_runs``).

    >>> writer_of("dup_clusters"), writer_of("removed")
    ('dedup', None)
    """
    return next((s.name for s in CHAIN if table in s.outputs), None)


def marker_files(cfg: WinnowConfig, name: str) -> dict[str, str]:
    """Files whose presence and sha256 mark stage ``name``'s file outputs complete, ``label -> location``.

    The shard stage writes ``manifest.json`` last, after every shard (and removes the old one first),
    so its digest stands for all shards; the report writes ``stats.json`` last.
    """
    return {m.label: f"{getattr(cfg, m.folder).rstrip('/')}/{m.name}" for m in stage(name).markers}


def require_columns(df: DataFrame, columns: Iterable[str], stage_name: str, note: str = "") -> None:
    """Check that ``df`` has every column of ``columns`` before a stage (or one of its steps) runs.

    Args:
        df: the input DataFrame (only its column names are read).
        columns: required column names.
        stage_name: who needs them (a stage or a function name), named in the message.
        note: appended to the message, e.g. the config value that made a column required.

    Raises:
        ValueError: naming the missing columns, in the order given, and the columns ``df`` has.
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        extra = f"; {note}" if note else ""
        raise ValueError(f"{stage_name}: input is missing columns {missing}; it has {df.columns}{extra}")
