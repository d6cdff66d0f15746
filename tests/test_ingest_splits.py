"""Streamed, split reading (udfs/formats + pipelines/ingest_splits): every cut gives the same records."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from pyspark.testing import assertDataFrameEqual

from pipelines.core.config import load_config
from pipelines.ingest import stage as ingest
from pipelines.ingest.splits import plan_splits, small_splits_line
from udfs.formats import ParseOptions, explode_split
from udfs.formats.jsonl import LongLine, owned_lines


def _lines_file(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.05:
            out.append(b"")  # blank
        elif r < 0.1:
            out.append(b'{"text": "cut')  # malformed
        else:
            out.append(json.dumps({"id": f"d{i}", "text": "w" * rng.randint(1, 300) + f" {i}"}).encode())
    return b"\n".join(out) + (b"\n" if seed % 2 == 0 else b"")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_owned_lines_cover_every_line_once_for_any_cuts(seed):
    data = _lines_file(300, seed)
    rng = random.Random(seed)
    cuts = sorted({0, len(data), *(rng.randrange(1, len(data)) for _ in range(12))})
    got = []
    for s, e in zip(cuts, cuts[1:], strict=False):
        chunks = [data[max(s - 1, 0):][i : i + 37] for i in range(0, len(data), 37)]
        got += list(owned_lines(chunks, s, e, 1 << 20))
    expected = data.split(b"\n")
    if not expected[-1]:
        expected.pop()
    assert got == expected


def test_a_line_over_the_limit_comes_out_as_its_head_and_length():
    data = b"short\n" + b"x" * 1000 + b"\nend"
    got = list(owned_lines([data[i : i + 64] for i in range(0, len(data), 64)], 0, None, 100))
    assert got[0] == b"short" and got[2] == b"end"
    assert isinstance(got[1], LongLine) and got[1].n_bytes == 1000 and len(got[1].head) <= 1000


def _split_rows(path, data, opts, cuts):
    rows = []
    for s, e in zip(cuts, cuts[1:], strict=False):
        for b in explode_split(path, lambda: io.BytesIO(data), len(data), opts, None, s, e):
            rows += b.to_pylist()
    return rows


def test_jsonl_splits_report_their_lines_and_keep_batches_bounded():
    data = _lines_file(500)
    opts = ParseOptions(batch_rows=16)
    batches = list(explode_split("x.jsonl", lambda: io.BytesIO(data), len(data), opts))
    assert max(b.num_rows for b in batches) <= 16
    whole = pa.Table.from_batches(batches).to_pylist()
    cuts = [0, 1000, 5000, 5001, len(data) // 2, len(data)]
    parts = _split_rows("x.jsonl", data, opts, cuts)
    lines = {r["split_start"]: int(dict(r["meta"])["lines"]) for r in parts if r["kind"] == "file"}
    assert sum(lines.values()) == 500
    before, acc = {}, 0
    for s in sorted(lines):
        before[s], acc = acc, acc + lines[s]
    renumbered = sorted((r["record"] + before[r["split_start"]], r["kind"], r["reason"], r["text"])
                        for r in parts if r["kind"] != "file")
    assert renumbered == sorted((r["record"], r["kind"], r["reason"], r["text"]) for r in whole if r["kind"] != "file")


@pytest.mark.parametrize("codec, pack", [
    ("gz", lambda b: gzip.compress(b[:5000]) + gzip.compress(b[5000:])),
    ("zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    ("bz2", bz2.compress),
    ("xz", lzma.compress),
])
def test_compressed_streams_are_read_in_small_steps(codec, pack):
    data = _lines_file(400)
    blob = pack(data)
    opts = ParseOptions(read_bytes=512, batch_rows=32)
    rows = pa.Table.from_batches(list(explode_split(f"c.jsonl.{codec}", lambda: io.BytesIO(blob), len(blob), opts))).to_pylist()
    plain = pa.Table.from_batches(list(explode_split("c.jsonl", lambda: io.BytesIO(data), len(data), opts))).to_pylist()
    key = [(r["kind"], r["record"], r["reason"], r["text"]) for r in rows]
    assert key[:-1] == [(r["kind"], r["record"], r["reason"], r["text"]) for r in plain][:-1]


def test_truncated_zstd_keeps_what_precedes_the_damage():
    data = _lines_file(4000)  # several 128 KiB zstd blocks: the ones before the cut are whole
    blob = zstandard.ZstdCompressor().compress(data)
    rows = pa.Table.from_batches(list(explode_split("t.jsonl.zst", lambda: io.BytesIO(blob[:-50]), len(blob) - 50, ParseOptions()))).to_pylist()
    assert [r["reason"] for r in rows if r["kind"] == "quarantine" and r["record"] == 0] == ["unreadable_file"]
    assert sum(r["kind"] == "doc" for r in rows) > 2000


def _parquet(n: int, group: int) -> bytes:
    buf = io.BytesIO()
    texts = [None if i % 17 == 0 else (5 if i % 23 == 0 else f"row {i} " + "t" * (i % 50)) for i in range(n)]
    table = pa.table({"id": [f"p{i}" for i in range(n)], "text": pa.array([t if not isinstance(t, int) else None for t in texts])})
    pq.write_table(table, buf, row_group_size=group)
    return buf.getvalue()


def test_parquet_row_groups_are_owned_once():
    data = _parquet(500, 40)
    whole = _split_rows("p.parquet", data, ParseOptions(), [0, len(data)])
    cuts = [0, 300, 2000, len(data) // 2, len(data)]
    parts = _split_rows("p.parquet", data, ParseOptions(), cuts)
    key = lambda rows: sorted((r["kind"], r["record"], r["reason"], r["text"]) for r in rows if r["kind"] != "file")  # noqa: E731
    assert key(parts) == key(whole) and len(key(whole)) == 500


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("splits")
    (d / "big.jsonl").write_bytes(b"\xef\xbb\xbf" + _lines_file(600, 4) + b'{"id": "d1", "text": "same id twice"}\n')
    (d / "rows.parquet").write_bytes(_parquet(300, 25))
    (d / "blank.jsonl").write_bytes(b"\n" * 5000)
    return d


def test_one_split_and_many_give_identical_tables(spark, split_dir, make_cfg, tmp_path):
    inputs = f"ingest.inputs=['{split_dir}/*']"
    one = make_cfg(inputs, root=tmp_path / "one")
    many = make_cfg(inputs, "ingest.split_bytes=8192", "ingest.batch_rows=7", root=tmp_path / "many")
    assert len(ingest.ingest_splits.plan_splits(ingest.list_files(spark, many.ingest), many.ingest)) > 10
    r1, r2 = ingest.run(spark, one), ingest.run(spark, many)
    assert (r1.rows_in, r1.rows_out, r1.quarantined, r1.extra) == (r2.rows_in, r2.rows_out, r2.quarantined, r2.extra)
    for name in ("documents", "quarantine"):
        a = spark.read.format("delta").load(one.table_path(name))
        b = spark.read.format("delta").load(many.table_path(name))
        assertDataFrameEqual(b, a)
    q = spark.read.format("delta").load(one.table_path("quarantine"))
    assert q.where("input_file like '%blank.jsonl'").select("record", "reason").collect() == [(0, "empty_file")]
    assert r1.extra["skipped"]["blank_line"] >= 5000


def test_ids_held_twice_give_the_same_tables_broadcast_or_shuffled(spark, split_dir, make_cfg, tmp_path, monkeypatch):
    # Few duplicated ids are broadcast to the documents; over DUP_BROADCAST_MAX they are joined through
    # a shuffle: same doc ids either way, and the session's settings come back as they were.
    from pipelines.ingest import tally as ingest_tally

    inputs = f"ingest.inputs=['{split_dir}/*']"
    before = {k: spark.conf.get(k, None) for k in ingest._STAGE_CONF}
    few = make_cfg(inputs, "ingest.split_bytes=8192", root=tmp_path / "few")
    r1 = ingest.run(spark, few)
    monkeypatch.setattr(ingest_tally, "DUP_BROADCAST_MAX", 0)
    many = make_cfg(inputs, "ingest.split_bytes=8192", root=tmp_path / "many")
    r2 = ingest.run(spark, many)
    assert {k: spark.conf.get(k, None) for k in ingest._STAGE_CONF} == before
    a = spark.read.format("delta").load(few.table_path("documents"))
    b = spark.read.format("delta").load(many.table_path("documents"))
    assertDataFrameEqual(b, a)
    assert (r1.rows_out, r2.rows_out) == (a.count(), a.count())
    copies = a.where("text = 'same id twice' or doc_id like 'big/d1'").select("doc_id").collect()
    assert copies and all(r["doc_id"].startswith("big/~") for r in copies)


def _rows_by_file(spark, path):
    """The rows of a Delta table file by file (by part number), each in its order within the file."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(path).withColumn("_f", F.regexp_extract(F.input_file_name(), r"part-(\d+)", 1))
    out: dict = {}
    for r in df.collect():
        out.setdefault(r["_f"], []).append(tuple(v for k, v in r.asDict().items() if k != "_f"))
    return out


