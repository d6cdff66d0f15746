"""Calibration and speed of ``winnow gate`` on real text run through Winnow (``make bench`` part ``gate``).

``python -m bench.gate [--cases same,dup,spam,raw,passages,wavy,wavy_mixed,speed] [--work DIR]``. The
English samples of the shared data (``WINNOW_SHARED_DATA``, default ``../shared/data``; :data:`SOURCES`:
the Dolma Common Crawl sample and WARC files, the DCLM human-labelled pages, two cc_net files, the
Wikipedia wikitext pages, the PMC and unarXive papers) go through the default chain of ``conf/local.yaml``
(``base``, with ``shard.per_source_sets``), and, for the cases that need them, through the same chain
without its passages stage (``nopass``) and as raw input (ingest -> tokenize -> shard, ``raw``). Planted
variants are written from ``base``'s own train documents as Megatron shards (the format the shard
stage writes; :mod:`udfs.megatron`), so the size of each defect is known exactly:

1. ``same``: the same documents in another shuffle, against the baseline, ``BENCH_GATE_SETS`` copies
   (false alarms: a verdict other than no difference);
2. ``dup``: near-duplicate copies (a document with 5 % of its tokens dropped) put back until they are
   10 / 30 / 50 % of the tokens;
3. ``spam``: the pages the filter stage removed for quality (its ``removed`` table), tokenized with the
   run's tokenizer, put back at 10 / 30 / 50 % of the tokens;
4. ``raw``: the default chain against its raw input; ``passages``: against the same chain with the
   passages stage off;
5. ``wavy``: the train documents written source by source (blocks) against the same documents shuffled;
   ``wavy_mixed``: the train documents and the pages the filter removed, half the tokens each, in
   alternating blocks of ``BENCH_GATE_BLOCK_TOKENS`` (default 16,384), in that order and shuffled.

Every fourth train document of ``base`` is held out: with base's validation split it is the reference
text every model is scored on (no variant trains on it: ``raw`` and ``nopass`` lose those documents by
doc_id); the other documents, shuffled, are the baseline variant ``clean``. ``BENCH_GATE_TOKENS``,
``BENCH_GATE_SEEDS`` and ``BENCH_GATE_MODEL`` (``d,layers,heads``) shrink the budget on a busy machine;
the figures say what they ran with. ``speed`` measures tokens/s per core, the model FLOP utilisation
against the measured matmul rate, and the gate's training loop against a plain JAX loop over the same
arrays.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import format_table

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WINNOW_SHARED_DATA", REPO.parent / "shared" / "data"))
WEB = ["web_crawl/dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
       "web_crawl/dclm_human_quality_labels_A.jsonl", "web_crawl/dolma_ccnet_cc_en_head-0091.jsonl",
       "web_crawl/dolma_ccnet_cc_en_head-0174.jsonl", "web_crawl/dolma_warc_sample-0000.warc.gz",
       "web_crawl/dolma_warc_sample-0001.warc.gz"]
WIKI = "wikipedia/wtf_wikipedia_wikitext_pages.jsonl"
SOURCES = [*WEB, WIKI, "scientific"]
"""Every English sample of the shared data: web pages (JSONL and WARC), Wikipedia wikitext, PMC and
unarXive papers; ``BENCH_GATE_SOURCES=web`` keeps the web pages only."""
SHARES = (0.1, 0.3, 0.5)


def sources() -> list[str]:
    """The shared files the bench's runs read (``BENCH_GATE_SOURCES``: ``all``, the default, or ``web``)."""
    return WEB if os.environ.get("BENCH_GATE_SOURCES", "all") == "web" else SOURCES


def chain(root: Path, raw: bool = False, passages: bool = True) -> None:
    """Run the default chain (``conf/local.yaml``: passages on), without the passages stage, or as
    ingest -> tokenize -> shard (``raw``) on the shared samples into ``root``."""
    inputs = json.dumps([str(SHARED / p) for p in sources()])
    wiki = json.dumps({str(SHARED / WIKI): {"text": "wikitext", "record_format": "mediawiki"}})
    cmd = [sys.executable, "jobs/pipeline.py", "--conf", "conf/local.yaml", "--quiet", "--set", f"run.root={root}",
           "--set", f"ingest.inputs={inputs}", "--set", f"ingest.fields_by_input={wiki}",
           "--set", "shard.formats=[megatron]", "--set", "decontam.eval_sets=[]",
           "--set", "shard.per_source_sets=true"]
    if raw:
        cmd += ["--set", "pipeline.stages=[ingest, tokenize, shard]", "--set", "tokenize.input_table=documents"]
    if not passages:
        cmd += ["--set", "passages.enabled=false"]
    subprocess.run(cmd, cwd=REPO, check=True, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})


