"""Ingest's accounting in as few Spark jobs as possible: one aggregation over the parsed records, which
also finds the duplicated source ids (the row counts of the written tables come from their Delta commits,
:func:`pipelines.core.tables.written_rows`); where the records are spooled, the same sums from the parse
workers (:func:`partial_rows`), added up on the driver (:func:`tally_partials`).

Why: on one 1 GB JSONL file (bench/notes.md, "Ingest alone") the separate jobs of the first design (the
split summaries, a sum of characters, counts per file and reason, a shuffle join of every document with
the duplicated ids, and two reads of the written tables) cost about as much CPU as parsing the file.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

DUP_BROADCAST_MAX = 100_000
"""Source ids seen more than once within their source that the driver collects and broadcasts to the
document rows; more than this and the documents are joined with them through a shuffle instead (the
driver then holds none)."""


@dataclass
class Tally:
    """What one pass over the parsed records says, collected on the driver.

    Attributes:
        summaries: the ``kind = "file"`` rows (``input_file``, ``key_path``, ``split_start``,
            ``record``, ``meta``), one per split, as dicts.
        counts: ``(input_file, reason, rows)`` of documents (``reason`` ``None``) and quarantined records.
        chars, n_bytes, replaced: sums of ``n_chars``, ``n_bytes``, ``n_replaced`` over the documents.
        with_src_id: documents with a non-empty source id (0: no id can be duplicated).
        by_source: documents per ``source`` (``""`` for none), for the chain's ``shard.mix`` check.
        dup_ids: the candidate ids more than one document holds; ``None`` when there are more than
            :data:`DUP_BROADCAST_MAX` (then left to a distributed aggregation, :func:`duplicated_ids`).
        doc_splits: per Spark partition of the records, the splits ``(input_file, split_start)`` whose
            documents it holds.
        split_rows: per Spark partition and split ``(input_file, split_start)``, the first and last
            position of its rows in the partition (``monotonically_increasing_id``: partition index in
            the upper bits, row index below), which tells in what order the partition holds its splits.
        parts: the Spark partitions that hold any record.
    """

    summaries: list[dict[str, Any]] = field(default_factory=list)
    counts: list[tuple[str, str | None, int]] = field(default_factory=list)
    chars: int = 0
    n_bytes: int = 0
    replaced: int = 0
    with_src_id: int = 0
    by_source: Counter = field(default_factory=Counter)
    dup_ids: list[str] | None = field(default_factory=list)
    doc_splits: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    split_rows: dict[tuple[int, str, int], tuple[int, int]] = field(default_factory=dict)
    parts: set[int] = field(default_factory=set)

    @property
    def docs_in_order(self) -> bool:
        """True when the documents already lie in ``(input_file, record)`` order within each partition,
        so sorting them there changes nothing (as long as the rows stay in those partitions): no split
        emitted its documents out of record order (no summary row says ``docs_unordered``) and every
        partition holds the documents of one split, or of several in a row (not interleaved, from
        :attr:`split_rows`) in rising ``(input_file, split_start)`` order. A later split of a file
        holds higher record numbers than an earlier one (line numbers are fixed by the prefix sum of
        the earlier splits' lines, Parquet rows count from the footer), and the sort compares
        ``input_file`` by its UTF-8 bytes, the order of Python's ``str`` comparison."""
        if any(dict(s["meta"]).get("docs_unordered") for s in self.summaries):
            return False
        return all(len(s) <= 1 or self._splits_in_a_row(part, s) for part, s in self.doc_splits.items())

    def _splits_in_a_row(self, part: int, with_docs: set[tuple[str, int]]) -> bool:
        """Whether partition ``part`` holds its splits one after another, those of ``with_docs`` in
        rising ``(input_file, split_start)`` order (``False`` where a split's positions are unknown)."""
        spans = sorted((lo, hi, (f, s)) for (p, f, s), (lo, hi) in self.split_rows.items() if p == part)
        keys = [key for _, _, key in spans if key in with_docs]
        apart = all(hi < lo_next for (_, hi, _), (lo_next, _, _) in pairwise(spans))
        return apart and len(keys) == len(with_docs) and keys == sorted(keys)


def has_src_id() -> Any:
    """True where a row carries a non-empty source id (the candidate ``doc_id`` ``source/src_id``)."""
    return F.col("src_id").isNotNull() & (F.col("src_id") != "")


def candidate_id() -> Any:
    """The ``doc_id`` a document's own id gives it (``source/src_id``), used where present and unique
    within its source.

    A source id starting with ``~`` gets one more ``~`` in front (``~x`` -> ``source/~~x``): a derived
    id is ``source/~`` and 32 hex digits, so no source id can take one a derived id holds (two documents
    with one ``doc_id`` made dedup write more rows than it read). :func:`arrow_candidate_ids` builds the
    same strings in the parse workers."""
    src_id = F.col("src_id")
    sid = F.when(src_id.startswith("~"), F.concat(F.lit("~"), src_id)).otherwise(src_id)
    return F.concat_ws("/", F.col("source"), sid)


def arrow_candidate_ids(source: Any, src_id: Any) -> Any:
    """:func:`candidate_id` over Arrow string arrays (pyarrow in, pyarrow out, the same strings)."""
    import pyarrow.compute as pc

    tilde = pc.fill_null(pc.starts_with(src_id, "~"), False)
    sid = pc.if_else(tilde, pc.binary_join_element_wise("~", src_id, ""), src_id)
    # concat_ws skips a null source; pyarrow's own null skipping drops a trailing all-null row (25.0)
    return pc.if_else(pc.is_null(source), sid, pc.binary_join_element_wise(source, sid, "/"))


_KEYS = ("input_file", "split_start", "kind", "reason", "src", "part")
"""The tally's grouping: per split, kind, reason and source; ``part`` (the Spark partition) adds no group,
a split lying in one partition."""


def tally(records: DataFrame) -> Tally:
    """One aggregation over the parser's rows (:data:`pipelines.ingest.stage.RECORD_DDL`): per split, kind and
    reason the rows, their sums, and the split's summary rows; in the same pass, the candidate ids
    (:func:`candidate_id`) more than one document holds (up to :data:`DUP_BROADCAST_MAX` of them).

    The two groupings are grouping sets of one aggregation (Spark expands each row into one row per set),
    so the records are read once for both; the candidate ids cross the shuffle, never the texts.

    Returns:
        The :class:`Tally` (record numbers play no part, so this may run before they are fixed).
    """
    is_doc = F.col("kind") == "doc"
    # A split's one summary row as a grouping key (JSON: a map cannot be one): no collect_list, whose
    # object buffers make Spark aggregate by sorting once a task sees 128 keys (the candidate ids).
    summary = F.when(F.col("kind") == "file", F.to_json(F.struct("key_path", "record", "meta")))
    cols = records.select(
        "input_file", "split_start", "kind", "reason", F.coalesce(F.col("source"), F.lit("")).alias("src"),
        F.spark_partition_id().alias("part"), F.when(is_doc & has_src_id(), candidate_id()).alias("_cand"),
        F.when(is_doc, F.col("n_chars")).alias("_chars"), F.when(is_doc, F.col("n_bytes")).alias("_bytes"),
        F.when(is_doc, F.col("n_replaced")).alias("_replaced"), summary.alias("_summary"),
        F.monotonically_increasing_id().alias("_pos"),
    )
    both = (
        cols.groupingSets([[*_KEYS, "_summary"], ["_cand"]], *_KEYS, "_summary", "_cand")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("_chars").alias("chars"),
            F.sum("_bytes").alias("bytes"),
            F.sum("_replaced").alias("replaced"),
            F.count("_cand").alias("with_src_id"),
            F.min("_pos").alias("first_pos"),
            F.max("_pos").alias("last_pos"),
            F.grouping("_cand").alias("_by_keys"),  # 1: a row of the first set, 0: a candidate id
        )
    )
    return _collect(both)


