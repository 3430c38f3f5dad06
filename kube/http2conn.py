"""One HTTP/2 connection to an API server over TLS: its state (:mod:`kube.http2state`),
streams, flow control and liveness, used by :class:`kube.http2.Http2Transport`.

The connection is the socket's asyncio protocol: what arrives is handed to the state as
it arrives (in the event loop's callback, no task reads) and each event to its stream,
waking the task that waits for it; what the state has to send is written at once (the
transport buffers it, so writes keep their order and a cancelled task never cuts a TLS
record). A stream closed early is reset (what still arrives for it is dropped); the
connection's window is given back on receipt and a stream's once read, so a slow reader
holds back only its own stream; a request's deadline (its whole answer, not each part)
fails only that request and, if the connection was silent too, a PING decides whether
the connection is dead.

A server is not trusted with the event loop (:mod:`kube.http2limits`): what arrives is
handled for at most a time slice per round of the loop (reading pauses meanwhile), reading
pauses too while the server does not take what we send (acknowledgements pile up no
further), body parts that arrive before their reader wakes are kept as one, and a server
that breaks the protocol is told why (GOAWAY with the error) before it is dropped.

Why a protocol and not an anyio stream: a task that reads the socket, wakes the task an
answer is for and hands the reading over cost two task switches per answer, and anyio's
TLS wrapper a Python round per read and write; here TLS is the event loop's (C under
uvloop) and an answer costs one wake-up. anyio has no callback API for sockets, so this
module needs anyio's asyncio backend (the one the controller runs).

One module and one class over the size the codebase keeps to: a connection's streams,
flow-control windows, liveness and deadlines change together on every frame, and the
invariants between them (a window never negative, a stream's end read once) are checked
in one place rather than passed between classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import cast

import anyio
import httpx
from hpack.hpack import encode_integer
from hpack.table import HeaderTable

from kube.answerbody import BodyDecoder
from kube.http2limits import RECEIVE_SLICE_S
from kube.http2state import (
    ClientState,
    ConnectionTerminated,
    DataReceived,
    Event,
    ProtocolViolation,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamMalformed,
    StreamReset,
    StreamUnavailable,
    WindowUpdated,
    error_name,
)

STREAM_WINDOW = 1 << 20
"""How much of one response may arrive before its reader takes it (the server's send
window per stream); a reader that falls behind holds back only its own stream."""
CONNECTION_WINDOW = 1 << 24
"""The connection's receive window: arrivals are acknowledged on receipt, per stream
windows bound what is buffered."""
WRITE_TIMEOUT_S = 30.0
"""How long the server may take no data from us before the connection counts as broken
(for writes that have no timeout of their own)."""
PING_TIMEOUT_S = 5.0
"""After a request heard nothing for its whole timeout and the connection was silent too:
how long a PING may take before the connection counts as dead (the request has failed
already; the connection takes no new one meanwhile)."""


_STATIC_FIELDS = {field: i for i, field in reversed(list(enumerate(HeaderTable.STATIC_TABLE, 1)))}
"""HPACK's static table, by (name, value): the index of each (the first, if twice)."""
_STATIC_NAMES = {name: i for (name, _), i in _STATIC_FIELDS.items()}
"""By name, the index of its first entry in HPACK's static table (``_STATIC_FIELDS`` is
built last entry first, so the first one is written last)."""
_SENSITIVE = frozenset({b"authorization", b"proxy-authorization", b"cookie"})
"""Header names whose values are sent as never to be indexed (by any hop)."""


_PREFIXES: dict[tuple[bytes, bool], bytes] = {}
"""A literal's first bytes (its representation and its name), by name and whether it is
never indexed. (The names are those the client sends: a few dozen.)"""


def _prefix(name: bytes, never_indexed: bool) -> bytes:
    prefix = _PREFIXES.get((name, never_indexed))
    if prefix is None:
        flag = 0x10 if never_indexed else 0x00
        index = _STATIC_NAMES.get(name)
        if index is not None:
            first = encode_integer(index, 4)
            first[0] |= flag
            prefix = bytes(first)
        else:
            prefix = bytes((flag,)) + _string(name)
        _PREFIXES[name, never_indexed] = prefix
    return prefix


