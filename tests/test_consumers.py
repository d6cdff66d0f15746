"""The loaders users train with read a real run's shards: megatron-core and mosaicml-streaming.

The run is :func:`tests.chain.reference_run` (the chain on a sample_data/ subset, seq_len 64). The loaders
run in the consumers venv (``make test`` installs ``tests/consumers-lock.txt``, the pinned loaders of
``winnow[consumers]``, into ``.venv-consumers``: torch, megatron-core and mosaicml-streaming cannot share the
dev venv) through ``tests/consumers_probe.py``; without that venv the module skips, saying what is
missing.

What the loaders are built with (the README quotes it):

* Megatron: ``GPTDatasetConfig(random_seed=<run.seed>, sequence_length=<shard.seq_len>,
  blend=([<prefix>, ...], None), split="100,0,0", reset_position_ids=False, reset_attention_mask=False,
  eod_mask_loss=False, tokenizer=NullTokenizer(<eos_id>))`` through ``BlendedMegatronDatasetBuilder``.
* Streaming: ``StreamingDataset(local=<shards>/mds, shuffle=False, batch_size=1)`` and
  ``LocalDataset(local=<shards>/mds)``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.chain import REPO, reference_run  # noqa: F401  (the session fixture)

PROBE = Path(__file__).with_name("consumers_probe.py")
CONSUMERS_PYTHON = Path(os.environ.get("WINNOW_CONSUMERS_PYTHON", REPO / ".venv-consumers" / "bin" / "python"))
LOADERS = "import torch, megatron.core.datasets.gpt_dataset, streaming"


def _missing() -> str | None:
    if not CONSUMERS_PYTHON.exists():
        # tests/install_consumers.sh says why it built nothing (too little free disk for ~5 GB of CUDA wheels)
        why = CONSUMERS_PYTHON.parent.parent.with_suffix(".skipped")
        return f"no consumers venv at {CONSUMERS_PYTHON}" + (f": {why.read_text().strip()}" if why.is_file() else "")
    done = subprocess.run([str(CONSUMERS_PYTHON), "-c", LOADERS], capture_output=True, text=True)
    return None if done.returncode == 0 else f"{CONSUMERS_PYTHON} cannot {LOADERS!r}: {done.stderr.strip()[-300:]}"


MISSING = _missing()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the consumers extra is not installed ({MISSING}); `make test` installs it into .venv-consumers "
    "(or set WINNOW_CONSUMERS_PYTHON to a python that has winnow[consumers])",
)


def probe(spec: dict, tmp: Path, env: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Run tests/consumers_probe.py with the consumers' python; returns the arrays it saved."""
    spec_path, out = tmp / f"spec-{spec['kind']}.json", tmp / f"out-{spec['kind']}.npz"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run([str(CONSUMERS_PYTHON), str(PROBE), str(spec_path), str(out)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def _split_shards(root: Path, manifest: dict, rows: list, split: str) -> list[dict]:
    """The shards of shard set ``split`` (``train`` / ``validation``): per shard its path prefix and its
    documents' tokens in stream order, from the ``tokenized`` rows (train holds the keys >= the cut)."""
    from udfs.shuffle_quality import shuffle_key
    from udfs.tokenize import token_lists

    cut = manifest["split"]["cut"]

    def held_out(r) -> bool:
        return cut is not None and hashlib.sha256(f"{manifest['seed']}:validation:{r['doc_id']}".encode()).hexdigest() < cut

    mine = [r for r in rows if held_out(r) == (split == "validation")]
    by_key = sorted(mine, key=lambda r: (shuffle_key(manifest["seed"], r["doc_id"]), r["doc_id"]))
    # tokenized.tokens is read through its one reader (binary little-endian ids, or an older list<int>).
    docs = [np.asarray(d, dtype=np.int64) for d in token_lists(pa.array([r["tokens"] for r in by_key]))]
    shards, start = [], 0
    for f in sorted((f for f in manifest["files"] if f["kind"] == "bin" and f["path"].startswith(f"{split}/")),
                    key=lambda f: f["shard"]):
        shards.append({"prefix": str(root / f["path"][: -len(".bin")]), "docs": docs[start : start + f["documents"]]})
        start += f["documents"]
    assert start == len(docs) == manifest["splits"][split]["documents"]
    return shards


@pytest.fixture(scope="module")
def run(spark, reference_run):  # noqa: F811
    """The reference run's train shard set: manifest, and its documents' tokens in stream order, per shard;
    ``validation``: the same for the validation set."""
    from pipelines.core import tables
    from pipelines.core.config import load_config

    root = reference_run.root / "shards"
    manifest = json.loads((root / "manifest.json").read_text())
    cfg = load_config(overrides=[f"run.root={reference_run.root}"])
    rows = tables.read_table(spark, cfg, "tokenized").select("doc_id", "tokens").collect()
    shards = _split_shards(root, manifest, rows, "train")
    assert len(shards) == 2, "the reference run writes two train shards"
    return {"root": root, "manifest": manifest, "shards": shards,
            "validation": _split_shards(root, manifest, rows, "validation")}


@pytest.fixture(scope="module")
def megatron_read(run, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("megatron")
    m = run["manifest"]
    return probe({"kind": "megatron", "prefixes": [s["prefix"] for s in run["shards"]], "seed": m["seed"],
                  "seq_len": m["seq_len"], "eos_id": m["tokenizer"]["eos_id"], "cache": str(tmp / "cache"),
                  "blend_samples": 20}, tmp)


def test_indexed_dataset_opens_every_shard_with_the_manifests_counts_and_tokens(run, megatron_read):
    got, m = megatron_read, run["manifest"]
    for i, shard in enumerate(run["shards"]):
        assert got[f"idx{i}_lengths"].tolist() == [len(d) for d in shard["docs"]]
        assert got[f"idx{i}_doc_indices"].tolist() == list(range(len(shard["docs"]) + 1))
        assert str(got[f"idx{i}_dtype"]) == m["dtype"]
        assert got[f"idx{i}_tokens"].astype(np.int64).tolist() == np.concatenate(shard["docs"]).tolist()


def test_gpt_dataset_samples_are_the_shuffled_documents_packed_with_eos_between(run, megatron_read):
    got, m = megatron_read, run["manifest"]
    docs, seq_len, eos = run["shards"][0]["docs"], m["seq_len"], m["tokenizer"]["eos_id"]
    doc_index, sample_index, shuffle_index = (got[f"gpt_dp1_{n}"] for n in ("document_index", "sample_index", "shuffle_index"))
    assert sorted(doc_index.tolist()) == list(range(len(docs)))  # one epoch: every document once
    # Megatron packs the documents in its own shuffled order into windows of seq_len + 1 tokens.
    stream = np.concatenate([docs[i] for i in doc_index])
    assert int(got["gpt_len"]) == (len(stream) - 1) // seq_len
    assert int((stream == eos).sum()) == len(docs)  # exactly one EOS closes every document
    starts = np.concatenate([[0], np.cumsum([len(docs[i]) for i in doc_index])])
    for row, i in enumerate(got["gpt_picked"].tolist()):
        doc_pos, offset = sample_index[shuffle_index[i]]
        text = stream[starts[doc_pos] + offset :][: seq_len + 1]
        assert got["gpt_tokens"][row].tolist() == text[:-1].tolist()
        assert got["gpt_labels"][row].tolist() == text[1:].tolist()


def test_blended_dataset_over_two_shards_draws_from_both(run, megatron_read):
    got = megatron_read
    assert str(got["blend_type"]) == "BlendedDataset" and got["blend_tokens"].shape == (20, run["manifest"]["seq_len"])
    assert sorted(set(got["blend_dataset_index"].tolist())) == [0, 1]
    vocab = [set(np.concatenate(s["docs"]).tolist()) for s in run["shards"]]
    for tokens, source in zip(got["blend_tokens"], got["blend_dataset_index"], strict=True):
        assert set(tokens.tolist()) <= vocab[source]


def test_megatron_sample_index_does_not_depend_on_the_data_parallel_size(megatron_read):
    for name in ("document_index", "sample_index", "shuffle_index"):
        assert np.array_equal(megatron_read[f"gpt_dp1_{name}"], megatron_read[f"gpt_dp4_{name}"])


def test_streaming_reads_every_mds_sample_and_they_are_the_megatron_tokens_packed_per_shard(run, tmp_path):
    m = run["manifest"]
    seq_len = m["seq_len"]
    expected = []
    for shard in run["shards"]:  # MDS packs each shard's documents in stream order; the tail is dropped
        flat = np.concatenate(shard["docs"])
        n = len(flat) // seq_len
        expected.append(flat[: n * seq_len].reshape(n, seq_len))
    expected = np.concatenate(expected)
    got = probe({"kind": "streaming", "mds": str(run["root"] / "train" / "mds")}, tmp_path)
    assert got["local"].shape == (m["splits"]["train"]["mds_samples"], seq_len) == expected.shape
    assert str(got["local"].dtype) == m["dtype"]
    assert np.array_equal(got["local"].astype(np.int64), expected)
    assert np.array_equal(got["streamed"], got["local"])


def test_validation_set_is_read_by_both_loaders_with_the_manifests_counts_and_tokens(run, tmp_path):
    # The held-out set is what a trainer's eval loader opens (--valid-data-path, eval_loader): every
    # .bin/.idx pair and the MDS folder of validation/ must open and hold the held-out documents.
    m, shards = run["manifest"], run["validation"]
    assert shards, "the reference run holds out documents (shard.split.validation)"
    got = probe({"kind": "indexed", "prefixes": [s["prefix"] for s in shards]}, tmp_path)
    for i, shard in enumerate(shards):
        assert got[f"idx{i}_lengths"].tolist() == [len(d) for d in shard["docs"]]
        assert str(got[f"idx{i}_dtype"]) == m["dtype"]
        assert got[f"idx{i}_tokens"].astype(np.int64).tolist() == np.concatenate(shard["docs"]).tolist()
    seq_len, expected = m["seq_len"], []
    for shard in shards:
        flat = np.concatenate(shard["docs"])
        expected.append(flat[: len(flat) // seq_len * seq_len].reshape(-1, seq_len))
    mds = probe({"kind": "streaming", "mds": str(run["root"] / "validation" / "mds")}, tmp_path)
    assert mds["local"].shape[0] == m["splits"]["validation"]["mds_samples"]
    assert np.array_equal(mds["local"].astype(np.int64), np.concatenate(expected))
    assert np.array_equal(mds["streamed"], mds["local"])


@pytest.fixture(scope="module")
def mixed_run(spark, reference_run, tmp_path_factory):  # noqa: F811
    """The reference run's ``tokenized`` sharded again with an equal-weight ``shard.mix`` over its sources
    and ``shard.per_source_sets`` (a copy of the table under its own root: the reference run is shared)."""
    import shutil

    from pipelines.core.config import load_config
    from pipelines.core.runner import run_stage
    from tests.chain import SEQ_LEN

    base = tmp_path_factory.mktemp("mixed")
    shutil.copytree(reference_run.root / "tables" / "tokenized", base / "tables" / "tokenized")
    ref = json.loads((reference_run.root / "shards" / "manifest.json").read_text())
    sources = sorted(ref["splits"]["train"]["tokens_by_source"])
    assert len(sources) >= 2, f"the reference run's train set has one source only: {sources}"
    mix = {s: {"weight": 1 / len(sources)} for s in sources}
    cfg = load_config(overrides=[f"run.root={base}", f"shard.output={base / 'shards'}", f"shard.seq_len={SEQ_LEN}",
                                 "shard.num_shards=1", "shard.per_source_sets=true", f"shard.mix={json.dumps(mix)}",
                                 "spark.shuffle_partitions=2"])
    run_stage(spark, cfg, "shard")
    return {"root": base / "shards", "sources": sources,
            "manifest": json.loads((base / "shards" / "manifest.json").read_text())}


def test_blend_at_load_time_over_two_sources_with_the_mix_json(mixed_run, tmp_path):
    # A BlendedDataset over the sources (not two shards of one set), from blend/mix.json as the
    # README tells a user who blends at load time; and streaming's streams from the same file.
    root, m = mixed_run["root"], mixed_run["manifest"]
    got = probe({"kind": "blend", "mix_json": str(root / "blend" / "mix.json"), "seed": m["seed"], "seq_len": m["seq_len"],
                 "eos_id": m["tokenizer"]["eos_id"], "cache": str(tmp_path / "cache"), "blend_samples": 60}, tmp_path)
    assert str(got["blend_type"]) == "BlendedDataset" and got["tokens"].shape == (60, m["seq_len"])
    prefixes = json.loads((root / "blend" / "mix.json").read_text())["megatron_data_path"][1::2]
    source_of = [next(s for s in mixed_run["sources"] if p.startswith(f"sources/{s}/")) for p in prefixes]
    drawn = [source_of[i] for i in got["dataset_index"].tolist()]
    for s in mixed_run["sources"]:  # equal weights: each source drawn about 1/n of the time
        assert abs(drawn.count(s) / len(drawn) - 1 / len(mixed_run["sources"])) < 0.1, (s, drawn.count(s))
    # every sample holds tokens of the source it was drawn from
    vocab = {}
    for f in m["files"]:
        if f["kind"] == "bin" and f["path"].startswith("sources/"):
            src = next(s for s in mixed_run["sources"] if f["path"].startswith(m["sources"][s]["path"] + "/"))
            ids = np.frombuffer((root / f["path"]).read_bytes(), dtype=m["dtype"])  # a .bin: ids back to back
            vocab.setdefault(src, set()).update(ids.tolist())
    for tokens, s in zip(got["tokens"], drawn, strict=True):
        assert set(tokens.tolist()) <= vocab[s]
    assert got["streamed"].shape == (60, m["seq_len"])


RESUME_BATCH = 2
"""Per-rank batch size of the resume test."""


def recommended_reader(manifest: dict) -> dict:
    """The streaming settings the manifest recommends (``readers.streaming``), as the resume test uses them."""
    return dict(manifest["readers"]["streaming"], batch_size=RESUME_BATCH)


def read_ranks(mds: Path, tmp: Path, world: int, reader: dict, state: dict | None, batches: int | None):
    """The ranks of a ``world``-GPU job on one node read at once, each in its own process (streaming joins
    them in a gloo group through ``MASTER_ADDR``/``MASTER_PORT`` on 127.0.0.1); returns what each rank saw
    and rank 0's state after it."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        spec = tmp / f"w{world}-r{rank}.json"
        spec.write_text(json.dumps({"kind": "resume", "mds": str(mds), "reader": reader, "state": state,
                                    "batches": batches, "world_size": world, "sync": str(tmp)}))
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([str(CONSUMERS_PYTHON), str(PROBE), str(spec), str(spec.with_suffix(".npz"))],
                                      env=env, stderr=subprocess.PIPE, text=True))
    seen, states = [], []
    for rank, p in enumerate(procs):
        err = p.communicate(timeout=600)[1]
        assert p.returncode == 0, err[-3000:]
        with np.load(tmp / f"w{world}-r{rank}.npz") as z:
            seen.append(z["seen"].astype(np.int64))
            states.append(json.loads(str(z["state"])))
    return seen, states[0]


def interleave(seen: list[np.ndarray]) -> np.ndarray:
    """The global order of the ranks' samples: streaming deals them out one sample per rank in turn."""
    return np.stack([x for step in zip(*seen, strict=False) for x in step])


def test_streaming_resumes_on_2_then_4_gpus_in_the_order_of_one_uninterrupted_gpu(run, tmp_path):
    mds = run["root"] / "train" / "mds"
    reader = recommended_reader(run["manifest"])
    for name in ("ref", "head", "two", "four"):
        (tmp_path / name).mkdir()
    (full,), _ = read_ranks(mds, tmp_path / "ref", 1, reader, None, None)
    assert len(full) >= 16, "enough samples to stop twice"
    k1 = 3 * RESUME_BATCH
    (head,), state1 = read_ranks(mds, tmp_path / "head", 1, reader, None, 3)
    assert np.array_equal(head, full[:k1]) and state1["sample_in_epoch"] == k1
    two, state2 = read_ranks(mds, tmp_path / "two", 2, reader, state1, 2)
    k2 = k1 + 2 * 2 * RESUME_BATCH
    assert np.array_equal(interleave(two), full[k1:k2]) and state2["sample_in_epoch"] == k2
    four, _ = read_ranks(mds, tmp_path / "four", 4, reader, state2, None)
    rest = interleave(four)
    # The four ranks read the rest in the single GPU's order; streaming pads the last step with samples
    # already seen so that every rank reads as many.
    assert np.array_equal(rest[: len(full) - k2], full[k2:])
    assert len(rest) - (len(full) - k2) < 4 and {tuple(x) for x in rest[len(full) - k2 :]} <= {tuple(x) for x in full}
