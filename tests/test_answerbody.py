"""Answers read within limits: decoded piece by piece, watch events cut into lines."""

from __future__ import annotations

import gzip

import pytest

from fleet.answerbody import PIECE, BodyDecoder, LineSplitter, UnreadableAnswer


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
