"""What a server answers, read without trusting its size.

A member is not trusted with the hub's memory: a body is decoded (gzip or none) piece by
piece and read only up to a limit, and a watch's events each up to a limit. A gzip
answer expands up to ~1,000 times (a 1 MB "compression bomb" is a gigabyte), so the limit
counts decoded bytes, checked as they are produced.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

PIECE = 1 << 16
"""Decoded bytes produced at a time from one received chunk."""


class UnreadableAnswer(Exception):
    """An answer (or one watch event) past its limit, or not decodable; the request is
    abandoned."""


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n} bytes"


class BodyDecoder:
    """Decodes a body's chunks as they arrive (``content-encoding`` gzip or none), never
    more than ``limit`` decoded bytes in all (no limit if None)."""

    def __init__(self, encoding: str, limit: int | None) -> None:
        encoding = encoding.strip().lower()
        if encoding not in ("", "identity", "gzip"):
            raise UnreadableAnswer(f"the answer's content-encoding {encoding!r} was not asked for")
        self._gzip = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
        self._limit = limit
        self._left = limit if limit is not None else 0

    def decode(self, chunk: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``chunk``, in pieces of at most :data:`PIECE` (raw chunks
        as they are); raises :class:`UnreadableAnswer` once the limit is passed."""
        if self._gzip is None:
            self._count(len(chunk))
            yield chunk
            return
        data = chunk
        while data:
            if self._gzip.eof:
                # gzip allows members one after another; a streamed answer (a watch that
                # begins with the current objects) flushes each as one.
                self._gzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                piece = self._gzip.decompress(data, PIECE)
            except zlib.error as exc:
                raise UnreadableAnswer(f"the answer is not valid gzip: {exc}") from None
            data = self._gzip.unused_data if self._gzip.eof else self._gzip.unconsumed_tail
            self._count(len(piece))
            if piece:
                yield piece

    def _count(self, n: int) -> None:
        if self._limit is None:
            return
        self._left -= n
        if self._left < 0:
            raise UnreadableAnswer(f"the answer is larger than {_size(self._limit)}")


class LineSplitter:
    """A watch's stream cut into lines (one event each), none longer than ``limit``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes (without their newline)."""
        *lines, rest = data.split(b"\n")
        if lines:
            lines[0] = bytes(self._partial) + lines[0]
            self._partial = bytearray(rest)
        else:
            self._partial += rest
        if len(self._partial) > self._limit or any(len(line) > self._limit for line in lines):
            raise UnreadableAnswer(f"a watch event is larger than {_size(self._limit)}")
        return lines

    def rest(self) -> bytes:
        """What came after the last newline (the stream ended)."""
        return bytes(self._partial)