@pytest.mark.parametrize("split_bytes", [1 << 20, 4096])
def test_documents_already_in_order_are_written_unsorted_the_same(spark, make_cfg, tmp_path, monkeypatch, split_bytes):
    # Unique ids, nothing quarantined: the tally lets the writes skip the sort (when each partition holds
    # one split) and the read for the empty quarantine table; the files hold the same rows in the same order.
    from pipelines.ingest import tally as ingest_tally

    (tmp_path / "in").mkdir()
    lines = [json.dumps({"id": f"u{i}", "text": f"document {i} " + "w" * (i % 97)}) for i in range(400)]
    (tmp_path / "in" / "u.jsonl").write_text("\n".join(lines) + "\n")
    inputs = f"ingest.inputs=['{tmp_path}/in/*']", f"ingest.split_bytes={split_bytes}"
    fast = make_cfg(*inputs, root=tmp_path / "fast")
    r1 = ingest.run(spark, fast)
    monkeypatch.setattr(ingest_tally.Tally, "docs_in_order", property(lambda self: False))
    slow = make_cfg(*inputs, root=tmp_path / "slow")
    r2 = ingest.run(spark, slow)
    assert (r1.rows_out, r1.quarantined, r1.extra) == (r2.rows_out, r2.quarantined, r2.extra) == (400, {}, r1.extra)
    for name in ("documents", "quarantine"):
        assert _rows_by_file(spark, fast.table_path(name)) == _rows_by_file(spark, slow.table_path(name))