def tokenized(run: Path) -> dict[str, np.ndarray]:
    """Every document of a run's ``tokenized`` Delta table: doc_id -> token ids (uint32, EOS last)."""
    from deltalake import DeltaTable

    t = DeltaTable(str(run / "tables" / "tokenized")).to_pyarrow_table(columns=["doc_id", "tokens"])
    return {i: np.frombuffer(b, dtype="<u4") for i, b in zip(t["doc_id"].to_pylist(), t["tokens"].to_pylist(),
                                                               strict=True)}


def write_variant(root: Path, docs: list[np.ndarray], tokenizer: dict) -> Path:
    """One Megatron train shard of ``docs`` (each ending with EOS) and its manifest under ``root``."""
    from udfs import megatron

    out = root / "train" / "megatron"
    out.mkdir(parents=True, exist_ok=True)
    lengths = np.array([len(d) for d in docs])
    (out / "winnow_00000.bin").write_bytes(np.concatenate(docs).astype("<u2").tobytes())
    (out / "winnow_00000.idx").write_bytes(megatron.encode_index(lengths, np.dtype(np.uint16)))
    files = [{"path": f"train/megatron/winnow_00000.{k}", "format": "megatron", "kind": k,
              "documents": len(docs), "tokens": int(lengths.sum())} for k in ("bin", "idx")]
    (root / "manifest.json").write_text(json.dumps({"tokenizer": tokenizer, "files": files, "dtype": "uint16"}))
    return root


