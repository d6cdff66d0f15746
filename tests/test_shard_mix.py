"""The data mix of the shard stage: config checks, seeded selection, repeat passes and distance, determinism."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pipelines.core import tables
from pipelines.core.config import ConfigError, load_config
from pipelines.core.runner import run_stage
from pipelines.shard import mix as shard_mix
from pipelines.shard import sources as shard_sources
from pipelines.shard.config import MixSourceConfig
from pipelines.tools.verify import verify
from tests.test_shard import TOK_SCHEMA, gpt2_props, tokenized_rows
from udfs import megatron
from udfs import shuffle_quality as sq
from udfs.errors import UserError

N = 400


def frac(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:13], 16) / 2**52


def pick(doc_id: str, seed: int = 42) -> int:
    return int(hashlib.sha256(f"{seed}:mixpick:{doc_id}".encode()).hexdigest()[:13], 16)


def plans_for(spark, rows, entries, seed=42):
    df = spark.createDataFrame(rows, TOK_SCHEMA)
    return shard_mix.pick_cuts(df, seed, shard_mix.plan_mix(shard_mix.source_counts(df), entries))


def assert_shortest_prefix(rows, source, chosen, fraction):
    """``chosen`` is the shortest prefix of ``source``'s documents in pick order reaching ``fraction`` of its tokens."""
    docs = sorted((pick(d), d, n) for d, s, _, n in rows if s == source)
    want = fraction * sum(n for _, _, n in docs)
    k = len(chosen)
    assert sorted(chosen) == sorted(d for _, d, _ in docs[:k])
    assert sum(n for _, _, n in docs[:k]) >= want > sum(n for _, _, n in docs[: k - 1])  # just inside, just outside


def mix(**entries: dict) -> dict[str, MixSourceConfig]:
    return {s: MixSourceConfig(**e) for s, e in entries.items()}


def copies_of(spark, rows, plans, seed=42, partitions=3):
    df = spark.createDataFrame(rows, TOK_SCHEMA).repartition(partitions)
    out = shard_mix.apply_mix(df, seed, plans)
    return out, sorted((r["_key"], r["doc_id"], r["source"], r["_pass"]) for r in out.collect())


@pytest.mark.parametrize(("override", "fragment"), [
    ("shard.mix={a: {weight: 0.5, epochs: 2}}", "exactly one of weight, target_tokens, epochs; got ['weight', 'epochs']"),
    ("shard.mix={a: {min_repeat_distance: 5}}", "exactly one of weight, target_tokens, epochs; got none"),
    ("shard.mix={a: {weight: 0.6}, b: {weight: 0.3}}", "sum to 0.9; when every source has a weight they must sum to 1"),
    ("shard.mix={a: {weight: 0.6}, b: {weight: 0.4}, c: {epochs: 1}}", "beside sources with epochs / target_tokens"),
    ("shard.mix={a: {epochs: 0}}", "shard.mix.a.epochs"),
    ("shard.mix={a: {weight: 1.01}}", "shard.mix.a.weight"),
    ("shard.mix={a: {target_tokens: 10, colour: red}}", "shard.mix.a.colour"),
])
def test_bad_mix_config_fails_at_load_naming_the_key(override, fragment):
    with pytest.raises(ConfigError, match="shard.mix") as e:
        load_config(overrides=[override])
    assert fragment in str(e.value)


def test_weights_summing_to_one_within_1e6_load():
    cfg = load_config(overrides=["shard.mix={a: {weight: 0.7}, b: {weight: 0.3000005}}"])
    assert cfg.shard.mix["b"].weight == 0.3000005
    assert load_config().shard.mix == {}


def test_unknown_missing_or_empty_sources_name_the_key():
    counts = {"a": (10, 100), "b": (5, 50)}
    with pytest.raises(UserError, match=r"shard.mix.c: no document of source 'c'.*\['a', 'b'\]"):
        shard_mix.plan_mix(counts, mix(a={"epochs": 1}, b={"epochs": 1}, c={"epochs": 1}))
    with pytest.raises(UserError, match=r"shard.mix.b: source 'b' has 5 documents but no mix entry"):
        shard_mix.plan_mix(counts, mix(a={"epochs": 1}))


