"""Export a stage table to Parquet files, optionally laid out as a Hugging Face Hub dataset.

Plain export: the table's rows as Parquet under ``output`` (optionally partitioned by columns), for any
tool that reads Parquet. Hub export (``hf=True``): ``data/train-00000-of-000NN.parquet`` files of about
``file_bytes`` each (the Hub's recommended ~500 MB, read by ``datasets.load_dataset``) and a dataset
card ``README.md`` whose YAML header maps the files to the ``train`` split, with the run's funnel (from
the completion records) and the effective config. Rows are ordered by ``doc_id`` (when the table has
it), so the same table exports to the same rows in the same files whatever the partitioning. The
``tokens`` column of ``tokenized`` (packed little-endian uint32 ids, :func:`udfs.tokenize.token_ids`)
is exported as ``array<int>`` of ids, the column a Parquet reader (``datasets``, pandas) can use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pyspark.sql import DataFrame, SparkSession

from pipelines.core import tables
from pipelines.core.config import WinnowConfig

HUB_FILE_BYTES = 500 * 2**20
"""Target size of one Parquet file for the Hub: its dataset docs recommend files of about 500 MB
(large enough for few requests, small enough for streaming)."""

ORDER_COLUMN = "doc_id"


def with_token_lists(df: DataFrame) -> DataFrame:
    """``df`` with a ``binary`` ``tokens`` column (``tokenized``: little-endian uint32 ids, 4 bytes each)
    turned into ``array<int>`` of the ids, per Arrow batch; any other ``df`` unchanged.

    Raises:
        ValueError: (in the tasks) a value that is not whole 4-byte ids, or an id over 2**31 - 1.
    """
    if dict(df.dtypes).get("tokens") != "binary":
        return df
    from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

    ids_type = ArrayType(IntegerType(), containsNull=False)
    schema = StructType([StructField(f.name, ids_type, f.nullable) if f.name == "tokens" else f
                         for f in df.schema.fields])

    def unpack(batches):
        import numpy as np
        import pyarrow as pa

        from udfs.tokenize import token_ids

        for b in batches:
            i = b.schema.get_field_index("tokens")
            lengths, flat = token_ids(b.column(i))
            offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            ids = pa.array(flat).cast(pa.int32())  # a safe cast: an id >= 2**31 raises, never wraps
            yield b.set_column(i, "tokens", pa.ListArray.from_arrays(pa.array(offsets), ids))

    return df.mapInArrow(unpack, schema)


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        table: the exported table.
        output: the output folder.
        rows: rows exported.
        files: the Parquet files written, relative to ``output``, in order.
    """

    table: str
    output: str
    rows: int
    files: list[str] = field(default_factory=list)

    def summary_line(self) -> str:
        """One human line: ``[export] tokenized: 279 rows -> 1 files under out/hf``."""
        return f"[export] {self.table}: {self.rows} rows -> {len(self.files)} files under {self.output}"


def export_table(
    spark: SparkSession,
    cfg: WinnowConfig,
    table: str,
    output: str,
    *,
    hf: bool = False,
    file_bytes: int = HUB_FILE_BYTES,
    partition_by: list[str] | None = None,
    split: str = "train",
) -> ExportResult:
    """Write table ``table`` of this run as Parquet files under ``output`` (replacing what is there).

    Args:
        table: a Delta table of the run, e.g. ``tokenized`` or ``removed``.
        output: folder (local path or Hadoop URI).
        hf: Hub layout: ``data/<split>-NNNNN-of-NNNNN.parquet`` + ``README.md`` dataset card.
        file_bytes: Hub layout: target bytes per file (from the table's Delta size, which is Parquet
            too, so the files come out near it); at least one file.
        partition_by: plain layout only: Hive-style partition columns.
        split: Hub layout: the split name in the file names and the card.

    Returns:
        The :class:`ExportResult`.

    Raises:
        MissingTableError: the table does not exist yet.
        ValueError: ``partition_by`` with ``hf``, or a ``partition_by`` column the table lacks.
    """
    df = with_token_lists(tables.read_table(spark, cfg, table))
    if partition_by and hf:
        raise ValueError("export: partition_by is for the plain layout; the Hub layout is "
                         "data/<split>-*.parquet")
    missing = [c for c in partition_by or [] if c not in df.columns]
    if missing:
        raise ValueError(f"export: partition_by columns {missing} not in table {table!r}; "
                         f"it has {df.columns}")
    rows = df.count()
    out = output.rstrip("/")
    if not hf:
        ordered = df.orderBy(ORDER_COLUMN) if ORDER_COLUMN in df.columns else df
        ordered.write.mode("overwrite").partitionBy(*(partition_by or [])).parquet(out)
        fs, root = tables.hadoop_path(spark, out)
        files = sorted(
            str(st.getPath()).split(out.split("://")[-1] + "/", 1)[-1]
            for st in _walk(fs, root) if st.getPath().getName().endswith(".parquet")
        )
        return ExportResult(table, out, rows, files)

    n = max(1, math.ceil(tables.table_size_bytes(spark, cfg, table) / max(1, file_bytes)))
    parts = df.repartitionByRange(n, ORDER_COLUMN) if ORDER_COLUMN in df.columns else df.repartition(n)
    if ORDER_COLUMN in df.columns:
        parts = parts.sortWithinPartitions(ORDER_COLUMN)
    tmp = f"{out}/_export_tmp"
    parts.write.mode("overwrite").parquet(tmp)
    files = _rename_parts(spark, tmp, f"{out}/data", split)
    tables.write_text(spark, f"{out}/README.md", dataset_card(spark, cfg, table, rows, files))
    return ExportResult(table, out, rows, files)


