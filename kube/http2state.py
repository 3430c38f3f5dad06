"""The client side of one HTTP/2 connection (RFC 9113) without I/O: bytes from the server
in, events out; requests, window updates, pings and resets turned into frames to send.

Only what a client of an API server needs: no server push (refused in our SETTINGS), no
priorities (ignored), no extension frames (skipped), no compression table (our SETTINGS
give the server none, and ours is never used). A breach of the protocol by the server is
a connection error (:class:`ProtocolViolation`): the connection is dropped and its
requests fail retryably, where the RFC would allow resetting a single stream; a server
that breaks the protocol is not one to keep talking to. An answer whose fields break
HTTP/2's rules (RFC 9113 8.2) fails only its own stream (:class:`StreamMalformed`).

A member's API server is not trusted with the hub's CPU or memory
(:mod:`kube.http2limits`): frames that carry nothing draw on an allowance, a header
block is bounded in frames and bytes, blocks for streams we closed are not decoded, empty
DATA frames make no event, and :meth:`ClientState.receive` stops after a time slice,
keeping the rest for the next call.

Why not h2: its general state machine (every frame an object, every transition an
enum-keyed table, a ``repr`` of every frame received for a trace log nobody reads) was a
quarter of the controller's CPU at rest with 1,000 members and of each API call's; this
one parses a frame with one ``struct`` call and keeps a stream's state in five fields.
Header blocks are decoded by :class:`kube.hpackread.AnswerHeaderDecoder` (only the
headers read); ``encode`` (:func:`kube.http2conn.encode_headers`) encodes ours.

One module and one class over the size the codebase keeps to: RFC 9113's connection state
machine is one table of what each frame may do in each state, kept together so every
rule a hostile server could probe is found in one reading.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable
from typing import Any

from kube.hpackread import READ_HEADERS, AnswerHeaderDecoder, CompressionError, MalformedHeaders
from kube.http2limits import MAX_CONTINUATIONS, SMALL_DATA, Allowance

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 1, 2, 3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 4, 5, 6

NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR = 0x0, 0x1, 0x3, 0x6
CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x8, 0x9, 0xB
ERROR_NAMES = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}
"""RFC 9113's error codes by value, for messages."""

DEFAULT_WINDOW = 65_535
MAX_WINDOW = (1 << 31) - 1
FRAME_SIZE = 16_384
"""The largest frame payload we accept (we never raise SETTINGS_MAX_FRAME_SIZE)."""
LAST_STREAM_ID = (1 << 31) - 1

_FRAME_HEADER = struct.Struct(">HBBBL")  # length (24 bits, as 16 + 8), type, flags, stream
_SETTING = struct.Struct(">HL")
_U32 = struct.Struct(">L")
_TWO_U32 = struct.Struct(">LL")
_RESETS_KEPT = 1024
"""Streams we reset that are remembered (see ClientState._reset)."""
_PINGS_KEPT = 16
"""PINGs of ours awaited at once at most (one per probe, at the probe interval)."""
_TABLE_SIZE_ZERO = b"\x20"
"""An HPACK dynamic table size update to 0 (RFC 7541 6.3)."""
_FORBIDDEN_IN_VALUE = re.compile(rb"[\r\n\0]").search
"""(One search per value: three ``in`` tests over each, a ~1 KB token among them, showed
in the controller's profile at rest.)"""


def error_name(code: int) -> str:
    """``code``'s name in RFC 9113, or its number when it has none."""
    return ERROR_NAMES.get(code, f"0x{code:x}")


