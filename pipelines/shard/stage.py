"""Shard stage: ``tokenized`` -> seeded global shuffle -> token-balanced Megatron / MDS shards + manifest.

How shards are written deterministically, in parallel, with the tokens moved once and no token per row:

1. **Order.** Every document gets ``shuffle_key = sha256("<seed>:<doc_id>")`` as hex
   (:func:`udfs.shuffle_quality.shuffle_key`); the stream order is ``(shuffle_key, doc_id)``, which
   depends on neither input order, partitioning nor executors. With ``shard.mix`` the train documents
   are first selected and copied, and each copy gets its own key (:mod:`pipelines.shard.mix`).
2. **Buckets.** The first 8 hex digits of the key (uniform, as sha256 is) give a *range* bucket
   ``floor(prefix * B / 2^32)``: bucket ``b`` holds a contiguous slice of the stream, without the
   sampling job of ``repartitionByRange``. ``B`` (``spark.shuffle_partitions``) changes no byte of output.
3. **Plan (slim columns only).** One Spark job sorts each bucket's ``(key, doc_id, n_tokens)`` and
   returns its token counts in stream order (4 bytes per document) to the driver, which cuts the stream
   into ``S`` contiguous shards whose token counts differ by at most the longest document
   (:func:`udfs.shard_balance.balanced_boundaries`). A second slim job returns the key of each shard's
   first document (``S - 1`` rows).
4. **Write.** The full rows are read once; a JVM expression gives each document its shard by a binary
   search (a ``when`` tree of depth log2 S) of its key among the ``S - 1`` boundary keys, so tokens never
   enter Python before the shuffle; one shuffle groups the rows by shard and sorts them by key, and
   one ``applyInArrow`` task per shard receives them as a stream of Arrow batches and appends each to
   ``.bin`` (the flattened ``list<int32>`` buffer cast to the shard dtype) and to the MDS samples,
   writes ``.idx`` at the end, and returns only file sizes, sha256 and shuffle statistics. A shard is
   never held whole in a Python worker.
5. **Publish.** The driver writes ``mds/index.json``, uploads to ``s3://`` when asked (verified
   remotely), and writes ``manifest.json`` last. A stale manifest is removed first, so a failed run
   never leaves a manifest that describes other shards.

The driver holds 4 bytes per document during planning (400 MB for 100 M documents); above that, shard
the corpus in several runs (e.g. by source) or raise the driver memory.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.core import chain, provenance, storage, tables
from pipelines.core.config import WinnowConfig
from pipelines.core.runner import StageReport
from pipelines.core.runs import latest_records
from pipelines.shard import blend as shard_blend
from pipelines.shard import mix as shard_mix
from pipelines.shard import short as shard_short
from pipelines.shard import sources as shard_sources
from pipelines.shard.blend import blend_files
from pipelines.shard.plan import EmptyInput, ShardPlan, plan_shards, shard_id_column, shuffle_key
from pipelines.shard.split import SplitPlan, plan_split, split_key
from pipelines.shard.writer import RESULT_SCHEMA, ShardLayout, make_sets_writer, write_file
from udfs import mds, megatron
from udfs import shuffle_quality as sq

STAGE = "shard"
log = logging.getLogger(__name__)
INPUT_COLUMNS: tuple[str, ...] = ("doc_id", "source", "tokens", "n_tokens")
MANIFEST = chain.MANIFEST
MDS_INDEX = "mds/index.json"
STREAMING_CANONICAL_NODES = 8
"""Recommended ``num_canonical_nodes`` of streaming readers (``manifest["readers"]``): the global sample order
is a function of it, the seed and the shuffle settings only, so a job may resume on any number of nodes
that divides it or that it divides (1, 2, 4, 8, 16, ...) and read the same order
(``streaming/base/partition/orig.py``). tests/test_consumers.py resumes on 1 -> 2 -> 4 nodes."""
SPLITS = ("train", "validation")
"""Shard sets under the shard root, each with its own ``megatron/`` and ``mds/`` (``validation`` only when
``shard.split.validation`` > 0)."""


def _output_dirs(cfg: WinnowConfig) -> tuple[str, Path, bool]:
    root = cfg.shard_root
    if storage.is_s3(root):
        staging = cfg.shard.storage.staging_dir or tempfile.mkdtemp(prefix="winnow-shards-")
        return root, Path(staging), True
    if "://" in root:
        raise ValueError(f"shard.output={root!r}: allowed are a local path (incl. /dbfs/...) or s3://bucket/prefix")
    return root, Path(root), False


def run(spark: SparkSession, cfg: WinnowConfig) -> StageReport:
    """Shuffle ``tokenized`` and write ``train/`` (and ``validation/``, and with ``shard.per_source_sets``
    ``sources/<folder>/``) shard sets + ``manifest.json`` (last).

    Publishing order: data files (and, for ``s3://``, their upload and remote check), then each
    ``mds/index.json``, then ``manifest.json``; the indexes and the manifest of a previous run are
    retracted first, so a failed run leaves no index pointing at a missing or short file.

    Returns:
        A :class:`StageReport` (``rows_out`` = documents in shards; nothing is removed) whose ``extra``
        holds the manifest totals, balance and shuffle-quality figures.

    Raises:
        MissingTableError: ``tokenized`` does not exist.
        ValueError: empty input, more shards than documents, or a dtype that cannot hold the vocabulary.
        StorageError: an upload failed after retries (no manifest is written).
    """
    scfg = cfg.shard
    src_name = chain.stage(STAGE).input
    src_path = cfg.table_path(src_name)
    # Queried by the split, the mix and each shard set's writer: cached for the stage while small.
    df = tables.read_table(spark, cfg, src_name, cache_under_bytes=tables.SMALL_TABLE_BYTES)
    chain.require_columns(df, INPUT_COLUMNS, STAGE)
    props = tables.table_properties(spark, src_path)
    version = tables.table_version(spark, src_path)
    vocab = int(props["vocab_size"])
    dtype = megatron.choose_dtype(vocab, scfg.dtype)
    root, local, remote = _output_dirs(cfg)
    _retract_previous(cfg, root, local, remote)

    plan = _plan_parts(cfg, df.select(*INPUT_COLUMNS))

    def write(part: DataFrame, name: str, num: int | None, per: int | None) -> tuple[Any, ...]:
        return _write_split(cfg, part, name, local / name, dtype, vocab, num, per)

    def write_all(p: _PartsPlan) -> list[tuple[str, tuple[Any, ...]]]:
        key = shuffle_key(cfg.run.seed)
        sets = [_plan_set(cfg, part, name, local / name, dtype, vocab, num, per, key)
                for name, part, num, per in p.parts]
        return _write_sets(cfg, p.base, key, sets, p.conds)

    try:
        written = _write_parts(plan, write, write_all)
    except EmptyInput:
        # No document survived: no shard and no manifest (the old ones are gone), a completion record
        # all the same, so the report still runs and shows the funnel down to zero.
        tables.publish(spark, cfg, STAGE, {})
        return StageReport(stage=STAGE, outputs={"shards": root},
                           extra={"totals": {"docs": 0, "tokens": 0, "shards": 0}, "empty": True,
                                  "shards_requested": scfg.num_shards})
    sources: dict[str, dict[str, Any]] | None = None
    if scfg.per_source_sets:
        sources, files, blobs = shard_sources.write_source_sets(
            plan.train_docs, plan.counts, lambda part, name: write(part, name, scfg.num_shards,
                                                                    scfg.tokens_per_shard)[:3])
        written.data_files += files
        written.index_blobs.update(blobs)

    index_files, upload_stats = _publish_files(cfg, written, plan.mix, sources, root, local, remote)
    manifest = build_manifest(cfg, written.sections, written.data_files + index_files, props=props,
                              version=version, dtype=dtype.name, vocab=vocab, root=root, cut=plan.cut,
                              mix=plan.mix, sources=sources)
    manifest.update(provenance.manifest_fields(spark, cfg, STAGE, latest_records(spark, cfg)))
    manifest["short"] = shard_short.check(manifest, cfg.shard.max_dropped_share, cfg.shard.strict)
    manifest["max_dropped_share"] = cfg.shard.max_dropped_share
    for line in manifest["short"]:
        log.warning("shard: %s", line)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_file(local / MANIFEST, text.encode("utf-8"))
    if remote:
        storage.put_text(root, MANIFEST, text, scfg.storage)
    tables.publish(spark, cfg, STAGE, {})

    mix = plan.mix
    return StageReport(
        stage=STAGE,
        rows_in=sum(s["documents"] for s in written.sections.values()),
        rows_out=manifest["totals"]["documents"],
        outputs={"shards": root, "manifest": f"{root}/{MANIFEST}"},
        extra={"totals": manifest["totals"], "balance": manifest["balance"], "split": manifest["split"],
               "shuffle_quality": manifest["shuffle_quality"], "upload": upload_stats,
               "shards_requested": sum(written.requested.values()),
               "by_split": {name: {"requested": written.requested[name], "shards": sec["shards"],
                                   "documents": sec["documents"], "setting": SHARD_COUNT_SETTINGS.get(name)}
                            for name, sec in written.sections.items()},
               **({"mix": mix} if mix is not None else {})},
        notes=mix_notes(mix),
        detail=split_figures(manifest),
    )


SHARD_COUNT_SETTINGS = {"train": "shard.num_shards", "validation": "shard.split.validation_shards"}
"""The setting that asks for each shard set's number of shards (the run's closing line names it)."""


def split_figures(manifest: dict[str, Any]) -> str:
    """The shard stage's end-line figures: shards, tokens and MDS samples per split of ``manifest``.

    >>> split_figures({"splits": {"train": {"shards": 2, "tokens": 99985, "mds_samples": 194},
    ...                           "validation": {"shards": 1, "tokens": 5023, "mds_samples": 1}}})
    'train: 2 shards, 99,985 tokens, 194 samples; validation: 1 shard, 5,023 tokens, 1 sample'
    """
    from pipelines.core.words import plural

    parts = []
    for name, s in (manifest.get("splits") or {}).items():
        figures = [plural(int(s["shards"]), "shard"), plural(int(s["tokens"]), "token")]
        if s.get("mds_samples") is not None:
            figures.append(plural(int(s["mds_samples"]), "sample"))
        parts.append(f"{name}: {', '.join(figures)}")
    return "; ".join(parts)


def _retract_previous(cfg: WinnowConfig, root: str, local: Path, remote: bool) -> None:
    """Retract what a previous run published before anything changes under it: readers trust the
    manifest and the MDS indexes, so they go first; then the local shard folders."""
    scfg = cfg.shard
    indexes = [f"{s}/{MDS_INDEX}" for s in SPLITS] + [MDS_INDEX, shard_blend.MEGATRON, shard_blend.STREAMS,
                                                      shard_blend.MIX]
    if remote:
        for rel in [MANIFEST, *indexes]:
            storage.delete(root, rel, scfg.storage)
        shard_sources.retract_remote_indexes(root, scfg.storage)
    (local / MANIFEST).unlink(missing_ok=True)
    for sub in ("megatron", "mds", "blend", *SPLITS, shard_sources.SOURCES):
        shutil.rmtree(local / sub, ignore_errors=True)


@dataclass
class _PartsPlan:
    """The shard sets to write: ``parts`` = ``(split, rows, num_shards, tokens_per_shard)``, train first
    (mixed when ``shard.mix`` is set); ``train_docs`` each train document once, unmixed."""

    parts: list[tuple[str, DataFrame, int | None, int | None]]
    cut: SplitPlan
    mix: dict[str, Any] | None
    train_docs: DataFrame
    counts: dict[str, Any]
    base: DataFrame | None = None
    conds: list[Column] | None = None
    """With a validation split and no mix: the documents every part is a filter of, and each part's
    filter (row for row with ``parts``), so that one job writes every split (:func:`_write_sets`)."""


def _plan_parts(cfg: WinnowConfig, df: DataFrame) -> _PartsPlan:
    """The validation split (:func:`plan_split`), then the data mix of train (:mod:`pipelines.shard.mix`)."""
    scfg = cfg.shard
    cut = plan_split(df, cfg.run.seed, scfg.split)
    parts: list[tuple[str, DataFrame, int | None, int | None]] = [
        ("train", df, scfg.num_shards, scfg.tokens_per_shard)]
    conds = None
    if cut.cut is not None:
        held = split_key(cfg.run.seed) < F.lit(cut.cut)
        conds = [~held, held]
        parts = [("train", df.filter(~held), scfg.num_shards, scfg.tokens_per_shard),
                 ("validation", df.filter(held), scfg.split.validation_shards, None)]
    mix: dict[str, Any] | None = None
    train_docs = parts[0][1]  # each train document once: the per-source sets hold these, unmixed
    counts = shard_mix.source_counts(train_docs) if scfg.mix or scfg.per_source_sets else {}
    if scfg.mix:  # the mix applies to train only, after the validation documents are chosen
        plans = shard_mix.plan_mix(counts, scfg.mix)
        plans = shard_mix.pick_cuts(parts[0][1], cfg.run.seed, plans)
        copies = shard_mix.apply_mix(parts[0][1], cfg.run.seed, plans)
        mix = shard_mix.mix_section(plans, shard_mix.mix_counts(copies))
        parts[0] = ("train", copies.select(*INPUT_COLUMNS, "_key"), scfg.num_shards, scfg.tokens_per_shard)
        conds = None  # the mixed train rows are copies, not a filter of df: each split is its own job
    return _PartsPlan(parts, cut, mix, train_docs, counts, df if conds else None, conds)


@dataclass
class _Written:
    """What the shard sets' writers returned: manifest sections per split, data files, MDS index blobs
    (by path under the shard root) and the shards asked for per split."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_files: list[dict[str, Any]] = field(default_factory=list)
    index_blobs: dict[str, bytes] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)


