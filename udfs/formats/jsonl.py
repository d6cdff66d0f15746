"""JSONL and plain-text readers over streamed bytes; a JSONL split owns the lines that start in it.

Splits follow Hadoop's ``LineRecordReader``: a split ``[start, end)`` of an uncompressed file skips
the line that began before ``start`` (reading from ``start - 1``, so a line starting exactly at
``start`` is its own) and reads every line that starts before ``end``, to that line's end. Every line
is read by exactly one split, whatever the cut points. Line numbers are local to the split (1-based);
the split reports how many lines it owns so the driver can turn them into file line numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from udfs import text as T
from udfs.formats import scirecords
from udfs.formats.chunkfile import UTF8_BOM
from udfs.formats.collector import Collector
from udfs.formats.records import MISSING, as_str, join_text, lookup, not_text, sectioned_text


@dataclass(frozen=True)
class LongLine:
    """A line over the reader's limit, not kept whole: its first bytes and its length."""

    head: bytes
    n_bytes: int


def owned_lines(
    chunks: Iterable[bytes], start: int, end: int | None, limit: int
) -> Iterator[bytes | LongLine]:
    """The lines (without ``\\n``) that start in ``[start, end)`` of a file.

    Args:
        chunks: the file's bytes from offset ``max(start - 1, 0)`` to its end, in any chunking.
        start, end: the split, byte offsets; ``end`` ``None`` = to the end of the file.
        limit: a line longer than this many bytes comes out as a :class:`LongLine` (its first
            bytes only), so one enormous line never sits whole in memory.

    Yields:
        One item per owned line, in order, blank lines included (the final line needs no ``\\n``).
    """
    skipping = start > 0  # the line in progress began before the split: another split owns it
    at = start - 1 if skipping else 0  # file offset of the start of the line in progress
    pending: list[bytes] = []
    size = 0

    def done(line: bytes | LongLine, n: int) -> bool:
        nonlocal at, skipping
        at += n + 1
        skipping = False
        return end is not None and at >= end

    for chunk in chunks:
        parts = chunk.split(b"\n")
        for piece in parts[:-1]:
            if pending:
                size += len(piece)
                line: bytes | LongLine = (
                    LongLine(pending[0], size) if size > limit else b"".join([*pending, piece])
                )
                n, pending, size = size, [], 0
            else:
                line, n = piece, len(piece)
                if n > limit:
                    line = LongLine(piece[:limit], n)
            if not skipping:
                yield line
            if done(line, n):
                return
        tail = parts[-1]
        if tail:
            if size + len(tail) > limit and pending:  # keep the head only: the rest is counted
                size += len(tail)
            else:
                pending.append(tail)
                size += len(tail)
    if pending and not skipping:
        yield LongLine(pending[0], size) if size > limit else b"".join(pending)


def from_mapping(
    c: Collector,
    record: int,
    obj: dict[str, Any],
    raw: bytes | str | Callable[[], str],
    escaped: bool,
    decoded_with_replacement: bool = False,
) -> None:
    """Route one parsed record (JSON object or Parquet row): document, or quarantine with a reason.

    ``decoded_with_replacement``: the file's bytes were decoded with U+FFFD for invalid UTF-8 before
    parsing (``.json``, CSV), so the text's U+FFFD count is its ``n_replaced``.

    ``raw`` is the raw record for excerpts, or a function rendering it (called only when quarantined).
    """
    o = c.opts
    shape = None if o.record_format in ("flat", "mediawiki") else (
        scirecords.detect(obj, o.text_field) if o.record_format == "auto" else o.record_format)
    if shape is not None:
        _structured(c, record, obj, raw, escaped, shape, decoded_with_replacement)
        return
    if o.heading_field is None:
        value = lookup(obj, o.text_field)
    else:
        value = sectioned_text(obj, o.text_field, o.heading_field)
    if isinstance(value, list):  # paragraphs (body_text[].text): joined with blank lines
        joined = join_text(value)
        value = value if joined is None else joined
    if value is MISSING or value is None or not isinstance(value, str):
        raw = raw() if callable(raw) else raw
        absent = value is MISSING or value is None
        why = (f"field {o.text_field!r} is {'absent' if value is MISSING else 'null'}" if absent
               else f"field {o.text_field!r} holds {not_text(value)}")
        problem = scirecords.body_text_problem(obj)
        if problem:  # a structured scientific record of the wrong shape
            c.quarantine(record, "invalid_record", raw, f"{problem}; {why}")
        else:
            # a Parquet row holds only the columns the fields name: the file's columns are the ones to offer
            found = obj if c.file_columns is None else dict.fromkeys(c.file_columns)
            hint = _fields_found(found) if value is MISSING else ""
            c.quarantine(record, "text_missing" if absent else "text_not_string", raw, why + hint)
        return
    if o.record_format == "mediawiki":
        _wikitext(c, record, obj, value, raw, escaped, decoded_with_replacement)
        return
    _emit(c, record, obj, value, value.count(T.REPLACEMENT) if decoded_with_replacement else 0, escaped)