class ProtocolViolation(Exception):
    """The server broke HTTP/2: the connection cannot go on (``code``: why, as RFC 9113
    names it)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} ({error_name(code)})")
        self.code = code


class StreamUnavailable(Exception):
    """A frame for a stream that cannot take it: not open (reset by the server, ended),
    no stream id left, more streams than the server allows, or more data than its
    windows take."""


# -- events ----------------------------------------------------------------------------


class ResponseReceived:
    """A stream's final answer headers (informational ones are not reported; trailers
    neither)."""

    __slots__ = ("headers", "stream_id")

    def __init__(self, stream_id: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.stream_id = stream_id
        self.headers = headers


class DataReceived:
    """Body bytes for a stream; ``flow_controlled_length`` (padding included) counts
    against its window until :meth:`ClientState.acknowledge`."""

    __slots__ = ("data", "flow_controlled_length", "stream_id")

    def __init__(self, stream_id: int, data: bytes, flow_controlled_length: int) -> None:
        self.stream_id = stream_id
        self.data: bytes | bytearray = data
        self.flow_controlled_length = flow_controlled_length

    def add(self, later: DataReceived) -> None:
        """Take the bytes of ``later`` (of the same stream) after these."""
        if not isinstance(self.data, bytearray):
            self.data = bytearray(self.data)
        self.data += later.data
        self.flow_controlled_length += later.flow_controlled_length


class StreamEnded:
    """The server sent the end of a stream."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


class StreamReset:
    """The server reset a stream (RST_STREAM)."""

    __slots__ = ("error_code", "stream_id")

    def __init__(self, stream_id: int, error_code: int) -> None:
        self.stream_id = stream_id
        self.error_code = error_code


class StreamMalformed:
    """A stream's answer broke HTTP/2's rules for fields (``reason``); the stream was
    reset (PROTOCOL_ERROR), the connection goes on."""

    __slots__ = ("reason", "stream_id")

    def __init__(self, stream_id: int, reason: str) -> None:
        self.stream_id = stream_id
        self.reason = reason


class ConnectionTerminated:
    """The server said GOAWAY: streams above ``last_stream_id`` were not processed."""

    __slots__ = ("additional_data", "error_code", "last_stream_id")

    def __init__(self, last_stream_id: int, error_code: int, additional_data: bytes) -> None:
        self.last_stream_id = last_stream_id
        self.error_code = error_code
        self.additional_data = additional_data


class WindowUpdated:
    """The server let us send more (on a stream, or on the connection: ``stream_id`` 0)."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


class RemoteSettingsChanged:
    """The server's SETTINGS arrived (and were acknowledged): ``changed`` by code."""

    __slots__ = ("changed",)

    def __init__(self, changed: dict[int, int]) -> None:
        self.changed = changed


Event = (
    ResponseReceived
    | DataReceived
    | StreamEnded
    | StreamReset
    | StreamMalformed
    | ConnectionTerminated
    | WindowUpdated
    | RemoteSettingsChanged
)


class _Stream:
    """One of our streams while it is open."""

    __slots__ = (
        "answered",
        "receive_window",
        "received_end",
        "send_window",
        "sent_end",
        "small_data",
    )

    def __init__(self, send_window: int, receive_window: int) -> None:
        self.send_window = send_window
        self.receive_window = receive_window
        self.sent_end = False
        self.received_end = False
        self.answered = False
        """Its final answer headers arrived: DATA may follow, and HEADERS only as trailers."""
        self.small_data = False
        """Its last DATA frame had fewer than SMALL_DATA bytes."""


