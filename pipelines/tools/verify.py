"""Re-read published shards and check them against ``manifest.json`` (used by ``jobs/verify.py``).

Checks, per file: size and sha256. Megatron: header (magic, version, dtype code = manifest dtype),
document count and token count against the manifest, ``.bin`` size, every id in ``[0, vocab)``, the
last token of every document is EOS and EOS occurs exactly once per document, BOS first when configured.
MDS: ``index.json`` entries match the files, sample count and shape (``seq_len``), ids in range.
A few documents are decoded with the tokenizer (whose fingerprint must equal the manifest's).
Counts are checked per shard set: the splits against ``totals``, each per-source set
(``shard.per_source_sets``) against its entry in the manifest's ``sources`` block.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.core import storage
from pipelines.core.config import StorageConfig
from pipelines.core.words import plural
from udfs import mds, megatron
from udfs import tokenize as tok_udfs


@dataclass
class VerifyResult:
    """Outcome of :func:`verify`: ``problems`` is empty when every check passed."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_checked: int = 0
    documents: int = 0
    tokens: int = 0
    decoded: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.problems


MANIFEST_KEYS = ("dtype", "tokenizer", "seq_len", "files", "formats", "totals")
"""Top-level keys of ``manifest.json`` that :func:`verify` reads."""


def verify(root: str, scfg: StorageConfig | None = None, decode_docs: int = 3) -> VerifyResult:
    """Verify every shard listed in ``<root>/manifest.json`` (local path or ``s3://``).

    Args:
        root: the shard output root.
        scfg: storage settings for ``s3://`` roots.
        decode_docs: documents decoded (from the first Megatron shard) as a readable spot check.

    Returns:
        A :class:`VerifyResult`; never raises for a bad shard, it lists the problem instead.
    """
    scfg = scfg or StorageConfig()
    res = VerifyResult()
    try:
        manifest = json.loads(storage.get_bytes(root, "manifest.json", scfg))
    except Exception as e:
        # The manifest is the shard stage's last write: without it the stage has not completed there.
        res.problems.append(f"{root}/manifest.json does not exist: the shard stage has not completed under "
                            "this root (run it, or give the root it wrote to)" if storage.is_not_found(e)
                            else f"cannot read {root}/manifest.json: {e}")
        return res
    # A manifest from another tool, or cut short by hand, is a problem to list, not a KeyError.
    missing = [k for k in MANIFEST_KEYS if k not in manifest] if isinstance(manifest, dict) else list(MANIFEST_KEYS)
    if missing:
        res.problems.append(f"{root}/manifest.json is not a Winnow manifest: keys {missing} missing; re-run the shard stage")
        return res
    from pipelines.shard.short import short_sets

    # Sets that give a loader nothing, or lose much of their tokens to MDS packing: not a mismatch.
    res.warnings = short_sets(manifest, float(manifest.get("max_dropped_share", 0.1)))
    dtype = np.dtype(manifest["dtype"])
    tk = manifest["tokenizer"]
    vocab, eos, bos = int(tk["vocab_size"]), int(tk["eos_id"]), tk["bos_id"]
    seq_len = int(manifest["seq_len"])
    blobs = _Files(root, manifest, scfg, res)
    set_of = _set_of(manifest)
    counted: dict[str | None, list[int]] = {}  # shard set (None = the splits) -> [docs, tokens, mds samples]
    sample_doc: list[np.ndarray] = []
    for f in manifest["files"]:
        if f["format"] != "megatron" or f["kind"] != "idx":
            continue
        pair = blobs.get(f["path"]), blobs.get(f["path"][: -len(".idx")] + ".bin")
        if pair[0] is None or pair[1] is None:
            continue  # listed as a problem by blobs.get
        try:
            first, n_docs, n_tokens = _check_megatron(f, *pair, dtype, vocab, eos, bos,
                                                      keep=decode_docs - len(sample_doc))
        except Exception as e:
            res.problems.append(f"{f['path']}: {e}")
            continue
        cell = counted.setdefault(set_of(f["path"]), [0, 0, 0])
        cell[0] += n_docs
        cell[1] += n_tokens
        sample_doc.extend(first)
    if "mds" in manifest["formats"]:
        _verify_mds(manifest, blobs, dtype, seq_len, vocab, res, set_of, counted)
    blobs.check_unread()
    _check_totals(manifest, counted, res)
    res.documents, res.tokens = counted.get(None, [0, 0, 0])[:2]
    if sample_doc:
        _decode_samples(tk, sample_doc, res)
    return res


