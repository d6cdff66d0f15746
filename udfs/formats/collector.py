"""Collects one split's documents and quarantined records into bounded Arrow batches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from udfs import text as T
from udfs.formats import mojibake
from udfs.formats.records import QUARANTINE_REASONS, RECORD_SCHEMA, ParseOptions, as_str, clean, excerpt

_DOC_FIELDS = ("record", "source", "src_id", "url", "meta", "text", "n_replaced")
_BAD_FIELDS = ("record", "reason", "excerpt", "detail")


def _lists(names: tuple[str, ...]) -> dict[str, list[Any]]:
    return {k: [] for k in names}


@dataclass
class Collector:
    """Buffers records of one split and emits :data:`RECORD_SCHEMA` batches of at most
    ``opts.batch_rows`` rows, or as soon as the buffered texts reach ``opts.batch_bytes``.

    Attributes:
        path, key_path: the file (``input_file``) and its path relative to its glob.
        split_start: first byte of the split (0 for a whole file).
        default_source: ``source`` of records that name none (the file name stem).
        emitted: rows emitted so far (documents + quarantined).
        lines: lines owned by the split (JSONL), for the driver's line-number prefix sum.
        skipped: non-document records skipped, by kind (``blank_line``, ``warc_request``...).
        counted: per-file counts of decisions (``charset_source.meta``, ``charset.gb18030``,
            ``mojibake_fixed``), emitted as ``count.<key>`` in the summary row.
    """

    path: str
    key_path: str
    split_start: int
    default_source: str
    opts: ParseOptions
    docs: dict[str, list[Any]] = field(default_factory=lambda: _lists(_DOC_FIELDS))
    bad: dict[str, list[Any]] = field(default_factory=lambda: _lists(_BAD_FIELDS))
    pending_bytes: int = 0
    emitted: int = 0
    lines: int | None = None
    skipped: Counter = field(default_factory=Counter)
    counted: Counter = field(default_factory=Counter)

    def doc(
        self,
        record: int,
        text: str,
        n_replaced: int,
        *,
        escaped: bool = False,
        src_id: Any = None,
        url: Any = None,
        source: Any = None,
        meta: dict[str, str] | None = None,
    ) -> None:
        """Buffer one document (normalised at flush time, a batch at once)."""
        text, n_fixed = T.repair_surrogates(text, escaped)
        if len(text) > self.opts.max_doc_bytes:  # bytes >= code points: over the limit already
            self.quarantine(
                record,
                "too_large",
                text,
                f"{len(text)} characters (so at least as many UTF-8 bytes) > max_doc_bytes "
                f"{self.opts.max_doc_bytes}",
            )
            return
        d = self.docs
        d["record"].append(record)
        d["source"].append(clean(source) if isinstance(source, str) and source else self.default_source)
        d["src_id"].append(as_str(src_id))
        d["url"].append(as_str(url))
        d["meta"].append(list((meta or {}).items()))
        d["text"].append(text)
        d["n_replaced"].append(n_replaced + n_fixed)
        self.pending_bytes += len(text)

    def quarantine(
        self, record: int, reason: str, raw: bytes | str | None, detail: str | None = None
    ) -> None:
        """Buffer one quarantined record (``record`` 0 = the whole file)."""
        assert reason in QUARANTINE_REASONS, reason
        b = self.bad
        b["record"].append(record)
        b["reason"].append(reason)
        b["excerpt"].append(excerpt(raw, self.opts.excerpt_chars))
        b["detail"].append(None if detail is None else clean(detail)[:500])

    @property
    def buffered(self) -> int:
        """Rows waiting in the buffers (documents + quarantined)."""
        return len(self.docs["text"]) + len(self.bad["record"])

    def full(self) -> bool:
        """True when a batch is due (``batch_rows`` rows or ``batch_bytes`` of text buffered)."""
        return self.buffered >= self.opts.batch_rows or self.pending_bytes >= self.opts.batch_bytes

    def flush(self) -> Iterator[pa.RecordBatch]:
        """Emit what is buffered: documents first, then quarantined records."""
        if self.docs["text"]:
            yield from self._flush_docs()
        if self.bad["record"]:
            n = len(self.bad["record"])
            self.emitted += n
            yield self._batch("quarantine", n, self.bad)
            self.bad = _lists(_BAD_FIELDS)

    def _flush_docs(self) -> Iterator[pa.RecordBatch]:
        o, d = self.opts, self.docs
        if o.fix_mojibake:
            fixed = mojibake.fix_all(d["text"])
            for i in fixed:
                d["meta"][i] = [*d["meta"][i], ("mojibake_fixed", "true")]
            self.counted["mojibake_fixed"] += len(fixed)
        raw = pa.array(d["text"], pa.string())
        text = T.normalize(
            raw,
            nfc=o.nfc,
            newlines=o.newlines,
            strip_invisible=o.strip_invisible,
            strip_control=o.strip_control,
        )
        n_chars, n_bytes = T.lengths(text)
        blank = T.is_blank(text)
        large = pc.greater(n_bytes, o.max_doc_bytes)
        replaced = pa.array(d["n_replaced"], pa.int32())
        chars = pc.max_element_wise(pc.cast(n_chars, pa.float64()), 1.0)
        frac = pc.divide(pc.cast(replaced, pa.float64()), chars)
        garbled = pc.greater(frac, o.max_replacement_fraction)
        if o.replacement_action == "flag":
            for i in pc.indices_nonzero(garbled).to_pylist():
                d["meta"][i] = [*d["meta"][i], ("replacement_fraction", f"{frac[i].as_py():.4f}")]
            garbled = pa.array([False] * len(d["text"]))
        bad = pc.or_(pc.or_(blank, large), garbled)
        for i in pc.indices_nonzero(bad).to_pylist():
            if blank[i].as_py():
                self.quarantine(d["record"][i], "empty_after_normalization", d["text"][i], None)
            elif garbled[i].as_py():
                self.quarantine(
                    d["record"][i],
                    "too_many_replacements",
                    d["text"][i],
                    f"{replaced[i].as_py()} of {n_chars[i].as_py()} characters are U+FFFD > "
                    f"max_replacement_fraction {o.max_replacement_fraction} (wrong or undeclared charset)",
                )
            else:
                self.quarantine(
                    d["record"][i],
                    "too_large",
                    d["text"][i],
                    f"{n_bytes[i].as_py()} bytes > max_doc_bytes {o.max_doc_bytes}",
                )
        keep = pc.invert(bad)
        cols = {
            "record": pa.array(d["record"], pa.int64()),
            "source": pa.array(d["source"], pa.string()),
            "src_id": pa.array(d["src_id"], pa.string()),
            "url": pa.array(d["url"], pa.string()),
            "meta": pa.array(d["meta"], RECORD_SCHEMA.field("meta").type),
            "text": text,
            "n_chars": n_chars,
            "n_bytes": n_bytes,
            "n_replaced": replaced,
        }
        if pc.any(bad).as_py():  # filtering copies every column, the texts too: only when a row goes
            cols = {k: v.filter(keep) for k, v in cols.items()}
        n = len(cols["record"])
        self.docs = _lists(_DOC_FIELDS)
        self.pending_bytes = 0
        if n:
            self.emitted += n
            yield self._batch("doc", n, cols)

    def _batch(self, kind: str, n: int, cols: dict[str, Any]) -> pa.RecordBatch:
        fixed = {
            "kind": kind,
            "input_file": self.path,
            "key_path": self.key_path,
            "split_start": self.split_start,
        }
        arrays = []
        for f in RECORD_SCHEMA:
            if f.name in fixed:
                arrays.append(pa.array([fixed[f.name]] * n, f.type))
            elif f.name in cols:
                v = cols[f.name]
                arrays.append(v if isinstance(v, pa.Array) else pa.array(v, f.type))
            else:
                arrays.append(pa.nulls(n, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)

    def summary(
        self, fmt: str | None, size: int, head: bytes | None = None, looks: str | None = None
    ) -> pa.RecordBatch:
        """The split's ``kind = "file"`` row: ``record`` = rows emitted; ``meta`` = format, bytes
        (the file's size on its first split, else 0, so sums count each file once), ``lines`` owned
        (JSONL), ``head`` (an excerpt of the decompressed start, first split), ``looks_like`` (what the
        start looks like, :func:`records.looks_like`) and skipped records."""
        meta = [("format", fmt or "unknown"), ("bytes", str(size if self.split_start == 0 else 0))]
        if self.lines is not None:
            meta.append(("lines", str(self.lines)))
        if head is not None and self.split_start == 0:
            meta.append(("head", excerpt(head, self.opts.excerpt_chars) or ""))
        if looks is not None:
            meta.append(("looks_like", looks))
        meta += [(f"skipped.{k}", str(v)) for k, v in sorted(self.skipped.items())]
        meta += [(f"count.{k}", str(v)) for k, v in sorted(self.counted.items())]
        return self._batch("file", 1, {"record": [self.emitted], "meta": [meta]})
