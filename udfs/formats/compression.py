"""Streaming decompression: gzip (any number of members), Zstandard, bzip2, xz, a chunk at a time.

Nothing here holds a whole file: the readers pull decompressed chunks of at most ``chunk`` bytes
(gzip output is bounded too, so a highly compressible member never inflates in one piece). A damaged
stream ends with :class:`StreamError` after every byte before the damage was yielded, so readers
keep the records before it (the salvage rule of ``unreadable_file``).

Source: RFC 1952 (gzip members, section 2.2), zstd frames (RFC 8878 section 3.1), Python's ``zlib``,
``bz2``, ``lzma`` and the ``zstandard`` package's ``stream_reader(read_across_frames=True)``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
"""First two bytes of every gzip member (RFC 1952, section 2.3.1)."""
CHUNK = 1 << 20


class StreamError(Exception):
    """A compressed stream is corrupt or truncated; every byte before the damage was already yielded."""


def read_chunks(f: BinaryIO, chunk: int = CHUNK) -> Iterator[bytes]:
    """The bytes of ``f`` from its position to its end, ``chunk`` bytes at a time."""
    while data := f.read(chunk):
        yield data


def gunzip_chunks(chunks: Iterable[bytes], out_chunk: int = CHUNK) -> Iterator[bytes]:
    """Decompress every gzip member of a chunked stream (``cat a.gz b.gz``), output bounded per step.

    Zero bytes after the last member (tape-style padding) are ignored.

    Raises:
        StreamError: corrupt data, or a member without its end (truncated file).
    """
    d = None
    for buf in chunks:
        while buf:
            if d is None:
                if not buf.strip(b"\x00"):
                    break
                d = zlib.decompressobj(wbits=31)
            try:
                yield d.decompress(buf, out_chunk)
                while d.unconsumed_tail and not d.eof:  # bounded output: highly compressible input
                    yield d.decompress(d.unconsumed_tail, out_chunk)
            except zlib.error as e:
                raise StreamError(f"gzip: {e}") from None
            if d.eof:  # the next member starts in what this one left over
                buf, d = d.unused_data, None
            else:
                buf = b""
    if d is not None:
        yield d.flush()
        raise StreamError("gzip: truncated stream (no end-of-stream marker)")


_ZSTD_IN = 128 << 10  # zstd output per call is unbounded: small input steps keep it to a few MiB


def unzstd_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Decompress every Zstandard frame of a chunked stream (concatenated frames are one stream).

    Raises:
        StreamError: corrupt data, or a frame without its end (truncated file); the reader of
            ``zstandard.stream_reader`` ends quietly there, this one says so.
    """
    import zstandard

    d = None
    for buf in chunks:
        while buf:
            if d is None:
                d = zstandard.ZstdDecompressor().decompressobj()
            try:
                yield d.decompress(buf)
            except zstandard.ZstdError as e:
                raise StreamError(f"zstd: {e}") from None
            if d.eof:
                buf, d = d.unused_data, None
            else:
                buf = b""
    if d is not None:
        raise StreamError("zstd: truncated stream (a frame without its end)")


def decompressed_chunks(f: BinaryIO, codec: str | None, chunk: int = CHUNK) -> Iterator[bytes]:
    """The decompressed bytes of the file object ``f`` (from its position), ``chunk`` at a time.

    Args:
        f: a binary file object (``read(n)``).
        codec: ``None`` (as is), ``"gz"``, ``"zst"``, ``"bz2"`` or ``"xz"``.

    Raises:
        StreamError: the stream is damaged (after the bytes before the damage).
    """
    if codec is None:
        yield from read_chunks(f, chunk)
    elif codec == "gz":
        yield from gunzip_chunks(read_chunks(f, chunk), chunk)
    elif codec == "zst":
        yield from unzstd_chunks(read_chunks(f, min(chunk, _ZSTD_IN)))
    else:
        reader, errors = open_codec(f, codec)
        # read1, not read: BZ2File/LZMAFile.read(n) fills n bytes from many decompressor calls and a
        # truncated stream's EOFError then discards all of them (a cut .xz kept no record at all).
        # read1 hands over each call's output; pieces are joined up to `chunk` as read() would.
        read = getattr(reader, "read1", reader.read)
        parts: list[bytes] = []
        size = 0
        try:
            while data := read(chunk):
                parts.append(data)
                size += len(data)
                if size >= chunk:
                    yield b"".join(parts)
                    parts, size = [], 0
        except errors as e:
            if parts:
                yield b"".join(parts)
            raise StreamError(f"{codec}: {type(e).__name__}: {e}") from None
        if parts:
            yield b"".join(parts)


def open_codec(f: BinaryIO, codec: str) -> tuple[BinaryIO, tuple[type[BaseException], ...]]:
    """A file object decompressing ``f`` (zst, bz2, xz, gz; multi-frame/stream/member) and the
    exceptions its reads raise on damaged data."""
    if codec == "zst":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True), (zstandard.ZstdError,)
    if codec == "bz2":
        import bz2

        return bz2.BZ2File(f), (OSError, EOFError, ValueError)
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(f), (lzma.LZMAError, OSError, EOFError)
    if codec == "gz":
        import gzip

        return gzip.GzipFile(fileobj=f), (OSError, EOFError, zlib.error)
    raise ValueError(f"compression {codec!r}: expected one of gz, zst, bz2, xz")


def decompress(data: bytes, codec: str | None) -> tuple[bytes, str | None]:
    """Decompress ``data`` whole (small inputs, tests), salvaging what precedes an error.

    Returns:
        ``(decompressed, error)``: ``error`` is ``None``, or why the stream is damaged; the bytes
        are then everything before the damage.
    """
    import io

    parts: list[bytes] = []
    try:
        for part in decompressed_chunks(io.BytesIO(data), codec):
            parts.append(part)
    except StreamError as e:
        return b"".join(parts), str(e)
    return b"".join(parts), None


def gzip_error(f: BinaryIO) -> str | None:
    """Why the gzip stream in ``f`` is damaged (``None`` when intact or not gzip); output discarded,
    so a multi-GB WARC is checked a chunk at a time."""
    if f.read(2) != GZIP_MAGIC:
        return None
    f.seek(0)
    try:
        for _ in gunzip_chunks(read_chunks(f)):
            pass
    except StreamError as e:
        return str(e)
    return None
