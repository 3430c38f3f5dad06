"""Answers read within limits: decoded piece by piece, watch events cut into lines."""

from __future__ import annotations

import gzip

import pytest

from kube.answerbody import PIECE, BodyDecoder, LineSplitter, UnreadableAnswer


def test_gzip_is_decoded_across_chunks_in_bounded_pieces() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    packed = gzip.compress(data)
    decoder = BodyDecoder("gzip", len(data))
    pieces = [p for i in range(0, len(packed), 1000) for p in decoder.decode(packed[i : i + 1000])]
    assert b"".join(pieces) == data
    assert max(len(p) for p in pieces) <= PIECE


def test_a_compression_bomb_stops_at_the_limit_not_at_its_size() -> None:
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)  # 64 MiB in ~64 KiB
    decoder = BodyDecoder("gzip", 1 << 20)
    produced: list[int] = []

    def drain() -> None:
        produced.extend(len(piece) for piece in decoder.decode(bomb))

    with pytest.raises(UnreadableAnswer, match="larger than 1 MiB"):
        drain()
    assert sum(produced) <= 1 << 20


def test_gzip_members_one_after_another_are_all_decoded() -> None:
    # A streamed answer (a watch that begins with the objects there are) flushes each
    # event as a gzip member of its own; those after the first were once dropped.
    first, second, third = b'{"type":"ADDED"}\n', b'{"type":"BOOKMARK"}\n', b'{"type":"ADDED"}\n'
    together = BodyDecoder("gzip", None)
    assert b"".join(together.decode(gzip.compress(first) + gzip.compress(second))) == first + second
    assert b"".join(together.decode(gzip.compress(third))) == third  # in a later chunk
    split = gzip.compress(first) + gzip.compress(second)
    apart = BodyDecoder("gzip", None)  # a member's header cut between two chunks
    cut = len(gzip.compress(first)) + 3
    assert b"".join([*apart.decode(split[:cut]), *apart.decode(split[cut:])]) == first + second


def test_the_limit_counts_every_gzip_member_and_what_follows_one_must_be_gzip() -> None:
    decoder = BodyDecoder("gzip", 15)
    assert b"".join(decoder.decode(gzip.compress(b"0123456789"))) == b"0123456789"
    with pytest.raises(UnreadableAnswer, match="larger than 15 bytes"):
        list(decoder.decode(gzip.compress(b"0123456789")))
    with pytest.raises(UnreadableAnswer, match="not valid gzip"):
        list(BodyDecoder("gzip", None).decode(gzip.compress(b"event") + b"not gzip"))


def test_an_identity_body_counts_too_and_unknown_encodings_are_refused() -> None:
    decoder = BodyDecoder("", 10)
    assert list(decoder.decode(b"0123456789")) == [b"0123456789"]
    with pytest.raises(UnreadableAnswer, match="larger than 10 bytes"):
        list(decoder.decode(b"x"))
    with pytest.raises(UnreadableAnswer, match="'br'"):
        BodyDecoder("br", None)
    with pytest.raises(UnreadableAnswer, match="not valid gzip"):
        list(BodyDecoder("gzip", None).decode(b"not gzip at all"))


def test_lines_are_joined_across_chunks_and_an_overlong_one_refused() -> None:
    lines = LineSplitter(8)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"c\nde\nf") == [b"abc", b"de"]
    assert lines.feed(b"g\n") == [b"fg"]
    assert lines.rest() == b""
    assert lines.feed(b"tail") == []
    assert lines.rest() == b"tail"
    with pytest.raises(UnreadableAnswer, match="larger than 8 bytes"):
        lines.feed(b"12345")  # "tail12345" has no end yet and is already too long
