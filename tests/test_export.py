"""jobs/export.py: a stage table to Parquet, the Hub layout read back by the real `datasets` package."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from jobs import export
from pipelines.core import tables
from pipelines.core.config import load_config

DOC_SCHEMA = "doc_id string, text string, source string, n_chars int"


def _docs(spark, cfg, n):
    rows = [(f"d{i:03d}", f"document number {i} " * (1 + i % 5), "web" if i % 2 else "news", 10 + i) for i in range(n)]
    tables.write_table(spark.createDataFrame(rows, DOC_SCHEMA).repartition(3), cfg, "filtered")
    return rows


def test_hub_layout_is_read_back_by_datasets(spark, tmp_path, monkeypatch, capsys):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    root, out = tmp_path / "run", tmp_path / "hf_export"
    cfg = load_config(overrides=[f"run.root={root}"])
    rows = _docs(spark, cfg, 40)
    size = tables.table_size_bytes(spark, cfg, "filtered")

    # A target of a third of the table's size: three files, named as the Hub expects.
    mb = size / 3 / 2**20
    from pipelines.tools.export import export_table

    res = export_table(spark, cfg, "filtered", str(out), hf=True, file_bytes=int(mb * 2**20) + 1)
    assert res.files == [f"data/train-{i:05d}-of-00003.parquet" for i in range(3)]
    assert sorted(p.name for p in (out / "data").iterdir()) == [f.split("/")[1] for f in res.files]
    assert not (out / "_export_tmp").exists()
    # Files in doc_id order, each sorted: the concatenation is the table sorted by doc_id.
    ids = [i for f in res.files for i in pq.read_table(out / f).column("doc_id").to_pylist()]
    assert ids == sorted(r[0] for r in rows)

    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---")
    assert "40 rows in 3 Parquet files" in card and "## Funnel" in card and "## Config" in card

    ds = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"), split="train",
                               cache_dir=str(tmp_path / "hf" / "cache"))
    assert ds.num_rows == 40 and ds.column_names == ["doc_id", "text", "source", "n_chars"]
    assert ds[0] == {"doc_id": "d000", "text": rows[0][1], "source": "news", "n_chars": 10}
    # The folder itself loads through the card's configs.
    ds2 = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf" / "cache"))
    assert ds2.num_rows == 40


def test_tokenized_exports_token_ids_not_packed_bytes(spark, tmp_path, monkeypatch):
    # tokenized.tokens is packed uint32 bytes; the Hub export handed `datasets` users opaque
    # bytes (feature Value('binary')). They get the ids, the same for any partitioning.
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from pipelines.tools.export import export_table
    from udfs.tokenize import pack_token_ids

    root, out = tmp_path / "run", tmp_path / "hf_tok"
    cfg = load_config(overrides=[f"run.root={root}"])
    ids = {f"d{i:02d}": [50256] if i == 0 else [i, 2**31 - 1, 7] * i + [50256] for i in range(12)}
    rows = [(k, "web", pack_token_ids(v), len(v)) for k, v in ids.items()]
    df = spark.createDataFrame(rows, "doc_id string, source string, tokens binary, n_tokens int").repartition(3)
    tables.write_table(df, cfg, "tokenized")
    export_table(spark, cfg, "tokenized", str(out), hf=True)
    ds = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"), split="train",
                               cache_dir=str(tmp_path / "hf_cache"))
    assert str(ds.features["tokens"].feature.dtype) == "int32"
    assert {r["doc_id"]: r["tokens"] for r in ds} == ids


def test_plain_export_partitioned_and_the_job(spark, tmp_path, capsys):
    root, out = tmp_path / "run", tmp_path / "plain"
    cfg = load_config(overrides=[f"run.root={root}"])
    _docs(spark, cfg, 10)
    assert export.main(["--set", f"run.root={root}", "--table", "filtered", "--output", str(out),
                        "--partition-by", "source"]) == 0
    assert capsys.readouterr().out.startswith("[export] filtered: 10 rows -> ")
    back = spark.read.parquet(str(out))
    assert sorted(r.source for r in back.select("source").distinct().collect()) == ["news", "web"]
    assert back.count() == 10


def test_unknown_table_fails_before_spark_listing_the_tables(capsys):
    with pytest.raises(SystemExit) as e:
        export.main(["--table", "tokenised", "--output", "x"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "invalid choice: 'tokenised'" in err and "'tokenized'" in err and "'removed'" in err


def test_export_errors_name_the_problem(spark, tmp_path):
    cfg = load_config(overrides=[f"run.root={tmp_path / 'run'}"])
    from pipelines.tools.export import export_table

    with pytest.raises(tables.MissingTableError, match="run the 'filter' stage first"):
        export_table(spark, cfg, "filtered", str(tmp_path / "x"))
    _docs(spark, cfg, 3)
    with pytest.raises(ValueError, match=r"partition_by columns \['lang'\] not in table 'filtered'"):
        export_table(spark, cfg, "filtered", str(tmp_path / "x"), partition_by=["lang"])