def encode_headers(headers: list[tuple[bytes, bytes]]) -> bytes:
    """A request's header block: HPACK without a dynamic table or Huffman coding. A
    header in the static table whole is sent as its index, every other one as a literal
    (its name indexed when the static table has it) that no decoder adds to its table;
    credentials as never indexed. (hpack's encoder searched and updated the dynamic table
    for every header, in Python, and Huffman-coded what it sent — a bearer token is ~1 KB:
    several times the CPU per request's headers; and it queued every table size the server
    set, to send them all on the next request. Each request carries a few hundred bytes
    more, which costs less than that.)"""
    block = []
    for name, value in headers:
        index = _STATIC_FIELDS.get((name, value))
        if index is not None:  # (every index of the static table is under 128)
            block.append(bytes((0x80 | index,)))
            continue
        block.append(_prefix(name, name in _SENSITIVE))
        block.append(_string(value))
    return b"".join(block)


def _string(data: bytes) -> bytes:
    """An HPACK string literal, not Huffman-coded."""
    if len(data) < 0x7F:
        return bytes((len(data),)) + data
    return bytes(encode_integer(len(data), 7)) + data


@dataclass
class Answer:
    """A whole answer: status, headers (names in lower case) and body (decoded)."""

    status: int
    headers: dict[bytes, bytes]
    content: bytes


Opened = tuple["Stream", int, list[tuple[bytes, bytes]]]
"""A request's stream once its answer's status and headers arrived."""


class Refused(httpx.RemoteProtocolError):
    """A request the server did not process (safe to send again)."""


class Stream:
    """One request on the connection: the events that arrived for it, not yet taken."""

    def __init__(self, stream_id: int, whole: bool = False) -> None:
        self.id = stream_id
        self.events: deque[Event | httpx.TransportError] = deque()
        self.unacknowledged = 0
        self.ended = False
        self.whole = whole
        """Its reader wants the whole answer: it is woken once the answer ended (or
        failed), or once half the stream's window arrived unread, not for each part. An
        API server sends an answer's headers and body as separate writes, often read in
        separate rounds of the event loop; each wake-up was a round of the loop's other
        work on the request's way back."""
        self.unread = 0
        """Bytes of body that arrived and were not taken yet."""
        self.woken: asyncio.Event | None = None
        """Set to wake the task waiting for this stream (made when one starts to wait:
        most answers arrive without a wait, and an Event per request showed in a rollout's
        CPU). asyncio's, not anyio's: it is set from the protocol's callbacks,
        where no task runs."""

    def wake(self) -> None:
        """Wake the task waiting for this stream, if one does."""
        if self.woken is not None:
            self.woken.set()

    def arrived(self, event: Event) -> None:
        """``event`` arrived for this stream: keep it, and wake the reader if it waits for
        it (see :attr:`whole`)."""
        if isinstance(event, DataReceived):
            self.unread += event.flow_controlled_length
            last = self.events[-1] if self.events else None
            if isinstance(last, DataReceived):  # not taken yet: one part (a server's
                last.add(event)  # tiny frames are not an object each)
            else:
                self.events.append(event)
            if self.whole and self.unread < STREAM_WINDOW // 2:
                return
        else:
            self.events.append(event)
        if self.whole and isinstance(event, ResponseReceived):
            return
        self.wake()


