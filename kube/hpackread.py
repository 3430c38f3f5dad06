"""Reading an API server's answer headers (HPACK, RFC 7541) for the few a client reads,
checked as RFC 9113 asks, at a cost bounded by the block's size.

Our SETTINGS give the server no compression table (SETTINGS_HEADER_TABLE_SIZE 0), and a
server applies them before it reads any request of ours: every answer's block is encoded
for a table of size 0. So a block is read without state — an index into HPACK's static
table, or a literal (one "with incremental indexing" adds nothing to a table of size 0) —
and a block that refers to the dynamic table, or sets its size above 0, is a compression
error: no decoder is kept for it (``hpack``'s, in Python, could be kept busy by a slow
stream of such blocks, and would hold a table for a server that ignores ours).

What is decoded: every field name that is not in the static table (each to be checked:
lower case, a token, no connection-specific field, pseudo-fields first and only
``:status``; names seen before are remembered, a few hundred at most) and the values of
the fields read (:data:`READ_HEADERS`, ``:status``), checked too. Other values are stepped
over unread. Huffman decoding (in Python, byte by byte) is bounded per block
(:data:`HUFFMAN_BUDGET`), and so is the block's header list as RFC 9113 counts it (each
field's name and value plus 32), so a block of the largest size costs little, whatever it
holds. ``hpack``'s decoding was a sizeable share of the controller's CPU with a thousand
members at rest (docs/decisions/0001-own-http2-client.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import hpack
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

READ_HEADERS = ("content-encoding", "retry-after", "etag")
"""The answer headers a call or a watch reads (over HTTP/2 the only ones decoded)."""

HUFFMAN_BUDGET = 4096
"""Huffman-coded bytes decoded per block at most (names not seen before and the values
read): an API server's answer has a few dozen; past this the block is malformed."""
MAX_READ_VALUE = 1024
"""The longest value of a header read (an ETag, a Retry-After, a content coding)."""
_KNOWN_NAMES = 512
"""Literal names remembered as checked (all are forgotten when more come)."""
_CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade", b"te"}
)
"""Fields HTTP/2 forbids in an answer (RFC 9113 8.2.2)."""
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9a-z]+").fullmatch
"""A field name as HTTP/2 sends it: a token (RFC 9110 5.6.2) in lower case."""
_BAD_VALUE = re.compile(rb"[\x00\r\n]|^[ \t]|[ \t]$").search
"""What a field value must not hold (RFC 9113 8.2.1)."""

_STATIC = HeaderTable.STATIC_TABLE
_STATIC_SIZE = len(_STATIC)


class MalformedHeaders(Exception):
    """A block that decodes but breaks RFC 9113's rules for an answer's fields: the
    answer (its stream) is malformed; the connection can go on."""


class CompressionError(Exception):
    """A block that cannot be decoded (cut short, an impossible integer, a reference to
    the dynamic table our SETTINGS forbid): the connection cannot go on (RFC 9113
    COMPRESSION_ERROR)."""


def _integer(block: bytes, at: int, prefix_bits: int) -> tuple[int, int]:
    """The integer with a ``prefix_bits`` prefix at ``at`` (RFC 7541 5.1) and where
    what follows it starts."""
    if at >= len(block):
        raise CompressionError("a header block cut short in an integer")
    mask = (1 << prefix_bits) - 1
    value = block[at] & mask
    at += 1
    if value < mask:
        return value, at
    shift = 0
    while True:
        if at >= len(block):
            raise CompressionError("a header block cut short in an integer")
        octet = block[at]
        at += 1
        value += (octet & 0x7F) << shift
        if not octet & 0x80:
            return value, at
        shift += 7
        if shift > 28:  # past 2^35: no header block or string is that long
            raise CompressionError("an integer too large in a header block")