def test_epochs_from_weights_and_fixed_amounts():
    counts = {"a": (10, 1000), "b": (10, 100)}
    only_weights = shard_mix.plan_mix(counts, mix(a={"weight": 0.5}, b={"weight": 0.5}))
    # The output is the largest without repeats: b (100 tokens) sets it, a is downsampled to 100.
    assert (only_weights["a"].epochs, only_weights["b"].epochs) == (0.1, 1.0)
    mixed = shard_mix.plan_mix(counts, mix(a={"weight": 0.8}, b={"epochs": 2.5}))
    # b fixed at 250 tokens = 20 %: the total is 1250 and a gets 1000 (one pass).
    assert (mixed["a"].epochs, mixed["b"].epochs, mixed["b"].asked_share) == (1.0, 2.5, pytest.approx(0.2))
    target = shard_mix.plan_mix(counts, mix(a={"target_tokens": 3000}, b={"epochs": 1}))
    assert target["a"].epochs == 3.0


def test_epochs_2_5_gives_every_document_twice_and_a_seeded_half_three_times(spark):
    rows = tokenized_rows(N, seed=3)
    plans = plans_for(spark, rows, mix(a={"epochs": 2.5, "min_repeat_distance": 50}, b={"epochs": 1}))
    _, got = copies_of(spark, rows, plans)
    counts: dict[str, int] = {}
    for _, d, _, _ in got:
        counts[d] = counts.get(d, 0) + 1
    assert {counts[d] for d, s, _, _ in rows if s == "b"} == {1}
    assert {counts[d] for d, s, _, _ in rows if s == "a"} == {2, 3}
    assert_shortest_prefix(rows, "a", [d for d, s, _, _ in rows if s == "a" and counts[d] == 3], 0.5)
    for d, s, _, _ in rows:  # the Python twin jobs/inspect.py uses
        assert counts[d] == shard_mix.copies(42, d, plans[s].full_passes, plans[s].pick_cut)


def test_passes_are_ordered_and_copies_keep_the_guaranteed_distance(spark):
    rows = tokenized_rows(N, seed=4)
    plans = plans_for(spark, rows, mix(a={"epochs": 3.4, "min_repeat_distance": 20}, b={"epochs": 1}))
    copies, got = copies_of(spark, rows, plans)
    section = shard_mix.mix_section(plans, shard_mix.mix_counts(copies))
    bound = section["a"]["repeat_distance_bound"]
    a_stream = [(d, p) for _, d, s, p in got if s == "a"]
    first_of_pass = {p: a_stream.index(next(x for x in a_stream if x[1] == p)) for p in range(4)}
    last_of_pass = {p: max(i for i, x in enumerate(a_stream) if x[1] == p) for p in range(4)}
    assert all(last_of_pass[p] < first_of_pass[p + 1] for p in range(3))  # a pass ends before the next starts
    where: dict[str, list[int]] = {}
    for i, (_, d, _, _) in enumerate(got):
        where.setdefault(d, []).append(i)
    gaps = [b - a for pos in where.values() for a, b in zip(pos, pos[1:], strict=False)]
    assert 20 <= bound <= min(gaps)
    # Just outside: asking one more than the bound fails, naming the key.
    too_far = plans_for(spark, rows, mix(a={"epochs": 3.4, "min_repeat_distance": bound + 1}, b={"epochs": 1}))
    with pytest.raises(UserError, match=rf"shard.mix.a.min_repeat_distance={bound + 1}:.*allowed: 1..{bound}"):
        shard_mix.mix_section(too_far, shard_mix.mix_counts(copies))


def test_downsampling_selects_by_seeded_hash_whatever_the_partitioning(spark):
    rows = tokenized_rows(N, seed=6)
    plans = plans_for(spark, rows, mix(a={"epochs": 0.3}, b={"epochs": 1}))
    _, one = copies_of(spark, rows, plans, partitions=1)
    _, four = copies_of(spark, rows, plans, partitions=4)
    assert one == four
    assert_shortest_prefix(rows, "a", [d for _, d, s, _ in one if s == "a"], 0.3)


