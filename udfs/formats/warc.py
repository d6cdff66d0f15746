"""WARC / WET reader (warcio, streamed): ``conversion`` records as they are, ``response`` records
through trafilatura; other record types are skipped and counted.

Source: WARC 1.1 (ISO 28500), Common Crawl WET conventions; warcio's ``ArchiveIterator`` reads the
stream record by record (gzip per record or whole), so a multi-GB WARC is never held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import pyarrow as pa

from udfs import text as T
from udfs.formats import charset
from udfs.formats.collector import Collector
from udfs.formats.compression import decompressed_chunks, gzip_error, open_codec

_HTML_TYPES = ("text/html", "application/xhtml+xml")


def codec_name(name: str) -> str:
    """Python codec name of a charset label (raises LookupError when unknown)."""
    import codecs

    return codecs.lookup(name).name


def _decode(c: Collector, payload: bytes, ctype: str | None, html: bool, meta: dict) -> tuple[str, int]:
    """Decode by BOM, HTTP charset, ``<meta>``, detection (:func:`charset.decide`); the decision and
    its source go to the document's ``meta`` and the file's counts."""
    codec, source = charset.decide(payload, ctype, html)
    meta["charset"], meta["charset_source"] = codec, source
    c.counted[f"charset_source.{source}"] += 1
    c.counted[f"charset.{codec}"] += 1
    if codec == "utf-8":
        return T.decode_utf8(payload)
    return charset.decode(payload, codec)


def _html_to_text(html: str, url: str | None) -> str | None:
    import trafilatura

    # deduplicate=False: trafilatura's dedup keeps a process-wide LRU cache, which would make the
    # output depend on which documents a worker saw before.
    return trafilatura.extract(html, url=url, include_comments=False, include_tables=True, deduplicate=False)


def read_warc(
    c: Collector, open_file: Callable[[], BinaryIO], codec: str | None, head: bytes
) -> Iterator[pa.RecordBatch]:
    """Parse a WARC/WET file's records into ``c``, yielding full batches.

    Args:
        c: the collector.
        open_file: opens the raw file (called twice for gzip: the second pass checks the stream's
            end, which warcio passes over quietly).
        codec: the file's compression; gzip is left to warcio, zst/bz2/xz are decompressed here.
        head: the file's first raw bytes (to tell "no WARC record" from an empty file).
    """
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    truncated = False
    start = head if codec is None else _start(open_file, codec)
    if start is not None and start.strip() and not start.lstrip().startswith(b"WARC/"):
        # Not WARC at all: warcio would report each line as a record of no type, on stderr too.
        from udfs.formats.records import looks_like

        c.quarantine(1, "unreadable_file", start[:200],
                     f"not a WARC file: it does not start with a 'WARC/' version line (it looks like "
                     f"{looks_like(start)}); set ingest.format if it is another format")
        yield from c.flush()
        return
    with open_file() as raw:
        stream = raw if codec in (None, "gz") else open_codec(raw, codec)[0]
        try:
            for rec in ArchiveIterator(stream, check_digests=False):
                n += 1
                truncated |= _record(c, n, rec)
                if c.full():
                    yield from c.flush()
        except Exception as e:  # warcio raises ArchiveLoadFailed, zlib.error, EOFError, ValueError...
            # warcio's message may quote a whole line of the bad bytes: the detail keeps its start.
            # A malformed header can end inside warcio with an AttributeError or TypeError: the detail
            # says which record, so the type name alone does not read as Winnow's own bug.
            c.quarantine(n + 1, "unreadable_file", None,
                         f"WARC record {n + 1} could not be parsed (warcio: {type(e).__name__}: {e})"[:500])
            yield from c.flush()
            return
    if n == 0 and head.strip():  # warcio yields nothing, without an error, for non-WARC bytes
        c.quarantine(1, "unreadable_file", head[:200], "no WARC record in the file")
    elif not truncated and codec == "gz":
        with open_file() as again:
            if error := gzip_error(again):
                # warcio also ends quietly when a gzip member is cut inside a record's headers.
                c.quarantine(n + 1, "unreadable_file", None, f"{error}; records before the damage were kept")
    yield from c.flush()


def _start(open_file: Callable[[], BinaryIO], codec: str) -> bytes | None:
    """The first decompressed bytes of a compressed file; None when they cannot be read (the damage is
    then reported by the read itself)."""
    try:
        with open_file() as raw:
            return next(decompressed_chunks(raw, codec, 4096), b"")
    except Exception:  # noqa: BLE001 - a damaged stream: the read below reports it
        return None


def _record(c: Collector, n: int, rec) -> bool:
    """Route WARC record ``n``; True when it was cut short (the file is truncated)."""
    if rec.length is None:  # Content-Length is mandatory (WARC 1.1 section 5.3): headers cut short
        c.quarantine(n, "unreadable_file", None, "record truncated: its headers end before Content-Length")
        return True
    kind = rec.rec_type
    if kind not in ("conversion", "response"):
        c.skipped[f"warc_{kind}"] += 1
        return False
    h = rec.rec_headers
    rid = (h.get_header("WARC-Record-ID") or "").strip("<>") or None
    url = h.get_header("WARC-Target-URI")
    meta = {"warc_type": kind, "warc_date": h.get_header("WARC-Date")}
    lang = h.get_header("WARC-Identified-Content-Language")
    if lang:
        meta["language"] = lang
    payload = rec.content_stream().read()
    # warcio stops quietly at the end of the bytes: a record cut short (a truncated download, or a
    # gzip member without its end) leaves part of its Content-Length unread. Its text is a fragment,
    # so it is quarantined rather than shipped as a (shorter) document.
    missing = getattr(rec.raw_stream, "limit", 0)
    if missing:
        declared = h.get_header("Content-Length")
        c.quarantine(
            n,
            "unreadable_file",
            payload,
            f"record truncated: {missing} of {declared} Content-Length bytes missing",
        )
        return True
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
            html, n_rep = _decode(c, payload, ctype, True, meta)
            extracted = _html_to_text(html, url) if c.opts.html_extractor == "trafilatura" else None
            if not extracted:
                c.quarantine(
                    n,
                    "extraction_failed",
                    payload,
                    f"{c.opts.html_extractor}: no main text in {len(payload)} bytes of HTML ({url})",
                )
                return False
            text, n_rep = extracted, min(n_rep, extracted.count(T.REPLACEMENT))
        elif mime == "text/plain":
            text, n_rep = _decode(c, payload, ctype, False, meta)
        else:
            c.quarantine(n, "unsupported_content_type", payload[:200], f"{ctype!r} ({url})")
            return False
    meta = {k: v for k, v in meta.items() if v is not None}
    c.doc(n, text, n_rep, src_id=rid, url=url, meta=meta)
    return False
