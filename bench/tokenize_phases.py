"""Where the tokenize stage's time goes, phase by phase, on the real-text corpus (CPU seconds).

Each phase is the previous one plus one step, run end to end on a ``refs_checked``-shaped Delta table
(:mod:`bench.tokenize_corpus`) and written to Spark's ``noop`` sink, except ``run`` (the whole stage:
``pipelines.tokenize.stage.run`` with its Delta writes). CPU seconds are those of this process tree (driver,
JVM, Python workers) from ``/proc``, so they hold on a shared machine; the difference between two
phases is the cost of the step added.

``python -m bench.tokenize_phases [--mb 50] [--only run] [--keep DIR]``; run it under
``py-spy record --subprocesses`` for the profile of a phase.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

PHASES = ("read", "arrow", "encode", "stage_no_audit", "stage", "run")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--only", default=",".join(PHASES))
    ap.add_argument("--keep", default=None, help="folder for the run root (reused when it holds the corpus)")
    ap.add_argument("--set", action="append", default=[], help="config override for the stage phases")
    a = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from bench.common import Measure, loadavg
    from bench.references import SHARED
    from bench.tokenize_corpus import repeated_corpus, write_refs_checked
    from pipelines.core.config import load_config
    from pipelines.core.session import get_spark
    from pipelines.tokenize import stage
    from udfs import tokenize as tu

    root = Path(a.keep or tempfile.mkdtemp(prefix="winnow-tokphases-"))
    cfg = load_config(overrides=[f"run.root={root}", f"spark.master=local[{a.cores}]",
                                 f"spark.shuffle_partitions={a.cores}", "pipeline.stages=[refs, tokenize]", *a.set])
    spark = get_spark("tokenize-phases", cfg.spark)
    src_path = cfg.table_path("refs_checked")
    corpus = repeated_corpus(SHARED, int(a.mb * 1e6))
    n_bytes = sum(len(t.encode("utf-8")) for t in corpus.column("text").to_pylist())
    if not (root / "tables" / "refs_checked").is_dir():
        write_refs_checked(spark, corpus, src_path, partitions=a.cores * 4)
    texts = corpus.column("text").to_pylist()
    tok = tu.load_tokenizer(cfg.tokenize.tokenizer)
    tu.set_thread_budget(1)
    with Measure() as m:
        n_tokens = sum(len(e.ids) for e in tok.tokenizer.encode_batch_fast(texts, add_special_tokens=False))
    out = {"docs": corpus.num_rows, "mb": round(n_bytes / 1e6, 2), "tokens": n_tokens,
           "raw_encode_batch_fast_1thread": m.as_dict()}
    del texts

    src = spark.read.format("delta").load(src_path)

    def identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    spec = cfg.tokenize.tokenizer

    def encode_only(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tu.set_thread_budget(1)
        t = tu.load_tokenizer(spec).tokenizer
        for b in batches:
            t.encode_batch_fast(b.column("text").to_pylist(), add_special_tokens=False)
            yield b

    no_audit = cfg.tokenize.model_copy(update={"roundtrip_sample_fraction": 0.0})
    make = {
        "read": lambda: src,
        "arrow": lambda: src.mapInArrow(identity, src.schema),
        "encode": lambda: src.mapInArrow(encode_only, src.schema),
        "stage_no_audit": lambda: stage.tokenize(src, no_audit, cfg.run.seed),
        "stage": lambda: stage.tokenize(src, cfg.tokenize, cfg.run.seed),
    }
    src.limit(100).mapInArrow(encode_only, src.schema).write.format("noop").mode("overwrite").save()  # warm workers
    for name in a.only.split(","):
        load0 = loadavg()[0]
        with Measure() as m:
            if name == "run":
                report = stage.run(spark, cfg)
            else:
                make[name]().write.format("noop").mode("overwrite").save()
        out[name] = {**m.as_dict(), "load1_before": load0, "load1_after": loadavg()[0]}
        if name == "run":
            out[name]["report_extra"] = {k: v for k, v in report.extra.items() if k != "tokens_by_source"}
        print(name, out[name], flush=True)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