class Http2Connection(asyncio.Protocol):
    """HTTP/2 over one TLS connection (see the module's docstring)."""

    def __init__(self, on_room: Callable[[], None] | None = None) -> None:
        self._on_room = on_room
        self._transport: asyncio.Transport | None = None
        # An answer's headers are checked where they are read (_status, and the few the
        # connection reads). What we send is built here (method, path, authority, token,
        # accept): names in lower case, values without surrounding space (a token is
        # stripped as it is read), no hop-by-hop headers (left out where they are built),
        # the credentials marked by encode_headers.
        self._state = ClientState(
            encode_headers,
            stream_window=STREAM_WINDOW,
            connection_window=CONNECTION_WINDOW,
            max_concurrent_streams=100,
            max_header_list_size=1 << 16,
        )
        self._streams: dict[int, Stream] = {}
        self._connection_waiters: set[Stream] = set()
        """Tasks waiting for the connection rather than for an event of their own: the
        server's SETTINGS, a larger send window, anything after a PING."""
        self._writable = asyncio.Event()  # clear while the transport's buffer is full
        self._writable.set()
        self._backlogged = False
        """Frames that arrived wait for the loop's next round (see :meth:`_take`)."""
        self._error: httpx.TransportError | None = None
        self._goaway = False
        self._settings_seen = False
        self._held = 0
        """Nesting of :meth:`together`: while above 0, writes wait for its end."""
        self._checking: asyncio.Task[None] | None = None
        """The PING after a request timed out on a silent connection (:meth:`_suspect`)."""
        self.received_at = time.monotonic()

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        sni: str,
        tls: ssl.SSLContext,
        timeout_s: float | None,
        on_room: Callable[[], None] | None = None,
    ) -> Http2Connection | None:
        """A connection to ``host``, its prefaces exchanged; None if the server chose a
        protocol other than HTTP/2 (httpx.ConnectError or ConnectTimeout if none is made).
        ``on_room`` is called whenever a stream closes or the server's limits change."""
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(timeout_s):
                transport, connection = await loop.create_connection(
                    lambda: cls(on_room), host, port, ssl=tls, server_hostname=sni
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection within {timeout_s} s") from None
        except OSError as exc:  # refused, unreachable, TLS failed (ssl.SSLError)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        try:
            tls_object = transport.get_extra_info("ssl_object")
            if tls_object is None or tls_object.selected_alpn_protocol() != "h2":
                transport.abort()
                return None
            await connection.start(timeout_s)
        except BaseException:
            # Cancelled too (a probe's bound, a caller's deadline): a connection nobody
            # holds would stay open, with whatever the server sends on it, forever.
            transport.abort()
            raise
        return connection

    @property
    def usable(self) -> bool:
        """New requests may go here (while :attr:`being_checked`, they wait for it): not
        failed, not going away, a stream id left."""
        return self._error is None and not self._goaway and self._state.ids_left

    @property
    def being_checked(self) -> bool:
        """Being checked for life (:meth:`_suspect`): a new request waits for the answer,
        then goes here or, if it is dead, to a new connection."""
        return self._checking is not None

    @property
    def has_room(self) -> bool:
        """Usable, not :attr:`being_checked`, and the server allows one more stream now."""
        return (
            self.usable
            and self._checking is None
            and self._state.open_streams < self._state.max_concurrent_streams
        )

    @property
    def idle(self) -> bool:
        """No stream open on it."""
        return not self._streams

    async def start(self, timeout_s: float | None) -> None:
        """Wait for the server's preface: the connection is used once its SETTINGS (its
        stream limit among them) arrived (ours went out when the connection was made)."""
        try:
            with anyio.fail_after(timeout_s):
                await self._wait_for_connection(lambda: self._settings_seen)
        except TimeoutError:
            self._fail(httpx.ConnectTimeout(f"no HTTP/2 SETTINGS within {timeout_s} s"))
        self._raise_if_broken()

    # -- requests ------------------------------------------------------------------------

    async def exchange(
        self,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        timeouts: dict[str, float | None],
        limit: int | None,
    ) -> Answer:
        """One request, its answer read whole and decoded, at most ``limit`` bytes of it
        (else :class:`kube.answerbody.UnreadableAnswer`, the stream reset), all of it
        within ``timeouts["read"]`` (else httpx.ReadTimeout)."""
        stream = self.send_now(headers, body, whole=True)
        if stream is None:
            stream = await self._send(headers, body, timeouts, whole=True)
        return await self.answer(stream, timeouts, limit)

    async def answer(
        self, stream: Stream, timeouts: dict[str, float | None], limit: int | None
    ) -> Answer:
        """The whole answer to a request sent with ``whole`` (see :meth:`exchange`), within
        ``timeouts["read"]`` from now, headers and body; the stream is closed once it is
        read, or once reading it failed."""
        deadline = deadline_after(timeouts.get("read"))
        status, answer_headers = await self._headers_of(stream, deadline)
        found = dict(answer_headers)
        chunks: list[bytes | bytearray] = []
        try:
            decoder = BodyDecoder(found.get(b"content-encoding", b"").decode("latin-1"), limit)
            async for chunk in ResponseBody(self, stream, deadline):
                chunks.extend(decoder.decode(chunk))
        finally:
            self.close_stream(stream)
        return Answer(status, found, b"".join(chunks))

    def send_now(
        self, headers: list[tuple[bytes, bytes]], body: bytes, *, whole: bool = False
    ) -> Stream | None:
        """Send a request at once, without a round of the event loop: its stream (read it
        with :meth:`answer`, or close it); None when it cannot go out whole right now (no
        free stream, the transport's buffer full, or a body past the send window), and
        nothing was sent."""
        if not (self.has_room and self._writable.is_set()):
            return None
        if body and len(body) > min(self._state.send_window, self._state.remote_initial_window):
            return None
        stream = self._new_stream(headers, body, whole)
        try:
            self._queue_body(stream, memoryview(body))  # (whole: a new stream's window)
        except BaseException:
            self.close_stream(stream)
            raise
        self._write()
        return stream

    def _new_stream(self, headers: list[tuple[bytes, bytes]], body: bytes, whole: bool) -> Stream:
        """A stream for a request, its headers queued (ending it when there is no body)."""
        try:
            stream_id = self._state.send_headers(headers, end_stream=not body)
        except (StreamUnavailable, ValueError) as exc:
            raise httpx.LocalProtocolError(f"HTTP/2: {exc}") from exc
        stream = Stream(stream_id, whole)
        self._streams[stream_id] = stream
        return stream

    async def open(
        self, headers: list[tuple[bytes, bytes]], body: bytes, timeouts: dict[str, float | None]
    ) -> Opened:
        """Send a request; its stream once the answer's status and headers arrived (within
        ``timeouts["read"]``)."""
        stream = await self._send(headers, body, timeouts, whole=False)
        status, answer_headers = await self._headers_of(
            stream, deadline_after(timeouts.get("read"))
        )
        return stream, status, answer_headers

    async def _send(
        self,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        timeouts: dict[str, float | None],
        *,
        whole: bool,
    ) -> Stream:
        """Send a request, waiting for the server to take its body if it must."""
        write_s = timeouts.get("write")
        if not self.has_room:  # (the transport waits for room before it comes here)
            raise Refused(f"not sent: {self._error or 'no free stream on the connection'}")
        stream = self._new_stream(headers, body, whole)
        try:
            if body:  # the headers go out with it
                await self._send_body(stream, body, write_s)
            else:
                await self._flush(write_s)
        except BaseException:
            self.close_stream(stream)
            raise
        return stream

    async def _headers_of(
        self, stream: Stream, deadline: float | None
    ) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The answer's status and headers, once they arrived (informational ones skipped)
        by ``deadline`` (loop time); the stream is closed if they do not come."""
        try:
            while True:
                event = await self._next_event(stream, deadline)
                if isinstance(event, ResponseReceived):
                    status, answer_headers = _status(event)
                    if status >= 200:
                        return status, answer_headers
                elif isinstance(event, StreamEnded):
                    stream.ended = True
                    raise httpx.RemoteProtocolError("the server ended the stream without an answer")
        except BaseException:
            self.close_stream(stream)
            raise

    async def _send_body(self, stream: Stream, body: bytes, timeout_s: float | None) -> None:
        """Send ``body`` (and what is queued before it: the request's headers), its last
        frame ending the stream: in one write when it fits the send window (a write per
        frame cost two more TLS records and socket writes per request)."""
        view = self._queue_body(stream, memoryview(body))
        while view:  # the server has not read enough yet: wait for its WINDOW_UPDATE
            await self._flush(timeout_s)
            event = await self._next_event(stream, deadline_after(timeout_s), until_window=True)
            if event is not None:  # it answered before taking the whole body
                stream.events.appendleft(event)
                return
            view = self._queue_body(stream, view)
        await self._flush(timeout_s)

    def _queue_body(self, stream: Stream, view: memoryview) -> memoryview:
        """Queue as much of ``view`` as the send window takes, in frames, the last one
        ending the stream; returns the rest."""
        while view:
            room = min(self._state.window(stream.id), self._state.max_frame_size)
            if room <= 0:
                if not self._state.is_open(stream.id):  # reset by the server meanwhile
                    raise httpx.RemoteProtocolError(f"HTTP/2: stream {stream.id} is closed")
                return view
            chunk, view = view[:room], view[room:]
            self._state.send_data(stream.id, chunk, end_stream=not view)
        return view

    async def _next_event(
        self, stream: Stream, deadline: float | None, until_window: bool = False
    ) -> Event | None:
        """The stream's next event (None once the send window grew, if ``until_window``);
        httpx.ReadTimeout at ``deadline`` (loop time; None: none) without one."""
        window = self._state.window(stream.id) if until_window else 0

        def arrived() -> bool:
            return bool(stream.events) or (until_window and self._state.window(stream.id) > window)

        waited_from = time.monotonic()
        try:
            if not arrived():
                await self._wait(stream, arrived, until_window, deadline)
        except TimeoutError:
            if self.received_at < waited_from:  # nothing at all arrived meanwhile
                self._suspect()
            raise httpx.ReadTimeout("no whole answer within its time") from None
        if not stream.events:
            return None
        event = stream.events.popleft()
        if isinstance(event, httpx.TransportError):
            raise event
        if isinstance(event, StreamReset):
            stream.ended = True
            raise _reset_error(event)
        if isinstance(event, StreamMalformed):
            stream.ended = True
            raise httpx.RemoteProtocolError(f"a malformed answer: {event.reason}")
        return event

    async def _wait(
        self,
        stream: Stream,
        done: Callable[[], bool],
        for_connection: bool,
        deadline: float | None = None,
    ) -> None:
        """Until ``done()``, woken by an event for ``stream`` (or, ``for_connection``, by
        anything that arrives); raises TimeoutError at ``deadline`` (loop time; None: no
        limit), and once the connection broke."""
        if for_connection:
            self._connection_waiters.add(stream)
        loop = asyncio.get_running_loop()
        try:
            while not done():
                self._raise_if_broken()
                stream.woken = woken = asyncio.Event()
                if deadline is None:
                    await woken.wait()
                    continue
                if loop.time() >= deadline:
                    raise TimeoutError
                # A timer that wakes it rather than a cancel scope: a watch waits once per
                # event, and anyio's scope (made, entered, left) was a large part of its CPU.
                timer = loop.call_at(deadline, woken.set)
                try:
                    await woken.wait()
                finally:
                    timer.cancel()
        finally:
            stream.woken = None
            self._connection_waiters.discard(stream)

    async def _wait_for_connection(self, done: Callable[[], bool]) -> None:
        await self._wait(Stream(0), done, for_connection=True)

    def _suspect(self) -> None:
        """A request heard nothing for its whole timeout, and neither did the connection:
        check in the background whether it is dead (:meth:`_check_alive`), taking no new
        request until it is known. The request fails at its own timeout, not a PING
        later."""
        if self._checking is None and self._error is None:
            self._checking = asyncio.get_running_loop().create_task(self._check_alive())

    async def _check_alive(self) -> None:
        """PING the server; the connection fails unless something arrives in time."""
        try:
            await self.ping(PING_TIMEOUT_S)
        except httpx.ReadTimeout as exc:
            self._fail(exc)
        except httpx.TransportError:
            return
        finally:
            self._checking = None
            self._room_changed()

    async def ping(self, timeout_s: float) -> None:
        """PING the server: returns once it acknowledged this PING (other frames prove
        nothing: a server may trickle bytes and answer nothing); raises httpx.ReadTimeout
        after ``timeout_s`` without (another TransportError if the connection broke). The
        connection is left as it is: a slow link is not a dead one (a call that times out
        on a silent connection fails it)."""
        self._raise_if_broken()
        payload = os.urandom(8)
        self._state.ping(payload)
        await self._flush(timeout_s)
        with anyio.move_on_after(timeout_s):
            await self._wait_for_connection(lambda: not self._state.awaits_ping(payload))
        if self._state.awaits_ping(payload):
            raise httpx.ReadTimeout(f"no answer to a PING within {timeout_s:g} s")

    def _raise_if_broken(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error))

    # -- the socket: asyncio's protocol callbacks ----------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport's subclasses, but behave as one)
        self._transport = cast(asyncio.Transport, transport)
        # Our preface goes out before anything the server sent is taken (it may arrive
        # in the same loop iteration).
        self._state.initiate()
        self._write()

    def data_received(self, data: bytes) -> None:
        """What arrived, its events handed out at once (see :meth:`_take`)."""
        self.received_at = time.monotonic()
        if self._error is None:
            self._take(data)

    def _take(self, data: bytes) -> None:
        """Hand ``data`` to the state for :data:`RECEIVE_SLICE_S` at most: what is left
        waits for the loop's next round, reading paused meanwhile (a server's flood of
        small frames holds the loop no longer than that, whoever else waits)."""
        try:
            events = self._state.receive(data, time.perf_counter() + RECEIVE_SLICE_S)
        except ProtocolViolation as exc:
            self._violated(exc)
            return
        backlog = self._state.backlog
        if backlog != self._backlogged:
            self._backlogged = backlog
            self._reading()
        if backlog:
            asyncio.get_running_loop().call_soon(self._take_backlog)
        for event in events:
            self._dispatch(event)
        if self._goaway:
            # The streams the server would still finish fail too: a connection that is
            # going away is not worth waiting on (each request is sent again or retried)
            self._fail(httpx.RemoteProtocolError("the server closed the connection (GOAWAY)"))
            return
        for waiter in self._connection_waiters:
            waiter.wake()  # (each checks whether what it waits for came)
        self._write()  # acknowledgements: SETTINGS, PING, windows

    def _take_backlog(self) -> None:
        if self._error is None:
            self._take(b"")

    def _reading(self) -> None:
        """Read from the socket unless frames wait to be handled or the server does not
        take what we send (our acknowledgements of its PINGs and SETTINGS among it)."""
        if self._transport is None or self._error is not None:
            return
        if self._backlogged or not self._writable.is_set():
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()

    def _violated(self, exc: ProtocolViolation) -> None:
        """The server broke the protocol: tell it why (GOAWAY with the error), then drop
        the connection (its requests fail retryably)."""
        if self._error is None and self._transport is not None:
            self._state.close(exc.code)
            self._write()
        flushed = self._transport is not None and not self._transport.get_write_buffer_size()
        # (a server that reads nothing is not waited for)
        self._fail(
            httpx.RemoteProtocolError(f"HTTP/2 protocol error: {exc}"), drop_unsent=not flushed
        )

    def connection_lost(self, exc: Exception | None) -> None:
        why = f" ({type(exc).__name__})" if exc is not None else ""
        self._fail(httpx.ReadError(f"the server closed the connection{why}"))

    def pause_writing(self) -> None:
        self._writable.clear()
        self._reading()

    def resume_writing(self) -> None:
        self._writable.set()
        self._reading()

    def _dispatch(self, event: Event) -> None:
        # (The connection's window is given back on receipt by the state; a stream's once
        # it is read: consumed().)
        if isinstance(
            event, (DataReceived, ResponseReceived, StreamEnded, StreamReset, StreamMalformed)
        ):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.arrived(event)
        elif isinstance(event, ConnectionTerminated):
            self._goaway = True
            last = event.last_stream_id
            for stream in self._streams.values():
                if stream.id > last:  # never processed by the server: safe to send again
                    stream.events.append(Refused("the server refused the stream (GOAWAY)"))
                    stream.wake()
        elif isinstance(event, (WindowUpdated, RemoteSettingsChanged)):
            self._settings_seen |= isinstance(event, RemoteSettingsChanged)
            self._room_changed()

    def _room_changed(self) -> None:
        """A stream closed, the server's limits changed or the connection failed: tell
        the transport, whose requests may be waiting for room."""
        if self._on_room is not None:
            self._on_room()

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """What is sent within the block (which must not wait: nothing else may be held
        back) goes to the transport in one write at its end: requests sent one after the
        other reach the server together, though the first to arrive wakes the server, and
        on a busy machine the processor may go to it before the rest are written."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held:
                self._write()

    def _write(self) -> None:
        """Hand what the state has queued to the transport (which sends it in that order)."""
        if self._held:
            return  # at the end of together()
        data = self._state.data_to_send()
        if data and self._error is None and self._transport is not None:
            self._transport.write(data)

    async def _flush(self, timeout_s: float | None) -> None:
        """Send what the state has queued, and wait while the transport holds more than it
        should (the server takes no data): past ``timeout_s`` the connection fails."""
        self._write()
        if not self._writable.is_set():
            limit = timeout_s or WRITE_TIMEOUT_S
            with anyio.move_on_after(limit):
                await self._writable.wait()
            if not self._writable.is_set():
                self._fail(httpx.WriteTimeout(f"the server took no data for {limit} s"))
        self._raise_if_broken()

    def _fail(self, error: httpx.TransportError, *, drop_unsent: bool = True) -> None:
        """The connection is done: ``error`` for every stream and waiter; what the
        transport still holds is dropped unless ``drop_unsent`` is False (then sent
        before it closes)."""
        if self._error is None:
            self._error = error
            self._writable.set()
            self._room_changed()
            for stream in (*self._streams.values(), *self._connection_waiters):
                stream.wake()
            if self._transport is not None:
                (self._transport.abort if drop_unsent else self._transport.close)()

    # -- streams -------------------------------------------------------------------------

    def consumed(self, stream: Stream, size: int) -> None:
        """``size`` bytes of ``stream`` were read: let the server send more."""
        stream.unread -= size
        stream.unacknowledged += size
        if stream.unacknowledged >= STREAM_WINDOW // 2 and not stream.ended:
            self._state.acknowledge(stream.id, stream.unacknowledged)  # (none if closed meanwhile)
            stream.unacknowledged = 0
            self._write()

    def close_stream(self, stream: Stream) -> None:
        """Forget ``stream``, resetting it if the server may still send on it."""
        if self._streams.pop(stream.id, None) is None:
            return
        if self._state.is_open(stream.id) and self._error is None:
            self._state.reset_stream(stream.id)
            self._write()
        if not self._streams and not self._state.ids_left:
            self.retire()  # its last stream is done and it can take no other
        self._room_changed()

    def retire(self) -> None:
        """Close now (streams still open on it fail)."""
        if self._error is None:
            self._state.close()
            self._write()
            # (its GOAWAY goes out before the connection closes)
            self._fail(httpx.ReadError("the connection was closed"), drop_unsent=False)


class ResponseBody(httpx.AsyncByteStream):
    """An answer's body as it arrives, until :attr:`deadline` (then httpx.ReadTimeout);
    closing it early resets its stream."""

    def __init__(self, connection: Http2Connection, stream: Stream, deadline: float | None) -> None:
        self._connection = connection
        self._stream = stream
        self.deadline = deadline
        """When the body must have ended (loop time; None: no limit); a watch's reader
        moves it on as events come."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stream = self._stream
        while not stream.ended:
            event = await self._connection._next_event(stream, self.deadline)
            if isinstance(event, DataReceived):
                self._connection.consumed(stream, event.flow_controlled_length)
                if event.data:
                    yield bytes(event.data)
            elif isinstance(event, StreamEnded):
                stream.ended = True

    async def aclose(self) -> None:
        self._connection.close_stream(self._stream)


def deadline_after(timeout_s: float | None) -> float | None:
    """The loop time ``timeout_s`` from now (None: no deadline)."""
    return None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s


def _status(event: ResponseReceived) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The answer's status and its other headers; raises RemoteProtocolError when it has no
    status, or more than one, or one that is not three digits."""
    status: int | None = None
    headers = []
    for name, value in event.headers:
        if name == b":status":
            if status is not None or len(value) != 3 or not value.isdigit():
                raise httpx.RemoteProtocolError(
                    f"the server's answer has an invalid :status {value[:16]!r}"
                )
            status = int(value)
        elif not name.startswith(b":"):
            headers.append((name, value))
    if status is None:
        raise httpx.RemoteProtocolError("the server's answer has no :status")
    return status, headers


def _reset_error(event: StreamReset) -> httpx.TransportError:
    return httpx.RemoteProtocolError(
        f"the server reset the stream ({error_name(event.error_code)})"
    )