class _Files:
    """The files the manifest lists, read one at a time when a check asks for one (a run's shards can
    outgrow memory; only the file being checked is held), each checked once against its manifest size
    and sha256: a file that cannot be read, or whose size or sha256 differs, is a problem (a differing
    file is still returned, for the checks of its content)."""

    def __init__(self, root: str, manifest: dict[str, Any], scfg: StorageConfig, res: VerifyResult):
        self.root, self.scfg, self.res = root, scfg, res
        self.listed = {f["path"]: f for f in manifest["files"]}
        self.read: set[str] = set()

    def get(self, path: str) -> bytes | None:
        """The bytes of a listed file, or None when it is not listed or cannot be read."""
        f = self.listed.get(path)
        if f is None:
            return None
        first = path not in self.read
        self.read.add(path)
        try:
            data = storage.get_bytes(self.root, path, self.scfg)
        except Exception as e:
            if first:
                self.res.problems.append(f"{path}: cannot read: {e}")
            return None
        if first:
            self.res.files_checked += 1
            if len(data) != f["bytes"] or hashlib.sha256(data).hexdigest() != f["sha256"]:
                self.res.problems.append(f"{path}: size/sha256 differ from the manifest")
        return data

    def check_unread(self) -> None:
        """Size and sha256 of the listed files no content check read (blend files, stray files)."""
        for path in self.listed:
            if path not in self.read:
                self.get(path)


def _check_megatron(f: dict[str, Any], idx_blob: bytes, bin_blob: bytes, dtype: np.dtype, vocab: int, eos: int,
                    bos: Any, keep: int = 0) -> tuple[list[np.ndarray], int, int]:
    """Check one Megatron ``.idx``/``.bin`` pair (their bytes) against the ``.idx`` manifest entry ``f``.

    Memory: the ``.bin`` is read in place (no copy); the checks hold one byte per token and a few
    integers per document, so a shard of a billion tokens is checked in about its own size.

    Args:
        keep: documents returned, from the first (copies: the ``.bin`` bytes can be freed).

    Returns:
        ``(first documents, documents, tokens)``: the first ``keep`` documents as token arrays, and
        the pair's document and token counts.

    Raises:
        ValueError: the first check that failed (dtype, ``.bin`` size, pointers, counts, document
            indices, ids, EOS, BOS).
    """
    idx = megatron.decode_index(idx_blob)
    if idx.dtype != dtype:
        raise ValueError(f"dtype {idx.dtype} != manifest {dtype}")
    lengths = idx.lengths.astype(np.int64)
    n_docs, n_tokens = len(lengths), int(lengths.sum())
    if len(bin_blob) != n_tokens * dtype.itemsize:
        raise ValueError(f".bin has {len(bin_blob)} bytes; the index needs {n_tokens * dtype.itemsize}")
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # Megatron's writer (MMapIndexedDataset) lays documents end to end: pointer = bytes before it.
    if not np.array_equal(idx.pointers.astype(np.int64), starts * dtype.itemsize):
        raise ValueError("document pointers are not the running sum of the lengths (documents end to end)")
    if n_docs != f["documents"] or n_tokens != f["tokens"]:
        raise ValueError(f"{n_docs} docs / {n_tokens} tokens, manifest says {f['documents']} / {f['tokens']}")
    if not np.array_equal(idx.doc_idx, np.arange(n_docs + 1)):
        raise ValueError("document indices are not 0..n")
    flat = np.frombuffer(bin_blob, dtype=idx.dtype.newbyteorder("<"))
    if flat.size and int(flat.max()) >= vocab:
        raise ValueError(f"token id {int(flat.max())} >= vocab {vocab}")
    if np.any(lengths == 0) or not np.all(flat[ends - 1] == eos):
        raise ValueError("a document does not end with EOS")
    eos_per_doc = np.bincount(np.searchsorted(ends, np.flatnonzero(flat == eos), side="right"), minlength=n_docs)
    if not np.all(eos_per_doc == 1):
        many = int(np.sum(eos_per_doc != 1))
        raise ValueError(f"{plural(many, 'document')} {'holds' if many == 1 else 'hold'} more than one EOS")
    if bos is not None and not np.all(flat[starts] == int(bos)):
        raise ValueError("a document does not start with BOS")
    return [flat[a:z].copy() for a, z in zip(starts[:keep], ends[:keep], strict=True)], n_docs, n_tokens