@pytest.fixture(scope="module")
def mix_runs(spark, tmp_path_factory):
    """A 70/30 weighted mix with a validation split, sharded with 1 and again with 4 partitions; the second
    run also writes the per-source sets (``shard.per_source_sets``), which must change nothing else."""
    base = tmp_path_factory.mktemp("mix")
    rows = tokenized_rows(2000, seed=8)
    outs = []
    for partitions in (1, 4):
        cfg = load_config(overrides=[
            f"run.root={base}", f"spark.shuffle_partitions={partitions}", "shard.num_shards=3", "shard.seq_len=16",
            f"shard.output={base / f'out{partitions}'}", "shard.split.validation=0.05",
            "shard.mix={a: {weight: 0.3}, b: {weight: 0.7}}", f"shard.per_source_sets={partitions == 4}"])
        if partitions == 1:
            tables.write_table(spark.createDataFrame(rows, TOK_SCHEMA), cfg, "tokenized", properties=gpt2_props())
        report = run_stage(spark, cfg, "shard")
        out = base / f"out{partitions}"
        outs.append((report, {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}))
    return outs


def test_mixed_run_is_byte_identical_for_1_and_4_partitions_and_records_the_mix(mix_runs):
    (r1, one), (_, four) = mix_runs
    m1 = json.loads(one.pop(next(p for p in one if p.name == "manifest.json")))
    four.pop(next(p for p in four if p.name == "manifest.json"))
    blends = [p for p in one if p.parts[0] == "blend"]
    # The per-source sets of the second run add sources/ and leave every other byte as it was.
    assert {p for p in one if p.parts[0] == "sources"} == set()
    assert {p: one[p] for p in one if p not in blends} == {
        p: four[p] for p in four if p not in blends and p.parts[0] != "sources"}
    assert one[Path("blend/megatron.json")].replace(b"/out1/", b"/out4/") == four[Path("blend/megatron.json")]
    assert "sources" not in m1
    a, b = m1["mix"]["a"], m1["mix"]["b"]
    assert (a["share_asked"], b["share_asked"]) == (pytest.approx(0.3), pytest.approx(0.7))
    # The partial pass is a token-exact prefix: shares are met within one document's tokens (<= 13 here).
    assert abs(a["share_realised"] - 0.3) < 13 / b["tokens_out"] and abs(b["share_realised"] - 0.7) < 13 / b["tokens_out"]
    assert a["documents_repeated"] == b["documents_repeated"] == 0
    assert m1["splits"]["train"]["documents"] == a["documents_out"] + b["documents_out"]
    # Validation is chosen before the mix: it is untouched by it.
    assert m1["split"]["validation_documents"] == m1["splits"]["validation"]["documents"] == 100
    assert a["documents_in"] + b["documents_in"] == 1900
    assert r1.extra["mix"] == m1["mix"]
    # in/out count the documents written; the stage line also says what the mix read and left out.
    written = m1["totals"]["documents"]
    left_out = 1900 - a["documents_selected"] - b["documents_selected"]
    assert (r1.rows_in, r1.rows_out) == (written, written) and left_out > 0
    assert f"in={written} out={written} train_read=1900 not_selected={left_out} " in r1.summary_line()
    blend = json.loads(one[next(p for p in blends if p.name == "mix.json")])
    assert blend["megatron_data_path"] == ["0.3", "<a>", "0.7", "<b>"]
    assert blend["streams"]["a"] == {"proportion": pytest.approx(0.3), "repeat": a["epochs_asked"]}
    assert {f["path"] for f in m1["files"] if f["kind"] == "blend"} == {
        "blend/megatron.json", "blend/streams.json", "blend/mix.json"}


def documents_of(folder: Path) -> list[tuple[int, ...]]:
    """The documents of a Megatron shard set, in shard then stream order, as token tuples."""
    docs = []
    for idx in sorted((folder / "megatron").glob("*.idx")):
        index = megatron.decode_index(idx.read_bytes())
        docs += [tuple(d.tolist()) for d in megatron.split_bin(index, idx.with_suffix(".bin").read_bytes())]
    return docs