def test_a_split_whose_documents_go_back_says_so():
    from udfs.formats.collector import Collector

    c = Collector("f.jsonl", "f.jsonl", 0, "f", ParseOptions(format="jsonl"))
    c._check_order(pa.array([1, 2, 5], pa.int64()))
    c._check_order(pa.array([6], pa.int64()))
    assert not c.unordered
    assert "docs_unordered" not in dict(c.summary("jsonl", 10).column("meta")[0].as_py())
    c._check_order(pa.array([6, 7], pa.int64()))  # 6 again
    assert c.unordered
    assert dict(c.summary("jsonl", 10).column("meta")[0].as_py())["docs_unordered"] == "1"


def test_records_spooled_kept_as_rows_or_cached_give_the_same_tables(spark, split_dir, make_cfg, tmp_path, monkeypatch):
    # A local master whose inputs are all streamed spools the parsed records as Arrow files; other local
    # runs keep them as rows (a local checkpoint); a cluster caches them.
    def stored() -> dict[int, str]:  # RDDs holding blocks now (earlier tests of the session may leave some)
        return {i.id(): i.toString() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}

    before = stored()
    inputs = f"ingest.inputs=['{split_dir}/*']", "ingest.split_bytes=8192"
    folders: list = []
    spool_folder = ingest._spool_folder
    monkeypatch.setattr(ingest, "_spool_folder", lambda s, listing: folders.append(spool_folder(s, listing)) or folders[-1])
    spooled = make_cfg(*inputs, root=tmp_path / "spooled")
    r0 = ingest.run(spark, spooled)
    assert folders and folders[0] and not Path(folders[0].path).exists()  # spooled, and the files removed
    monkeypatch.setattr(ingest, "_spool_folder", lambda s, listing: None)
    rows = make_cfg(*inputs, root=tmp_path / "rows")
    r1 = ingest.run(spark, rows)
    monkeypatch.setattr(ingest, "_as_rows", lambda records: False)
    cached = make_cfg(*inputs, root=tmp_path / "cached")
    r2 = ingest.run(spark, cached)
    key = lambda r: (r.rows_in, r.rows_out, r.quarantined, r.extra)  # noqa: E731
    assert key(r0) == key(r1) == key(r2)
    for name in ("documents", "quarantine"):
        a = _rows_by_file(spark, spooled.table_path(name))
        assert a == _rows_by_file(spark, rows.table_path(name)) == _rows_by_file(spark, cached.table_path(name))
    left = [x for rdd, x in stored().items() if rdd not in before and "Delta Table State" not in x]
    assert not left, left  # ingest leaves no blocks behind


