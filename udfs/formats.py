"""Input formats: one file's bytes -> Arrow batches of documents and quarantined records.

Pure functions (no Spark, no config objects, no I/O): :func:`explode_file` takes a file's path and
bytes plus :class:`ParseOptions` and yields :data:`RECORD_SCHEMA` batches, each row one of

* ``kind = "doc"``: a document, text repaired (:mod:`udfs.text`) and normalised;
* ``kind = "quarantine"``: a bad record or file, with ``reason`` from :data:`QUARANTINE_REASONS`, the
  1-based ``record`` number (JSONL line, WARC record, Parquet row; 0 = the whole file), an ``excerpt``
  of the raw record and a ``detail`` message;
* ``kind = "file"``: one summary row per file (``record`` = rows emitted, ``meta`` = format, bytes and
  skipped non-document records such as WARC ``request`` or blank JSONL lines).

Formats: JSONL (plain, ``.gz``, ``.zst``), Parquet, plain text (one document per file), WARC/WET
(``warcio``; ``conversion`` records as they are, ``response`` records through trafilatura).
"""

from __future__ import annotations

import io
import json
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from udfs import text as T

QUARANTINE_REASONS: dict[str, str] = {
    "unreadable_file": "the file (or its rest) cannot be decompressed or parsed as its format",
    "unsupported_format": "format auto and the file name has no known extension",
    "empty_file": "the file holds no record (0 bytes, an empty .gz, only blank lines)",
    "malformed_json": "a JSONL line that is not valid JSON",
    "invalid_record": "a record of the wrong shape (JSON that is not an object, a WARC record without payload)",
    "text_missing": "the text field is absent or null",
    "text_not_string": "the text field holds a number, list, object or bytes",
    "empty_after_normalization": "no character other than whitespace is left after normalisation",
    "too_large": "the normalised text is over max_doc_bytes UTF-8 bytes",
    "extraction_failed": "HTML to text gave nothing (no main content, or html_extractor none)",
    "unsupported_content_type": "a WARC response that is neither HTML nor plain text (images, PDF, ...)",
}
"""The fixed vocabulary of quarantine reasons, with their meaning."""

FORMATS = ("jsonl", "parquet", "text", "wet", "warc")
_FORMAT_SUFFIXES = {
    ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".txt": "text",
    ".wet": "wet", ".warc": "warc", ".arc": "warc",
}
_COMPRESSION_SUFFIXES = {".gz": "gz", ".zst": "zst", ".zstd": "zst"}
_HTML_TYPES = ("text/html", "application/xhtml+xml")

RECORD_SCHEMA = pa.schema([
    ("kind", pa.string()),
    ("input_file", pa.string()),
    ("key_path", pa.string()),
    ("record", pa.int64()),
    ("source", pa.string()),
    ("src_id", pa.string()),
    ("url", pa.string()),
    ("meta", pa.map_(pa.string(), pa.string())),
    ("text", pa.string()),
    ("n_chars", pa.int32()),
    ("n_bytes", pa.int32()),
    ("n_replaced", pa.int32()),
    ("reason", pa.string()),
    ("excerpt", pa.string()),
    ("detail", pa.string()),
])
"""Rows emitted by :func:`explode_file`; ``key_path`` is the file path relative to its input glob."""

_MISSING = object()
_FLUSH_ROWS = 2048
_FLUSH_BYTES = 64 << 20  # keeps a batch far below the 2 GiB offsets of Arrow `string`


