"""Ingest benchmarks: the parser and normaliser of one file, against named references, in one run.

1. ``normalize``: :func:`udfs.text.normalize` (Arrow kernels over a batch) against the same four steps
   done per document in Python (``re.sub`` + ``unicodedata.normalize``); outputs are checked equal.
   One document in ten needs every step, the others none (clean ASCII prose).
2. ``parse``: :func:`udfs.formats.explode_file` (decompress, parse, repair, normalise, route) on a
   JSONL.gz shard against datatrove 0.10.1's ``JsonlReader`` reading the same file (parse only, no
   normalisation), the reader of a widely used curation library.

    python -m bench.ingest [n_docs]
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
import unicodedata
from pathlib import Path

import pyarrow as pa

from bench.common import time_best
from bench.corpus import generate_texts
from udfs.formats import ParseOptions, explode_file
from udfs.text import normalize

_NEWLINES = re.compile(r"\r\n?")
_INVISIBLE = re.compile("[\u200b\ufeff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _python_normalize(texts: list[str]) -> list[str]:
    out = []
    for t in texts:
        t = _CONTROL.sub("", _INVISIBLE.sub("", _NEWLINES.sub("\n", t)))
        out.append(unicodedata.normalize("NFC", t))
    return out


def _dirty(texts: list[str], every: int = 10) -> list[str]:
    # One document in `every` needs every step (CRLF, zero-width spaces, decomposed accents, a
    # control character); the rest are clean ASCII prose, as most crawled text is.
    return [t.replace("\n", "\r\n").replace(" the ", " the\u200b ").replace("e", "e\u0301", 3) + "\x07"
            if i % every == 0 else t for i, t in enumerate(texts)]


def _best(fn, repeat: int = 3) -> float:
    """Best wall seconds of ``repeat`` runs (no warm-up run: the first call's cost is part of the figure)."""
    return time_best(fn, warmup=0, repeat=repeat)["best_s"]


def run(n_docs: int, seed: int = 0) -> dict:
    """Measure both comparisons on ``n_docs`` synthetic documents (bench/corpus.py, ``seed``).

    Returns:
        Figures in docs/s and MB/s (text UTF-8 bytes) plus the ratios ours / reference.
    """
    texts = _dirty(generate_texts(n_docs, seed))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    arr = pa.array(texts, pa.string())
    assert normalize(arr).to_pylist() == _python_normalize(texts)
    t_arrow = _best(lambda: normalize(arr))
    t_py = _best(lambda: _python_normalize(texts))

    from datatrove.pipeline.readers import JsonlReader

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "shard-00000.jsonl.gz"
        lines = [json.dumps({"id": f"d{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(texts)]
        path.write_bytes(gzip.compress("\n".join(lines).encode(), mtime=0))
        data = path.read_bytes()

        def ours() -> int:
            return sum(b.num_rows for b in explode_file(str(path), data, ParseOptions()))

        def datatrove() -> int:
            return sum(1 for _ in JsonlReader(d, glob_pattern="*.jsonl.gz", add_file_path=False).run())

        assert ours() == n_docs + 1 and datatrove() == n_docs
        t_ours = _best(ours)
        t_dt = _best(datatrove)
    return {
        "n_docs": n_docs, "text_mb": round(mb, 2),
        "normalize_arrow_mb_s": round(mb / t_arrow, 1), "normalize_python_mb_s": round(mb / t_py, 1),
        "normalize_speedup": round(t_py / t_arrow, 2),
        "parse_winnow_docs_s": round(n_docs / t_ours), "parse_datatrove_docs_s": round(n_docs / t_dt),
        "parse_ratio_vs_datatrove": round(t_dt / t_ours, 2),
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    res = run(n)
    width = max(map(len, res))
    for k, v in res.items():
        print(f"{k:<{width}}  {v}")