def test_per_source_sets_hold_each_train_document_of_their_source_once_in_key_order(mix_runs):
    (_, _), (r4, four) = mix_runs
    out = Path(r4.outputs["shards"])
    m4 = json.loads((out / "manifest.json").read_text())
    held = set(documents_of(out / "validation"))
    rows = tokenized_rows(2000, seed=8)
    assert set(m4["sources"]) == {"a", "b"}
    for source in ("a", "b"):
        entry = m4["sources"][source]
        assert entry["path"] == f"sources/{source}"
        want = sorted(((sq.shuffle_key(42, d), tuple(t)) for d, s, t, _ in rows if s == source and tuple(t) not in held))
        assert documents_of(out / entry["path"]) == [t for _, t in want]  # every train document once, key order
        assert (entry["documents"], entry["tokens"]) == (len(want), sum(len(t) for _, t in want))
        assert entry["documents"] == m4["mix"][source]["documents_in"] and entry["shards"] == 3
        assert entry["balance"]["max_abs_deviation"] <= entry["balance"]["longest_document_tokens"]
    listed = {f["path"] for f in m4["files"] if f["path"].startswith("sources/")}
    on_disk = {str(p) for p in four if p.parts[0] == "sources"}
    assert listed == on_disk and "sources/a/mds/index.json" in listed and "sources/b/megatron/winnow_00002.idx" in listed
    res = verify(str(out))
    assert res.ok, res.problems
    assert (res.documents, res.tokens) == (m4["totals"]["documents"], m4["totals"]["tokens"])
    shutil.copy(out / "sources/a/megatron/winnow_00001.bin", out / "sources/b/megatron/winnow_00001.bin")
    assert any(p.startswith("sources/b/megatron/winnow_00001.bin") for p in verify(str(out)).problems)
    (out / "sources/b/megatron/winnow_00001.bin").write_bytes(four[Path("sources/b/megatron/winnow_00001.bin")])


def test_mix_json_names_the_source_sets_with_weights_summing_to_the_asked_shares(mix_runs):
    (_, _), (r4, four) = mix_runs
    out = Path(r4.outputs["shards"])
    m4 = json.loads((out / "manifest.json").read_text())
    blend = json.loads(four[Path("blend/mix.json")])
    path = blend["megatron_data_path"]
    weights, prefixes = [float(w) for w in path[0::2]], path[1::2]
    # Relative to the shard root (the manifest's folder): the folder can be moved or copied.
    assert prefixes == [f"sources/{s}/megatron/winnow_{k:05d}" for s in ("a", "b") for k in range(3)]
    assert all((out / f"{p}.bin").is_file() and (out / f"{p}.idx").is_file() for p in prefixes)
    for s, share in (("a", 0.3), ("b", 0.7)):
        assert sum(w for w, p in zip(weights, prefixes, strict=True) if p.startswith(f"sources/{s}/")) == pytest.approx(share)
        tokens = {f["path"]: f["tokens"] for f in m4["files"] if f["kind"] == "bin"}
        mine = [(w, tokens[p + ".bin"]) for w, p in zip(weights, prefixes, strict=True) if p.startswith(f"sources/{s}/")]
        assert [w for w, _ in mine] == pytest.approx([share * t / sum(t for _, t in mine) for _, t in mine])
        assert blend["streams"][s] == {"local": f"sources/{s}/mds", "proportion": pytest.approx(share)}
        assert blend["streams_repeat"][s] == {"local": f"sources/{s}/mds", "repeat": m4["mix"][s]["epochs_asked"]}
        assert (out / f"sources/{s}/mds/index.json").is_file()
    assert blend["sources"] == {"a": "sources/a", "b": "sources/b"}


