"""Input formats: one split of a file -> bounded Arrow batches of documents and quarantined records.

Pure functions over file objects (no Spark, no config objects, no filesystem: the caller passes a
function that opens the file). :func:`explode_split` reads one split (a whole file, or a byte range
of a splittable one, see :func:`records.is_splittable`) and yields :data:`RECORD_SCHEMA` batches of
at most ``ParseOptions.batch_rows`` rows, each row one of

* ``kind = "doc"``: a document, text repaired (:mod:`udfs.text`) and normalised;
* ``kind = "quarantine"``: a bad record or file, with ``reason`` from :data:`QUARANTINE_REASONS`, the
  1-based ``record`` number (JSONL line, WARC record, Parquet row; 0 = the whole file), an ``excerpt``
  of the raw record and a ``detail`` message. JSONL line numbers are local to the split (the driver
  adds the lines of the earlier splits, reported in the summary row);
* ``kind = "file"``: one summary row per split (``record`` = rows emitted, ``meta`` = format, bytes,
  lines, head and skipped non-document records such as WARC ``request`` or blank JSONL lines).

Formats: JSONL, JSON (one object, concatenated objects or an array; :mod:`udfs.formats.tabular`),
CSV/TSV (each plain, ``.gz``, ``.zst``, ``.bz2``, ``.xz``), Parquet, plain text (one document per
file), WARC/WET (``conversion`` records as they are, ``response`` records through trafilatura).
Compressed files are decompressed as a stream (:mod:`udfs.formats.compression`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator, Iterator
from typing import BinaryIO

import pyarrow as pa

from udfs.formats.collector import Collector
from udfs.formats.compression import GZIP_MAGIC, StreamError, decompress, decompressed_chunks, gzip_error
from udfs.formats.jats import read_jats
from udfs.formats.jsonl import read_jsonl, read_text
from udfs.formats.latex import latex_to_text
from udfs.formats.mediawiki import read_mediawiki
from udfs.formats.parquet import FooterError, read_parquet
from udfs.formats.records import (
    FORMATS,
    QUARANTINE_REASONS,
    RECORD_SCHEMA,
    ParseOptions,
    file_format,
    is_splittable,
    looks_like,
    split_name,
)
from udfs.formats.tabular import read_csv, read_json
from udfs.formats.warc import codec_name, read_warc

__all__ = [
    "FORMATS",
    "QUARANTINE_REASONS",
    "RECORD_SCHEMA",
    "ParseOptions",
    "codec_name",
    "decompress",
    "explode_file",
    "explode_split",
    "file_format",
    "gzip_error",
    "is_splittable",
    "split_name",
]

_HEAD = 64 << 10


class _Guarded:
    """Iterates decompressed chunks, keeping the first bytes and turning a damaged stream's
    :class:`StreamError` into ``error`` (the bytes before the damage were passed on)."""

    def __init__(self, chunks: Iterator[bytes], keep: int):
        self.chunks, self.keep = chunks, keep
        self.head = b""
        self.error: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.chunks:
                if len(self.head) < self.keep:
                    self.head += chunk[: self.keep - len(self.head)]
                yield chunk
        except StreamError as e:
            self.error = str(e)


def explode_split(
    path: str,
    open_file: Callable[[], BinaryIO],
    size: int,
    opts: ParseOptions,
    key_path: str | None = None,
    start: int = 0,
    end: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Parse one split of an input file into documents, quarantined records and one summary row.

    Never raises on bad input: every problem becomes a ``quarantine`` row with a reason from
    :data:`QUARANTINE_REASONS`. Memory is bounded by ``opts`` (batch rows/bytes, read chunk) and the
    largest record, never by the file.

    Args:
        path: the file's path (stored as ``input_file``).
        open_file: opens the raw (possibly compressed) file as a seekable binary file object.
        size: the file's size in bytes.
        opts: parsing, normalisation and batching options.
        key_path: the path relative to its input glob (stored as ``key_path``); default ``path``.
        start, end: the split's byte range; ``0, None`` (or ``end >= size``) = the whole file. Only
            files for which :func:`is_splittable` holds may be given a range.

    Yields:
        :data:`RECORD_SCHEMA` record batches; the last one is the ``kind = "file"`` summary row.
    """
    stem, _, _ = split_name(path)
    fmt, codec = file_format(path, opts.format)
    whole = start == 0 and (end is None or end >= size)
    end = None if end is None or end >= size else end
    c = Collector(path, key_path or path, start, stem, opts)
    if fmt is None:
        with open_file() as f:
            head = f.read(200)
        c.quarantine(
            0,
            "unsupported_format",
            head,
            f"no known extension in {path.rsplit('/', 1)[-1]!r}; set ingest.format to one of {list(FORMATS)}",
        )
        yield from c.flush()
        yield c.summary(fmt, size)
        return
    if fmt == "xml":
        fmt = _xml_kind(open_file, codec)
        if fmt is None:
            with open_file() as f:
                head = b"".join(_first(decompressed_chunks(f, codec, 1 << 16)))
            c.quarantine(0, "unsupported_format", head[:200],
                         f"XML whose root is none of <article>, <pmc-articleset>, <mediawiki> (looks like "
                         f"{looks_like(head)}); set ingest.format")
            yield from c.flush()
            yield c.summary("xml", size)
            return
    codec, label = _plain_gz(open_file, fmt, codec, size)
    stream, head = yield from _read_split(c, fmt, codec, open_file, opts, start, end)
    if stream is not None:
        head = stream.head
    if stream is not None and stream.error is not None:
        c.quarantine(0, "unreadable_file", None, f"{stream.error}; records before the damage were kept")
    elif whole and c.emitted == 0 and not c.buffered:
        # The decompressed bytes (an empty .gz has a 20-byte header that means nothing to a reader).
        c.quarantine(0, "empty_file", head[:200] or None, f"{size} bytes, no record")
    yield from c.flush()
    # A WARC reader's head is the file's raw bytes: compressed under a codec its name gave, it says
    # nothing of the records (and "gzip-compressed data" would read as a misnamed file).
    raw_compressed = stream is None and codec is not None
    looks = looks_like(head) if start == 0 and head and not raw_compressed else None
    yield c.summary(label, size, head if fmt in _STREAMED else None, looks)