def _write_parts(plan: _PartsPlan, write: Any, write_all: Any = None) -> _Written:
    """Write each shard set of ``plan`` with ``write(part, name, num, per)`` (:func:`_write_split`), or
    all of them in one job with ``write_all(plan)`` (:func:`_write_sets`) when ``plan.base`` is set.

    Raises:
        EmptyInput: train holds no document (an empty validation set raises it too, as an error).
    """
    out = _Written()
    try:
        if write_all is not None and plan.base is not None:
            done = write_all(plan)
        else:
            done = [(name, write(part, name, num, per)) for name, part, num, per in plan.parts]
    except _EmptySet as e:
        if e.name != "train":  # an error, not an empty run: the caller returns early on EmptyInput only
            raise ValueError(str(e)) from None
        raise EmptyInput(str(e)) from None
    for name, (section, files, blob, asked) in done:
        out.sections[name], out.data_files = section, out.data_files + files
        out.requested[name] = asked
        if blob is not None:
            out.index_blobs[f"{name}/{MDS_INDEX}"] = blob
    return out


class _EmptySet(EmptyInput):
    """A shard set of the run holds no document (``name``: which)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def _publish_files(cfg: WinnowConfig, written: _Written, mix: dict[str, Any] | None,
                   sources: dict[str, dict[str, Any]] | None, root: str, local: Path,
                   remote: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Publish the data files (checked, and uploaded for ``s3://``), then the MDS indexes and blend files.

    Returns:
        The index and blend files' manifest entries, and the upload statistics (empty when local).
    """
    scfg = cfg.shard
    data_files, index_blobs = written.data_files, written.index_blobs
    _check_local(local, data_files)
    upload_stats: dict[str, int] = {}
    if remote:
        upload_stats = storage.upload_verified(_local_files(local, data_files), root, scfg.storage)
    split_files = [f for f in data_files if f["path"].split("/", 1)[0] in SPLITS]
    # Paths in the blend files: relative to the shard root for a local root, URIs for an object store.
    blend_root = root if remote else ""
    for rel, text in blend_files(blend_root, split_files, remote).items():
        index_blobs[rel] = text.encode("utf-8")
    if mix is not None:
        text = shard_blend.mix_file(mix, sources, data_files, root=blend_root, remote=remote)
        index_blobs[shard_blend.MIX] = text.encode("utf-8")
    index_files = []
    for rel, blob in index_blobs.items():
        size, sha = write_file(local / rel, blob)
        fmt, kind = ("mds", "index") if rel.endswith("index.json") else ("blend", "blend")
        index_files.append({"path": rel, "format": fmt, "kind": kind, "bytes": size, "sha256": sha})
    if remote and index_files:
        more = storage.upload_verified(_local_files(local, index_files), root, scfg.storage)
        upload_stats = {k: upload_stats.get(k, 0) + v for k, v in more.items()}
    return index_files, upload_stats


