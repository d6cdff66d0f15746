"""The dedup stage's work on a Python worker: the signature pass and the false-positive check (Arrow).

Everything the stage's ``mapInArrow`` functions run, and the settings they are given, lives here, so
that a Python worker imports ``udfs`` (plus numpy and pyarrow) and not the pipeline modules: unpickling
a function of ``pipelines.dedup.stage`` imports the config models (pydantic), the table helpers and
``pyspark.sql``, for nothing a worker uses: 0.39 CPU-s in a fresh worker against 0.13 from here, 0.075
against 0.012 in a worker that ingest's parser already ran in (the same split as
:mod:`udfs.tokenize_batch`). No Spark here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs import lsh, minhash
from udfs.errors import UserError

if TYPE_CHECKING:
    from pipelines.dedup.config import DedupConfig

EXACT_KEY = "_xkey"
"""Internal column: the exact-dedup key (MD5 of the text, or the ``doc_id`` when exact dedup is off)."""


class SignatureSettingsMismatch(UserError, ValueError):
    """Signatures or band keys made with different settings were about to be compared."""


@dataclass(frozen=True)
class SignatureSettings:
    """Everything that decides a signature and its band keys; recorded as table metadata."""

    scheme: str
    seed: int
    num_perm: int
    bands: int
    rows: int
    shingle: minhash.ShingleSpec

    @classmethod
    def from_config(cls, d: DedupConfig, seed: int) -> SignatureSettings:
        """The settings of ``dedup`` with ``run.seed``; bands x rows derived from ``threshold`` unless set.

        Raises:
            ValueError: ``seed`` does not fit the 32-bit permutation seed.
        """
        if not 0 <= seed < 2**32:
            raise ValueError(f"run.seed={seed} too large for dedup: MinHash permutations need "
                             "0 <= seed < 2^32")
        if d.bands is not None and d.rows is not None:
            bands, rows = d.bands, d.rows
        else:
            bands, rows = lsh.optimal_bands_rows(d.threshold, d.num_perm, d.false_positive_weight,
                                                 d.false_negative_weight)
        spec = minhash.ShingleSpec(d.ngram_size, d.fold_digits, d.fold_diacritics, d.split_unspaced)
        return cls(d.scheme, seed, d.num_perm, bands, rows, spec)

    @property
    def hash_name(self) -> str:
        """The shingle hash function, named as recorded in the ``winnow.signature`` property."""
        fast = self.scheme in ("fast", "oph")
        return minhash.FAST_HASH_NAME if fast else "sha1_hash32 (datasketch.hashfunc)"

    def to_dict(self) -> dict:
        """The settings as stored in the ``winnow.signature`` table property (canonical JSON)."""
        return {"scheme": self.scheme, "seed": self.seed, "num_perm": self.num_perm, "bands": self.bands,
                "rows": self.rows, "shingle": self.shingle.to_dict(), "hash": self.hash_name}

    def check_same(self, found: dict, where: str) -> None:
        """Raise :class:`SignatureSettingsMismatch` naming every setting that differs from ``found``."""
        mine = self.to_dict()
        diff = {k: (found.get(k), mine[k]) for k in mine if found.get(k) != mine[k]}
        if diff:
            details = ", ".join(f"{k}: {a!r} there vs {b!r} here" for k, (a, b) in sorted(diff.items()))
            raise SignatureSettingsMismatch(
                f"signature settings of {where} differ from this run's dedup settings ({details}); "
                "signatures and band keys made with different settings cannot be compared"
            )


def signature_batches(batches: Iterator[pa.RecordBatch], s: SignatureSettings,
                      md5_key: bool) -> Iterator[pa.RecordBatch]:
    """The signature pass over ``doc_id, text`` (+ other columns) batches: each batch without ``text``,
    plus ``_xkey`` (16-byte MD5 of the text, with ``md5_key``), ``bands`` (list<int64>, ``s.bands`` keys)
    and ``signature`` (binary, ``s.num_perm`` little-endian uint32)."""
    for batch in batches:
        text = batch.column("text")
        sig = minhash.signatures(text, s.shingle, s.num_perm, s.seed, s.scheme)
        keys = lsh.band_keys(sig, s.bands, s.rows)
        n = len(sig)
        band_off = np.arange(0, (n + 1) * s.bands, s.bands, dtype=np.int32)
        band_arr = pa.ListArray.from_arrays(band_off, pa.array(keys.reshape(-1)))
        sig_bytes = sig.astype("<u4").tobytes()
        width = s.num_perm * 4
        sig_off = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32).tobytes())
        sig_arr = pa.Array.from_buffers(pa.binary(), n, [None, sig_off, pa.py_buffer(sig_bytes)])
        kept = [name for name in batch.schema.names if name != "text"]
        extra, extra_names = ([minhash.md5_digests(text)], [EXACT_KEY]) if md5_key else ([], [])
        yield pa.record_batch([batch.column(name) for name in kept] + extra + [band_arr, sig_arr],
                              names=[*kept, *extra_names, "bands", "signature"])


def _sig_matrix(col: pa.Array, num_perm: int) -> np.ndarray:
    """uint32 (n, num_perm) view of a binary column of signatures (``num_perm`` little-endian uint32 each)."""
    col = col.cast(pa.large_binary())
    offs = np.frombuffer(col.buffers()[1], dtype=np.int64, count=len(col) + 1, offset=col.offset * 8)
    data = np.frombuffer(col.buffers()[2], dtype="<u4", count=(offs[-1] - offs[0]) // 4, offset=int(offs[0]))
    return data.reshape(len(col), num_perm)


def jaccard_batches(batches: Iterator[pa.RecordBatch], s: SignatureSettings,
                    exact: bool) -> Iterator[pa.RecordBatch]:
    """The false-positive check over candidate pairs: ``src, dst`` (+ ``sig_a, sig_b`` binary signatures,
    + ``text_a, text_b`` with ``exact``) batches -> ``src, dst, jaccard`` (float64: the exact shingle-set
    Jaccard where both texts are present, else the signatures' estimate, NaN without signatures)."""
    for batch in batches:
        names = batch.schema.names
        if "sig_a" in names:
            est = minhash.estimated_jaccard(_sig_matrix(batch.column("sig_a"), s.num_perm),
                                            _sig_matrix(batch.column("sig_b"), s.num_perm))
        else:  # exact check without reference documents: every pair has both texts
            est = np.full(batch.num_rows, np.nan)
        if exact:
            ta, tb = batch.column("text_a"), batch.column("text_b")
            both = np.asarray(pc.and_(ta.is_valid(), tb.is_valid()).to_numpy(zero_copy_only=False))
            if both.any():
                idx = pa.array(np.flatnonzero(both))
                est[both] = minhash.exact_jaccard(ta.take(idx), tb.take(idx), s.shingle)
        yield pa.record_batch([batch.column("src"), batch.column("dst"), pa.array(est)],
                              names=["src", "dst", "jaccard"])