@dataclass(frozen=True)
class ParseOptions:
    """What :func:`explode_file` needs; built by the pipeline from the ``ingest`` config section.

    Attributes:
        format: ``auto`` (from the file name) or one of :data:`FORMATS`.
        text_field, id_field, url_field, source_field: record fields (dotted paths reach into nested
            objects, e.g. ``metadata.url``); ``None`` disables id/url/source.
        meta_fields: fields copied into ``meta`` (strings as they are, other values as JSON).
        nfc, newlines, strip_invisible, strip_control: :func:`udfs.text.normalize` switches.
        max_doc_bytes: larger normalised texts are quarantined (``too_large``), UTF-8 bytes.
        html_extractor: ``trafilatura`` or ``none``.
        excerpt_chars: characters of the raw record kept in quarantine excerpts.
    """

    format: str = "auto"
    text_field: str = "text"
    id_field: str | None = "id"
    url_field: str | None = "url"
    source_field: str | None = "source"
    meta_fields: tuple[str, ...] = ()
    nfc: bool = True
    newlines: bool = True
    strip_invisible: bool = True
    strip_control: bool = True
    max_doc_bytes: int = 4_000_000
    html_extractor: str = "trafilatura"
    excerpt_chars: int = 200


# ------------------------------------------------------------------------------------ file names
def split_name(path: str) -> tuple[str, str | None, str | None]:
    """Split a file name into ``(stem, format, compression)`` from its suffixes.

    >>> split_name("s3://b/CC-MAIN-1-00000.warc.wet.gz")
    ('CC-MAIN-1-00000', 'wet', 'gz')
    >>> split_name("/x/notes.md")
    ('notes.md', None, None)
    """
    name = path.rstrip("/").rsplit("/", 1)[-1]
    stem, compression, fmt = name, None, None
    low = stem.lower()
    for suf, codec in _COMPRESSION_SUFFIXES.items():
        if low.endswith(suf):
            stem, compression, low = stem[: -len(suf)], codec, low[: -len(suf)]
            break
    for suf, f in _FORMAT_SUFFIXES.items():
        if low.endswith(suf):
            stem, fmt, low = stem[: -len(suf)], f, low[: -len(suf)]
            break
    if fmt == "wet" and low.endswith(".warc"):  # Common Crawl names WET files *.warc.wet.gz
        stem = stem[: -len(".warc")]
    return stem, fmt, compression


def decompress(data: bytes, codec: str | None) -> tuple[bytes, str | None]:
    """Decompress gzip (any number of members) or Zstandard, salvaging what precedes an error.

    Args:
        data: compressed bytes.
        codec: ``"gz"``, ``"zst"`` or ``None`` (returned as is).

    Returns:
        ``(decompressed, error)``: ``error`` is ``None``, or a message when the stream is corrupt or
        truncated; ``decompressed`` then holds everything before the damage (whole 1 MiB input
        chunks for gzip).
    """
    if codec is None or not data:
        return data, None
    if codec == "zst":
        import zstandard

        out = io.BytesIO()
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as r:
                while chunk := r.read(1 << 20):
                    out.write(chunk)
        except zstandard.ZstdError as e:
            return out.getvalue(), f"zstd: {e}"
        return out.getvalue(), None
    parts: list[bytes] = []
    error = _gunzip(data, parts.append)
    return b"".join(parts), error


def _gunzip(data: bytes, sink: Callable[[bytes], Any]) -> str | None:
    """Feed the decompressed bytes of every gzip member of ``data`` to ``sink``, 1 MiB at a time.

    Returns:
        ``None``, or why the stream is damaged (``sink`` then got everything before the damage).
    """
    buf = data
    while buf:
        d = zlib.decompressobj(wbits=31)
        pos = 0
        try:
            while pos < len(buf) and not d.eof:
                sink(d.decompress(buf[pos : pos + (1 << 20)], 1 << 20))
                while d.unconsumed_tail and not d.eof:  # bounded output: highly compressible input
                    sink(d.decompress(d.unconsumed_tail, 1 << 20))
                pos += 1 << 20
        except zlib.error as e:
            return f"gzip: {e}"
        if not d.eof:
            sink(d.flush())
            return "gzip: truncated stream (no end-of-stream marker)"
        # The next member starts in the chunk just fed (unused_data) and runs on past it.
        buf = d.unused_data + buf[pos:]
        if not buf.strip(b"\x00"):  # zero padding after the last member (tape-style writers)
            break
    return None


