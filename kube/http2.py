"""One HTTP/2 connection per API server, carrying its calls and its watches alike: an httpx
transport on anyio (the connection itself: :mod:`kube.http2conn`; its framing:
:mod:`kube.http2state`).

Why not httpcore's HTTP/2: a response closed before its end (a watch that is restarted) is
not reset there, so the server keeps sending into a window nobody acknowledges until the
whole connection stalls; one read timeout fails every stream on the connection; and an
answer can wait behind a request that reads the socket for nothing. A server that does not
offer HTTP/2 (or a plain-HTTP address) gets the HTTP/1.1 transport it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import quote

import anyio
import httpx

from kube.http2conn import (
    Answer,
    Http2Connection,
    Opened,
    Refused,
    ResponseBody,
    Stream,
    deadline_after,
)

T = TypeVar("T")

Streamed = tuple[int, dict[bytes, bytes], ResponseBody]
"""An answer read as it arrives: its status, headers and body."""

MAX_CONNECTIONS = 4
"""Connections to one server at most, however few streams it allows on each."""

_PATH_SAFE = "/%:@&=+$,;-_.!~*'()?"
"""Left as they are in a request's path and query (what httpx leaves too)."""
_HOP_BY_HOP = {
    b"host",
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
}


class Http2Transport(httpx.AsyncBaseTransport):
    """Requests to one ``https`` server over a single HTTP/2 connection (made again after
    it fails or the server sends GOAWAY; another only while none has a free stream, at
    most ``MAX_CONNECTIONS``); everything else through ``fallback``."""

    def __init__(self, tls: ssl.SSLContext, fallback: httpx.AsyncBaseTransport) -> None:
        tls.set_alpn_protocols(["h2", "http/1.1"])
        self._tls = tls
        self._fallback = fallback
        self._http1 = False  # the server chose HTTP/1.1 once: it will again
        self._connections: list[Http2Connection] = []
        """Usually one; another only while every stream the server allows on the others
        is taken (kube-apiserver allows 100 per connection), as Go's client does."""
        self._connect_lock = anyio.Lock()
        self._room = asyncio.Event()
        """Set when a stream frees on any connection (made anew once set, by the next
        request to wait)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._http1 or request.url.scheme != "https":
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        sni = request.extensions.get("sni_hostname") or url.host
        connect = (url.host, url.port or 443, sni, timeouts.get("connect"), timeouts.get("pool"))
        body = await request.aread()
        headers = _headers(request)

        async def send(connection: Http2Connection) -> tuple[Http2Connection, Opened]:
            return connection, await connection.open(headers, body, timeouts)

        sent = await self._send(connect, send)
        if sent is None:
            return await self._fallback.handle_async_request(request)
        connection, (stream, status, answer_headers) = sent
        return httpx.Response(
            status,
            headers=answer_headers,
            stream=ResponseBody(connection, stream, deadline_after(timeouts.get("read"))),
            extensions={"http_version": b"HTTP/2"},
            request=request,
        )

    async def exchange(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        timeouts: dict[str, float | None],
        limit: int | None,
    ) -> Answer | None:
        """One request to ``origin`` straight over HTTP/2, without httpx's request and
        response objects (a third of a call's CPU); None when the server is not reached
        over HTTP/2 (send it through httpx instead). ``target`` is the path and query;
        what needs escaping in it is escaped here. The answer is decoded, at most
        ``limit`` bytes of it (:class:`kube.answerbody.UnreadableAnswer` past that)."""
        if self._http1:
            return None
        request_headers = _request_headers(origin, method, target, headers)
        return await self._send(
            _connect_to(origin, timeouts),
            lambda connection: connection.exchange(request_headers, body, timeouts, limit),
        )

    def send_now(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> Sent | None:
        """Send a request as :meth:`exchange` would, at once, without a round of the event
        loop: on the connection already open to ``origin`` when it has a free stream and
        room for the whole request; None (nothing sent) otherwise. Several requests sent
        so go out together, where tasks would each wait for a round of the loop's other
        work before sending theirs. Its answer: :meth:`answer`; or :meth:`Sent.drop`."""
        if self._http1 or len(self._connections) != 1:
            return None
        connection = self._connections[0]
        request_headers = _request_headers(origin, method, target, headers)
        stream = connection.send_now(request_headers, body, whole=True)
        if stream is None:
            return None
        return Sent(connection, stream, request_headers, body)

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Requests :meth:`send_now` sends within the block (which must not wait) go out
        in one write (see :meth:`Http2Connection.together`)."""
        with contextlib.ExitStack() as held:
            for connection in self._connections:
                held.enter_context(connection.together())
            yield

    async def answer(
        self,
        origin: Origin,
        sent: Sent,
        timeouts: dict[str, float | None],
        limit: int | None,
    ) -> Answer | None:
        """The answer to a request :meth:`send_now` sent, as :meth:`exchange` returns it;
        sent again (as :meth:`exchange` sends) if the server refused it unseen."""
        try:
            return await sent.connection.answer(sent.stream, timeouts, limit)
        except Refused:
            return await self._send(
                _connect_to(origin, timeouts),
                lambda c: c.exchange(sent.headers, sent.body, timeouts, limit),
            )

    async def open(
        self,
        origin: Origin,
        target: str,
        headers: list[tuple[bytes, bytes]],
        timeouts: dict[str, float | None],
    ) -> Streamed | None:
        """A GET of ``target`` straight over HTTP/2 (as :meth:`exchange`) whose answer is
        read as it arrives (a watch): its status, headers and body, which the caller
        closes (that resets the stream if the server still sends); None when the server
        is not reached over HTTP/2. The headers must come within ``timeouts["read"]``, and
        so must the body, unless the caller moves its :attr:`ResponseBody.deadline`."""
        if self._http1:
            return None
        request_headers = _request_headers(origin, "GET", target, headers)

        async def send(connection: Http2Connection) -> Streamed:
            stream, status, answer_headers = await connection.open(request_headers, b"", timeouts)
            body = ResponseBody(connection, stream, deadline_after(timeouts.get("read")))
            return status, dict(answer_headers), body

        return await self._send(_connect_to(origin, timeouts), send)

    async def ping(self, timeout_s: float) -> bool:
        """PING the server over the connection already open to it (see
        :meth:`Http2Connection.ping`); False, sending nothing, when none is (no call made
        yet, the last one failed, or the server answers HTTP/1.1)."""
        for connection in self._connections:
            if connection.usable:
                await connection.ping(timeout_s)
                return True
        return False

    async def _send(
        self,
        connect: tuple[str, int, str, float | None, float | None],
        send: Callable[[Http2Connection], Awaitable[T]],
    ) -> T | None:
        """``send`` on a connection with a free stream, and once more on a new one if the
        server never saw it; None if the server answers HTTP/1.1."""
        connection = await self._connect(*connect)
        if connection is None:
            return None
        try:
            return await send(connection)
        except Refused:
            connection = await self._connect(*connect)
            if connection is None:
                raise
            return await send(connection)

    async def _connect(
        self, host: str, port: int, sni: str, connect_s: float | None, pool_s: float | None
    ) -> Http2Connection | None:
        """A connection with a free stream: an open one, or a new one; None if the server
        answers HTTP/1.1. With ``MAX_CONNECTIONS`` open and all full, waits (at most
        ``pool_s``) until a stream frees on any of them: a request parked on one
        connection would wait behind its watches while others have room."""
        if len(self._connections) == 1 and self._connections[0].has_room:
            # What the lock below finds too, without its cost: taking an anyio Lock yields
            # to the event loop, once per request (it showed in the controller's busy time
            # in a rollout to 1,000 clusters).
            return self._connections[0]
        deadline = anyio.current_time() + pool_s if pool_s is not None else math.inf
        while True:
            async with self._connect_lock:
                self._connections = [c for c in self._connections if c.usable]
                for extra in [c for c in self._connections[1:] if c.idle]:
                    if any(c.has_room for c in self._connections if c is not extra):
                        extra.retire()  # a burst's extra connection, no longer needed
                        self._connections.remove(extra)
                for connection in self._connections:
                    if connection.has_room:
                        return connection
                checked = any(c.being_checked for c in self._connections)
                if len(self._connections) < MAX_CONNECTIONS and not checked:
                    # (a server that allows few or no streams gets no more than that; one
                    # checked for life is waited for: alive, it takes the request)
                    made = await Http2Connection.connect(
                        host, port, sni, self._tls, connect_s, self._room_changed
                    )
                    if made is None:
                        self._http1 = True
                        return None
                    self._connections.append(made)
                    if made.has_room:  # (a server may allow no stream at all)
                        return made
                    continue
                if self._room.is_set():  # (others may wait on the one not set yet)
                    self._room = asyncio.Event()
                room = self._room
            with anyio.CancelScope(deadline=deadline) as scope:
                await room.wait()
            if scope.cancelled_caught:
                raise httpx.PoolTimeout(f"no free stream within {pool_s} s")

    def _room_changed(self) -> None:
        """A stream closed (or a connection failed, or the server's limits changed) on
        one of the connections: wake the requests waiting for one."""
        self._room.set()

    async def aclose(self) -> None:
        async with self._connect_lock:
            for connection in self._connections:
                connection.retire()
            self._connections = []
        await self._fallback.aclose()


@dataclass(frozen=True)
class Sent:
    """A request :meth:`Http2Transport.send_now` sent, its answer not read yet."""

    connection: Http2Connection
    stream: Stream
    headers: list[tuple[bytes, bytes]] = field(repr=False)  # (a bearer token among them)
    body: bytes = field(repr=False)

    def drop(self) -> None:
        """Give up on the answer: the stream is closed (reset if the server still sends)."""
        self.connection.close_stream(self.stream)


@dataclass(frozen=True)
class Origin:
    """Where :meth:`Http2Transport.exchange` sends: an ``https`` server address, parsed once."""

    host: str
    port: int
    sni: str
    authority: bytes
    prefix: bytes
    """The server address's own path (a proxy's), before each request's."""

    @classmethod
    def of(cls, server: str, sni: str | None = None) -> Origin | None:
        """None for an address that is not ``https``."""
        url = httpx.URL(server)
        if url.scheme != "https":
            return None
        return cls(
            url.host,
            url.port or 443,
            sni or url.host,
            url.netloc,
            url.raw_path.rstrip(b"/"),
        )


def _connect_to(
    origin: Origin, timeouts: dict[str, float | None]
) -> tuple[str, int, str, float | None, float | None]:
    return (origin.host, origin.port, origin.sni, timeouts.get("connect"), timeouts.get("pool"))


def _request_headers(
    origin: Origin, method: str, target: str, headers: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    return [
        (b":method", method.encode()),
        (b":authority", origin.authority),
        (b":scheme", b"https"),
        (b":path", origin.prefix + quote(target, safe=_PATH_SAFE).encode()),
        *headers,
    ]


def _headers(request: httpx.Request) -> list[tuple[bytes, bytes]]:
    url = request.url
    authority = request.headers.get("host", url.netloc.decode("ascii"))
    headers = [
        (b":method", request.method.encode()),
        (b":authority", authority.encode()),
        (b":scheme", url.scheme.encode()),
        (b":path", url.raw_path),
    ]
    headers.extend(
        (name.lower(), value)
        for name, value in request.headers.raw
        if name.lower() not in _HOP_BY_HOP
    )
    return headers
