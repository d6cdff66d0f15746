"""Collects one split's documents and quarantined records into bounded Arrow batches."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs import text as T
from udfs.formats import mojibake
from udfs.formats.records import (
    QUARANTINE_REASONS,
    RECORD_SCHEMA,
    ParseOptions,
    as_str,
    blank_detail,
    clean,
    excerpt,
)

_DOC_FIELDS = ("record", "source", "src_id", "url", "meta", "text", "n_replaced", "record_format",
               "markers_resolved")
_BAD_FIELDS = ("record", "reason", "excerpt", "detail")


def _utf8(a: pa.Array | None) -> pa.Array | None:
    return a if a is None or a.type == pa.string() else a.cast(pa.string())


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
        columns: documents buffered as Arrow columns (:meth:`doc_columns`), after those of ``docs``.
        lines: lines owned by the split (JSONL), for the driver's line-number prefix sum.
        skipped: non-document records skipped, by kind (``blank_line``, ``warc_request``...).
        counted: per-file counts of decisions (``charset_source.meta``, ``charset.gb18030``,
            ``mojibake_fixed``), emitted as ``count.<key>`` in the summary row.
        file_columns: the column names of a columnar file (Parquet), for messages about a text field
            it does not have; ``None`` for other formats.
        last_doc: the record number of the last document emitted (0 before any).
        unordered: some document was emitted after one with the same or a higher record number; the
            summary row then says ``docs_unordered`` (the driver sorts the split's documents only then).
    """

    path: str
    key_path: str
    split_start: int
    default_source: str
    opts: ParseOptions
    docs: dict[str, list[Any]] = field(default_factory=lambda: _lists(_DOC_FIELDS))
    columns: list[dict[str, pa.Array]] = field(default_factory=list)
    bad: dict[str, list[Any]] = field(default_factory=lambda: _lists(_BAD_FIELDS))
    pending_bytes: int = 0
    emitted: int = 0
    lines: int | None = None
    skipped: Counter = field(default_factory=Counter)
    counted: Counter = field(default_factory=Counter)
    file_columns: list[str] | None = None
    last_doc: int = 0
    unordered: bool = False

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
        record_format: str | None = None,
        markers: dict[str, int] | None = None,
    ) -> None:
        """Buffer one document (normalised at flush time, a batch at once); ``record_format`` and
        ``markers`` (kind -> count) only for structured records (:mod:`udfs.formats.scirecords`)."""
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
        d["record_format"].append(record_format)
        d["markers_resolved"].append(None if markers is None else list(markers.items()))
        self.pending_bytes += len(text)

    def doc_columns(
        self, first_record: int, text: pa.Array, src_id: pa.Array | None = None, url: pa.Array | None = None,
        source: pa.Array | None = None, row: Callable[[int], Any] | None = None,
    ) -> None:
        """Buffer a batch of records given as Arrow columns, as :meth:`doc` would each of them: what
        :func:`udfs.formats.parquet.read_parquet` does for plain string columns, without a Python
        object per record.

        Args:
            first_record: the record number of the first row (the others follow).
            text: the text field, ``string`` or ``large_string`` (valid UTF-8, so nothing to repair);
                a null is quarantined as ``text_missing``.
            src_id, url, source: the fields, ``string`` or ``None`` (absent: null, and the default
                source).
            row: gives row ``i`` as a mapping, for the excerpts of quarantined rows.
        """
        o, n = self.opts, len(text)
        text, src_id, url, source = (_utf8(a) for a in (text, src_id, url, source))
        records = pa.array(np.arange(first_record, first_record + n, dtype=np.int64))
        missing = pc.is_null(text)
        over = pc.fill_null(pc.greater(pc.utf8_length(text), o.max_doc_bytes), False)
        bad = pc.or_(missing, over)
        for i in pc.indices_nonzero(bad).to_pylist():
            raw = json.dumps(row(i), ensure_ascii=False, default=repr)[: 4 * o.excerpt_chars] if row else None
            if missing[i].as_py():
                self.quarantine(first_record + i, "text_missing", raw, f"field {o.text_field!r} is null")
            else:
                chars = pc.utf8_length(text[i : i + 1])[0].as_py()
                detail = f"{chars} characters (so at least as many UTF-8 bytes) > max_doc_bytes "
                detail += str(o.max_doc_bytes)
                self.quarantine(first_record + i, "too_large", text[i].as_py(), detail)
        nulls = pa.nulls(n, pa.string())
        src = source if source is not None else nulls
        named = pc.fill_null(pc.and_(pc.is_valid(src), pc.not_equal(src, "")), False)
        cols = {
            "record": records,
            "source": pc.if_else(named, src, pa.scalar(self.default_source, pa.string())),
            "src_id": src_id if src_id is not None else nulls,
            "url": url if url is not None else nulls,
            "meta": pa.array([[]] * n, RECORD_SCHEMA.field("meta").type),
            "text": text,
            "n_replaced": pa.array(np.zeros(n, dtype=np.int32)),
            "record_format": nulls,
            "markers_resolved": pa.nulls(n, RECORD_SCHEMA.field("markers_resolved").type),
        }
        if pc.any(bad).as_py():
            keep = pc.invert(bad)
            cols = {k: v.filter(keep) for k, v in cols.items()}
        if len(cols["text"]):
            self.columns.append(cols)
            self.pending_bytes += len(T.string_bytes(cols["text"]))

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
        return len(self.docs["text"]) + sum(len(c["text"]) for c in self.columns) + len(self.bad["record"])

    def full(self) -> bool:
        """True when a batch is due (``batch_rows`` rows or ``batch_bytes`` of text buffered)."""
        return self.buffered >= self.opts.batch_rows or self.pending_bytes >= self.opts.batch_bytes

    def flush(self) -> Iterator[pa.RecordBatch]:
        """Emit what is buffered: documents first, then quarantined records."""
        if self.docs["text"] or self.columns:
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
        given = [{
            "record": pa.array(d["record"], pa.int64()),
            "source": pa.array(d["source"], pa.string()),
            "src_id": pa.array(d["src_id"], pa.string()),
            "url": pa.array(d["url"], pa.string()),
            "meta": pa.array(d["meta"], RECORD_SCHEMA.field("meta").type),
            "text": pa.array(d["text"], pa.string()),
            "n_replaced": pa.array(d["n_replaced"], pa.int32()),
            "record_format": pa.array(d["record_format"], pa.string()),
            "markers_resolved": pa.array(d["markers_resolved"], RECORD_SCHEMA.field("markers_resolved").type),
        }] if d["text"] else []
        given += self.columns
        batch = given[0] if len(given) == 1 else {k: pa.concat_arrays([g[k] for g in given])
                                                  for k in _DOC_FIELDS}
        raw = batch["text"]
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
        replaced = batch["n_replaced"]
        chars = pc.max_element_wise(pc.cast(n_chars, pa.float64()), 1.0)
        frac = pc.divide(pc.cast(replaced, pa.float64()), chars)
        garbled = pc.greater(frac, o.max_replacement_fraction)
        meta = batch["meta"]
        if o.replacement_action == "flag":
            flagged = pc.indices_nonzero(garbled).to_pylist()
            if flagged:
                rows = meta.to_pylist()
                for i in flagged:
                    rows[i] = [*rows[i], ("replacement_fraction", f"{frac[i].as_py():.4f}")]
                meta = pa.array(rows, meta.type)
            garbled = pa.array(np.zeros(len(raw), dtype=bool))
        bad = pc.or_(pc.or_(blank, large), garbled)
        record = batch["record"]
        for i in pc.indices_nonzero(bad).to_pylist():
            rec, before = record[i].as_py(), raw[i].as_py()
            if blank[i].as_py():
                self.quarantine(rec, "empty_after_normalization", before, blank_detail(before or ""))
            elif garbled[i].as_py():
                self.quarantine(
                    rec,
                    "too_many_replacements",
                    before,
                    f"{replaced[i].as_py()} of {n_chars[i].as_py()} characters are U+FFFD > "
                    f"max_replacement_fraction {o.max_replacement_fraction} (wrong or undeclared charset)",
                )
            else:
                self.quarantine(
                    rec,
                    "too_large",
                    before,
                    f"{n_bytes[i].as_py()} bytes > max_doc_bytes {o.max_doc_bytes}",
                )
        keep = pc.invert(bad)
        cols = {
            "record": record,
            "source": batch["source"],
            "src_id": batch["src_id"],
            "url": batch["url"],
            "meta": meta,
            "text": text,
            "n_chars": n_chars,
            "n_bytes": n_bytes,
            "n_replaced": replaced,
            "record_format": batch["record_format"],
            "markers_resolved": batch["markers_resolved"],
        }
        if pc.any(bad).as_py():  # filtering copies every column, the texts too: only when a row goes
            cols = {k: v.filter(keep) for k, v in cols.items()}
        n = len(cols["record"])
        self.docs = _lists(_DOC_FIELDS)
        self.columns = []
        self.pending_bytes = 0
        if n:
            self._check_order(cols["record"])
            self.emitted += n
            yield self._batch("doc", n, cols)

    def _check_order(self, record: pa.Array) -> None:
        """Note in :attr:`unordered` whether the emitted documents' record numbers (int64, one batch)
        stop rising strictly, within the batch or after the previous one."""
        r = record.to_numpy(zero_copy_only=False)
        if r[0] <= self.last_doc or (len(r) > 1 and not bool((np.diff(r) > 0).all())):
            self.unordered = True
        self.last_doc = max(self.last_doc, int(r.max()))

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
        start looks like, :func:`records.looks_like`), ``columns`` (:attr:`file_columns`, first split)
        and skipped records."""
        meta = [("format", fmt or "unknown"), ("bytes", str(size if self.split_start == 0 else 0))]
        if self.lines is not None:
            meta.append(("lines", str(self.lines)))
        if head is not None and self.split_start == 0:
            meta.append(("head", excerpt(head, self.opts.excerpt_chars) or ""))
        if looks is not None:
            meta.append(("looks_like", looks))
        if self.file_columns is not None and self.split_start == 0:
            meta.append(("columns", ", ".join(self.file_columns)))
        if self.unordered:
            meta.append(("docs_unordered", "1"))
        meta += [(f"skipped.{k}", str(v)) for k, v in sorted(self.skipped.items())]
        meta += [(f"count.{k}", str(v)) for k, v in sorted(self.counted.items())]
        return self._batch("file", 1, {"record": [self.emitted], "meta": [meta]})
