"""Reading an API server's answer headers (HPACK, RFC 7541) for the few a client reads.

Our SETTINGS ask the server for no compression table (SETTINGS_HEADER_TABLE_SIZE 0): from
its acknowledgement on, every header arrives either as an index into HPACK's static table
or as a literal that is not to be indexed. Such a block changes no state, so a header
whose name is not one the client reads (``audit-id``, ``date``, the priority-and-fairness
UIDs) is stepped over without decoding its Huffman-coded name or value. ``hpack``'s
decoding, in Python, was 7-10 % of the controller's CPU with 1,000 members at rest and in
a rollout: ~75 us for a kube-apiserver answer's headers against ~15 us here (a scratch
measure on 300 answers of a local member). A block that does use or change the table (one
the server sent before it took our SETTINGS, or any from a server that keeps indexing) is
decoded by ``hpack`` whole, which keeps the table. Headers left out are never held, so
what a block can cost is bounded by its size (:class:`fleet.http2state.ClientState` caps
it), not by ``hpack``'s header list limit.
"""

from __future__ import annotations

from collections.abc import Iterable

import hpack
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

READ_HEADERS = ("content-encoding", "retry-after", "etag")
"""The answer headers a call or a watch reads (over HTTP/2 the only ones decoded)."""

_STATIC = HeaderTable.STATIC_TABLE
_STATIC_SIZE = len(_STATIC)
_HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


class _TableNeeded(Exception):
    """The block uses or changes the dynamic table: ``hpack`` decodes it."""


def _integer(block: bytes, at: int, prefix_bits: int) -> tuple[int, int]:
    """The integer with a ``prefix_bits`` prefix at ``at`` (RFC 7541 5.1) and where
    what follows it starts."""
    if at >= len(block):
        raise hpack.HPACKDecodingError("a header block cut short in an integer")
    mask = (1 << prefix_bits) - 1
    value = block[at] & mask
    at += 1
    if value < mask:
        return value, at
    shift = 0
    while True:
        if at >= len(block):
            raise hpack.HPACKDecodingError("a header block cut short in an integer")
        octet = block[at]
        at += 1
        value += (octet & 0x7F) << shift
        if not octet & 0x80:
            return value, at
        shift += 7
        if shift > 28:  # past 2^35: no header block or string is that long
            raise hpack.HPACKDecodingError("an integer too large in a header block")


class AnswerHeaderDecoder:
    """Decodes the header blocks of one connection (in the order they arrive) to the
    pseudo-headers (``:status``) and the headers named in ``read``, each name lower case
    (HTTP/2's), in the order sent; every other header is left out."""

    def __init__(self, read: Iterable[str], max_header_list_size: int) -> None:
        self._read = frozenset(name.encode() for name in read)
        self._full = hpack.Decoder(max_header_list_size=max_header_list_size)
        # A literal name is matched as it is sent: plain, or Huffman-coded (a string's
        # Huffman code, padded with ones as RFC 7541 5.2 requires, is unique).
        names = self._read | {b":status"}
        self._literal_names = {(False, name): name for name in names} | {
            (True, _HUFFMAN.encode(name)): name for name in names
        }
        self._kept_static: tuple[tuple[bytes, bytes] | None, ...] = (
            None,
            *(field if self._kept(field[0]) else None for field in _STATIC),
        )
        """By static index, the field if its name is read (index 0 is none)."""

    def _kept(self, name: bytes) -> bool:
        return name in self._read or name.startswith(b":")

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        """The block's headers the client reads; raises hpack.HPACKError for one that
        cannot be decoded."""
        try:
            return self._without_table(block)
        except _TableNeeded:
            pass
        return [
            (bytes(n), bytes(v)) for n, v in self._full.decode(block, raw=True) if self._kept(n)
        ]

    def _without_table(self, block: bytes) -> list[tuple[bytes, bytes]]:
        # Written out rather than in helpers: this runs for every answer of every member.
        headers: list[tuple[bytes, bytes]] = []
        kept = self._kept_static
        at, end = 0, len(block)
        while at < end:
            first = block[at]
            if first & 0x80:  # an indexed field
                index = first & 0x7F
                if not 0 < index <= _STATIC_SIZE:  # the dynamic table's (or 0: invalid)
                    raise _TableNeeded
                at += 1
                if (field := kept[index]) is not None:
                    headers.append(field)
                continue
            if first & 0x60:  # to be indexed, or a table size update
                raise _TableNeeded
            index = first & 0x0F  # a literal, not indexed (or never)
            if index == 0x0F:
                index, at = _integer(block, at, 4)
            else:
                at += 1
            name: bytes | None
            if index:
                if index > _STATIC_SIZE:
                    raise _TableNeeded
                name = field[0] if (field := kept[index]) is not None else None
            else:
                coded, huffman, at = _string(block, at)
                name = self._literal_names.get((huffman, coded))
            coded, huffman, at = _string(block, at)
            if name is not None:
                headers.append((name, decode_huffman(coded) if huffman else coded))
        return headers


def _string(block: bytes, at: int) -> tuple[bytes, bool, int]:
    """The string literal at ``at`` as sent, whether it is Huffman-coded, and where what
    follows it starts."""
    if at >= len(block):
        raise hpack.HPACKDecodingError("a header block cut short before a string")
    first = block[at]
    length = first & 0x7F
    if length == 0x7F:
        length, at = _integer(block, at, 7)
    else:
        at += 1
    if at + length > len(block):
        raise hpack.HPACKDecodingError("a header block cut short in a string")
    return block[at : at + length], bool(first & 0x80), at + length