# ---------------------------------------------------------------------------------- collecting
@dataclass
class _Collector:
    path: str
    key_path: str
    default_source: str
    opts: ParseOptions
    docs: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in ("record", "source", "src_id", "url", "meta", "text", "n_replaced")})
    bad: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in ("record", "reason", "excerpt", "detail")})
    pending_bytes: int = 0
    emitted: int = 0
    skipped: Counter = field(default_factory=Counter)

    def doc(self, record: int, text: str, n_replaced: int, *, escaped: bool = False, src_id: Any = None,
            url: Any = None, source: Any = None, meta: dict[str, str] | None = None) -> None:
        text, n_fixed = T.repair_surrogates(text, escaped)
        if len(text) > self.opts.max_doc_bytes:  # bytes >= code points: over the limit already
            self.quarantine(record, "too_large", text, f"{len(text)} characters (so at least as many UTF-8 bytes) > max_doc_bytes {self.opts.max_doc_bytes}")
            return
        d = self.docs
        d["record"].append(record)
        d["source"].append(_clean(source) if isinstance(source, str) and source else self.default_source)
        d["src_id"].append(_as_str(src_id))
        d["url"].append(_as_str(url))
        d["meta"].append(list((meta or {}).items()))
        d["text"].append(text)
        d["n_replaced"].append(n_replaced + n_fixed)
        self.pending_bytes += len(text)

    def quarantine(self, record: int, reason: str, raw: bytes | str | None, detail: str | None = None) -> None:
        assert reason in QUARANTINE_REASONS, reason
        b = self.bad
        b["record"].append(record)
        b["reason"].append(reason)
        b["excerpt"].append(_excerpt(raw, self.opts.excerpt_chars))
        b["detail"].append(None if detail is None else _clean(detail)[:500])

    def full(self) -> bool:
        return len(self.docs["text"]) + len(self.bad["record"]) >= _FLUSH_ROWS or self.pending_bytes >= _FLUSH_BYTES

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.docs["text"]:
            yield from self._flush_docs()
        if self.bad["record"]:
            n = len(self.bad["record"])
            self.emitted += n
            yield self._batch("quarantine", n, self.bad)
            self.bad = {k: [] for k in self.bad}

    def _flush_docs(self) -> Iterator[pa.RecordBatch]:
        o, d = self.opts, self.docs
        raw = pa.array(d["text"], pa.string())
        text = T.normalize(raw, nfc=o.nfc, newlines=o.newlines, strip_invisible=o.strip_invisible,
                           strip_control=o.strip_control)
        n_chars, n_bytes = T.lengths(text)
        blank = T.is_blank(text)
        large = pc.greater(n_bytes, o.max_doc_bytes)
        for i in pc.indices_nonzero(pc.or_(blank, large)).to_pylist():
            if blank[i].as_py():
                self.quarantine(d["record"][i], "empty_after_normalization", d["text"][i], None)
            else:
                self.quarantine(d["record"][i], "too_large", d["text"][i],
                                f"{n_bytes[i].as_py()} bytes > max_doc_bytes {o.max_doc_bytes}")
        keep = pc.invert(pc.or_(blank, large))
        cols = {
            "record": pa.array(d["record"], pa.int64()), "source": pa.array(d["source"], pa.string()),
            "src_id": pa.array(d["src_id"], pa.string()), "url": pa.array(d["url"], pa.string()),
            "meta": pa.array(d["meta"], RECORD_SCHEMA.field("meta").type), "text": text,
            "n_chars": n_chars, "n_bytes": n_bytes, "n_replaced": pa.array(d["n_replaced"], pa.int32()),
        }
        cols = {k: v.filter(keep) for k, v in cols.items()}
        n = len(cols["record"])
        self.docs = {k: [] for k in self.docs}
        self.pending_bytes = 0
        if n:
            self.emitted += n
            yield self._batch("doc", n, cols)

    def _batch(self, kind: str, n: int, cols: dict[str, Any]) -> pa.RecordBatch:
        arrays = []
        for f in RECORD_SCHEMA:
            if f.name == "kind":
                arrays.append(pa.array([kind] * n, f.type))
            elif f.name == "input_file":
                arrays.append(pa.array([self.path] * n, f.type))
            elif f.name == "key_path":
                arrays.append(pa.array([self.key_path] * n, f.type))
            elif f.name in cols:
                v = cols[f.name]
                arrays.append(v if isinstance(v, pa.Array) else pa.array(v, f.type))
            else:
                arrays.append(pa.nulls(n, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)

    def summary(self, fmt: str | None, size: int) -> pa.RecordBatch:
        meta = [("format", fmt or "unknown"), ("bytes", str(size))]
        meta += [(f"skipped.{k}", str(v)) for k, v in sorted(self.skipped.items())]
        return self._batch("file", 1, {"record": [self.emitted], "meta": [meta]})


def _as_str(v: Any) -> str | None:
    if v is None or v is _MISSING:
        return None
    if isinstance(v, str):
        return _clean(v)
    if isinstance(v, bool | int | float):
        return json.dumps(v)
    return _clean(json.dumps(v, ensure_ascii=False, sort_keys=True, default=str))


def _clean(s: str) -> str:
    return T.repair_surrogates(s)[0]


def _excerpt(raw: bytes | str | None, n: int) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw[: 4 * n]).decode("utf-8", errors="replace")[:n]
    return _clean(raw[: n + 1])[:n]