def _collect(both: DataFrame) -> Tally:
    """The :class:`Tally` of the tally's aggregation ``both``: rows of the per-key grouping (``_by_keys``
    1: ``_KEYS``, ``_summary``, ``n``, ``chars``, ``bytes``, ``replaced``, ``with_src_id``, ``first_pos``,
    ``last_pos``) and of the candidate ids (``_by_keys`` 0: ``_cand``, ``n``)."""
    dup = (F.col("_by_keys") == 0) & F.col("_cand").isNotNull() & (F.col("n") > 1)
    # Kept (small: no text) for the bounded look at the duplicated ids after the per-key rows; two
    # branches of one query would each read the records (Spark does not reuse the aggregation's shuffle
    # once a filter differs).
    kept = both.where((F.col("_by_keys") == 1) | dup).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = kept.where(F.col("_by_keys") == 1).collect()
        dup_rows = []
        if any(r["with_src_id"] for r in rows):  # else no id can be duplicated: no job
            dup_rows = kept.where(~F.col("_by_keys").cast("boolean")).select("_cand")
            dup_rows = dup_rows.limit(DUP_BROADCAST_MAX + 1).collect()
    finally:
        kept.unpersist()
    return _from_rows(rows, [r["_cand"] for r in dup_rows])


def _from_rows(rows: list[Any], dup_ids: list[str]) -> Tally:
    """The :class:`Tally` of the per-key rows of the tally's aggregation (``_KEYS``, ``_summary``, ``n``,
    ``chars``, ``bytes``, ``replaced``, ``with_src_id``, ``first_pos``, ``last_pos``) and the candidate
    ids held more than once (``None`` kept where there are more than :data:`DUP_BROADCAST_MAX`)."""
    t = Tally()
    t.dup_ids = dup_ids if len(dup_ids) <= DUP_BROADCAST_MAX else None
    per: Counter = Counter()
    for r in rows:
        t.parts.add(int(r["part"]))
        at_split = (int(r["part"]), r["input_file"], int(r["split_start"]))
        lo, hi = t.split_rows.get(at_split, (r["first_pos"], r["last_pos"]))
        t.split_rows[at_split] = (min(lo, r["first_pos"]), max(hi, r["last_pos"]))
        if r["kind"] == "file":
            at = {"input_file": r["input_file"], "split_start": r["split_start"]}
            f = json.loads(r["_summary"])  # the JSON of a null key_path leaves it out
            one = {**at, "key_path": f.get("key_path"), "record": f["record"]}
            t.summaries += [{**one, "meta": dict(f["meta"])} for _ in range(int(r["n"]))]
            continue
        per[(r["input_file"], r["reason"] if r["kind"] != "doc" else None)] += int(r["n"])
        t.chars += int(r["chars"] or 0)
        t.n_bytes += int(r["bytes"] or 0)
        t.replaced += int(r["replaced"] or 0)
        t.with_src_id += int(r["with_src_id"] or 0)
        if r["kind"] == "doc":
            t.by_source[r["src"]] += int(r["n"])
            t.doc_splits.setdefault(int(r["part"]), set()).add((r["input_file"], int(r["split_start"])))
    t.summaries.sort(key=lambda s: (s["input_file"], s["split_start"]))
    t.counts = sorted(((f, reason, n) for (f, reason), n in per.items()), key=lambda x: (x[0], x[1] or ""))
    return t


