"""A small HTTP/2 server over TLS for the connection's tests (h2 on anyio): it counts the
connections it accepts and the streams the client resets, and can stop answering.

Routes: ``/ok`` (a JSON answer), ``/echo`` (the size of the request body), ``/big?n=N`` (N
bytes), ``/trickle?n=N&size=S`` (a JSON answer of N strings of S bytes, sent in N parts 10
ms apart, then its end), ``/flood`` (a watch that sends as fast as the client lets it),
``/watch`` (a watch event every 10 ms), ``/idle`` (a watch that sends nothing), ``/slow``
(no answer until reset), ``/freeze`` (the connection stops answering anything, PINGs
included), ``/drop`` (the connection closes), ``/goaway`` (the first time: GOAWAY,
refusing it), ``/gzip`` (the request's path, compressed), ``/bomb?n=N`` (N zero bytes,
compressed), ``/gzip-watch`` (a watch, compressed as it goes), ``/endless-event`` (a watch
event that never ends), ``/bye`` (answered, then once idle the connection is closed, as an
idle timeout does), ``/busy`` (429, Retry-After 7), ``/etag`` (an ETag and 304s;
``?crlf``: a tag with a line break, ``?bare``: one without quotes), ``/bad-status?v=V``
(``:status`` V, or none without ``v``).
Also a benchmark's server (bench/calls.py).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import ssl
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import anyio.streams.tls
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack

from fleet.local.pki import CertificateAuthority


@dataclass
class _Request:
    path: str
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    reset: anyio.Event = field(default_factory=anyio.Event)


class H2Server:
    def __init__(
        self, directory: Path, max_streams: int = 100, preface_delay_s: float = 0.0
    ) -> None:
        ca = CertificateAuthority(directory, "test-ca")
        serving = ca.issue("server", "server", server_hosts=["127.0.0.1"])
        self.ca_pem = ca.pair.cert.read_bytes()
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(serving.cert, serving.key)
        self._tls.set_alpn_protocols(["h2"])
        self.max_streams = max_streams
        self.preface_delay_s = preface_delay_s
        """Seconds each connection waits, after TLS, before its SETTINGS go out."""
        self.connections = 0
        self.ended = 0
        """Connections the client closed (or that broke), once served."""
        self.resets = 0
        self.pings = 0
        self.went_away = False
        self.port = 0
        self.authorizations: list[tuple[bytes, bool]] = []
        self.encodings: list[tuple[str, bytes | None]] = []
        """(path, accept-encoding) of every request."""
        """Each request's Authorization header and whether it came marked never-indexed."""

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        await listener.serve(self._connection)

    async def _connection(self, sock: anyio.abc.SocketStream) -> None:
        try:
            tls = await anyio.streams.tls.TLSStream.wrap(
                sock, server_side=True, ssl_context=self._tls, standard_compatible=False
            )
        except Exception:
            return
        self.connections += 1
        conn = h2.connection.H2Connection(
            # Unchecked: some routes answer what a broken (or hostile) server would.
            h2.config.H2Configuration(
                client_side=False, header_encoding=None, validate_outbound_headers=False
            )
        )
        conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams},
        )
        await anyio.sleep(self.preface_delay_s)
        conn.initiate_connection()
        link = _Link(tls, conn)
        try:
            await link.flush()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.ended += 1
            return
        requests: dict[int, _Request] = {}
        frozen = gone = False
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    data = await tls.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self.ended += 1
                    break
                if frozen:
                    continue
                for event in conn.receive_data(data):
                    sid = getattr(event, "stream_id", 0)
                    if isinstance(event, h2.events.RequestReceived):
                        self.authorizations.extend(
                            (h[1], isinstance(h, hpack.NeverIndexedHeaderTuple))
                            for h in event.headers or []
                            if h[0] == b"authorization"
                        )
                        headers = dict(event.headers or [])
                        requests[sid] = _Request(headers[b":path"].decode(), headers)
                        self.encodings.append((requests[sid].path, headers.get(b"accept-encoding")))
                    elif isinstance(event, h2.events.DataReceived):
                        requests[sid].body += event.data or b""
                        conn.acknowledge_received_data(event.flow_controlled_length or 0, sid)
                    elif isinstance(event, h2.events.PingReceived):
                        self.pings += 1  # (h2 answers it)
                    elif isinstance(event, h2.events.StreamReset):
                        self.resets += 1
                        if sid in requests:
                            requests.pop(sid).reset.set()
                    if isinstance(event, h2.events.StreamEnded) and sid in requests:
                        if requests[sid].path == "/freeze":
                            frozen = True
                        elif requests[sid].path == "/drop":
                            frozen = gone = True  # no answer: the connection just closes
                            break
                        elif requests[sid].path == "/bye":
                            tg.start_soon(self._bye, link, tls, conn, sid)
                        elif requests[sid].path == "/goaway" and not self.went_away:
                            self.went_away = True  # refuses this stream: it was not processed
                            conn.close_connection(last_stream_id=sid - 2)
                            frozen = gone = True
                            break
                        else:
                            tg.start_soon(self._answer, link, sid, requests[sid])
                    elif isinstance(event, (h2.events.WindowUpdated, h2.events.StreamReset)):
                        link.wake()
                await link.flush()
                if gone:
                    await tls.aclose()
                    break
            tg.cancel_scope.cancel()

    async def _bye(
        self,
        link: _Link,
        tls: anyio.abc.ByteStream,
        conn: h2.connection.H2Connection,
        sid: int,
    ) -> None:
        """Answer, then, once the connection is idle, GOAWAY and close it (abruptly: the
        worst case of an API server's idle timeout, Go's 90 s)."""
        await link.answer(sid, 200, b"{}")
        await anyio.sleep(0.2)
        conn.close_connection(last_stream_id=sid)
        await link.flush()
        raw = tls.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        await anyio.aclose_forcefully(tls)

    async def _answer(self, link: _Link, sid: int, request: _Request) -> None:
        path, _, query = request.path.partition("?")
        with anyio.CancelScope() as scope:
            # a stream the client resets ends its handler
            async def cancel_on_reset() -> None:
                await request.reset.wait()
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_on_reset)
                with contextlib.suppress(h2.exceptions.ProtocolError):  # reset or closed meanwhile
                    await self._route(link, sid, path, query, request)
                tg.cancel_scope.cancel()

    async def _route(self, link: _Link, sid: int, path: str, query: str, request: _Request) -> None:
        if path == "/ok":
            await link.answer(sid, 200, json.dumps({"kind": "Status", "n": 1}).encode())
        elif path == "/echo":
            await link.answer(sid, 200, json.dumps({"bytes": len(request.body)}).encode())
        elif path == "/big":
            await link.answer(sid, 200, b"x" * int(query.removeprefix("n=")))
        elif path == "/trickle":
            parts, size = (int(v) for v in query.removeprefix("n=").split("&size="))
            body = json.dumps({"parts": ["x" * size] * parts}).encode()
            await link.headers(sid, 200)
            step = -(-len(body) // parts)
            for at in range(0, len(body), step):
                await anyio.sleep(0.01)
                await link.data(sid, body[at : at + step], end=False)
            await link.data(sid, b"", end=True)
        elif path in ("/flood", "/watch"):
            await link.headers(sid, 200)
            n = 0
            while True:
                n += 1
                line = json.dumps({"type": "ADDED", "object": {"n": n}}).encode() + b"\n"
                if path == "/flood":
                    line *= 1000
                await link.data(sid, line, end=False)
                if path == "/watch":
                    await anyio.sleep(0.01)
        elif path == "/bomb":
            body = gzip.compress(bytes(int(query.removeprefix("n="))), compresslevel=1)
            await link.answer(sid, 200, body, [(b"content-encoding", b"gzip")])
        elif path == "/gzip-watch":
            await link.headers(sid, 200, extra=[(b"content-encoding", b"gzip")])
            packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
            for n in range(1, 4):
                line = json.dumps({"type": "ADDED", "object": {"n": n}}).encode() + b"\n"
                await link.data(
                    sid, packer.compress(line) + packer.flush(zlib.Z_SYNC_FLUSH), end=False
                )
            await anyio.sleep_forever()
        elif path == "/endless-event":
            await link.headers(sid, 200)
            while True:
                await link.data(sid, b"x" * 65536, end=False)
        elif path.startswith("/gzip"):
            body = gzip.compress(json.dumps({"path": request.path}).encode())
            await link.answer(sid, 200, body, [(b"content-encoding", b"gzip")])
        elif path == "/etag":  # unchanged since "v1" (If-None-Match): 304 without a body
            if request.headers.get(b"if-none-match") == b'"v1"' or query == "always-304":
                await link.answer(sid, 304, b"")
            elif query == "crlf":  # a tag that would put a header of its own into a request
                await link.answer(sid, 200, b"{}", [(b"etag", b'"v1"\r\nx-injected: 1')])
            elif query == "bare":  # a tag without its quotes: no entity tag
                await link.answer(sid, 200, b"{}", [(b"etag", b"v1")])
            else:
                await link.answer(sid, 200, b'{"kinds": 1}', [(b"etag", b'"v1"')])
        elif path == "/bad-status":  # ?v=VALUE, or no :status at all without v
            status = [(b":status", query.removeprefix("v=").encode())] if query else []
            await link.raw_headers(sid, [*status, (b"content-length", b"0")], end=True)
        elif path == "/busy":
            await link.answer(sid, 429, b'{"reason": "TooManyRequests"}', [(b"retry-after", b"7")])
        elif path == "/goaway":
            await link.answer(sid, 200, b'{"after": "goaway"}')
        elif path == "/idle":  # a watch with nothing to say
            await link.headers(sid, 200)
            await anyio.sleep_forever()
        elif path == "/slow":
            await anyio.sleep_forever()
        else:
            await link.answer(sid, 404, b'{"reason": "NotFound"}')


class _Link:
    """The server side of one connection: sends with flow control."""

    def __init__(self, tls: anyio.abc.ByteStream, conn: h2.connection.H2Connection) -> None:
        self._tls = tls
        self._conn = conn
        self._lock = anyio.Lock()
        self._window = anyio.Event()

    def wake(self) -> None:
        self._window.set()
        self._window = anyio.Event()

    async def flush(self) -> None:
        # Shielded: a TLS send cut off by a cancellation (a handler whose stream was
        # reset) breaks the TLS stream for good.
        with anyio.CancelScope(shield=True):
            await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            data = self._conn.data_to_send()
            if data:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await self._tls.send(data)

    async def headers(
        self, sid: int, status: int, end: bool = False, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        await self.raw_headers(sid, [(b":status", str(status).encode()), *extra], end)

    async def raw_headers(self, sid: int, headers: list[tuple[bytes, bytes]], end: bool) -> None:
        self._conn.send_headers(sid, headers, end_stream=end)
        await self.flush()

    async def data(self, sid: int, body: bytes, end: bool = True) -> None:
        view = memoryview(body)
        while view:
            room = min(
                self._conn.local_flow_control_window(sid), self._conn.max_outbound_frame_size
            )
            if room <= 0:
                await self._window.wait()
                continue
            self._conn.send_data(sid, bytes(view[:room]))
            view = view[room:]
            await self.flush()
        if end:
            self._conn.end_stream(sid)
            await self.flush()

    async def answer(
        self, sid: int, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        await self.headers(sid, status, extra=extra)
        await self.data(sid, body)