def mix_notes(mix: dict[str, Any] | None) -> dict[str, int]:
    """The stage line's account of a mix: in/out count the documents written (copies included), so the
    train documents read, those the mix left out and the extra copies it added are said beside them.

    >>> mix_notes({"a": {"documents_in": 10, "documents_selected": 4, "documents_out": 4},
    ...            "b": {"documents_in": 2, "documents_selected": 2, "documents_out": 5}})
    {'train_read': 12, 'not_selected': 6, 'repeat_copies': 3}
    """
    if not mix:
        return {}
    total = {k: sum(m[k] for m in mix.values()) for k in ("documents_in", "documents_selected", "documents_out")}
    return {"train_read": total["documents_in"], "not_selected": total["documents_in"] - total["documents_selected"],
            "repeat_copies": total["documents_out"] - total["documents_selected"]}


def _local_files(local: Path, files: list[dict[str, Any]]) -> list[storage.LocalFile]:
    return [storage.LocalFile(f["path"], local / f["path"], f["bytes"], f["sha256"]) for f in files]


def _check_local(local: Path, files: list[dict[str, Any]]) -> None:
    """Every data file the workers reported is on disk with its size (before any index names it)."""
    bad = [f["path"] for f in files if not (local / f["path"]).is_file() or (local / f["path"]).stat().st_size != f["bytes"]]
    if bad:
        raise RuntimeError(f"shard: {len(bad)} written files are missing or of another size than reported: {bad[:5]}")