def _lookup(obj: Any, path: str) -> Any:
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


# ------------------------------------------------------------------------------------ formats
def _from_mapping(c: _Collector, record: int, obj: dict[str, Any], raw: bytes | str, escaped: bool) -> None:
    o = c.opts
    value = _lookup(obj, o.text_field)
    if value is _MISSING or value is None:
        c.quarantine(record, "text_missing", raw, f"field {o.text_field!r} is {'absent' if value is _MISSING else 'null'}")
        return
    if not isinstance(value, str):
        c.quarantine(record, "text_not_string", raw, f"field {o.text_field!r} holds {type(value).__name__}")
        return
    meta = {}
    for k in o.meta_fields:
        v = _lookup(obj, k)
        if v is not _MISSING and v is not None:
            meta[k] = _as_str(v)
    c.doc(record, value, 0, escaped=escaped,
          src_id=_lookup(obj, o.id_field) if o.id_field else None,
          url=_lookup(obj, o.url_field) if o.url_field else None,
          source=_lookup(obj, o.source_field) if o.source_field else None, meta=meta)


def _jsonl(c: _Collector, data: bytes) -> Iterator[pa.RecordBatch]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            c.skipped["blank_line"] += 1
            continue
        escaped = False
        try:
            obj = orjson.loads(line)  # fast path: strict JSON, valid UTF-8, no lone surrogates
        except orjson.JSONDecodeError:
            s, escaped = T.decode_utf8_escaped(line)
            try:
                # strict=False accepts raw control characters (a NUL, a tab) inside strings, which many
                # real dumps hold; normalisation then removes them instead of losing the document.
                obj = json.loads(s, strict=False)
            except (ValueError, RecursionError) as e:  # JSONDecodeError; RecursionError on [[[[...
                c.quarantine(i, "malformed_json", line, str(e))
                continue
        if isinstance(obj, dict):
            _from_mapping(c, i, obj, line, escaped)
        else:
            c.quarantine(i, "invalid_record", line, f"JSON {type(obj).__name__}, not an object")
        if c.full():
            yield from c.flush()


def _parquet(c: _Collector, data: bytes) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    o = c.opts
    pf = pq.ParquetFile(pa.BufferReader(data))
    wanted = [f for f in (o.text_field, o.id_field, o.url_field, o.source_field, *o.meta_fields) if f]
    tops = sorted({f.split(".")[0] if f not in pf.schema_arrow.names else f for f in wanted} & set(pf.schema_arrow.names))
    record = 0
    for batch in pf.iter_batches(batch_size=_FLUSH_ROWS, columns=tops):
        for row in batch.to_pylist():
            record += 1
            _from_mapping(c, record, row, json.dumps(row, ensure_ascii=False, default=repr)[: 4 * o.excerpt_chars], False)
        yield from c.flush()