_STREAMED = ("jsonl", "json", "csv", "tsv", "jats", "latex", "mediawiki", "text")


def _plain_gz(open_file: Callable[[], BinaryIO], fmt: str, codec: str | None,
              size: int) -> tuple[str | None, str]:
    """``(codec, format label)``: a file named ``.gz`` without the gzip magic is read as it is.

    A plain file named .gz is a common upload slip: reading it as it is beats quarantining every record
    as undecompressable; the file summary's format says so (report: ingest formats).
    """
    if codec == "gz" and size:
        with open_file() as f:
            if f.read(2) != GZIP_MAGIC:
                return None, f"{fmt} (plain, named .gz)"
    return codec, fmt


def _read_split(
    c: Collector, fmt: str, codec: str | None, open_file: Callable[[], BinaryIO], opts: ParseOptions,
    start: int, end: int | None,
) -> Generator[pa.RecordBatch, None, tuple[_Guarded | None, bytes]]:
    """Yield the split's record batches through the reader of ``fmt``; a reader that fails quarantines
    the file (``unreadable_file``) instead of raising.

    Returns:
        The guarded stream (None for WARC and Parquet, which read the file themselves) and the file's
        first bytes as far as they were read.
    """
    stream: _Guarded | None = None
    head = b""
    try:
        if fmt in ("wet", "warc"):
            with open_file() as f:
                head = f.read(_HEAD)
            yield from read_warc(c, open_file, codec, head)
        elif fmt == "parquet":
            with open_file() as f:
                yield from read_parquet(c, f, start, end)
        else:
            with open_file() as f:
                if start:
                    f.seek(start - 1)
                stream = _Guarded(
                    decompressed_chunks(f, codec, opts.read_bytes), 4 * max(opts.excerpt_chars, 50)
                )
                yield from _read_stream(c, fmt, stream, start, end)
    except FooterError as e:
        if start == 0:  # every split of the file fails the same way: report it once
            c.quarantine(0, "unreadable_file", None, f"parquet: {e}")
    except Exception as e:  # a reader bug or an unforeseen corruption: never lose the file silently
        c.quarantine(0, "unreadable_file", head[:200] or None, f"{fmt}: {type(e).__name__}: {e}")
    return stream, head


def _first(chunks: Iterator[bytes]) -> list[bytes]:
    try:
        return [next(iter(chunks), b"")]
    except StreamError:
        return [b""]


def _xml_kind(open_file: Callable[[], BinaryIO], codec: str | None) -> str | None:
    """The format of a ``.xml`` file from its root element: ``jats``, ``mediawiki`` or ``None``."""
    import re

    with open_file() as f:
        head = b"".join(_first(decompressed_chunks(f, codec, 1 << 16)))
    body = re.sub(rb"<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>", b"", head[:65536], flags=re.DOTALL).lstrip()
    root = re.match(rb"<([\w:.-]+)", body)
    name = root.group(1).split(b":")[-1].lower() if root else b""
    if name == b"mediawiki":
        return "mediawiki"
    return "jats" if name in (b"article", b"pmc-articleset", b"articles") else None


def _read_stream(
    c: Collector, fmt: str, stream: Iterator[bytes], start: int, end: int | None
) -> Iterator[pa.RecordBatch]:
    if fmt == "jsonl":
        return read_jsonl(c, stream, start, end)
    if fmt == "json":
        return read_json(c, stream)
    if fmt == "jats":
        return read_jats(c, stream)
    if fmt == "mediawiki":
        return read_mediawiki(c, stream)
    if fmt == "latex":
        return read_text(c, stream, latex_to_text)
    if fmt in ("csv", "tsv"):
        return read_csv(c, stream, "," if fmt == "csv" else "\t")
    return read_text(c, stream)


def explode_file(
    path: str, content: bytes, opts: ParseOptions, key_path: str | None = None
) -> Iterator[pa.RecordBatch]:
    """:func:`explode_split` over a whole file held in memory (tests, small files, filesystems the
    workers cannot open: the ``binaryFile`` fallback)."""
    yield from explode_split(path, lambda: io.BytesIO(content), len(content), opts, key_path)