def _emit(c: Collector, record: int, obj: dict[str, Any], text: str, n_replaced: int, escaped: bool,
          record_format: str | None = None, markers: dict[str, int] | None = None,
          extra_meta: dict[str, str] | None = None) -> None:
    """Buffer the document ``text`` of ``obj`` with its id, url, source and ``meta`` fields
    (``extra_meta``: what the reader adds, such as the template counts of wikitext)."""
    o = c.opts
    meta = dict(extra_meta or {})
    for k in o.meta_fields:
        v = lookup(obj, k)
        if v is not MISSING and v is not None:
            meta[k] = as_str(v)
    c.doc(
        record,
        text,
        n_replaced,
        escaped=escaped,
        src_id=lookup(obj, o.id_field) if o.id_field else None,
        url=lookup(obj, o.url_field) if o.url_field else None,
        source=lookup(obj, o.source_field) if o.source_field else None,
        meta=meta,
        record_format=record_format,
        markers=markers,
    )


def _wikitext(c: Collector, record: int, obj: dict[str, Any], source: str,
              raw: bytes | str | Callable[[], str], escaped: bool, decoded_with_replacement: bool) -> None:
    """A text field holding MediaWiki wikitext (``record_format: mediawiki``): rendered as a dump's
    page is (:func:`udfs.formats.mediawiki.wikitext_to_document`, ``ingest.mediawiki.*``), with
    ``meta`` ``templates_rendered``, ``templates_dropped``, ``dropped_structures`` and ``markup_repaired``
    as there. A
    redirect page (``#REDIRECT [[...]]``) is skipped and counted (``skipped.mediawiki_redirect``), as
    in a dump."""
    from udfs.formats.mediawiki import page_meta, wikitext_to_document

    if source.lstrip()[:9].lower() == "#redirect":
        c.skipped["mediawiki_redirect"] += 1
        return
    try:
        text, dropped, counts, repaired = wikitext_to_document(source, c.opts)
    except Exception as e:  # a parser bug on odd wikitext: this record is quarantined, the rest is read
        c.quarantine(record, "invalid_record", raw() if callable(raw) else raw,
                     f"record_format mediawiki: {type(e).__name__}: {e}")
        return
    meta = page_meta(dropped, counts, repaired)
    n_replaced = text.count(T.REPLACEMENT) if decoded_with_replacement else 0
    _emit(c, record, obj, text, n_replaced, escaped, "mediawiki", extra_meta=meta)


def _structured(c: Collector, record: int, obj: dict[str, Any], raw: bytes | str | Callable[[], str],
                escaped: bool, shape: str, decoded_with_replacement: bool) -> None:
    """A structured scientific record (:mod:`udfs.formats.scirecords`): its resolved text, with
    ``record_format`` (the shape) and ``markers_resolved`` (kind -> count)."""
    try:
        out = scirecords.render(obj)
    except Exception as e:  # a record of an unforeseen shape: quarantined, never a lost file
        out = None
        why = f"record_format {shape}: {type(e).__name__}: {e}"
    else:
        keys = ", ".join(sorted(map(str, obj))[:12])
        problem = scirecords.body_text_problem(obj) or f"no body_text list (keys: {keys})"
        why = f"record_format {shape}: {problem}"
    if out is None:
        c.quarantine(record, "invalid_record", raw() if callable(raw) else raw, why)
        return
    text, counts = out
    n_replaced = text.count(T.REPLACEMENT) if decoded_with_replacement else 0
    _emit(c, record, obj, text, n_replaced, escaped, shape, counts)