@dataclass
class _SetWrite:
    """One shard set's share of a write job: its plan, the writer's layout and its shard id column."""

    name: str
    plan: ShardPlan
    layout: ShardLayout
    shard_id: Column


def _plan_set(cfg: WinnowConfig, df: DataFrame, name: str, out: Path, dtype: np.dtype, vocab: int,
              num_shards: int | None, tokens_per_shard: int | None, key: Column) -> _SetWrite:
    """Plan one shard set (:func:`plan_shards`: slim jobs only) and lay out its files under ``out``.

    Raises:
        _EmptySet: the set holds no document.
    """
    scfg = cfg.shard
    try:
        sp = plan_shards(df, cfg.run.seed, num_shards, tokens_per_shard, cfg.spark.shuffle_partitions, key=key)
    except EmptyInput as e:
        raise _EmptySet(name, str(e)) from None
    per_file = mds.samples_per_file(scfg.seq_len, dtype, scfg.mds_size_limit)
    plan: dict[int, dict[str, int]] = {}
    next_file = 0
    for k in range(sp.shards):
        tokens_k = int(sp.shard_tokens[k])
        plan[k] = {"docs": int(sp.starts[k + 1] - sp.starts[k]), "tokens": tokens_k, "first_doc": int(sp.starts[k]),
                   "mds_first_file": next_file}
        next_file += mds.files_per_shard(tokens_k, scfg.seq_len, per_file) if "mds" in scfg.formats else 0
    layout = ShardLayout(str(out), plan, scfg.name_prefix, list(scfg.formats), dtype.name, vocab, scfg.seq_len,
                         scfg.mds_size_limit, scfg.shuffle_window_docs)
    return _SetWrite(name, sp, layout, shard_id_column(sp.boundary_keys))


