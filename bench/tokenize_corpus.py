"""Real-text corpus for the tokenize benchmark: the shared web and Wikipedia samples repeated to a size.

The texts come from ``<shared>/web_crawl/*.jsonl*`` (field ``text``) and ``<shared>/wikipedia/*.jsonl``
(field ``wikitext``), read in sorted file order; copy ``k`` of document ``i`` gets ``doc_id``
``<source>/<i>~<k>`` so every row is distinct while the text mix stays that of the samples. Nothing is
copied into the repository: the path comes from ``$WINNOW_SHARED_DATA`` (see :data:`bench.references.SHARED`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa

TEXT_FIELDS = {"web_crawl": "text", "wikipedia": "wikitext"}
"""Sub-folder of the shared data -> JSON field that holds the document text."""


def sample_texts(shared: Path) -> list[tuple[str, str]]:
    """Every ``(source, text)`` of the shared web and Wikipedia JSONL samples, in file then line order.

    Raises:
        FileNotFoundError: none of the sample files exists under ``shared``.
    """
    out: list[tuple[str, str]] = []
    for sub, field in TEXT_FIELDS.items():
        for path in sorted((shared / sub).glob("*.jsonl*")):
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                for line in f:
                    text = json.loads(line).get(field) if line.strip() else None
                    if isinstance(text, str) and text:
                        out.append((path.name.split(".")[0], text))
    if not out:
        raise FileNotFoundError(f"no web_crawl/wikipedia JSONL samples under {shared}")
    return out


def repeated_corpus(shared: Path, min_bytes: int) -> pa.Table:
    """The samples repeated until their UTF-8 size reaches ``min_bytes`` (whole copies only).

    Returns:
        Columns ``doc_id`` (string, unique), ``text`` (string), ``source`` (string: the file stem).
    """
    base = sample_texts(shared)
    size = sum(len(t.encode("utf-8")) for _, t in base)
    copies = max(1, -(-min_bytes // size))
    ids, texts, sources = [], [], []
    for k in range(copies):
        for i, (src, text) in enumerate(base):
            ids.append(f"{src}/{i}~{k}")
            texts.append(text)
            sources.append(src)
    return pa.table({"doc_id": ids, "text": texts, "source": sources})


def write_refs_checked(spark, table: pa.Table, path: str, partitions: int) -> None:
    """Write ``table`` as a Delta table shaped like ``refs_checked`` (documents + filter + refs columns).

    The extra columns hold constant, realistic values: the tokenize stage must carry or ignore them.
    """
    from pyspark.sql import functions as F

    df = spark.createDataFrame(table.to_pandas()).repartition(partitions)
    mention = F.struct(F.lit("table").alias("kind"), F.lit("1").alias("label"), F.lit(0).alias("start"),
                       F.lit(7).alias("end"), F.lit(False).alias("dangling"))
    df = (
        df.withColumn("url", F.concat(F.lit("https://example.org/"), F.col("doc_id")))
        .withColumn("meta", F.create_map(F.lit("k"), F.lit("v")))
        .withColumn("input_file", F.concat(F.col("source"), F.lit(".jsonl.gz")))
        .withColumn("n_chars", F.length("text"))
        .withColumn("n_bytes", F.octet_length("text"))
        .withColumn("n_replaced", F.lit(0))
        .withColumn("lang", F.lit("en"))
        .withColumn("lang_score", F.lit(0.93))
        .withColumn("ref_mentions", F.array(mention))
        .withColumn("n_mentions", F.lit(1))
        .withColumn("n_dangling", F.lit(0))
        .withColumn("dangling_ratio", F.lit(0.0))
        .withColumn("refs_action", F.lit("none"))
    )
    df.write.format("delta").mode("overwrite").save(path)