def read_jsonl(
    c: Collector, chunks: Iterable[bytes], start: int = 0, end: int | None = None
) -> Iterator[pa.RecordBatch]:
    """Parse the JSONL lines a split owns (see :func:`owned_lines`) into ``c``, yielding full batches.

    Sets ``c.lines`` to the number of lines owned (blank ones included).
    """
    limit = 4 * c.opts.max_doc_bytes + 1024  # JSON escapes can make a line up to ~6x its text; 4x + slack is
    # already far over any document that normalises under max_doc_bytes in practice
    i = 0
    for line in owned_lines(chunks, start, end, limit):
        i += 1
        if isinstance(line, LongLine):
            c.quarantine(
                i,
                "too_large",
                line.head,
                f"line of {line.n_bytes} bytes > {4 * c.opts.max_doc_bytes} "
                "(4 x ingest.max_doc_bytes; not parsed)",
            )
        else:
            if i == 1 and start == 0 and line.startswith(UTF8_BOM):
                line = line[
                    len(UTF8_BOM) :
                ]  # Windows tools write one; JSON (RFC 8259 sec. 8.1) must not start with it
            _line(c, i, line)
        if c.full():
            yield from c.flush()
    c.lines = i


NUL_HINT = ("; the line holds NUL bytes: the file looks like UTF-16 or UTF-32 text, not UTF-8 (re-encode it, "
            "e.g. iconv -f UTF-16 -t UTF-8)")
"""Said of a malformed line holding NUL bytes, which UTF-8 JSON text holds only escaped: any record of the
file, not only the first split's, whose bytes the file summary describes (``looks_like``)."""

_ASCII_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() strips


def _line(c: Collector, i: int, line: bytes) -> None:
    if not line or (line[0] in _ASCII_SPACE and not line.strip()):  # strip() copies: only if it may be blank
        c.skipped["blank_line"] += 1
        return
    if line[0] == 0 and not line.replace(b"\x00", b"").strip():
        # the second byte of a UTF-16LE line break (or of a UTF-32 one) after the file's last line: no
        # record; the lines before it are quarantined with NUL_HINT
        c.skipped["nul_line"] += 1
        return
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
            c.quarantine(i, "malformed_json", line, str(e) + (NUL_HINT if b"\x00" in line else ""))
            return
    if isinstance(obj, dict):
        from_mapping(c, i, obj, line, escaped)
    else:
        c.quarantine(i, "invalid_record", line, f"JSON {type(obj).__name__}, not an object")


def read_text(
    c: Collector, chunks: Iterable[bytes], convert: Callable[[str], tuple[str, dict[str, str]]] | None = None
) -> Iterator[pa.RecordBatch]:
    """A plain-text file is one document. Files over 4 x ``max_doc_bytes`` (decompressed) are
    quarantined as ``too_large`` from their first bytes, without being held whole.

    Args:
        convert: turns the decoded file into ``(text, meta)`` (LaTeX sources); ``None`` = as is.
    """
    limit = 4 * c.opts.max_doc_bytes
    parts: list[bytes] = []
    n = 0
    for chunk in chunks:
        n += len(chunk)
        if n <= limit:
            parts.append(chunk)
        elif len(parts) > 1 or not parts:
            parts = parts[:1] or [chunk[:4096]]
    if not n:
        return
    data = b"".join(parts)
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    if n > limit:
        c.quarantine(
            1,
            "too_large",
            data[:4096],
            f"{n} bytes > {4 * c.opts.max_doc_bytes} (4 x ingest.max_doc_bytes; not read whole)",
        )
    else:
        text, n_replaced = T.decode_utf8(data)
        meta = None
        if convert is not None:
            try:
                text, meta = convert(text)
            except Exception as e:  # a converter bug on odd input: the file is quarantined, not lost
                c.quarantine(1, "invalid_record", data[:4096], f"conversion failed: {type(e).__name__}: {e}")
                yield from c.flush()
                return
        c.doc(1, text, n_replaced, meta=meta)
    yield from c.flush()


def _fields_found(obj: dict[str, Any], most: int = 12) -> str:
    """`` (fields: a, b, ...)``: the record's top-level field names, so that a user sees which one to
    set as ``ingest.fields.text`` (a CSV row's column numbers left out where its header names them)."""
    names = [k for k in obj if not k.isdigit()] or list(obj)
    more = f", ... {len(names) - most} more" if len(names) > most else ""
    return f" (fields: {', '.join(names[:most])}{more})"
