"""Answer headers: only those read are decoded; a block that uses the compression table
goes to hpack, which keeps the table across blocks."""

from __future__ import annotations

import hpack
import pytest
from hpack.hpack import encode_integer
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hypothesis import given
from hypothesis import strategies as st

from fleet.hpackread import READ_HEADERS, AnswerHeaderDecoder

HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


def _string(value: bytes, huffman: bool) -> bytes:
    data = HUFFMAN.encode(value) if huffman else value
    assert len(data) < 127
    return bytes([(0x80 if huffman else 0) | len(data)]) + data


def _literal(
    name: bytes | int, value: bytes, *, never: bool = False, huffman: bool = True
) -> bytes:
    """A literal not to be indexed, as a server without a compression table sends it:
    its name a static index or a string."""
    flag = 0x10 if never else 0x00
    if isinstance(name, int):
        index = encode_integer(name, 4)
        index[0] |= flag
        return bytes(index) + _string(value, huffman)
    return bytes([flag]) + _string(name, huffman) + _string(value, huffman)


def _decoder() -> AnswerHeaderDecoder:
    return AnswerHeaderDecoder(READ_HEADERS, 1 << 16)


def test_only_the_status_and_the_headers_read_are_kept_from_a_block_without_the_table() -> None:
    block = b"".join(
        [
            b"\x88",  # :status 200, static index 8
            _literal(b"audit-id", b"0b6f1c2e-4f0e-4c1a-9a57-5b1c7f0a9e21"),
            _literal(26, b"gzip"),  # content-encoding, a static name
            _literal(b"x-kubernetes-pf-flowschema-uid", b"3f6b", never=True),
            _literal(b"retry-after", b"7"),  # a read name sent as a Huffman-coded literal
            _literal(b"etag", b'"abc"', huffman=False),
            b"\xa1",  # date, static index 33 (no value): not read
        ]
    )
    assert _decoder().decode(block) == [
        (b":status", b"200"),
        (b"content-encoding", b"gzip"),
        (b"retry-after", b"7"),
        (b"etag", b'"abc"'),
    ]


def test_a_status_not_in_the_static_table_comes_as_a_literal_with_its_name_indexed() -> None:
    assert _decoder().decode(_literal(8, b"422")) == [(b":status", b"422")]


@pytest.mark.parametrize(
    "block",
    [
        b"\x0f",  # a name index whose integer never ends
        _literal(26, b"gzip")[:-1],  # a value cut short
        b"\x00\x85ab",  # a literal name longer than the block
        b"\x0f\x0b",  # content-encoding (26) with no value at all
        b"\x80",  # index 0
    ],
)
def test_a_broken_block_is_a_decoding_error(block: bytes) -> None:
    with pytest.raises(hpack.HPACKError):
        _decoder().decode(block)


headers = st.lists(
    st.tuples(
        st.sampled_from(
            [b":status", b"content-type", b"audit-id", b"date", *(n.encode() for n in READ_HEADERS)]
        ),
        st.binary(min_size=0, max_size=20).map(lambda b: b.hex().encode()),
    ),
    min_size=1,
    max_size=8,
)


@given(st.lists(headers, min_size=1, max_size=6), st.integers(min_value=0, max_value=4096))
def test_blocks_that_use_the_table_decode_as_hpack_decodes_them(
    blocks: list[list[tuple[bytes, bytes]]], table_size: int
) -> None:
    """A server that keeps indexing (or one before it took our SETTINGS): each block
    as hpack decodes it, less the headers not read, block after block."""
    encoder = hpack.Encoder()
    encoder.header_table_size = table_size
    ours, reference = _decoder(), hpack.Decoder()
    for block_headers in blocks:
        block = encoder.encode(block_headers)
        expected = [
            (bytes(n), bytes(v))
            for n, v in reference.decode(block, raw=True)
            if n.startswith(b":") or n.decode() in READ_HEADERS
        ]
        assert ours.decode(block) == expected


def test_after_the_table_is_dropped_blocks_decode_without_it() -> None:
    """The server's acknowledgement of our SETTINGS: its next block starts with a table size
    update to 0 (hpack's), the ones after use no table."""
    encoder = hpack.Encoder()
    decoder = _decoder()
    assert decoder.decode(encoder.encode([(b":status", b"200"), (b"etag", b'"1"')])) == [
        (b":status", b"200"),
        (b"etag", b'"1"'),
    ]
    assert decoder.decode(b"\x20" + b"\x88" + _literal(b"etag", b'"2"')) == [
        (b":status", b"200"),
        (b"etag", b'"2"'),
    ]
    assert decoder.decode(b"\x88" + _literal(34, b'"3"')) == [
        (b":status", b"200"),
        (b"etag", b'"3"'),
    ]
