"""The ``dedup`` config section (mirrored in ``conf/default.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from pipelines.core.section import Section


class DedupConfig(Section):
    """Exact + MinHash-LSH near-deduplication (``pipelines/dedup/stage.py``, ``udfs/minhash.py``)."""

    enabled: bool = True
    # exact dedup
    exact: bool = True
    exact_key: Literal["text", "collapsed_whitespace"] = "text"
    # near dedup: shingles (Lee et al. 2022 and RefinedWeb use word 5-grams)
    near: bool = True
    ngram_size: int = Field(default=5, ge=1, le=64)
    fold_digits: bool = False
    fold_diacritics: bool = False
    split_unspaced: bool = True
    # signatures
    scheme: Literal["fast", "oph", "datasketch_affine32", "datasketch_legacy"] = "fast"
    num_perm: int = Field(default=128, ge=1, le=1024)
    # LSH banding (datasketch MinHashLSH method) and the false-positive check
    threshold: float = Field(default=0.8, gt=0.0, lt=1.0)
    bands: int | None = Field(default=None, ge=1)
    rows: int | None = Field(default=None, ge=1)
    false_positive_weight: float = Field(default=0.05, ge=0.0, le=1.0)
    false_negative_weight: float = Field(default=0.95, ge=0.0, le=1.0)
    fp_check: Literal["exact", "estimated"] | None = "exact"
    log_buckets_over: int = Field(default=1000, ge=2)
    # connected components and representatives
    representative: str = "first"
    max_cc_iterations: int = Field(default=40, ge=1)
    checkpoint_dir: str | None = None
    # incremental dedup against an earlier run's band table
    reference: str | None = None
    reference_append: bool = Field(default=False, validate_default=True)

    @field_validator("representative")
    @classmethod
    def _policy(cls, v: str) -> str:
        if v in ("first", "longest") or (v.startswith("max:") and len(v) > 4):
            return v
        raise ValueError(f"representative {v!r} unknown; allowed: 'first', 'longest', 'max:<column>'")

    @field_validator("reference_append")
    @classmethod
    def _cross_checks(cls, v: bool, info) -> bool:  # last field: every other value is in info.data
        d = info.data
        bands, rows, num_perm = d.get("bands"), d.get("rows"), d.get("num_perm", 128)
        if (bands is None) != (rows is None):
            raise ValueError(f"dedup.bands and dedup.rows must be set together or both null; got bands={bands}, rows={rows}")
        if bands is not None and rows is not None and bands * rows > num_perm:
            raise ValueError(f"dedup.bands*rows = {bands}*{rows} exceeds dedup.num_perm = {num_perm}")
        if v and d.get("reference") is None:
            raise ValueError("dedup.reference_append=true needs dedup.reference (a band table path)")
        return v