def _walk(fs, path):
    for st in fs.listStatus(path):
        if st.isDirectory():
            yield from _walk(fs, st.getPath())
        else:
            yield st


def _rename_parts(spark: SparkSession, tmp: str, data: str, split: str) -> list[str]:
    # Spark names files part-<partition index>-...; sorted by name they are in range order. Empty
    # range partitions write no file, so the count is taken from what was written.
    fs, tmp_path = tables.hadoop_path(spark, tmp)
    parts = sorted(
        (st.getPath() for st in fs.listStatus(tmp_path)
         if st.getPath().getName().startswith("part-") and st.getPath().getName().endswith(".parquet")),
        key=lambda p: p.getName(),
    )
    _, data_path = tables.hadoop_path(spark, data)
    if fs.exists(data_path):
        fs.delete(data_path, True)
    fs.mkdirs(data_path)
    jvm = spark._jvm  # type: ignore[attr-defined]
    names = [f"{split}-{i:05d}-of-{len(parts):05d}.parquet" for i in range(len(parts))]
    for src, name in zip(parts, names, strict=True):
        if not fs.rename(src, jvm.org.apache.hadoop.fs.Path(data_path, name)):
            raise OSError(f"export: could not move {src} to {data}/{name}")
    if "://" not in data or data.startswith("file:"):
        # Hadoop's checksumming local filesystem moves a hidden .crc file along with each Parquet
        # file (and hides it from its own listings); the Hub folder holds the data files only.
        for crc in Path(data.removeprefix("file:")).glob(".*.crc"):
            crc.unlink()
    fs.delete(tmp_path, True)
    return [f"data/{name}" for name in names]


def dataset_card(spark: SparkSession, cfg: WinnowConfig, table: str, rows: int, files: list[str]) -> str:
    """The ``README.md`` of a Hub export: YAML header (``configs`` -> the split's files), the funnel
    from the run's completion records, the config the run was made with and the versions that change
    its output.

    Config and versions are the run root's records (:mod:`pipelines.core.provenance`: each stage's section
    and versions as that stage recorded them), not the export command's: an export run with other
    ``ingest.inputs`` or without the run's config files still describes the data it exports.

    Source: the Hub's dataset card and "configs" metadata (huggingface.co/docs/hub/datasets-cards,
    datasets-manual-configuration).
    """
    from pipelines.core import provenance
    from pipelines.core.runs import latest_records

    records = latest_records(spark, cfg)
    run_cfg = provenance.run_config(spark, cfg, records)
    split = files[0].split("/")[-1].split("-")[0] if files else "train"
    files_of_split = [{"split": split, "path": f"data/{split}-*"}]
    header = {"configs": [{"config_name": "default", "data_files": files_of_split}]}
    lines = ["---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
             f"# Winnow export: `{table}`", "",
             f"{rows} rows in {len(files)} Parquet files, exported from the Delta table `{table}` of "
             f"the Winnow run `{cfg.run.root}` (config fingerprint "
             f"`{provenance.fingerprint(run_cfg)[:12]}`).", "",
             "## Funnel", "", "| stage | rows in | rows out | removed |", "|---|---:|---:|---|"]
    from pipelines.core.chain import STAGES

    for stage in [s for s in STAGES if s in records]:
        r = records[stage]
        removed = ", ".join(f"{k}={v}" for k, v in sorted(r["removed"].items())) or "-"
        lines.append(f"| {stage} | {r['rows_in']} | {r['rows_out']} | {removed} |")
    if not records:
        lines.append("| (no completion records) | | | |")
    config = yaml.safe_dump(run_cfg, sort_keys=True).strip()
    lines += ["", "## Config", "", "The config the run's tables were made with, as each stage recorded it.",
              "", "```yaml", config, "```", ""]
    versions = provenance.recorded_versions(spark, cfg, records)
    if versions:
        pinned = yaml.safe_dump(versions, sort_keys=True).strip()
        lines += ["## Versions", "", "Libraries and model files whose version changes the output, as each "
                  "stage recorded them.", "", "```yaml", pinned, "```", ""]
    return "\n".join(lines)