def _text(c: _Collector, data: bytes) -> Iterator[pa.RecordBatch]:
    text, n_replaced = T.decode_utf8(data)
    c.doc(1, text, n_replaced)
    yield from c.flush()


def _charset(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k.strip().lower() == "charset" and v.strip():
            try:
                return codec_name(v.strip().strip("\"'").lower())
            except LookupError:
                return "utf-8"
    return "utf-8"


def codec_name(name: str) -> str:
    """Python codec name of a charset label (raises LookupError when unknown)."""
    import codecs

    return codecs.lookup(name).name


def _decode(payload: bytes, charset: str) -> tuple[str, int]:
    if charset == "utf-8":
        return T.decode_utf8(payload)
    text = payload.decode(charset, errors="replace")
    return text, text.count(T.REPLACEMENT)


def _gzip_error(data: bytes) -> str | None:
    """Why the gzip stream ``data`` is damaged (``None`` when intact or not gzip), output discarded.

    Streams 1 MiB at a time, so a multi-GB WARC is checked without holding its decompressed bytes.
    """
    return _gunzip(data, lambda chunk: None) if data[:2] == b"\x1f\x8b" else None


def _html_to_text(html: str, url: str | None) -> str | None:
    import trafilatura

    # deduplicate=False: trafilatura's dedup keeps a process-wide LRU cache, which would make the
    # output depend on which documents a worker saw before.
    return trafilatura.extract(html, url=url, include_comments=False, include_tables=True, deduplicate=False)


def _warc(c: _Collector, data: bytes) -> Iterator[pa.RecordBatch]:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    truncated = False
    try:
        for rec in ArchiveIterator(io.BytesIO(data), check_digests=False):
            n += 1
            if rec.length is None:  # Content-Length is mandatory (WARC 1.1 section 5.3): headers cut short
                truncated = True
                c.quarantine(n, "unreadable_file", None, "record truncated: its headers end before Content-Length")
                continue
            kind = rec.rec_type
            if kind not in ("conversion", "response"):
                c.skipped[f"warc_{kind}"] += 1
                continue
            h = rec.rec_headers
            rid = (h.get_header("WARC-Record-ID") or "").strip("<>") or None
            url = h.get_header("WARC-Target-URI")
            meta = {"warc_type": kind, "warc_date": h.get_header("WARC-Date")}
            lang = h.get_header("WARC-Identified-Content-Language")
            if lang:
                meta["language"] = lang
            payload = rec.content_stream().read()
            # warcio stops quietly at the end of the bytes: a record cut short (a truncated download,
            # or a gzip member without its end) leaves part of its Content-Length unread. Its text is
            # a fragment, so it is quarantined rather than shipped as a (shorter) document.
            missing = getattr(rec.raw_stream, "limit", 0)
            if missing:
                truncated = True
                declared = h.get_header("Content-Length")
                c.quarantine(n, "unreadable_file", payload,
                             f"record truncated: {missing} of {declared} Content-Length bytes missing")
                continue
            if kind == "conversion":
                meta["content_type"] = h.get_header("Content-Type")
                text, n_rep = T.decode_utf8(payload)
            else:
                http = rec.http_headers
                ctype = http.get_header("Content-Type") if http else None
                meta["content_type"] = ctype
                if http is not None:
                    meta["http_status"] = http.get_statuscode()
                mime = (ctype or "").split(";")[0].strip().lower()
                if mime in _HTML_TYPES:
                    html, n_rep = _decode(payload, _charset(ctype))
                    extracted = _html_to_text(html, url) if c.opts.html_extractor == "trafilatura" else None
                    if not extracted:
                        c.quarantine(n, "extraction_failed", payload,
                                     f"{c.opts.html_extractor}: no main text in {len(payload)} bytes of HTML ({url})")
                        continue
                    text, n_rep = extracted, min(n_rep, extracted.count(T.REPLACEMENT))
                elif mime == "text/plain":
                    text, n_rep = _decode(payload, _charset(ctype))
                else:
                    c.quarantine(n, "unsupported_content_type", payload[:200], f"{ctype!r} ({url})")
                    continue
            meta = {k: v for k, v in meta.items() if v is not None}
            c.doc(n, text, n_rep, src_id=rid, url=url, meta=meta)
            if c.full():
                yield from c.flush()
    except Exception as e:  # warcio raises ArchiveLoadFailed, zlib.error, EOFError, ValueError...
        c.quarantine(n + 1, "unreadable_file", None, f"{type(e).__name__}: {e}")
    else:
        if n == 0 and data.strip():  # warcio yields nothing, without an error, for non-WARC bytes
            c.quarantine(1, "unreadable_file", data[:200], f"no WARC record in {len(data)} bytes")
        elif not truncated and (error := _gzip_error(data)):
            # warcio also ends quietly when a gzip member is cut inside a record's headers.
            c.quarantine(n + 1, "unreadable_file", None, f"{error}; records before the damage were kept")
    yield from c.flush()


_UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
"""First two bytes of every gzip member (RFC 1952, section 2.3.1)."""

_READERS = {"jsonl": _jsonl, "parquet": _parquet, "text": _text, "wet": _warc, "warc": _warc}


def explode_file(path: str, content: bytes, opts: ParseOptions, key_path: str | None = None) -> Iterator[pa.RecordBatch]:
    """Parse one input file into documents, quarantined records and one summary row.

    Never raises on bad input: every problem becomes a ``quarantine`` row with a reason from
    :data:`QUARANTINE_REASONS`.

    Args:
        path: the file's path (stored as ``input_file``).
        content: the file's raw (possibly compressed) bytes.
        opts: parsing and normalisation options.
        key_path: the path relative to its input glob (stored as ``key_path``); default ``path``.

    Yields:
        :data:`RECORD_SCHEMA` record batches; the last one is the ``kind = "file"`` summary row.
    """
    stem, fmt, codec = split_name(path)
    c = _Collector(path, key_path or path, stem, opts)
    if opts.format != "auto":
        fmt = opts.format
    size = len(content)
    if fmt is None:
        c.quarantine(0, "unsupported_format", content[:200], f"no known extension in {path.rsplit('/', 1)[-1]!r}; "
                     f"set ingest.format to one of {list(FORMATS)}")
        yield from c.flush()
        yield c.summary(fmt, size)
        return
    data, error = content, None
    label = fmt
    if codec == "gz" and content and not content.startswith(_GZIP_MAGIC):
        # A plain file named .gz (a common upload slip): read it as it is rather than quarantining
        # every record as undecompressable; the file summary's format says so (report: ingest formats).
        codec, label = None, f"{fmt} (plain, named .gz)"
    if fmt not in ("wet", "warc") or codec == "zst":  # warcio reads gzip-per-record files itself
        data, error = decompress(content, codec)
    if fmt in ("jsonl", "text") and data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]  # Windows tools write one; JSON (RFC 8259 sec. 8.1) must not start with it
    try:
        yield from _READERS[fmt](c, data)
    except Exception as e:  # a corrupt Parquet footer, or a reader bug: never lose the file silently
        c.quarantine(0, "unreadable_file", content[:200], f"{fmt}: {type(e).__name__}: {e}")
    if error is not None:
        c.quarantine(0, "unreadable_file", None, f"{error}; records before the damage were kept")
    elif c.emitted == 0 and not c.docs["text"] and not c.bad["record"]:
        # The decompressed bytes (an empty .gz has a 20-byte header that means nothing to a reader).
        c.quarantine(0, "empty_file", data[:200] or None, f"{size} bytes, no record")
    yield from c.flush()
    yield c.summary(label, size)
