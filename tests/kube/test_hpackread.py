"""Answer headers: only those read are decoded, every name is checked as RFC 9113 asks,
and a block that uses the compression table our SETTINGS forbid is a compression error;
what a block can cost is bounded by its size."""

from __future__ import annotations

import hpack
import pytest
from hpack.hpack import encode_integer
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.huffman_table import decode_huffman
from hypothesis import given
from hypothesis import strategies as st

import kube.hpackread
from kube.hpackread import (
    _CONNECTION_SPECIFIC,
    HUFFMAN_BUDGET,
    MAX_READ_VALUE,
    READ_HEADERS,
    AnswerHeaderDecoder,
    CompressionError,
    MalformedHeaders,
)

HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


def _string(value: bytes, huffman: bool) -> bytes:
    data = HUFFMAN.encode(value) if huffman else value
    length = encode_integer(len(data), 7)
    length[0] |= 0x80 if huffman else 0
    return bytes(length) + data


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
        b"\xbe",  # index 62: the dynamic table's first entry, which ours never has
        b"\x7e\x01x",  # a literal whose name is index 62
        b"\x3f\xe1\x1f",  # a table size update to 4096
        b"\x88\x20",  # a table size update after a field
        b"\x00\x81\xff\x01x",  # a name whose Huffman code is EOS
    ],
)
def test_a_broken_block_is_a_compression_error(block: bytes) -> None:
    with pytest.raises(CompressionError):
        _decoder().decode(block)


@pytest.mark.parametrize(
    ("block", "says"),
    [
        (_literal(b"Content-Encoding", b"gzip"), "not a lower-case token"),
        (_literal(b"Content-Encoding", b"gzip", huffman=False), "not a lower-case token"),
        (_literal(b"x-ok", b"1") + _literal(b"X-Audit", b"1"), "not a lower-case token"),
        (_literal(b"bad name", b"1"), "not a lower-case token"),
        (_literal(b"", b"1"), "not a lower-case token"),
        (_literal(b"connection", b"close"), "connection-specific"),
        (_literal(b"Transfer-Encoding", b"chunked"), "connection-specific"),
        (_literal(57, b"chunked"), "connection-specific"),  # transfer-encoding's index
        (b"\xb9", "connection-specific"),  # transfer-encoding, indexed whole
        (_literal(b"te", b"trailers"), "connection-specific"),
        (b"\x84", "pseudo-header ':path'"),  # :path /, indexed
        (_literal(b":method", b"GET"), "pseudo-header ':method'"),
        (_literal(b":bogus", b"1"), "pseudo-header ':bogus'"),
        (_literal(b"audit-id", b"1") + b"\x88", ":status after a regular header"),
        (_literal(b"etag", b'"a"\r\nx-injected: 1'), "etag has a line break"),
        (_literal(b"retry-after", b" 7"), "surrounding space"),
        (_literal(26, b"gzip\x00"), "a NUL"),
    ],
)
def test_fields_that_break_rfc_9113_make_the_answer_malformed(block: bytes, says: str) -> None:
    with pytest.raises((MalformedHeaders, CompressionError), match=says):
        _decoder().decode(block)


def test_a_read_value_past_its_limit_or_a_list_past_its_size_is_malformed() -> None:
    long = _literal(b"etag", b"x" * (MAX_READ_VALUE + 1), huffman=False)
    with pytest.raises(MalformedHeaders, match=f"etag of {MAX_READ_VALUE + 1} bytes"):
        _decoder().decode(long)
    # Values not read are not decoded, but count toward the list as RFC 9113 counts it.
    unread = _literal(b"x-padding", b"v" * 100, huffman=False)
    decoder = AnswerHeaderDecoder(READ_HEADERS, 1000)
    assert decoder.decode(b"\x88" + unread * 6) == [(b":status", b"200")]
    with pytest.raises(MalformedHeaders, match="header list larger than 1000 bytes"):
        decoder.decode(b"\x88" + unread * 7)


def test_huffman_decoding_is_bounded_per_block_whatever_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block of new Huffman-coded names (each decoded once to be checked) stops at the
    budget: what one block costs is bounded, however a server fills it."""
    decoded: list[int] = []
    real = decode_huffman

    def counting(coded: bytes) -> bytes:
        decoded.append(len(coded))
        return real(coded)

    monkeypatch.setattr(kube.hpackread, "decode_huffman", counting)
    names = b"".join(_literal(f"x-name-{i:05}".encode(), b"1") for i in range(2000))
    with pytest.raises(MalformedHeaders, match=f"more than {HUFFMAN_BUDGET} Huffman-coded"):
        _decoder().decode(names[: 1 << 16])
    assert sum(decoded) <= HUFFMAN_BUDGET
    # Names seen before are not decoded again: an API server's answers cost nothing more.
    decoder, decoded[:] = _decoder(), []
    block = _literal(b"audit-id", b"1") + _literal(b"x-kubernetes-pf-flowschema-uid", b"2")
    for _ in range(100):
        decoder.decode(block)
    assert len(decoded) == 2


# Connection-specific names are refused by design (RFC 9113 8.2.2): tested above.
token = (
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=24)
    .map(str.encode)
    .filter(lambda name: name not in _CONNECTION_SPECIFIC)
)
headers = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from(
                [b"content-type", b"audit-id", b"date", *(n.encode() for n in READ_HEADERS)]
            ),
            token,
        ),
        st.binary(min_size=0, max_size=20).map(lambda b: b.hex().encode()),
    ),
    min_size=0,
    max_size=8,
)


@given(st.lists(headers, min_size=1, max_size=6), st.sampled_from([b"200", b"404", b"422"]))
def test_blocks_of_a_server_that_took_our_settings_decode_as_hpack_decodes_them(
    blocks: list[list[tuple[bytes, bytes]]], status: bytes
) -> None:
    """What a compliant server sends once it applied our SETTINGS (hpack's encoder with a
    table of size 0: its first block says so; literals "with incremental indexing" into
    nothing): each block as hpack decodes it, less the headers not read."""
    encoder = hpack.Encoder()
    encoder.header_table_size = 0
    ours, reference = _decoder(), hpack.Decoder()
    for block_headers in blocks:
        block = encoder.encode([(b":status", status), *block_headers])
        expected = [
            (bytes(n), bytes(v))
            for n, v in reference.decode(block, raw=True)
            if n.startswith(b":") or n.decode() in READ_HEADERS
        ]
        assert ours.decode(block) == expected


def test_a_server_that_keeps_indexing_is_refused() -> None:
    """A block that refers to an entry a server added to its table (a table our SETTINGS
    do not give it) cannot be read: a compression error, not a decoder kept for it."""
    encoder = hpack.Encoder()  # the initial 4096-byte table, never lowered
    decoder = _decoder()
    decoder.decode(encoder.encode([(b":status", b"200"), (b"etag", b'"1"')]))  # adds "etag"
    with pytest.raises(CompressionError, match="not in the static table"):
        decoder.decode(encoder.encode([(b":status", b"200"), (b"etag", b'"1"')]))