def shuffled(docs: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """``docs`` in a seeded uniform order."""
    return [docs[i] for i in np.random.default_rng(seed).permutation(len(docs))]


def near_copy(doc: np.ndarray, rng: np.random.Generator, drop: float = 0.05) -> np.ndarray:
    """A near-duplicate: ``drop`` of the tokens (never the final EOS) removed at random."""
    keep = rng.random(len(doc) - 1) >= drop
    return np.concatenate([doc[:-1][keep], doc[-1:]])


def planted(base: list[np.ndarray], extra: list[np.ndarray], share: float, seed: int) -> tuple[list, int]:
    """Base documents plus ``extra`` ones (cycled) until they are ``share`` of all tokens, shuffled."""
    total = sum(map(len, base))
    want = share / (1 - share) * total
    added, have, i = [], 0, 0
    while have < want:
        added.append(extra[i % len(extra)])
        have, i = have + len(extra[i % len(extra)]), i + 1
    return shuffled(base + added, seed), len(added)


def removed_pages(run: Path, tokenizer_spec: str, eos: int, quality_only: bool = True) -> list[np.ndarray]:
    """The pages the filter stage removed for quality (Delta table ``removed``, read as its Parquet files),
    tokenized."""
    import pyarrow.dataset as ds

    from udfs.tokenize import load_tokenizer

    table = ds.dataset(str(run / "tables" / "removed"), format="parquet").to_table(columns=["stage", "reason", "text"])
    rows = zip(table["stage"].to_pylist(), table["reason"].to_pylist(), table["text"].to_pylist(), strict=True)
    # quality removals only (boilerplate, spam, lists of links); language removals are another defect
    texts = [t for s, r, t in rows if s == "filter" and t and t.strip()
             and not (quality_only and any(x.startswith("lang.") for x in r or []))]
    tok = load_tokenizer(tokenizer_spec).tokenizer
    return [np.array([*e.ids, eos]) for e in tok.encode_batch(texts, add_special_tokens=False)]


def source_blocks(run: Path) -> list[np.ndarray]:
    """The train documents of ``shard.per_source_sets``, one source after another (sources sorted)."""
    from udfs import megatron

    m = json.loads((run / "shards" / "manifest.json").read_text())
    docs: list[np.ndarray] = []
    for _, info in sorted(m["sources"].items()):
        for f in sorted(f["path"] for f in m["files"] if f["path"].startswith(info["path"] + "/")
                        and f["path"].endswith(".idx")):
            idx = megatron.decode_index((run / "shards" / f).read_bytes())
            docs += megatron.split_bin(idx, (run / "shards" / f).with_suffix(".bin").read_bytes())
    return [np.asarray(d) for d in docs]


def alternate(groups: list[list[np.ndarray]], block_tokens: int) -> list[np.ndarray]:
    """Documents of each group in blocks of about ``block_tokens`` tokens, the groups taking turns
    (shards written source by source, then read in round-robin file order)."""
    blocks: list[list[list[np.ndarray]]] = []
    for docs in groups:
        cut, cur, have = [], [], 0
        for d in docs:
            cur.append(d)
            have += len(d)
            if have >= block_tokens:
                cut, cur, have = [*cut, cur], [], 0
        blocks.append([*cut, cur] if cur else cut)
    out: list[np.ndarray] = []
    for i in range(max(map(len, blocks))):
        for b in blocks:
            if i < len(b):
                out += b[i]
    return out


def gate_config(variants: list[Path], ref: Path, seed: int, **gate):
    """The bench's gate config: the defaults, or the ``BENCH_GATE_*`` overrides, and base's validation as reference."""
    from pipelines.core.config import load_config

    over = [f"run.seed={seed}", f"gate.reference={ref}", "gate.validation=false", "gate.progress_s=60",
            f"gate.variants={json.dumps([str(v) for v in variants])}"]
    for env, key in (("BENCH_GATE_TOKENS", "tokens"), ("BENCH_GATE_SEEDS", "seeds")):
        if os.environ.get(env):
            over.append(f"gate.{key}={os.environ[env]}")
    if os.environ.get("BENCH_GATE_MODEL"):
        d, n_layers, heads = os.environ["BENCH_GATE_MODEL"].split(",")
        over += [f"gate.model.d_model={d}", f"gate.model.n_layers={n_layers}", f"gate.model.n_heads={heads}"]
    over += [f"gate.{k}={json.dumps(v)}" for k, v in gate.items()]
    return load_config(["conf/default.yaml"], over)


def verdict(result: dict, name: str) -> dict:
    """The figures of one variant against base, on the reference text."""
    c = result["comparisons"][name]["reference"]
    p = result["proxy_comparisons"].get(name, {}).get("reference", {})
    return {"verdict": c["verdict"], "mean_diff_bpb": c["mean"], "ci95": c["ci95"],
            "min_detectable_bpb": c["min_detectable"], "proxy_verdict": p.get("verdict"),
            "proxy_mean_diff_bpb": p.get("mean"), "wavy": {k: v["order_share"] for k, v in result["wavy"].items()},
            "flagged": {k: v["flagged"] for k, v in result["wavy"].items()}}


def reference_folder(run: Path, held: list[np.ndarray], out: Path) -> Path:
    """Held-out text, one ``.txt`` file per document: base's validation split plus the ``held`` train
    documents (which no variant trains on), decoded with the run's tokenizer."""
    from pipelines.gate import shards
    from udfs.tokenize import load_tokenizer

    v = shards.open_variant(str(run))
    tok = load_tokenizer(v.tokenizer["spec"]).tokenizer
    out.mkdir(parents=True, exist_ok=True)
    for i, d in enumerate([*shards.documents(v, "validation"), *held]):
        (out / f"{i:05d}.txt").write_text(tok.decode([int(x) for x in d[:-1]]), "utf-8")
    return out


def split_held(docs: list[np.ndarray], every: int = 4) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(train documents, held-out documents): every ``every``-th document is held out."""
    return [d for i, d in enumerate(docs) if i % every], [d for i, d in enumerate(docs) if not i % every]


def key(doc: np.ndarray) -> bytes:
    """A document's identity (its token bytes)."""
    return np.asarray(doc, dtype="<u4").tobytes()


def plain_jax_step(shape, sched):
    """The same model and optimiser as a bare jitted step (no progress, no loss fetch, no donation)."""
    import jax
    import optax

    from pipelines.gate.model import token_nll
    from pipelines.gate.train import optimizer

    opt = optimizer(sched)

    @jax.jit
    def step(p, s, b):
        loss, g = jax.value_and_grad(lambda q: token_nll(q, b[:, :-1], b[:, 1:], shape.n_heads).mean())(p)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    return step, opt


def plain_jax_loop(step, opt, samples: np.ndarray, shape, sched, batch: int, seed: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one pass of ``step`` over ``samples``, by a bare Python loop."""
    import jax

    from pipelines.gate.model import init_params

    params = init_params(shape, seed)
    state = opt.init(params)
    data = jax.numpy.asarray(samples[: sched.steps * batch].reshape(sched.steps, batch, -1))
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(sched.steps):
        params, state, _ = step(params, state, data[i])
    jax.block_until_ready(params)
    return time.perf_counter() - t0, time.process_time() - c0


def matmul_rates(n: int = 1024, reps: int = 10) -> tuple[float, float]:
    """The float32 matmul rate in FLOP per wall second and per CPU second (best of ``reps``)."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    wall = cpu = float("inf")
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        f(a).block_until_ready()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return 2.0 * n**3 / wall, 2.0 * n**3 / cpu


def speed(base: Path, ref: Path) -> dict:
    """Gate loop vs plain JAX loop on the same arrays, both compiled before timing; model FLOP utilisation
    against the matmul rate measured in the same minutes, per wall second and per CPU second (what the
    model's kernels reach of the matmul kernel on the cores this process got: the goal figure, robust to
    other work on a shared machine); tokens/s per core; the default gate's training minutes at the wall
    rate measured and on an idle machine (CPU rate x cores)."""
    import jax

    from pipelines.gate import runner, shards
    from pipelines.gate import train as tr
    from pipelines.gate.model import init_params
    from pipelines.gate.vocab import build

    cfg = gate_config([base, base], ref, 0)
    g = cfg.gate
    v = shards.open_variant(str(base))
    d = shards.draw(v, g.tokens, g.seq_len, 0)
    vocab = build([d], int(v.tokenizer["vocab_size"]), g.vocab_size)
    shape = runner.model_shape(g, vocab.size, jax.default_backend())
    sched = tr.Schedule(g.lr, g.min_lr_ratio, g.warmup, g.weight_decay, tr.steps_for(len(d), g.batch_size))
    x = vocab.map(d)
    first = jax.numpy.asarray(x[: g.batch_size])
    gate_step, opt = tr.step_fn(shape, sched)  # compiled here, so no timed pass pays for compilation
    jax.block_until_ready(gate_step(init_params(shape, 0), opt.init(init_params(shape, 0)), first))
    plain, plain_opt = plain_jax_step(shape, sched)
    jax.block_until_ready(plain(init_params(shape, 0), plain_opt.init(init_params(shape, 0)), first))
    tokens = sched.steps * g.batch_size * g.seq_len
    gate_runs, plain_runs, rates = [], [], []
    for rep in range(2):  # alternate, so a change in the machine's load hits both
        c0 = time.process_time()
        m = tr.train(x, shape, sched, g.batch_size, rep, lambda *a: None, g.progress_s)
        gate_runs.append((m.seconds, time.process_time() - c0))
        plain_runs.append(plain_jax_loop(plain, plain_opt, x, shape, sched, g.batch_size, rep))
        rates.append(matmul_rates())
    flops = shape.flops_per_token()
    gate_tps = [tokens / w for w, _ in gate_runs]
    plain_tps = [tokens / w for w, _ in plain_runs]
    gate_cpu = min(c for _, c in gate_runs)
    rate, rate_cpu = max(r[0] for r in rates), max(r[1] for r in rates)
    tps = max(gate_tps)
    cores = runner.cores()
    return {"tokens": tokens, "model": shape.__dict__, "params": shape.params(), "flops_per_token": flops,
            "gate_tokens_per_s": gate_tps, "plain_jax_tokens_per_s": plain_tps,
            "gate_cpu_s": [c for _, c in gate_runs], "plain_jax_cpu_s": [c for _, c in plain_runs],
            "cores": cores, "tokens_per_s_per_core": tps / cores, "tokens_per_cpu_s": tokens / gate_cpu,
            "matmul_flops_per_s": rate, "matmul_flops_per_cpu_s": rate_cpu,
            "mfu": tps * flops / rate, "mfu_cpu": tokens / gate_cpu * flops / rate_cpu,
            "overhead_vs_plain_jax": max(plain_tps) / tps,
            "overhead_vs_plain_jax_cpu": gate_cpu / min(c for _, c in plain_runs),
            "default_gate_minutes_estimate": (6 + 2) * 393_216 / tps / 60,
            "default_gate_minutes_estimate_idle": (6 + 2) * 393_216 / (tokens / gate_cpu * cores) / 60,
            "load1": os.getloadavg()[0]}


def measure(cases: list[str], work: Path) -> dict:
    """Build the runs and variants, run each case's gates; returns every figure.

    The planted variants (``dup``, ``spam``), the raw input (``raw``) and the chain without passages
    (``passages``) share one gate, so ``clean``'s models are trained once for all of them; ``same`` runs
    its copies ``BENCH_GATE_SAME_GROUP`` (default 5) to a gate, each gate with its own seed set; ``wavy``
    and ``wavy_mixed`` share one gate with the shuffled documents as its baseline and the fewest seeds
    (2: the wavy check reads the first seed's curve).
    """
    from pipelines.gate import shards
    from pipelines.gate.runner import run_gate

    base, raw, nopass = work / "base", work / "raw", work / "nopass"
    if not (base / "shards" / "manifest.json").is_file():
        chain(base)
    v = shards.open_variant(str(base))
    tk, eos = v.tokenizer, int(v.tokenizer["eos_id"])
    docs, held = split_held([np.asarray(d) for d in shards.documents(v, "train")])
    held_keys = {key(d) for d in held}
    ref_keys = held_keys | {key(d) for d in shards.documents(v, "validation")}
    ref_ids = {i for i, t in tokenized(base).items() if key(t) in ref_keys}
    ref = reference_folder(base, held, work / "reference")
    clean = write_variant(work / "variants" / "clean", shuffled(docs, 1), tk)
    out: dict = {"base": {"train_documents": len(docs), "train_tokens": int(sum(map(len, docs))),
                          "reference_documents": len(list(ref.glob("*.txt"))),
                          "reference_tokens": int(sum(map(len, held))) + v.tokens("validation"),
                          "sources": sources()}}
    seed0 = 1000

    def quiet(line: str) -> None:  # progress on stderr: a long calibration shows it is alive
        print(line, file=sys.stderr, flush=True)

    def gate(variants: dict[str, list[np.ndarray]], seed: int = seed0, baseline: Path = clean, **kw) -> dict:
        """One gate of ``baseline`` and ``variants`` (name -> documents): each variant's figures against it."""
        paths = [write_variant(work / "variants" / name, d, tk) for name, d in variants.items()]
        t0 = time.perf_counter()
        r = run_gate(gate_config([baseline, *paths], ref, seed, **kw), quiet)
        # the whole gate.json (bits per byte per seed, loss curves) beside the variants, to read later
        (work / "gates").mkdir(exist_ok=True)
        (work / "gates" / f"{baseline.name}-{'-'.join(p.name for p in paths)}-{seed}.json").write_text(
            json.dumps(r, default=str))
        common = {"seconds": round(time.perf_counter() - t0, 1), "budget": r["budget"]["tokens_per_model"],
                  "seeds": len(r["budget"]["seeds"]), "gate_variants": len(paths) + 1,
                  "model": {k: r["model"][k] for k in ("d_model", "n_layers", "n_heads", "params")}}
        out = {}
        for p in paths:
            rec = verdict(r, p.name)
            mine = [n for n in (baseline.name, p.name) if n in rec["wavy"]]
            rec["wavy"], rec["flagged"] = {n: rec["wavy"][n] for n in mine}, {n: rec["flagged"][n] for n in mine}
            out[p.name] = {"name": p.name, "baseline": baseline.name, **rec, **common}
        return out

    planted_variants: dict[str, list[np.ndarray]] = {}
    if "dup" in cases:
        rng = np.random.default_rng(3)
        copies = [near_copy(docs[i], rng) for i in rng.permutation(len(docs))]
        planted_variants |= {f"dup{int(s * 100)}": planted(docs, copies, s, 5)[0] for s in SHARES}
    if "spam" in cases:
        pages = removed_pages(base, tk["spec"], eos)
        out["spam"] = {"removed_pages": len(pages), "removed_tokens": int(sum(map(len, pages)))}
        planted_variants |= {f"spam{int(s * 100)}": planted(docs, pages, s, 6)[0] for s in SHARES}
    if "raw" in cases:
        if not (raw / "shards" / "manifest.json").is_file():
            chain(raw, raw=True)
        rv = shards.open_variant(str(raw))
        # the raw run's documents that are held out as reference text (same tokens) are left out of it
        planted_variants["raw"] = [np.asarray(d) for d in shards.documents(rv, "train") if key(d) not in ref_keys]
        out["raw"] = {"raw_train_tokens": rv.tokens("train")}
    if "passages" in cases:
        if not (nopass / "tables" / "tokenized" / "_delta_log").is_dir():
            chain(nopass, passages=False)
        # every document of the run without passages but those of base's reference text (by doc_id: the
        # stage changes the text of some), shuffled as clean is
        kept = sorted((i, t) for i, t in tokenized(nopass).items() if i not in ref_ids)
        planted_variants["nopass"] = shuffled([t for _, t in kept], 1)
        out["passages"] = {"documents": len(kept), "tokens": int(sum(len(t) for _, t in kept)),
                           "clean_documents": len(docs)}
    if planted_variants:
        res = gate(planted_variants, wavy=False)
        for case in ("dup", "spam"):
            if case in cases:
                out.setdefault(case, {}).update({f"{s:.0%}": res[f"{case}{int(s * 100)}"] for s in SHARES})
        if "raw" in cases:
            out["raw"] |= res["raw"]
        if "passages" in cases:
            out["passages"] |= res["nopass"]
    if "same" in cases:
        sets, group = int(os.environ.get("BENCH_GATE_SETS", 10)), int(os.environ.get("BENCH_GATE_SAME_GROUP", 5))
        first = int(os.environ.get("BENCH_GATE_SAME_FIRST", 0))  # a later process goes on from copy `first`
        runs: list[dict] = []
        for g0 in range(first, first + sets, group):
            ks = range(g0, min(first + sets, g0 + group))
            res = gate({f"same{k}": shuffled(docs, 7 + k) for k in ks}, seed=seed0 + 10 * g0, wavy=False)
            runs += [res[f"same{k}"] for k in ks]
        out["same"] = {"runs": runs, "baselines": -(-sets // group),
                       "false_alarms": sum(r["verdict"] != "no_difference" for r in runs),
                       "proxy_false_alarms": sum(r["proxy_verdict"] != "no_difference" for r in runs)}
    wavy_variants: dict[str, list[np.ndarray]] = {}
    if "wavy" in cases:
        wavy_variants["blocks"] = [d for d in source_blocks(base) if key(d) not in ref_keys]
    if "wavy_mixed" in cases:
        # web pages and the pages the filter removed (language and quality), half the tokens each, in
        # alternating blocks of BENCH_GATE_BLOCK_TOKENS, against the same documents shuffled
        block = int(os.environ.get("BENCH_GATE_BLOCK_TOKENS", 16384))
        pages = removed_pages(base, tk["spec"], eos, quality_only=False)
        rng = np.random.default_rng(4)
        pages = [pages[i] for i in rng.permutation(len(pages))]
        total, cut = sum(map(len, docs)), 0
        while cut < len(pages) and sum(map(len, pages[:cut])) < total:
            cut += 1
        wavy_variants["mixed_shuffled"] = shuffled(alternate([docs, pages[:cut]], block), 12)
        wavy_variants["mixed_blocks"] = alternate([docs, pages[:cut]], block)
        out["wavy_mixed"] = {"block_tokens": block, "removed_pages": cut}
    if wavy_variants:
        shuffled_root = write_variant(work / "variants" / "shuffled", shuffled(docs, 11), tk)
        res = gate(wavy_variants, baseline=shuffled_root, ngram=False, seeds=2)
        if "wavy" in cases:
            out["wavy"] = {"blocks": res["blocks"], "shuffled": _baseline_wavy(res["blocks"], "shuffled")}
        if "wavy_mixed" in cases:
            out["wavy_mixed"] |= {"blocks": res["mixed_blocks"], "shuffled": res["mixed_shuffled"]}
    if "speed" in cases:
        out["speed"] = speed(clean, ref)
        # in CPU seconds: a best-of-10 matmul of 10 ms finds the cores free between other work's slices,
        # a training pass of minutes shares them, so wall-time ratios on a shared machine are biased low;
        # a training step keeps both cores busy (per-thread CPU ticks), so on an idle machine the two agree
        out["goals"] = {"gate_overhead_vs_plain_jax": out["speed"]["overhead_vs_plain_jax_cpu"],
                        "gate_mfu": out["speed"]["mfu_cpu"],
                        "gate_default_minutes": out["speed"]["default_gate_minutes_estimate_idle"]}
    return out


def _baseline_wavy(r: dict, name: str) -> dict:
    """The wavy figures of a gate's baseline ``name``, from a variant's record of that gate."""
    return {**r, "name": name, "verdict": None, "proxy_verdict": None, "wavy": {name: r["wavy"][name]},
            "flagged": {name: r["flagged"][name]}}


VERDICTS = {"better": "better", "worse": "worse", "no_difference": "no difference", None: "–"}


def _model(r: dict) -> str:
    m = r["model"]
    return f"{m['d_model']} x {m['n_layers']} ({m['params'] / 1e6:.2f} M)"


def _row(case: str, share: str, r: dict) -> dict:
    lo, hi = r["ci95"]
    return {"case": case, "planted": share, "model": _model(r), "tokens/model": r["budget"], "seeds": r["seeds"],
            "mean diff (bits/byte)": round(r["mean_diff_bpb"], 4), "95 % interval": f"[{lo:+.3f}, {hi:+.3f}]",
            "smallest detectable": round(r["min_detectable_bpb"], 3), "verdict": VERDICTS[r["verdict"]],
            "proxy verdict": VERDICTS[r["proxy_verdict"]]}


def _verdict_word(r: dict) -> str:
    return "not flagged" if r["verdict"] == "no_difference" else f"flagged: {VERDICTS[r['verdict']]}"


def _smallest_flagged(per_share: dict[str, dict]) -> str:
    hit = [k for k in SHARE_KEYS if k in per_share and per_share[k]["verdict"] != "no_difference"]
    tried = [k for k in SHARE_KEYS if k in per_share]
    return hit[0] if hit else f"none of {' / '.join(tried)}"


SHARE_KEYS = tuple(f"{s:.0%}" for s in SHARES)
"""The keys of the planted shares in the figures (``10%``, ...)."""


def render_markdown(figures: dict) -> list[str]:
    """The calibration figures of :func:`measure` as Markdown tables (``bench/results.md``'s gate section).

    Args:
        figures: the dict :func:`measure` returns (any subset of the cases).

    Returns:
        Markdown lines: the corpus, the smallest planted share flagged per defect, every gate's figures,
        the false alarms, the wavy check and the speed.
    """
    f = figures
    lines = []
    if "base" in f:
        b = f["base"]
        what = ("the shared English samples (web pages, Wikipedia, PMC and unarXive papers)"
                if b.get("sources", SOURCES) == SOURCES else "the shared web samples")
        lines += [f"Corpus: {what} through the default chain, {b['train_documents']:,} train documents "
                  f"({b['train_tokens']:,} tokens) as the baseline `clean`; {b['reference_documents']:,} held-out "
                  f"documents ({b['reference_tokens']:,} tokens) are the reference text every model is scored on. "
                  "A verdict other than \"no difference\" flags the variant (95 % interval of the paired seed "
                  "differences clear of 0).", ""]
    summary, rows = [], []
    for case, label in (("dup", "near-duplicates put back"), ("spam", "pages the filter removed put back")):
        if case in f:
            summary.append({"defect": label, "smallest planted share flagged": _smallest_flagged(f[case]),
                            "model": _model(f[case][SHARE_KEYS[0]])})
            rows += [_row(case, k, f[case][k]) for k in SHARE_KEYS if k in f[case]]
    for case, label, share in (("raw", "raw input vs the default chain", "the whole raw input"),
                               ("passages", "the chain without its passages stage", "the stage off")):
        if case in f and "verdict" in f[case]:
            summary.append({"defect": label, "model": _model(f[case]),
                            "smallest planted share flagged": _verdict_word(f[case]) + f" ({share})"})
            rows.append(_row(case, "all", f[case]))
    for case, label in (("wavy", "sources in blocks (each source's documents after the last)"),
                        ("wavy_mixed", "sources in blocks (web / removed pages)")):
        if case in f:
            w = f[case]["blocks"]
            name = w.get("name") or next(k for k in w["wavy"] if k != "clean")
            summary.append({"defect": f"{label}: wavy flag", "model": _model(w),
                            "smallest planted share flagged": "flagged" if w["flagged"][name] else "not flagged"})
    if summary:
        lines += [format_table(summary, ["defect", "smallest planted share flagged", "model"]), ""]
    if rows:
        lines += [format_table(rows), ""]
    same_rows = []
    for case in ("same", "same_small"):  # same_small: an earlier run of the same check on a smaller model
        if case in f:
            runs = f[case]["runs"]
            mdd = sorted(r["min_detectable_bpb"] for r in runs)
            shared = f[case].get("baselines", len(runs))
            sets = (f"{len(runs)} seed sets" if shared == len(runs)
                    else f"{len(runs)} copies, {shared} baseline{'s' * (shared != 1)} and seed set{'s' * (shared != 1)}")
            same_rows.append({"same data, another shuffle": sets, "model": _model(runs[0]),
                              "tokens/model": runs[0]["budget"], "false alarms": f[case]["false_alarms"],
                              "proxy false alarms": f[case]["proxy_false_alarms"],
                              "smallest detectable (median)": round(mdd[len(mdd) // 2], 3),
                              "smallest detectable (range)": f"{mdd[0]:.3f} to {mdd[-1]:.3f}"})
    if same_rows:
        lines += [format_table(same_rows), ""]
    wavy = []
    for case in ("wavy", "wavy_mixed"):
        for order in ("blocks", "shuffled"):
            if case in f and order in f[case]:
                w = f[case][order]
                name = w.get("name") or next(k for k in w["wavy"] if k != "clean")
                ws = w["wavy"][name]
                share = ws if not isinstance(ws, dict) else ws.get("order_share")
                wavy.append({"case": case, "shard order": order, "model": _model(w), "order share": share,
                             "flagged": w["flagged"][name], "verdict vs shuffled": VERDICTS[w.get("verdict")]})
    if wavy:
        lines += [format_table(wavy), ""]
    if "speed" in f:
        sp = f["speed"]
        m = sp["model"]
        row = {"model": f"{m['d_model']} x {m['n_layers']} ({sp['params'] / 1e6:.2f} M)", "tokens": sp["tokens"],
               "tokens/s per core": sp["tokens_per_s_per_core"], "tokens per CPU s": sp.get("tokens_per_cpu_s"),
               "MFU (wall)": sp["mfu"], "MFU (CPU s)": sp.get("mfu_cpu"),
               "overhead vs plain JAX (wall)": sp["overhead_vs_plain_jax"],
               "overhead (CPU s)": sp.get("overhead_vs_plain_jax_cpu"),
               "default gate min (idle)": sp.get("default_gate_minutes_estimate_idle"),
               "matmul GFLOP/s (wall)": sp["matmul_flops_per_s"] / 1e9,
               "matmul GFLOP per CPU s": (sp.get("matmul_flops_per_cpu_s") or math.nan) / 1e9, "load1": sp["load1"]}
        lines += [format_table([row]), ""]
    return lines


def run(n_docs: int = 0, seed: int = 0) -> dict:
    """The ``make bench`` part (``n_docs`` and ``seed`` unused: the corpus is the shared web sample)."""
    work = Path(os.environ.get("BENCH_GATE_WORK") or tempfile.mkdtemp(prefix="winnow-gate-"))
    try:
        return measure(os.environ.get("BENCH_GATE_CASES", "same,dup,spam,raw,passages,wavy,wavy_mixed,speed").split(","), work)
    finally:
        if not os.environ.get("BENCH_GATE_WORK"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="same,dup,spam,raw,passages,wavy,wavy_mixed,speed")
    p.add_argument("--work", default=None, help="keep runs and variants here (reused when present)")
    a = p.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="winnow-gate-"))
    print(json.dumps(measure(a.cases.split(","), work), indent=1, default=str))
