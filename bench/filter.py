"""Filter-stage benchmark: quality signals, LID and the whole stage, each against its reference.

Figures (one run, same documents from :mod:`bench.corpus`):

* ``signals``: :func:`udfs.quality.quality_signals` on one Arrow batch vs datatrove 0.10.1's Gopher
  quality + Gopher repetition + C4 + FineWeb filters called per document (goal: >= 10x).
* ``lid``: :mod:`udfs.langid` preprocess + predict vs a raw fastText ``predict`` on the same strings.
* ``stage``: :func:`pipelines.filter.stage.filter_documents` in Spark (local[1], one core) vs the same UDF
  functions on a plain Arrow batch (goal: Spark overhead <= 1.25x), and filter + LID MB/s per core
  (goal: >= 5 MB/s/core).

``python -m bench.filter [n_docs]`` prints a table; ``run(n_docs, seed)`` returns the figures.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from bench.common import time_best


def _timed(fn, repeat: int = 1) -> float:
    """Best wall seconds of ``repeat`` runs (no warm-up run: the first call's cost is part of the figure)."""
    return time_best(fn, warmup=0, repeat=repeat)["best_s"]


def _datatrove_seconds(texts: list[str]) -> float:
    import warnings

    warnings.filterwarnings("ignore")
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    filters = [GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter(), FineWebQualityFilter()]
    filters[0].filter(Document(text="warm up the tokenizer", id="w"))

    def go():
        for i, t in enumerate(texts):
            for f in filters:
                # every filter sees every document (no short-circuit), as our signals are all computed
                f.filter(Document(text=t, id=str(i)))

    return _timed(go)


def run(n_docs: int, seed: int = 0) -> dict:
    """Measure the figures above on ``n_docs`` synthetic documents; returns JSON-serialisable numbers."""
    from bench.corpus import generate_batch
    from udfs import langid, quality

    batch = generate_batch(n_docs, seed)
    text = batch.column("text")
    mb = sum(len(t.encode()) for t in text.to_pylist()) / 1e6
    out: dict = {"n_docs": n_docs, "mb": round(mb, 3)}

    t_sig = _timed(lambda: quality.quality_signals(text), repeat=2)
    dt_docs = text.to_pylist()[: max(50, n_docs // 10)]
    t_dt = _datatrove_seconds(dt_docs) * (n_docs / len(dt_docs))
    out["signals"] = {"s": t_sig, "mb_per_s": mb / t_sig, "datatrove_s_extrapolated": t_dt, "speedup": t_dt / t_sig}

    model = langid.load_model(langid.default_model_path())
    prepared = langid.preprocess(text, 1000)
    t_lid = _timed(lambda: langid.predict(model, langid.preprocess(text, 1000), 3), repeat=2)
    t_raw = _timed(lambda: model.predict(prepared, k=3), repeat=2)
    out["lid"] = {"s": t_lid, "docs_per_s": n_docs / t_lid, "raw_fasttext_s": t_raw, "overhead": t_lid / t_raw}

    def arrow_stage():
        quality.quality_signals(text)
        langid.predict(model, langid.preprocess(text, 1000), 3)

    t_arrow = _timed(arrow_stage)
    out["arrow_stage"] = {"s": t_arrow, "mb_per_s_per_core": mb / t_arrow}
    out["spark_stage"] = _spark_stage(batch, mb, t_arrow)
    return out


def _spark_stage(batch: pa.RecordBatch, mb: float, t_arrow: float) -> dict:
    import os
    import tempfile

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipelines.core.config import SparkConfig, load_config
    from pipelines.core.session import get_spark
    from pipelines.filter.stage import filter_documents

    spark = get_spark("winnow-bench-filter", SparkConfig(master="local[1]", shuffle_partitions=1,
                                                          conf={"spark.ui.enabled": "false"}))
    cfg = load_config(overrides=[f"run.root={tempfile.mkdtemp()}"])
    df = spark.createDataFrame(batch.to_pandas()).repartition(1).cache()
    df.count()
    sink = filter_documents(df, cfg).select("doc_id", "filter_reasons")
    sink.write.format("noop").mode("overwrite").save()  # warm-up: workers, model load
    t = _timed(lambda: sink.write.format("noop").mode("overwrite").save())
    df.unpersist()
    return {"s": t, "mb_per_s_per_core": mb / t, "overhead_vs_arrow": t / t_arrow}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    res = run(n)
    print(json.dumps(res, indent=2, default=float))
