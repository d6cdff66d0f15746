"""The evaluation sets as n-gram hashes: the ``eval_ngrams`` table, rebuilt only when the sets or the
settings that decide the hashes change, and the index the join reads from it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from pipelines.core import tables
from pipelines.core.config import WinnowConfig, canonical_json
from pipelines.core.eval_sets import read_items
from udfs import decontam as kernels

STAGE = "decontam"


EVAL_TABLE = "eval_ngrams"


EVAL_SCHEMA = "set_name string, item_id string, hash bigint, item_ngrams int, item_words int"


class EvalIndex:
    """What the join needs from ``eval_ngrams``, held on the driver.

    Attributes:
        df: the ``eval_ngrams`` table.
        ngram_keys: sorted uint64 hashes of the items of ``>= ngram_size`` words.
        short_keys: sorted uint64 whole-text hashes of the shorter items.
        short_lengths: their distinct word counts.
        summary: per set ``{"items", "indexed", "skipped": {reason: n}, "missing_fields": {...}}``.
        fingerprint: sha256 of the sets' bytes and the settings that decide the hashes.
        reused: the table was already built for this fingerprint.
    """

    def __init__(
        self,
        df: DataFrame,
        ngram_keys: np.ndarray,
        short_keys: np.ndarray,
        short_lengths: list[int],
        summary: dict[str, Any],
        fingerprint: str,
        reused: bool,
    ) -> None:
        self.df, self.ngram_keys, self.short_keys = df, ngram_keys, short_keys
        self.short_lengths, self.summary, self.fingerprint, self.reused = (
            short_lengths,
            summary,
            fingerprint,
            reused,
        )


def build_eval_ngrams(spark: SparkSession, cfg: WinnowConfig) -> EvalIndex:
    """Read the evaluation sets and write ``eval_ngrams``, or reuse it when its fingerprint matches.

    Raises:
        pipelines.core.eval_sets.EvalSetError: a set cannot be read or has no item (names the key).
    """
    dc = cfg.decontam
    sets = [read_items(es, i, spark) for i, es in enumerate(dc.eval_sets)]
    fingerprint = hashlib.sha256(
        canonical_json(
            {
                "normalization": kernels.NORMALIZATION_VERSION,
                "ngram_size": dc.ngram_size,
                "min_item_words": dc.min_item_words,
                "sets": [
                    {"config": es.model_dump(mode="json"), "digest": s.digest}
                    for es, s in zip(dc.eval_sets, sets, strict=True)
                ],
            }
        ).encode()
    ).hexdigest()
    path = cfg.table_path(EVAL_TABLE)
    if (
        tables.table_exists(spark, path)
        and tables.table_properties(spark, path).get("eval_fingerprint") == fingerprint
    ):
        props = tables.table_properties(spark, path)
        df = tables.read_path(spark, path)
        keys = df.select("hash", "item_ngrams", "item_words").toArrow()
        words = keys.column("item_words").to_numpy()
        hashes = keys.column("hash").to_numpy().view(np.uint64)
        short = words < dc.ngram_size
        return EvalIndex(
            df,
            np.unique(hashes[~short]),
            np.unique(hashes[short]),
            sorted(set(words[short].tolist())),
            json.loads(props["eval_summary"]),
            fingerprint,
            True,
        )

    cols: dict[str, list] = {c: [] for c in ("set_name", "item_id", "hash", "item_ngrams", "item_words")}
    summary: dict[str, Any] = {}
    for s in sets:
        skipped = dict(s.skipped)
        indexed = 0
        for item_id, (keys, words) in zip(s.ids, kernels.item_hashes(s.texts, dc.ngram_size), strict=True):
            if words < dc.min_item_words:
                skipped["too_short"] = skipped.get("too_short", 0) + 1
                continue
            indexed += 1
            cols["set_name"] += [s.name] * keys.size
            cols["item_id"] += [item_id] * keys.size
            cols["hash"].append(keys.view(np.int64))
            cols["item_ngrams"] += [int(keys.size)] * keys.size
            cols["item_words"] += [words] * keys.size
        summary[s.name] = {
            "items": len(s.ids),
            "indexed": indexed,
            "rows": s.rows,
            "skipped": dict(sorted(skipped.items())),
            "missing_fields": dict(sorted(s.missing_fields.items())),
        }
    hashes = np.concatenate(cols["hash"]) if cols["hash"] else np.zeros(0, np.int64)
    table = pa.table(
        {
            "set_name": pa.array(cols["set_name"], pa.string()),
            "item_id": pa.array(cols["item_id"], pa.string()),
            "hash": pa.array(hashes, pa.int64()),
            "item_ngrams": pa.array(cols["item_ngrams"], pa.int32()),
            "item_words": pa.array(cols["item_words"], pa.int32()),
        }
    )
    df = (
        spark.createDataFrame(table.to_pandas(), EVAL_SCHEMA)
        if table.num_rows
        else spark.createDataFrame([], EVAL_SCHEMA)
    )
    tables.write_table(
        df,
        cfg,
        EVAL_TABLE,
        properties={
            **tables.standard_properties(cfg, STAGE),
            "eval_fingerprint": fingerprint,
            "eval_summary": summary,
        },
    )
    words = np.asarray(cols["item_words"], dtype=np.int64)
    short = words < dc.ngram_size
    uh = hashes.view(np.uint64)
    return EvalIndex(
        tables.read_path(spark, path),
        np.unique(uh[~short]),
        np.unique(uh[short]),
        sorted(set(words[short].tolist())),
        summary,
        fingerprint,
        False,
    )
