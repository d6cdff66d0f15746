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
        res.problems.append(f"cannot read {root}/manifest.json: {e}")
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
    blobs = _read_files(root, manifest, scfg, res)
    set_of = _set_of(manifest)
    counted: dict[str | None, list[int]] = {}  # shard set (None = the splits) -> [docs, tokens, mds samples]
    sample_doc: list[np.ndarray] = []
    for f in manifest["files"]:
        if f["format"] != "megatron" or f["kind"] != "idx" or f["path"] not in blobs:
            continue
        try:
            seqs, n_tokens = _check_megatron(f, blobs, dtype, vocab, eos, bos)
        except Exception as e:
            res.problems.append(f"{f['path']}: {e}")
            continue
        cell = counted.setdefault(set_of(f["path"]), [0, 0, 0])
        cell[0] += len(seqs)
        cell[1] += n_tokens
        if len(sample_doc) < decode_docs:
            sample_doc.extend(seqs[: decode_docs - len(sample_doc)])
    if "mds" in manifest["formats"]:
        _verify_mds(manifest, blobs, dtype, seq_len, vocab, res, set_of, counted)
    _check_totals(manifest, counted, res)
    res.documents, res.tokens = counted.get(None, [0, 0, 0])[:2]
    if sample_doc:
        _decode_samples(tk, sample_doc, res)
    return res


def _read_files(root: str, manifest: dict[str, Any], scfg: StorageConfig, res: VerifyResult) -> dict[str, bytes]:
    """Every file the manifest lists, by path; a file that cannot be read, or whose size or sha256
    differs, is a problem (a differing file is still returned, for the checks of its content)."""
    blobs: dict[str, bytes] = {}
    for f in manifest["files"]:
        try:
            data = storage.get_bytes(root, f["path"], scfg)
        except Exception as e:
            res.problems.append(f"{f['path']}: cannot read: {e}")
            continue
        res.files_checked += 1
        if len(data) != f["bytes"] or hashlib.sha256(data).hexdigest() != f["sha256"]:
            res.problems.append(f"{f['path']}: size/sha256 differ from the manifest")
        blobs[f["path"]] = data
    return blobs


def _check_megatron(f: dict[str, Any], blobs: dict[str, bytes], dtype: np.dtype, vocab: int, eos: int,
                    bos: Any) -> tuple[list[np.ndarray], int]:
    """Check one Megatron ``.idx``/``.bin`` pair against its manifest entry ``f``.

    Returns:
        The documents (token arrays) and their token count.

    Raises:
        ValueError: the first check that failed (dtype, counts, document indices, ids, EOS, BOS).
    """
    bin_path = f["path"][: -len(".idx")] + ".bin"
    idx = megatron.decode_index(blobs[f["path"]])
    if idx.dtype != dtype:
        raise ValueError(f"dtype {idx.dtype} != manifest {dtype}")
    seqs = megatron.split_bin(idx, blobs[bin_path])
    flat = np.concatenate(seqs) if seqs else np.zeros(0, dtype)
    if len(seqs) != f["documents"] or flat.size != f["tokens"]:
        raise ValueError(f"{len(seqs)} docs / {flat.size} tokens, manifest says {f['documents']} / {f['tokens']}")
    if not np.array_equal(idx.doc_idx, np.arange(len(seqs) + 1)):
        raise ValueError("document indices are not 0..n")
    if flat.size and int(flat.max()) >= vocab:
        raise ValueError(f"token id {int(flat.max())} >= vocab {vocab}")
    ends = np.cumsum(idx.lengths.astype(np.int64))
    if not np.all(flat[ends - 1] == eos):
        raise ValueError("a document does not end with EOS")
    eos_per_doc = np.diff(np.concatenate([[0], np.cumsum(flat == eos)[ends - 1]]))
    if not np.all(eos_per_doc == 1):
        raise ValueError(f"{int(np.sum(eos_per_doc != 1))} documents hold more than one EOS")
    if bos is not None and not np.all(flat[ends - idx.lengths] == int(bos)):
        raise ValueError("a document does not start with BOS")
    return seqs, int(flat.size)


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


def _verify_mds(manifest: dict[str, Any], blobs: dict[str, bytes], dtype: np.dtype, seq_len: int, vocab: int,
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
        if f["kind"] != "mds" or f["path"] not in blobs:
            continue
        try:
            e = entries[f["path"]]
            if e["raw_data"]["bytes"] != f["bytes"] or e["raw_data"]["hashes"].get("sha256") != f["sha256"]:
                raise ValueError("index.json entry differs from the file")
            arr = mds.decode_shard(blobs[f["path"]], seq_len, dtype)
            if len(arr) != e["samples"] or len(arr) != f["samples"]:
                raise ValueError(f"{len(arr)} samples, index says {e['samples']}")
            if arr.size and int(arr.max()) >= vocab:
                raise ValueError(f"token id {int(arr.max())} >= vocab {vocab}")
            counted.setdefault(set_of(f["path"]), [0, 0, 0])[2] += len(arr)
        except Exception as ex:
            res.problems.append(f"{f['path']}: {ex}")