def test_mix_json_names_a_source_whose_set_has_no_mds_sample():
    # make run's tokenized with 2 web_evals train documents (677 tokens in 2 shards, seq_len 512) had no MDS
    # sample: mix.json's streams held the other sources only, 0.92 of the asked mix, and said nothing.
    from pipelines.shard.blend import mix_file

    mix = {s: {"share_asked": w, "epochs_asked": 1.0, "share_realised": w, "epochs_realised": 1.0}
           for s, w in (("big", 0.9), ("tiny", 0.1))}
    sources = {"big": {"path": "sources/big"}, "tiny": {"path": "sources/tiny"}}
    files = [{"path": "sources/big/megatron/winnow_00000.bin", "kind": "bin", "tokens": 900},
             {"path": "sources/big/mds/shard.00000.mds", "kind": "mds", "tokens": 896},
             {"path": "sources/tiny/megatron/winnow_00000.bin", "kind": "bin", "tokens": 100}]
    blend = json.loads(mix_file(mix, sources, files, root="/r"))
    assert list(blend["streams"]) == ["big"] and blend["megatron_data_path"][1::2] == [
        "/r/sources/big/megatron/winnow_00000", "/r/sources/tiny/megatron/winnow_00000"]
    assert list(blend["streams_missing"]) == ["tiny"] and "share 0.1" in blend["streams_missing"]["tiny"]
    files.append({"path": "sources/tiny/mds/shard.00000.mds", "kind": "mds", "tokens": 64})
    assert "streams_missing" not in json.loads(mix_file(mix, sources, files, root="/r"))


def test_source_folders_map_unsafe_names_deterministically_and_refuse_collisions():
    got = shard_sources.source_folders(["web", "a/b", "..", "", "wiki pédia", ".hidden"])
    digest = {s: hashlib.sha256(s.encode()).hexdigest()[:8] for s in got}
    assert got == {"": f"_-{digest['']}", "..": f"_-{digest['..']}", ".hidden": f"hidden-{digest['.hidden']}",
                   "a/b": f"a_b-{digest['a/b']}", "web": "web", "wiki pédia": f"wiki_p_dia-{digest['wiki pédia']}"}
    with pytest.raises(ValueError, match=r"shard.per_source_sets: sources 'a/b' and 'a_b-.{8}' both map"):
        shard_sources.source_folders(["a/b", f"a_b-{digest['a/b']}"])


def test_report_and_inspect_show_the_mix(tmp_path):
    from pipelines.report.stage import _shard_part
    from pipelines.tools.inspect import _shard_place

    docs = [f"a{i}" for i in range(200)]
    picks = {d: frac(f"42:mixpick:{d}") for d in docs}
    kept = min((d for d in docs if picks[d] >= 0.5), key=lambda d: picks[d])  # just outside: 2 copies
    third = max((d for d in docs if picks[d] < 0.5), key=lambda d: picks[d])  # just inside: 3 copies
    block = {"a": {"epochs_asked": 2.5, "share_asked": 0.8, "share_realised": 0.79, "documents_repeated": 100,
                   "full_passes": 2, "pick_cut": 2**51},
             "b": {"epochs_asked": 0.5, "share_asked": 0.2, "share_realised": 0.21, "full_passes": 0, "pick_cut": 2**51}}
    manifest = {"seed": 42, "split": {"cut": None}, "mix": block, "files": []}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    cfg = load_config(overrides=[f"run.root={tmp_path}", f"shard.output={tmp_path}"])
    assert [_shard_place(cfg, d, "a")["status"] for d in (kept, third)] == ["repeated", "repeated"]
    assert "3 copies" in _shard_place(cfg, third, "a")["detail"] and "2 copies" in _shard_place(cfg, kept, "a")["detail"]
    dropped = next(d for d in docs if picks[d] >= 0.5)
    assert _shard_place(cfg, dropped, "b")["status"] == "not selected"
    assert _shard_place(cfg, next(d for d in docs if picks[d] < 0.5), "b")["status"] == "train"
    rows = _shard_part(manifest)["mix"]
    assert [(r["source"], r["share_asked"], r["share_realised"], r["epochs_asked"]) for r in rows] == [
        ("a", 0.8, 0.79, 2.5), ("b", 0.2, 0.21, 0.5)]
    assert "mix" not in _shard_part({"files": []})