def test_spooled_records_of_a_partition_that_had_some_must_be_there(spark, tmp_path):
    # A partition the tally saw records in but whose spool file is missing fails the job: never fewer rows.
    from pipelines.ingest import splits as ingest_splits

    df = ingest_splits.read_spool(spark, str(tmp_path), 2, ingest.RECORD_DDL, {1})
    with pytest.raises(Exception, match="no spooled records of partition 1"):
        df.collect()
    assert ingest_splits.read_spool(spark, str(tmp_path), 2, ingest.RECORD_DDL, set()).count() == 0


def test_a_spool_folder_outlives_its_run_only_until_the_next_one(tmp_path):
    # A run killed hard leaves its memory-backed spool folder; the next spool removes it (nobody holds
    # its lock) and leaves alone the folder of a run still alive (this process holds that lock).
    import signal
    import subprocess
    import sys
    import textwrap

    from pipelines.ingest import spool as ingest_spool

    child = textwrap.dedent(f"""
        import sys, time
        from pipelines.ingest import spool
        s = spool.held_spool({str(tmp_path)!r})
        open(s.path + "/part-00000.arrow", "wb").write(b"x" * 1024)
        print(s.path, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    dead = proc.stdout.readline().strip()
    alive = ingest_spool.held_spool(str(tmp_path))
    assert Path(dead).exists()  # its owner still runs: not swept
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    making = tmp_path / f"{ingest_spool.SPOOL_PREFIX}being-made"  # no owner file yet: left alone
    making.mkdir()
    newer = ingest_spool.held_spool(str(tmp_path))
    assert not Path(dead).exists() and Path(alive.path).exists() and making.exists()
    for s in (alive, newer):
        s.remove()
        s.remove()  # idempotent
        assert not Path(s.path).exists()


def test_only_inputs_with_a_known_size_bound_are_spooled_to_memory(tmp_path):
    # A compressed stream may inflate a hundredfold, and so may a Parquet file (dictionary pages): only
    # plain text files, which hold at least their texts' bytes, may land in /dev/shm.
    assert ingest._spooled_bytes("file:/x/a.jsonl", 1000) == 1000 * ingest.SPOOL_EXPANSION
    for p in ("file:/x/a.jsonl.gz", "file:/x/a.jsonl.zst", "file:/x/a.parquet", "s3://b/a.parquet"):
        assert ingest._spooled_bytes(p, 1000) is None, p
    assert not ingest._spool_fits_memory([("file:/x/a.jsonl", "", 10), ("file:/x/b.jsonl.gz", "", 10)])


def test_the_sweep_counts_only_the_folders_it_removed(tmp_path):
    # A link named like a spool folder, to a folder whose owner file nobody holds, is neither followed
    # nor counted (a count that never falls would be reported by every later ingest).
    from pipelines.ingest import spool as ingest_spool

    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / ingest_spool.OWNER_FILE).write_text("")
    (tmp_path / f"{ingest_spool.SPOOL_PREFIX}link").symlink_to(target)
    assert ingest_spool.sweep_orphans(str(tmp_path)) == 0
    assert (target / ingest_spool.OWNER_FILE).exists()


def test_tiny_ingest_split_bytes_draws_one_warning_line_once_a_file_is_cut():
    listing = [("big.jsonl", "big.jsonl", 10_000), ("small.jsonl", "small.jsonl", 100), ("x.jsonl.gz", "x", 9_000)]
    tiny = load_config(overrides=["ingest.split_bytes=1024"]).ingest
    (line,) = small_splits_line(plan_splits(listing, tiny), tiny).splitlines()
    assert line.startswith("ingest: WARNING: ingest.split_bytes=1024 cut 1 file(s) into 10 splits")
    assert line.endswith("use at least 1048576 (1 MiB; default 67108864)")
    # no file cut, or a split size at the floor: no line
    assert small_splits_line(plan_splits(listing[1:], tiny), tiny) is None
    floor = load_config(overrides=[f"ingest.split_bytes={1 << 20}"]).ingest
    assert small_splits_line(plan_splits([("b.jsonl", "b.jsonl", 5 << 20)], floor), floor) is None


@pytest.mark.parametrize("partitions", [1, 3])
def test_documents_read_from_the_spool_equal_those_of_the_records(spark, make_cfg, tmp_path, monkeypatch, partitions):
    # Ids unique within each source, records spooled: the documents come from the spool files with their
    # line numbers fixed and ids computed in the worker (source ids, and the positional hash of records
    # without one, including a source field and a blank id); the same rows file by file as the records'
    # own join, filter and projection give. One partition holds several splits of two files in a row.
    from pipelines.ingest import splits as ingest_splits

    (tmp_path / "in").mkdir()
    rows = []
    for i in range(300):
        r = {"text": f"text {i} " + "z" * (i % 53)}
        if i % 3:
            r["id"] = f"a{i}" if i % 7 else ""
        if i % 11 == 0:
            r["source"] = "elsewhere"
        rows.append(json.dumps(r))
    rows[40] = '{"text": "cut'  # quarantined
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "in" / "b.jsonl").write_text("\n".join(json.dumps({"text": f"b {i}"}) for i in range(200)) + "\n")
    inputs = (f"ingest.inputs=['{tmp_path}/in/*']", "ingest.split_bytes=2048", "ingest.batch_rows=16",
              f"ingest.input_partitions={partitions}", "ingest.fields.source=source")
    used: list = []
    read_docs = ingest_splits.read_spool_documents
    monkeypatch.setattr(ingest_splits, "read_spool_documents", lambda *a: used.append(1) or read_docs(*a))
    spooled = make_cfg(*inputs, root=tmp_path / "spooled")
    r0 = ingest.run(spark, spooled)
    assert used and r0.quarantined == {"malformed_json": 1}
    monkeypatch.setattr(ingest, "_spool_folder", lambda s, listing: None)
    kept = make_cfg(*inputs, root=tmp_path / "kept")
    r1 = ingest.run(spark, kept)
    assert (r0.rows_in, r0.rows_out, r0.quarantined, r0.extra) == (r1.rows_in, r1.rows_out, r1.quarantined, r1.extra)
    for name in ("documents", "quarantine"):
        assert _rows_by_file(spark, spooled.table_path(name)) == _rows_by_file(spark, kept.table_path(name))
    a = spark.read.format("delta").load(spooled.table_path("documents"))
    assert a.schema == spark.read.format("delta").load(kept.table_path("documents")).schema
    assert a.where("doc_id like '%/~%'").count() > 200 and a.where("doc_id like 'elsewhere/%'").count() > 20


def test_split_document_ids_match_sparks_expressions(spark):
    # The worker's doc ids and record numbers against Spark's own (assign_doc_ids over number_lines) on
    # the edge cases: null or blank source ids, a null source, a null key path, a record past an offset,
    # a source id starting with "~".
    from pipelines.ingest import splits as ingest_splits
    from udfs.formats import RECORD_SCHEMA

    n = 6
    cols = {"kind": ["doc"] * n, "input_file": ["f"] * n, "key_path": ["k/f", None, "k/f", "k/é", "k/f", "k/f"],
            "split_start": [0, 0, 9, 9, 9, 0], "record": [1, 2, 3, 0, 5, 6],
            "source": ["s", "s", None, "s", "ü", None], "src_id": [None, "", "x", None, "~y", None]}
    batch = pa.RecordBatch.from_arrays(
        [pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type) for f in RECORD_SCHEMA],
        schema=RECORD_SCHEMA)
    offsets = {("f", 9): 100}
    got = ingest_splits.spooled_documents(batch, offsets, ["doc_id", "record"]).to_pylist()
    df = spark.createDataFrame(batch.to_pylist(), ingest.RECORD_DDL)
    summaries = [{"input_file": "f", "split_start": 0, "meta": {"lines": "100"}},
                 {"input_file": "f", "split_start": 9, "meta": {"lines": "10"}}]
    expected = ingest.assign_doc_ids(ingest_splits.number_lines(df, summaries, spark), unique=True)
    assert got == [r.asDict() for r in expected.select("doc_id", "record").collect()]
    assert ingest_splits.spooled_documents(batch.filter(pa.array([False] * n)), offsets, ["doc_id"]) is None


def test_several_splits_of_a_partition_count_as_in_order_only_one_after_another_and_rising():
    # A partition that parsed several splits needs no sort when it holds them one after another in file
    # order (later splits of a file hold higher record numbers); the tally's row positions tell.
    from pipelines.ingest.tally import Tally

    def tally(spans: dict) -> Tally:
        t = Tally(split_rows={(0, f, s): lohi for (f, s), lohi in spans.items()})
        t.doc_splits = {0: set(spans)}
        return t

    assert tally({("a", 0): (0, 9), ("a", 50): (10, 19), ("b", 0): (20, 29)}).docs_in_order
    assert not tally({("a", 50): (0, 9), ("a", 0): (10, 19)}).docs_in_order  # a later split first
    assert not tally({("b", 0): (0, 9), ("a", 0): (10, 19)}).docs_in_order  # a later file first
    assert not tally({("a", 0): (0, 15), ("a", 50): (10, 19)}).docs_in_order  # interleaved
    t = tally({("a", 0): (0, 9)})
    t.doc_splits[0].add(("a", 50))  # positions unknown
    assert not t.docs_in_order


def test_the_tally_of_partial_rows_equals_that_of_the_records(spark):
    # Spooled, the parse workers hand the tally their per-batch sums and the candidate ids instead of the
    # records: the same Tally as Spark's aggregation over the records themselves, in the same partitions
    # (row positions too), with ids held twice within and across partitions, blank and missing ids, a
    # null source, quarantined rows and split summaries with and without a key path.
    from pipelines.ingest import tally as ingest_tally
    from udfs.formats import RECORD_SCHEMA

    def batch(rows: list[dict]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array([r.get(f.name) for r in rows], f.type) for f in RECORD_SCHEMA], schema=RECORD_SCHEMA)

    def doc(f, start, rec, src, sid, n):
        return {"kind": "doc", "input_file": f, "key_path": "k/" + f, "split_start": start, "record": rec,
                "source": src, "src_id": sid, "n_chars": n, "n_bytes": 2 * n, "n_replaced": n % 2, "text": "t"}

    def summary(f, start, lines, key=True):
        return {"kind": "file", "input_file": f, "key_path": "k/" + f if key else None, "split_start": start,
                "record": lines, "meta": [("format", "jsonl"), ("bytes", "10"), ("lines", str(lines))]}

    bad = {"kind": "quarantine", "input_file": "a", "split_start": 0, "record": 3, "reason": "malformed_json",
           "source": "s"}
    parts = [
        [batch([doc("a", 0, 1, "s", "x", 5), doc("a", 0, 2, "s", "x", 7), bad, doc("a", 0, 4, None, "y", 1)]),
         batch([doc("a", 0, 5, "s", "", 3), doc("a", 0, 6, "t", None, 4), summary("a", 0, 6)])],
        [batch([doc("b", 0, 1, "s", "z", 9), doc("b", 0, 2, "s", "x", 2)]), batch([summary("b", 0, 2, False)]),
         batch([doc("a", 50, 1, "u", "z", 8), summary("a", 50, 1)])],
    ]

    def records(it):
        from pyspark import TaskContext

        for _ in it:
            yield from parts[TaskContext.get().partitionId()]

    def partials(it):
        from pyspark import TaskContext

        part, rows = TaskContext.get().partitionId(), 0
        for _ in it:
            for b in parts[part]:
                yield from ingest_tally.partial_rows(b, part, rows).to_batches()
                rows += b.num_rows

    frame = spark.range(0, 2, 1, 2)
    expected = ingest_tally.tally(frame.mapInArrow(records, ingest.RECORD_DDL))
    got = ingest_tally.tally_partials(frame.mapInArrow(partials, ingest_tally.PARTIAL_DDL))
    assert sorted(got.dup_ids) == sorted(expected.dup_ids) == ["s/x"]
    got.dup_ids = expected.dup_ids
    assert got == expected
    assert got.with_src_id == 6 and got.chars == 39 and got.by_source == {"s": 5, "": 1, "t": 1, "u": 1}