class ClientState:
    """One HTTP/2 connection's state, client side (see the module's docstring): feed it
    what arrives (:meth:`receive`), call it to send, and write :meth:`data_to_send` to the
    socket after each."""

    def __init__(
        self,
        encode: Callable[[list[tuple[bytes, bytes]]], bytes],
        *,
        stream_window: int,
        connection_window: int,
        max_concurrent_streams: int,
        max_header_list_size: int,
    ) -> None:
        if not DEFAULT_WINDOW <= connection_window <= MAX_WINDOW:
            raise ValueError(f"connection_window {connection_window} out of range")
        if not 0 <= stream_window <= MAX_WINDOW:
            raise ValueError(f"stream_window {stream_window} out of range")
        self._encode = encode
        """A request's header block: never indexed, so no table of ours to keep."""
        self._decoder = AnswerHeaderDecoder(READ_HEADERS, max_header_list_size)
        self._local_settings = {
            HEADER_TABLE_SIZE: 0,  # see kube.hpackread
            ENABLE_PUSH: 0,
            MAX_CONCURRENT_STREAMS: max_concurrent_streams,
            MAX_HEADER_LIST_SIZE: max_header_list_size,
            INITIAL_WINDOW_SIZE: stream_window,
        }
        self._stream_window = stream_window
        self._connection_window = connection_window
        self._max_block = max_header_list_size
        """The largest header block (HEADERS and its CONTINUATIONs) taken: a server that
        never ends one would otherwise fill memory. (An encoded block is smaller than the
        header list it holds, which our SETTINGS bound by this.)"""
        self._out = bytearray()
        self._pending = b""  # the start of a frame not whole yet
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._block: bytearray | None = None
        self._block_stream = 0
        self._block_ends_stream = False
        self._continuations = 0
        """CONTINUATION frames of the header block under way."""
        self._allowance = Allowance()
        """For frames that carry nothing (see :mod:`kube.http2limits`)."""
        self._reset: dict[int, None] = {}
        """Streams we reset lately, whose answer's headers may still be on their way."""
        self._pings: dict[bytes, None] = {}
        """The payloads of PINGs sent and not acknowledged yet (the last few)."""
        self._settings_seen = 0
        """SETTINGS the server sent (its first is its preface)."""
        self._acks_due = 1
        """Acknowledgements of our SETTINGS still to come (we send one)."""
        self._table_size = 4096
        """Our compression table's size as the server's decoder takes it: 4096 (HPACK's
        initial) until the server lowers its limit, then 0, said once (a server's flood of
        changes is not queued)."""
        self._announce_table = False
        """The next header block starts with a table size update to 0."""
        self.send_window = DEFAULT_WINDOW
        """How much the connection's window lets us send now (each stream has its own too)."""
        self._receive_window = DEFAULT_WINDOW
        self._unacknowledged = 0
        self.remote_initial_window = DEFAULT_WINDOW
        """The server's SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window."""
        self.max_frame_size = FRAME_SIZE
        """The largest frame payload the server takes."""
        self.max_concurrent_streams = LAST_STREAM_ID
        """How many streams the server lets us have open (unlimited until it says)."""

    # -- sending -------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the connection preface: our SETTINGS, then the connection's window raised
        to ``connection_window`` (the server applies both before any stream of ours, which
        follow them on the wire)."""
        payload = b"".join(
            _SETTING.pack(code, value) for code, value in self._local_settings.items()
        )
        self._out += PREFACE
        self._frame(SETTINGS, 0, 0, payload)
        increment = self._connection_window - DEFAULT_WINDOW
        if increment:
            self._frame(WINDOW_UPDATE, 0, 0, _U32.pack(increment))
            self._receive_window += increment

    @property
    def ids_left(self) -> bool:
        """Whether a stream id is left for a new request (a client's ids are odd and end
        at 2^31 - 1: a connection that lived long enough runs out of them)."""
        return self._next_id <= LAST_STREAM_ID

    @property
    def open_streams(self) -> int:
        """Streams of ours not closed yet (counted against the server's limit)."""
        return len(self._streams)

    def is_open(self, stream_id: int) -> bool:
        """The stream is not closed: the server may still send on it, or we on it."""
        return stream_id in self._streams

    def send_headers(self, headers: list[tuple[bytes, bytes]], *, end_stream: bool) -> int:
        """Open a stream with a request's headers (ending it when there is no body); its
        id. Raises ValueError for a value holding CR, LF or NUL (no server would take it
        as meant), StreamUnavailable when the server allows no other stream now or no id
        is left."""
        for name, value in headers:
            if _FORBIDDEN_IN_VALUE(value):
                raise ValueError(f"header {name!r} has a CR, LF or NUL in its value")
        if len(self._streams) >= self.max_concurrent_streams:
            raise StreamUnavailable(f"the server allows {self.max_concurrent_streams} open streams")
        if not self.ids_left:
            raise StreamUnavailable("no stream id left on this connection")
        stream_id = self._next_id
        block = self._encode(headers)
        if self._announce_table:
            block = _TABLE_SIZE_ZERO + block
            self._announce_table = False
        self._next_id += 2
        stream = _Stream(self.remote_initial_window, self._stream_window)
        self._streams[stream_id] = stream
        size = self.max_frame_size
        flags = END_STREAM if end_stream else 0
        if len(block) <= size:
            self._frame(HEADERS, flags | END_HEADERS, stream_id, block)
        else:
            view = memoryview(block)
            self._frame(HEADERS, flags, stream_id, view[:size])
            for start in range(size, len(block), size):
                last = start + size >= len(block)
                self._frame(
                    CONTINUATION, END_HEADERS if last else 0, stream_id, view[start : start + size]
                )
        if end_stream:
            stream.sent_end = True
        return stream_id

    def window(self, stream_id: int) -> int:
        """How much may be sent on the stream now (its window and the connection's)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.sent_end:
            return 0
        return min(stream.send_window, self.send_window)

    def send_data(self, stream_id: int, data: bytes | memoryview, *, end_stream: bool) -> None:
        """Queue one DATA frame; StreamUnavailable if the stream is closed or ended, or
        ``data`` is more than :meth:`window` or a frame takes."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.sent_end:
            raise StreamUnavailable(f"stream {stream_id} is closed")
        size = len(data)
        if size > min(stream.send_window, self.send_window, self.max_frame_size):
            raise StreamUnavailable(f"{size} bytes are more than stream {stream_id} may send now")
        stream.send_window -= size
        self.send_window -= size
        self._allowance.earn(size)
        self._frame(DATA, END_STREAM if end_stream else 0, stream_id, data)
        if end_stream:
            stream.sent_end = True
            if stream.received_end:
                del self._streams[stream_id]

    def acknowledge(self, stream_id: int, size: int) -> None:
        """``size`` bytes of the stream were read: the server may send that much more on
        it (nothing is sent for a stream no longer open, or one the server ended)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.received_end or size <= 0:
            return
        stream.receive_window += size
        self._frame(WINDOW_UPDATE, 0, stream_id, _U32.pack(size))

    def reset_stream(self, stream_id: int, code: int = CANCEL) -> None:
        """Close the stream, telling the server (RST_STREAM) when it is still open."""
        if self._streams.pop(stream_id, None) is not None:
            self._frame(RST_STREAM, 0, stream_id, _U32.pack(code))
            self._reset[stream_id] = None
            if len(self._reset) > _RESETS_KEPT:
                del self._reset[next(iter(self._reset))]

    def ping(self, payload: bytes) -> None:
        """Queue a PING (8 bytes of ``payload``: see :meth:`awaits_ping`)."""
        payload = payload[:8].ljust(8, b"\0")
        self._pings[payload] = None
        if len(self._pings) > _PINGS_KEPT:
            del self._pings[next(iter(self._pings))]
        self._frame(PING, 0, 0, payload)

    def awaits_ping(self, payload: bytes) -> bool:
        """Whether the PING of ``payload`` has been neither acknowledged nor forgotten."""
        return payload[:8].ljust(8, b"\0") in self._pings

    def close(self, code: int = NO_ERROR) -> None:
        """Queue GOAWAY (``code``: why): no new stream will be opened."""
        self._frame(GOAWAY, 0, 0, _TWO_U32.pack(0, code))

    def data_to_send(self) -> bytes:
        """What was queued since the last call, in order."""
        data = bytes(self._out)
        self._out.clear()
        return data

    def _frame(self, kind: int, flags: int, stream_id: int, payload: Any) -> None:
        size = len(payload)
        self._out += _FRAME_HEADER.pack(size >> 8, size & 0xFF, kind, flags, stream_id)
        self._out += payload

    # -- receiving -----------------------------------------------------------------------

    def receive(self, data: bytes, until: float | None = None) -> list[Event]:
        """The events in ``data`` (and in what was kept of the last call's: a frame not
        whole yet, or frames left at the last call's ``until``); ProtocolViolation when the
        server broke the protocol (the connection cannot be used after it).
        Acknowledgements (SETTINGS, PING) and the connection's window, given back as data
        arrives, are queued to send. With ``until`` (time.perf_counter()), frames are
        taken until then and the rest kept (:attr:`backlog`): call again with no data."""
        buffer = self._pending + data if self._pending else data
        events: list[Event] = []
        position, end = 0, len(buffer)
        clock = time.perf_counter
        while end - position >= 9:
            if until is not None and position and clock() >= until:
                break
            high, low, kind, flags, stream_id = _FRAME_HEADER.unpack_from(buffer, position)
            size = high << 8 | low
            if size > FRAME_SIZE:
                raise ProtocolViolation(FRAME_SIZE_ERROR, f"a frame of {size} bytes")
            start = position + 9
            if end - start < size:
                break
            position = start + size
            self._receive_frame(
                kind, flags, stream_id & LAST_STREAM_ID, buffer[start:position], events
            )
        self._pending = buffer[position:]
        return events

    @property
    def backlog(self) -> bool:
        """A whole frame was kept by :meth:`receive` (its time was up)."""
        pending = self._pending
        if len(pending) < 9:
            return False
        return len(pending) - 9 >= pending[0] << 16 | pending[1] << 8 | pending[2]

    def _unuseful(self, what: str) -> None:
        """A frame that carries nothing: ProtocolViolation (ENHANCE_YOUR_CALM) once the
        server is past its allowance (see :mod:`kube.http2limits`)."""
        if not self._allowance.spend():
            raise ProtocolViolation(
                ENHANCE_YOUR_CALM, f"too many frames that carry nothing ({what}, among others)"
            )

    def _receive_frame(
        self, kind: int, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        if self._block is not None and kind != CONTINUATION:
            raise ProtocolViolation(PROTOCOL_ERROR, "a header block was cut by another frame")
        if kind == DATA:
            self._receive_data(flags, stream_id, payload, events)
        elif kind == HEADERS:
            self._receive_headers(flags, stream_id, payload, events)
        elif kind == CONTINUATION:
            self._receive_continuation(flags, stream_id, payload, events)
        elif kind == WINDOW_UPDATE:
            self._receive_window_update(stream_id, payload, events)
        elif kind == SETTINGS:
            self._receive_settings(flags, stream_id, payload, events)
        elif kind == PING:
            if stream_id or len(payload) != 8:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a PING not of 8 bytes on stream 0")
            if not flags & ACK:
                self._unuseful("PING")
                self._frame(PING, ACK, 0, payload)
            elif payload in self._pings:
                del self._pings[payload]
            else:
                self._unuseful("a PING acknowledgement of no PING")
        elif kind == RST_STREAM:
            if len(payload) != 4:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "an RST_STREAM not of 4 bytes")
            self._known(stream_id, "RST_STREAM")
            if self._streams.pop(stream_id, None) is not None:
                events.append(StreamReset(stream_id, _U32.unpack(payload)[0]))
            else:
                self._unuseful("RST_STREAM of a closed stream")
        elif kind == GOAWAY:
            if stream_id or len(payload) < 8:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a GOAWAY under 8 bytes or on a stream")
            last, code = _TWO_U32.unpack_from(payload)
            events.append(ConnectionTerminated(last & LAST_STREAM_ID, code, payload[8:]))
        elif kind == PUSH_PROMISE:
            raise ProtocolViolation(PROTOCOL_ERROR, "a PUSH_PROMISE, though push is off")
        elif kind == PRIORITY:
            if len(payload) != 5:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a PRIORITY not of 5 bytes")
            self._unuseful("PRIORITY")
        else:  # an extension's, which a receiver ignores
            self._unuseful(f"a frame of unknown type {kind}")

    def _known(self, stream_id: int, what: str) -> None:
        """ProtocolViolation unless the stream is one we opened (open or closed since): not
        stream 0, not one the server opened (it opens none: push is off), not one to come."""
        if stream_id == 0 or stream_id % 2 == 0 or stream_id >= self._next_id:
            raise ProtocolViolation(PROTOCOL_ERROR, f"{what} on stream {stream_id}, not ours")

    def _unpadded(self, flags: int, payload: bytes, skip: int = 0) -> bytes:
        """``payload`` without its padding (and ``skip`` bytes after the pad length)."""
        if not flags & PADDED:
            return payload[skip:] if skip else payload
        if not payload or payload[0] + 1 + skip > len(payload):
            raise ProtocolViolation(PROTOCOL_ERROR, "padding longer than the frame")
        return payload[1 + skip : len(payload) - payload[0]]

    def _receive_data(
        self, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        size = len(payload)
        self._receive_window -= size
        if self._receive_window < 0:
            raise ProtocolViolation(FLOW_CONTROL_ERROR, "more data than the connection's window")
        # The connection's window is given back on receipt (each stream's bounds what is
        # buffered), for closed streams' data too.
        self._unacknowledged += size
        if self._unacknowledged >= self._connection_window // 2:
            self._frame(WINDOW_UPDATE, 0, 0, _U32.pack(self._unacknowledged))
            self._receive_window += self._unacknowledged
            self._unacknowledged = 0
        self._known(stream_id, "DATA")
        stream = self._streams.get(stream_id)
        data = self._unpadded(flags, payload)
        self._allowance.earn(len(data))
        if stream is None:  # closed by us: what was in flight still arrives, within reason
            self._unuseful("DATA on a closed stream")
            return
        if not stream.answered or stream.received_end:
            raise ProtocolViolation(PROTOCOL_ERROR, f"DATA on stream {stream_id} out of turn")
        stream.receive_window -= size
        if stream.receive_window < 0:
            raise ProtocolViolation(
                FLOW_CONTROL_ERROR, f"more data than stream {stream_id}'s window"
            )
        if size:  # (padding alone too: its window is given back as it is read)
            events.append(DataReceived(stream_id, data, size))
        if flags & END_STREAM:
            self._ended(stream_id, stream, events)
        elif not data or (stream.small_data and len(data) < SMALL_DATA):
            # (a small answer's body, then its end, is two frames; a body a byte a frame
            # is not)
            self._unuseful("an empty or tiny DATA frame")
        stream.small_data = len(data) < SMALL_DATA

    def _receive_headers(
        self, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        self._known(stream_id, "HEADERS")
        block = self._unpadded(flags, payload, 5 if flags & PRIORITY_FLAG else 0)
        if len(block) > self._max_block:
            raise ProtocolViolation(PROTOCOL_ERROR, f"a header block past {self._max_block} bytes")
        self._block_stream = stream_id
        self._block_ends_stream = bool(flags & END_STREAM)
        if flags & END_HEADERS:
            self._headers_done(stream_id, block, events)
        else:
            if not block:
                self._unuseful("an empty HEADERS frame")
            self._block = bytearray(block)
            self._continuations = 0

    def _receive_continuation(
        self, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        if self._block is None or stream_id != self._block_stream:
            raise ProtocolViolation(PROTOCOL_ERROR, "a CONTINUATION without its HEADERS")
        self._continuations += 1
        if self._continuations > MAX_CONTINUATIONS:
            raise ProtocolViolation(
                ENHANCE_YOUR_CALM, f"a header block in more than {MAX_CONTINUATIONS} CONTINUATIONs"
            )
        self._block += payload
        if len(self._block) > self._max_block:
            raise ProtocolViolation(PROTOCOL_ERROR, f"a header block past {self._max_block} bytes")
        if flags & END_HEADERS:
            block, self._block = bytes(self._block), None
            self._headers_done(stream_id, block, events)

    def _headers_done(self, stream_id: int, block: bytes, events: list[Event]) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:  # closed by us; no table to keep, so not decoded
            if stream_id in self._reset:  # its answer, in flight when we reset it
                del self._reset[stream_id]
            else:
                self._unuseful("HEADERS on a closed stream")
            return
        if stream.received_end:
            raise ProtocolViolation(PROTOCOL_ERROR, f"HEADERS on ended stream {stream_id}")
        try:
            headers = self._decoder.decode(block)
            # (of trailers, only pseudo-fields and those read are kept: enough to check)
            if stream.answered and any(name[:1] == b":" for name, _ in headers):
                raise MalformedHeaders("a pseudo-header in trailers")
        except CompressionError as exc:
            raise ProtocolViolation(COMPRESSION_ERROR, f"undecodable headers: {exc}") from None
        except MalformedHeaders as exc:
            self.reset_stream(stream_id, PROTOCOL_ERROR)
            events.append(StreamMalformed(stream_id, str(exc)))
            return
        if not stream.answered:
            status = next((value for name, value in headers if name == b":status"), b"")
            if len(status) == 3 and status[:1] == b"1" and status.isdigit():
                if self._block_ends_stream:
                    raise ProtocolViolation(
                        PROTOCOL_ERROR, "an informational answer ended its stream"
                    )
                self._unuseful("an informational answer")
                return  # 1xx: the final answer comes next
            stream.answered = True
            events.append(ResponseReceived(stream_id, list(headers)))
        elif not self._block_ends_stream:
            raise ProtocolViolation(PROTOCOL_ERROR, f"trailers that do not end stream {stream_id}")
        if self._block_ends_stream:
            self._ended(stream_id, stream, events)

    def _ended(self, stream_id: int, stream: _Stream, events: list[Event]) -> None:
        stream.received_end = True
        events.append(StreamEnded(stream_id))
        if stream.sent_end:
            del self._streams[stream_id]

    def _receive_window_update(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if len(payload) != 4:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "a WINDOW_UPDATE not of 4 bytes")
        increment = _U32.unpack(payload)[0] & LAST_STREAM_ID
        if increment == 0:
            raise ProtocolViolation(PROTOCOL_ERROR, "a WINDOW_UPDATE of 0")
        self._unuseful("WINDOW_UPDATE")  # (earned back by what we send)
        if stream_id == 0:
            self.send_window += increment
            if self.send_window > MAX_WINDOW:
                raise ProtocolViolation(FLOW_CONTROL_ERROR, "the connection's window past 2^31-1")
        else:
            self._known(stream_id, "WINDOW_UPDATE")
            stream = self._streams.get(stream_id)
            if stream is None:
                return
            stream.send_window += increment
            if stream.send_window > MAX_WINDOW:
                raise ProtocolViolation(
                    FLOW_CONTROL_ERROR, f"stream {stream_id}'s window past 2^31-1"
                )
        events.append(WindowUpdated(stream_id))

    def _receive_settings(
        self, flags: int, stream_id: int, payload: bytes, events: list[Event]
    ) -> None:
        if stream_id:
            raise ProtocolViolation(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a SETTINGS acknowledgement with a body")
            if self._acks_due:
                self._acks_due -= 1
            else:
                self._unuseful("a SETTINGS acknowledgement of no SETTINGS")
            return
        if len(payload) % 6:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "SETTINGS not in 6-byte entries")
        self._settings_seen += 1
        if self._settings_seen > 1:  # (its first is its preface)
            self._unuseful("SETTINGS")
        entries = list(_SETTING.iter_unpack(payload))
        if self._table_size and any(
            c == HEADER_TABLE_SIZE and v < self._table_size for c, v in entries
        ):
            # Our table (never used) is said to be 0, once: RFC 7541 4.2 asks for the
            # smallest size the server set since our last block, and 0 is below any.
            self._table_size = 0
            self._announce_table = True
        # (In order, the last of a code counting: what applying each in turn leaves.)
        changed = dict(entries)
        for code, value in changed.items():
            if code == ENABLE_PUSH and value > 1:
                raise ProtocolViolation(PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
            elif code == MAX_CONCURRENT_STREAMS:
                self.max_concurrent_streams = value
            elif code == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ProtocolViolation(
                        FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}"
                    )
                delta = value - self.remote_initial_window
                self.remote_initial_window = value
                for stream in self._streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise ProtocolViolation(FLOW_CONTROL_ERROR, "a stream's window past 2^31-1")
            elif code == MAX_FRAME_SIZE:
                if not FRAME_SIZE <= value <= (1 << 24) - 1:
                    raise ProtocolViolation(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                self.max_frame_size = value
        self._frame(SETTINGS, ACK, 0, b"")
        events.append(RemoteSettingsChanged(changed))