class AnswerHeaderDecoder:
    """Decodes the header blocks of one connection to the pseudo-fields (``:status``) and
    the fields named in ``read``, in the order sent; every other field is checked by its
    name and left out. Blocks are independent (no table), so any may be skipped."""

    def __init__(self, read: Iterable[str], max_header_list_size: int) -> None:
        self._read = frozenset(name.encode() for name in read)
        self._max_list = max_header_list_size
        self._kept_static: tuple[tuple[bytes, bytes] | None, ...] = (
            None,
            *(field if self._kept(field[0]) else None for field in _STATIC),
        )
        """By static index, the field if its name is read (index 0 is none)."""
        self._static_size = (0, *(len(n) + len(v) + 32 for n, v in _STATIC))
        """By static index, what the field counts toward the header list's size."""
        self._names: dict[tuple[bool, bytes], bytes] = {}
        """Literal names as sent (Huffman-coded or not) that were checked: the name."""

    def _kept(self, name: bytes) -> bool:
        return name in self._read or name.startswith(b":")

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        """The block's fields the client reads. Raises :class:`CompressionError` for a
        block that cannot be decoded, :class:`MalformedHeaders` for one whose fields break
        RFC 9113 (an upper-case or invalid name, a connection-specific field, a
        pseudo-field other than ``:status`` or after a regular one, a bad value of a field
        read), or one past the header list size or the Huffman budget."""
        # Written out rather than in helpers: this runs for every answer of every member.
        headers: list[tuple[bytes, bytes]] = []
        kept = self._kept_static
        at, end = 0, len(block)
        listed = 0  # the header list's size (RFC 9113 6.5.2)
        budget = HUFFMAN_BUDGET
        regular = False  # a regular field came: no pseudo-field may follow
        first = True
        while at < end:
            octet = block[at]
            if octet & 0x80:  # an indexed field
                index, at = _integer(block, at, 7)
                if not 0 < index <= _STATIC_SIZE:
                    raise CompressionError(f"header index {index}: not in the static table")
                name = _STATIC[index - 1][0]
                listed += self._static_size[index]
                if (field := kept[index]) is not None:
                    headers.append(field)
                elif name == b"transfer-encoding":
                    raise MalformedHeaders(f"the connection-specific header {name!r}")
            elif octet & 0xE0 == 0x20:  # a dynamic table size update
                size, at = _integer(block, at, 5)
                if size or not first:
                    raise CompressionError(
                        f"a table size update to {size}"
                        + ("" if first else " after the first field")
                        + " (our SETTINGS_HEADER_TABLE_SIZE is 0)"
                    )
                continue
            else:  # a literal: with incremental indexing (into nothing), without, never
                index, at = _integer(block, at, 6 if octet & 0x40 else 4)
                if index:
                    if index > _STATIC_SIZE:
                        raise CompressionError(f"header name index {index}: not in the table")
                    name = _STATIC[index - 1][0]
                    if name == b"transfer-encoding":
                        raise MalformedHeaders(f"the connection-specific header {name!r}")
                else:
                    coded, huffman, at = _string(block, at)
                    found = self._names.get((huffman, coded))
                    if found is None:
                        if huffman:
                            budget -= len(coded)
                            if budget < 0:
                                raise MalformedHeaders(_over_budget())
                        found = self._checked_name(_huffman(coded) if huffman else coded)
                        if len(self._names) >= _KNOWN_NAMES:
                            self._names.clear()
                        self._names[huffman, coded] = found
                    name = found
                coded, huffman, at = _string(block, at)
                listed += len(name) + len(coded) + 32
                if name in self._read or name[:1] == b":":
                    if len(coded) > MAX_READ_VALUE:
                        raise MalformedHeaders(f"a {name.decode()} of {len(coded)} bytes")
                    if huffman:
                        budget -= len(coded)
                        if budget < 0:
                            raise MalformedHeaders(_over_budget())
                    value = _huffman(coded) if huffman else coded
                    if _BAD_VALUE(value):
                        raise MalformedHeaders(
                            f"{name.decode()} has a line break, a NUL or surrounding space"
                        )
                    headers.append((name, value))
            first = False
            if listed > self._max_list:
                raise MalformedHeaders(f"a header list larger than {self._max_list} bytes")
            if name[:1] == b":":
                if name != b":status":
                    raise MalformedHeaders(f"the pseudo-header {name.decode()!r} in an answer")
                if regular:
                    raise MalformedHeaders(":status after a regular header")
            else:
                regular = True
        return headers

    @staticmethod
    def _checked_name(name: bytes) -> bytes:
        """``name`` if an answer may carry it (RFC 9113 8.2 and 8.2.2); else
        :class:`MalformedHeaders` naming it (cut, as bytes)."""
        if name[:1] == b":":
            if _TOKEN(name[1:]):
                return name
        elif _TOKEN(name) and name not in _CONNECTION_SPECIFIC:
            return name
        if name.lower() in _CONNECTION_SPECIFIC:
            raise MalformedHeaders(f"the connection-specific header {name[:64]!r}")
        raise MalformedHeaders(
            f"the header name {name[:64]!r} is not a lower-case token (RFC 9113 8.2.1)"
        )


def _huffman(coded: bytes) -> bytes:
    try:
        return decode_huffman(coded)
    except hpack.HPACKDecodingError as exc:
        raise CompressionError(f"invalid Huffman code: {exc}") from None


def _over_budget() -> str:
    return f"more than {HUFFMAN_BUDGET} Huffman-coded bytes of names and values read"


def _string(block: bytes, at: int) -> tuple[bytes, bool, int]:
    """The string literal at ``at`` as sent, whether it is Huffman-coded, and where what
    follows it starts."""
    if at >= len(block):
        raise CompressionError("a header block cut short before a string")
    first = block[at]
    length = first & 0x7F
    if length == 0x7F:
        length, at = _integer(block, at, 7)
    else:
        at += 1
    if at + length > len(block):
        raise CompressionError("a header block cut short in a string")
    return block[at : at + length], bool(first & 0x80), at + length