PARTIAL_DDL = (
    "input_file string, split_start bigint, kind string, reason string, src string, part int, "
    "_summary string, n bigint, chars bigint, bytes bigint, replaced bigint, with_src_id bigint, "
    "first_pos bigint, last_pos bigint, _ids binary"
)
"""Spark schema of :func:`partial_rows`: the tally's per-key rows of one batch (``_ids`` null), then one
row holding the batch's candidate ids (``_ids``, the other columns null) where it has any."""

_PARTIAL_SUMS = ("n", "chars", "bytes", "replaced", "with_src_id")
_PARTIAL_KEYS = ("input_file", "split_start", "kind", "reason", "src", "_summary")


def partial_rows(batch: Any, part: int, row0: int) -> Any:
    """What :func:`tally` computes from one batch of parsed records, computed in the Python worker that
    parsed them (a pyarrow ``Table`` of :data:`PARTIAL_DDL`; :func:`tally_partials` adds them up).

    Args:
        batch: records (:data:`udfs.formats.RECORD_SCHEMA`, at least the columns :func:`tally` reads).
        part: the Spark partition of the task (``spark_partition_id``).
        row0: the rows this task yielded before ``batch``: positions are ``part << 33`` plus the row's
            index in the task, as Spark's ``monotonically_increasing_id`` numbers the rows of a partition.

    Returns:
        Per ``(input_file, split_start, kind, reason, src, _summary)`` (``src``: ``source``, ``""`` for
        none; ``_summary``: for ``kind = "file"`` rows the JSON of ``key_path``, left out where null,
        ``record`` and ``meta``) the row count ``n``, the sums of ``n_chars``, ``n_bytes``,
        ``n_replaced`` over documents (null where none), the documents with a source id
        (``with_src_id``) and the first and last position; then, where any document has a source id,
        one row whose ``_ids`` is an Arrow IPC stream of their candidate ids (:func:`candidate_id`:
        ``source/src_id``, ``src_id`` alone for a null source), a string column ``_cand``.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    kind, source, src_id = batch.column("kind"), batch.column("source"), batch.column("src_id")
    is_doc = pc.fill_null(pc.equal(kind, "doc"), False)
    has_id = pc.and_(is_doc, pc.and_(pc.is_valid(src_id), pc.fill_null(pc.not_equal(src_id, ""), False)))
    summary = pa.nulls(n, pa.string())
    is_file = pc.fill_null(pc.equal(kind, "file"), False)
    if pc.any(is_file).as_py():
        at = pc.indices_nonzero(is_file).to_pylist()
        keys, recs, metas = (batch.column(c).take(at).to_pylist() for c in ("key_path", "record", "meta"))
        texts = summary.to_pylist()
        for i, k, r, m in zip(at, keys, recs, metas, strict=True):
            one = {"key_path": k, "record": r, "meta": dict(m or [])}
            texts[i] = json.dumps(one if k is not None else {x: v for x, v in one.items() if x != "key_path"})
        summary = pa.array(texts, pa.string())
    none = pa.nulls(n, pa.int64())
    grouped = pa.table({
        "input_file": batch.column("input_file"), "split_start": batch.column("split_start"), "kind": kind,
        "reason": batch.column("reason"), "src": pc.fill_null(source, ""), "_summary": summary,
        "chars": pc.if_else(is_doc, batch.column("n_chars").cast(pa.int64()), none),
        "bytes": pc.if_else(is_doc, batch.column("n_bytes").cast(pa.int64()), none),
        "replaced": pc.if_else(is_doc, batch.column("n_replaced").cast(pa.int64()), none),
        "with_src_id": has_id.cast(pa.int64()),
        "pos": pa.array(np.arange(n, dtype=np.int64) + ((part << 33) + row0)),
    }).group_by(list(_PARTIAL_KEYS), use_threads=False).aggregate([
        ("pos", "count"), ("chars", "sum"), ("bytes", "sum"), ("replaced", "sum"), ("with_src_id", "sum"),
        ("pos", "min"), ("pos", "max"),
    ])
    cols = {k: grouped[k] for k in _PARTIAL_KEYS}
    cols.update(part=pa.array([part] * grouped.num_rows, pa.int32()), n=grouped["pos_count"],
                first_pos=grouped["pos_min"], last_pos=grouped["pos_max"],
                **{k: grouped[f"{k}_sum"] for k in _PARTIAL_SUMS[1:]})
    schema = partial_schema()
    cols["_ids"] = pa.nulls(grouped.num_rows, pa.binary())
    out = pa.table({f.name: cols[f.name] for f in schema}).cast(schema)
    if pc.any(has_id).as_py():
        with_id = batch.filter(has_id)
        source, src_id = with_id.column("source"), with_id.column("src_id")
        cand = arrow_candidate_ids(source, src_id)
        sink = pa.BufferOutputStream()
        ids = pa.RecordBatch.from_arrays([cand], names=["_cand"])
        with pa.ipc.new_stream(sink, ids.schema) as w:
            w.write_batch(ids)
        row = {f.name: pa.nulls(1, f.type) for f in out.schema}
        row["_ids"] = pa.array([sink.getvalue().to_pybytes()], pa.binary())
        out = pa.concat_tables([out, pa.table(row, schema=out.schema)])
    return out.combine_chunks()


def partial_schema() -> Any:
    """The pyarrow schema of :data:`PARTIAL_DDL`."""
    import pyarrow as pa

    types = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "binary": pa.binary()}
    return pa.schema([(name, types[t]) for name, t in (f.split() for f in PARTIAL_DDL.split(", "))])


def tally_partials(partials: DataFrame) -> Tally:
    """:func:`tally` of records whose Python workers gave :func:`partial_rows` instead (rows of
    :data:`PARTIAL_DDL`): the same :class:`Tally`, added up on the driver, the candidate ids counted
    there (pyarrow's ``value_counts``) rather than by a Spark aggregation.

    Why: the records then no longer cross into the JVM to be projected, expanded into two grouping sets,
    hashed by their string keys and shuffled: the job only parses and collects a few rows per batch
    (bench/notes.md, "Ingest's tally summed in the parse workers"). The driver holds every candidate id
    once (their bytes and 4 bytes an id), on the one machine of a ``local`` master whose records are
    spooled (:func:`pipelines.ingest.stage._read_kept`), where the spooled texts are far larger.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    acc: dict[tuple, dict[str, Any]] = {}
    ids = []
    for r in partials.collect():
        if r["_ids"] is not None:
            ids += pa.ipc.open_stream(r["_ids"]).read_all().column("_cand").chunks
            continue
        key = tuple(r[k] for k in (*_KEYS, "_summary"))
        a = acc.setdefault(key, {**{k: r[k] for k in (*_KEYS, "_summary")}, "n": 0, "chars": None,
                                 "bytes": None, "replaced": None, "with_src_id": 0,
                                 "first_pos": r["first_pos"], "last_pos": r["last_pos"]})
        for k in _PARTIAL_SUMS:
            if r[k] is not None:
                a[k] = (a[k] or 0) + r[k]
        a["first_pos"], a["last_pos"] = min(a["first_pos"], r["first_pos"]), max(a["last_pos"], r["last_pos"])
    dup_ids: list[str] = []
    if ids:
        counts = pc.value_counts(pa.chunked_array(ids, pa.string()))
        dup_ids = counts.filter(pc.greater(counts.field("counts"), 1)).field("values").to_pylist()
    return _from_rows(list(acc.values()), dup_ids)


def duplicated_ids(spark: SparkSession, docs: DataFrame, candidate: Any, t: Tally) -> DataFrame | None:
    """The candidate ids (``_cand``) that more than one document holds, as a frame to join on ``_cand``
    (column ``_dup`` true); ``None`` when there is none (no join needed).

    Those the tally collected (:attr:`Tally.dup_ids`, at most :data:`DUP_BROADCAST_MAX`) come as a small
    local frame marked for broadcast (no Spark job, no shuffle of the documents); more stay a
    distributed aggregate of ``docs``.
    """
    if t.dup_ids is not None:
        if not t.dup_ids:
            return None
        rows = [(c, True) for c in t.dup_ids]
        from pipelines.core.tables import local_frame  # driver side only: the workers need not import it

        return F.broadcast(local_frame(spark, rows, "_cand string, _dup boolean"))
    return (
        docs.where(has_src_id()).groupBy(candidate.alias("_cand")).count().where(F.col("count") > 1)
        .select("_cand", F.lit(True).alias("_dup"))
    )