def _check_totals(manifest: dict[str, Any], counted: dict[str | None, list[int]], res: VerifyResult) -> None:
    """The counts found per shard set against the manifest's ``totals`` and ``sources`` entries."""
    for name, want in [(None, manifest["totals"]), *manifest.get("sources", {}).items()]:
        docs, toks, samples = counted.get(name, [0, 0, 0])
        what = "manifest totals" if name is None else f"manifest sources[{name!r}]"
        if "megatron" in manifest["formats"] and (docs, toks) != (want["documents"], want["tokens"]):
            res.problems.append(f"Megatron shards hold {docs} docs / {toks} tokens; {what} differ")
        if "mds" in manifest["formats"] and samples != want["mds_samples"]:
            res.problems.append(f"MDS shards hold {samples} samples; {what} say {want['mds_samples']}")


def _decode_samples(tk: dict[str, Any], sample_doc: list[np.ndarray], res: VerifyResult) -> None:
    """Decode the sampled documents with the manifest's tokenizer, whose fingerprint must match."""
    try:
        loaded = tok_udfs.load_tokenizer(tk["spec"], allow_download=False)
        if loaded.fingerprint != tk["fingerprint"]:
            res.problems.append(f"tokenizer {tk['spec']!r} fingerprint {loaded.fingerprint[:12]} != manifest {tk['fingerprint'][:12]}")
        res.decoded = [loaded.tokenizer.decode(s.tolist()[:64]) for s in sample_doc]  # type: ignore[attr-defined]
    except Exception as e:
        res.problems.append(f"cannot decode sample documents: {e}")


def _set_of(manifest: dict[str, Any]):
    """``path -> source`` of the per-source set holding the file, or None for a file of the splits."""
    folders = {f"{v['path']}/": s for s, v in manifest.get("sources", {}).items()}

    def set_of(path: str) -> str | None:
        return next((s for folder, s in folders.items() if path.startswith(folder)), None)
    return set_of


def _verify_mds(manifest: dict[str, Any], blobs: _Files, dtype: np.dtype, seq_len: int, vocab: int,
                res: VerifyResult, set_of, counted: dict[str | None, list[int]]) -> None:
    # One index.json per MDS folder (train/mds, validation/mds; mds/ in manifests before splits).
    entries: dict[str, dict[str, Any]] = {}
    folders = {f["path"].rsplit("/", 1)[0] for f in manifest["files"] if f["kind"] == "mds"}
    for folder in sorted(folders):
        index = blobs.get(f"{folder}/index.json")
        if index is None:
            res.problems.append(f"{folder}/index.json is missing")
            continue
        entries.update({f"{folder}/{e['raw_data']['basename']}": e for e in json.loads(index)["shards"]})
    for f in manifest["files"]:
        if f["kind"] != "mds" or (data := blobs.get(f["path"])) is None:
            continue
        try:
            e = entries[f["path"]]
            if e["raw_data"]["bytes"] != f["bytes"] or e["raw_data"]["hashes"].get("sha256") != f["sha256"]:
                raise ValueError("index.json entry differs from the file")
            arr = mds.decode_shard(data, seq_len, dtype)
            if len(arr) != e["samples"] or len(arr) != f["samples"]:
                raise ValueError(f"{len(arr)} samples, index says {e['samples']}")
            if arr.size and int(arr.max()) >= vocab:
                raise ValueError(f"token id {int(arr.max())} >= vocab {vocab}")
            counted.setdefault(set_of(f["path"]), [0, 0, 0])[2] += len(arr)
        except Exception as ex:
            res.problems.append(f"{f['path']}: {ex}")