def _write_sets(cfg: WinnowConfig, rows: DataFrame, key: Column, sets: list[_SetWrite],
                conds: list[Column] | None) -> list[tuple[str, tuple[Any, ...]]]:
    """Write the shards of every set of ``sets`` in one Spark job over ``rows``: one read of the tokens,
    one shuffle. Set ``i`` holds the rows where ``conds[i]`` is true (``conds`` None: one set, every row);
    its shards get the ids after the previous sets' (:func:`pipelines.shard.writer.make_sets_writer`).

    Returns:
        Per set, ``(name, (manifest section, data files, mds/index.json bytes or None, shards asked for))``
        as :func:`_write_split` returns them.
    """
    scfg = cfg.shard
    firsts = np.concatenate([[0], np.cumsum([s.plan.shards for s in sets])]).tolist()
    if conds is None:
        shard_id = sets[0].shard_id
    else:
        # The sets' filters are disjoint; a row in none of them (a null doc_id) is in no set, as with a filter.
        rows = rows.filter(functools.reduce(lambda a, b: a | b, conds))
        shard_id = F.when(conds[0], sets[0].shard_id)
        for s, cond, first in zip(sets[1:], conds[1:], firsts[1:-1], strict=True):
            shard_id = shard_id.when(cond, s.shard_id + F.lit(first))
    writer = make_sets_writer([(first, s.layout) for first, s in zip(firsts, sets, strict=False)])
    # Rows reach the writer sorted by key within their shard: the grouped-map operator needs its input
    # clustered by shard_id and sorted by it, which this partitioning and sort already satisfy, so Spark
    # adds no exchange or sort of its own (the writer checks the order as it streams).
    with_shard = (
        rows.withColumn("_key", key).withColumn("shard_id", shard_id.cast("int"))
        .repartition(min(firsts[-1], cfg.spark.shuffle_partitions), "shard_id")
        .sortWithinPartitions("shard_id", "_key")
    )
    results = sorted(with_shard.groupBy("shard_id").applyInArrow(writer, RESULT_SCHEMA).collect(), key=lambda r: r["shard_id"])
    done = []
    for s, first, end in zip(sets, firsts[:-1], firsts[1:], strict=True):
        mine = [r for r in results if first <= r["shard_id"] < end]
        sp = s.plan
        totals = {"docs": sp.docs, "tokens": sp.tokens, "shards": sp.shards, "max_doc_tokens": sp.max_doc_tokens}
        section = split_section(cfg, mine, totals)
        files = [dict(f, path=f"{s.name}/{f['path']}") for r in mine for f in json.loads(r["files"])]
        blob = None
        if "mds" in scfg.formats:
            blob = mds.index_json([e for r in mine for e in json.loads(r["mds_entries"])]).encode("utf-8")
        done.append((s.name, (section, files, blob, sp.requested)))
    return done


def _write_split(cfg: WinnowConfig, df: DataFrame, name: str, out: Path, dtype: np.dtype, vocab: int,
                 num_shards: int | None, tokens_per_shard: int | None
                 ) -> tuple[dict[str, Any], list[dict[str, Any]], bytes | None, int]:
    """Shuffle and write one split's shards under ``out``.

    Returns:
        (its manifest section, its data files with paths relative to the shard root, the bytes of its
        ``mds/index.json`` or None when MDS is not written, the number of shards asked for).

    Raises:
        EmptyInput: ``df`` holds no document.
    """
    key = F.col("_key") if "_key" in df.columns else shuffle_key(cfg.run.seed)
    one = _plan_set(cfg, df, name, out, dtype, vocab, num_shards, tokens_per_shard, key)
    return _write_sets(cfg, df, key, [one], None)[0][1]


def split_section(cfg: WinnowConfig, results: list[Any], totals: dict[str, int]) -> dict[str, Any]:
    """One split's manifest section: counts, tokens by source, balance and shuffle quality of its shards.

    Raises:
        RuntimeError: the writers wrote other document or token counts than planned.
    """
    files = [f for r in results for f in json.loads(r["files"])]
    docs = sum(int(r["n_docs"]) for r in results)
    tokens = sum(int(r["n_tokens"]) for r in results)
    if docs != totals["docs"] or tokens != totals["tokens"]:
        raise RuntimeError(f"shard: wrote {docs} docs / {tokens} tokens, input has {totals['docs']} / {totals['tokens']}")
    by_src: dict[str, int] = {}
    windows: dict[int, dict[str, int]] = {}
    for r in results:
        for s, n in json.loads(r["tokens_by_source"]).items():
            by_src[s] = by_src.get(s, 0) + n
        for w, c in json.loads(r["windows"]).items():
            cell = windows.setdefault(int(w), {})
            for s, n in c.items():
                cell[s] = cell.get(s, 0) + n
    shard_tokens = [int(r["n_tokens"]) for r in results]
    target = tokens / len(results)
    mds_tokens = sum(f["tokens"] for f in files if f["kind"] == "mds")
    quality = sq.window_deviation(windows, docs, cfg.shard.shuffle_window_docs)
    quality["longest_same_source_run"] = sq.longest_run([json.loads(r["runs"]) for r in results])
    return {
        "shards": len(results), "documents": docs, "tokens": tokens,
        "mds_samples": sum(f.get("samples", 0) for f in files),
        "mds_dropped_tokens": tokens - mds_tokens if "mds" in cfg.shard.formats else 0,
        "tokens_by_source": dict(sorted(by_src.items())),
        "token_share_by_source": {s: n / tokens for s, n in sorted(by_src.items())},
        "balance": {"target_tokens_per_shard": target, "min_tokens": min(shard_tokens), "max_tokens": max(shard_tokens),
                    "max_abs_deviation": max(abs(t - target) for t in shard_tokens),
                    "longest_document_tokens": totals["max_doc_tokens"]},
        "shuffle_quality": quality,
    }


def build_manifest(cfg: WinnowConfig, sections: dict[str, dict[str, Any]], files: list[dict[str, Any]], *,
                   props: dict[str, str], version: int, dtype: str, vocab: int, root: str, cut: SplitPlan,
                   mix: dict[str, Any] | None = None, sources: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest: run-wide facts, totals over the splits, the train split's figures at top level
    (``balance``, ``shuffle_quality``, ``tokens_by_source``), each split under ``splits``, every file, and
    with ``shard.mix`` set the ``mix`` block per source (:func:`pipelines.shard.mix.mix_section`), with
    ``shard.per_source_sets`` the ``sources`` block (:func:`pipelines.shard.sources.write_source_sets`;
    ``totals`` stay those of the splits except ``files`` and ``bytes``, which count every file)."""
    train = sections["train"]
    split_cfg = cfg.shard.split
    return {
        "manifest_version": 2,
        "output": root if storage.is_s3(root) else os.path.abspath(root),
        "formats": list(cfg.shard.formats),
        "dtype": dtype,
        "seq_len": cfg.shard.seq_len,
        "seed": cfg.run.seed,
        "config_fingerprint": cfg.fingerprint(),
        "stage_fingerprint": cfg.stage_fingerprint(STAGE),
        "tokenizer": {"spec": props.get("tokenizer"), "fingerprint": props.get("tokenizer_fingerprint"),
                      "vocab_size": vocab, "eos_id": int(props["eos_id"]), "bos_id": json.loads(props.get("bos_id", "null"))},
        "input_tables": {"tokenized": {"path": cfg.table_path("tokenized"), "version": version},
                         props.get("input_table", "unknown"): {"version": json.loads(props.get("input_version", "null"))}},
        "totals": {"shards": sum(s["shards"] for s in sections.values()),
                   "documents": sum(s["documents"] for s in sections.values()),
                   "tokens": sum(s["tokens"] for s in sections.values()), "files": len(files),
                   # Blend files of an object-store root name it: counting them would make two runs of the
                   # same data under two roots differ, so the total is of the data and index files only.
                   "bytes": sum(f["bytes"] for f in files if f["kind"] != "blend"),
                   "mds_samples": sum(s["mds_samples"] for s in sections.values()),
                   "mds_dropped_tokens": sum(s["mds_dropped_tokens"] for s in sections.values())},
        "split": {"validation": split_cfg.validation, "unit": split_cfg.unit, "target": cut.target,
                  "key": "sha256(<seed>:validation:<doc_id>) < cut", "cut": cut.cut,
                  "validation_documents": cut.docs, "validation_tokens": cut.tokens},
        "splits": sections,
        "readers": {
            "streaming": {"num_canonical_nodes": STREAMING_CANONICAL_NODES, "shuffle": True, "shuffle_algo": "py1e",
                          "shuffle_seed": cfg.run.seed, "partition_algo": "orig"},
            "megatron": {"seed": cfg.run.seed, "sequence_length": cfg.shard.seq_len, "split": "100,0,0",
                         "per_split_data_args_path": shard_blend.MEGATRON},
        },
        "tokens_by_source": train["tokens_by_source"],
        "token_share_by_source": train["token_share_by_source"],
        "balance": train["balance"],
        "shuffle_quality": train["shuffle_quality"],
        "files": files,
        **({"mix": mix} if mix is not None else {}),
        **({"sources": sources} if sources is not None else {}),
    }
