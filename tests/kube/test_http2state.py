"""kube.http2state: the client side of HTTP/2 without I/O, against h2's server side as an
independent peer, and against frames a broken or hostile server could send."""

from __future__ import annotations

import struct

import h2.config
import h2.connection
import h2.events
import hpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.http2conn import encode_headers
from kube.http2state import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    LAST_STREAM_ID,
    PADDED,
    PING,
    PUSH_PROMISE,
    SETTINGS,
    WINDOW_UPDATE,
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
)

STREAM_WINDOW = 1 << 20
CONNECTION_WINDOW = 1 << 24
REQUEST = [
    (b":method", b"GET"),
    (b":path", b"/api/v1/namespaces"),
    (b":scheme", b"https"),
    (b":authority", b"member"),
    (b"authorization", b"Bearer token"),
]


def _client() -> ClientState:
    client = ClientState(
        encode_headers,
        stream_window=STREAM_WINDOW,
        connection_window=CONNECTION_WINDOW,
        max_concurrent_streams=100,
        max_header_list_size=1 << 16,
    )
    client.initiate()
    return client


class _Pair:
    """Our client and h2's server, each fed what the other sent."""

    def __init__(self) -> None:
        self.client = _client()
        self.server = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        self.server.initiate_connection()
        self.server_events = self.server.receive_data(self.client.data_to_send())
        self.client_events = self.client.receive(self.server.data_to_send())
        self.server_events += self.server.receive_data(self.client.data_to_send())

    def to_server(self) -> list[h2.events.Event]:
        events = self.server.receive_data(self.client.data_to_send())
        self.client_events += self.client.receive(self.server.data_to_send())
        return events

    def to_client(self, data: bytes | None = None) -> list[Event]:
        events = self.client.receive(self.server.data_to_send() if data is None else data)
        self.server.receive_data(self.client.data_to_send())
        return events


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return (
        struct.pack(">HBBBL", len(payload) >> 8, len(payload) & 0xFF, kind, flags, stream_id)
        + payload
    )


def _frame_types(data: bytes) -> list[int]:
    """The types of the frames ``data`` holds, which must be whole."""
    kinds, position = [], 0
    while position < len(data):
        high, low, kind = struct.unpack_from(">HBB", data, position)
        kinds.append(kind)
        position += 9 + (high << 8 | low)
    assert position == len(data)
    return kinds


def _headers_block(headers: list[tuple[bytes, bytes]]) -> bytes:
    return hpack.Encoder().encode(headers)


def _opened() -> tuple[ClientState, int]:
    """A client past the server's preface with one stream open (a GET)."""
    client = _client()
    client.receive(_frame(SETTINGS, 0, 0, b""))
    stream_id = client.send_headers(REQUEST, end_stream=True)
    client.data_to_send()
    return client, stream_id


def test_a_request_and_its_answer_go_through_an_independent_server() -> None:
    pair = _Pair()
    assert any(isinstance(e, RemoteSettingsChanged) for e in pair.client_events)
    stream_id = pair.client.send_headers(REQUEST, end_stream=True)
    [received, ended] = pair.to_server()
    assert isinstance(received, h2.events.RequestReceived)
    assert isinstance(ended, h2.events.StreamEnded)
    assert received.headers == REQUEST
    pair.server.send_headers(
        stream_id,
        [(b":status", b"200"), (b"content-type", b"application/json"), (b"etag", b'"1"')],
    )
    pair.server.send_data(stream_id, b'{"kind":')
    pair.server.send_data(stream_id, b'"List"}', end_stream=True)
    events = pair.to_client()
    assert [type(e) for e in events] == [ResponseReceived, DataReceived, DataReceived, StreamEnded]
    # Only the headers the connection reads are decoded (kube.hpackread).
    assert events[0].headers == [(b":status", b"200"), (b"etag", b'"1"')]  # type: ignore[union-attr]
    assert b"".join(e.data for e in events if isinstance(e, DataReceived)) == b'{"kind":"List"}'
    assert not pair.client.is_open(stream_id)  # both ends ended
    assert pair.client.open_streams == 0


def test_bytes_split_anywhere_give_the_same_events() -> None:
    pair = _Pair()
    stream_id = pair.client.send_headers(REQUEST, end_stream=True)
    pair.to_server()
    pair.server.send_headers(stream_id, [(b":status", b"200")])
    for _ in range(3):
        pair.server.send_data(stream_id, b"x" * 10_000)
    pair.server.send_data(stream_id, b"x" * 10_000, end_stream=True)
    data = pair.server.data_to_send()
    events: list[Event] = []
    for i in range(0, len(data), 7):
        events += pair.client.receive(data[i : i + 7])
    assert isinstance(events[0], ResponseReceived)
    assert b"".join(e.data for e in events if isinstance(e, DataReceived)) == b"x" * 40_000
    assert isinstance(events[-1], StreamEnded)


def test_a_body_is_sent_within_the_windows_and_more_once_the_server_reads() -> None:
    pair = _Pair()
    stream_id = pair.client.send_headers([(b":method", b"POST"), *REQUEST[1:]], end_stream=False)
    # The server's default stream window: 65,535 bytes.
    assert pair.client.window(stream_id) == 65_535
    sent = 0
    while pair.client.window(stream_id):
        chunk = min(pair.client.window(stream_id), pair.client.max_frame_size)
        pair.client.send_data(stream_id, b"y" * chunk, end_stream=False)
        sent += chunk
    assert sent == 65_535
    with pytest.raises(StreamUnavailable):
        pair.client.send_data(stream_id, b"y", end_stream=True)
    events = pair.to_server()
    received = sum(len(e.data) for e in events if isinstance(e, h2.events.DataReceived))
    pair.server.acknowledge_received_data(received, stream_id)
    updates = pair.to_client()
    assert any(isinstance(e, WindowUpdated) and e.stream_id == stream_id for e in updates)
    assert pair.client.window(stream_id) > 0
    pair.client.send_data(stream_id, b"end", end_stream=True)
    assert pair.client.window(stream_id) == 0  # ended: nothing more may go
    assert any(isinstance(e, h2.events.StreamEnded) for e in pair.to_server())


def test_the_servers_settings_bound_streams_and_windows_and_are_acknowledged() -> None:
    client, stream_id = _opened()
    settings = struct.pack(">HLHL", 3, 1, 4, 1000)  # MAX_CONCURRENT_STREAMS 1, INITIAL_WINDOW 1000
    [changed] = client.receive(_frame(SETTINGS, 0, 0, settings))
    assert isinstance(changed, RemoteSettingsChanged)
    assert changed.changed == {3: 1, 4: 1000}
    assert client.data_to_send() == _frame(SETTINGS, 0x1, 0, b"")
    assert client.window(stream_id) == 0  # a GET: ended on our side
    with pytest.raises(StreamUnavailable, match="allows 1 open streams"):
        client.send_headers(REQUEST, end_stream=False)
    client.receive(_frame(SETTINGS, 0, 0, struct.pack(">HL", 3, 2)))
    post = client.send_headers(REQUEST, end_stream=False)
    assert client.window(post) == 1000


def test_the_last_stream_id_is_used_once_then_none_is_left() -> None:
    client, _ = _opened()
    client._next_id = LAST_STREAM_ID  # a connection that lived long enough
    assert client.ids_left
    assert client.send_headers(REQUEST, end_stream=True) == LAST_STREAM_ID
    assert not client.ids_left
    with pytest.raises(StreamUnavailable, match="no stream id left"):
        client.send_headers(REQUEST, end_stream=True)


def test_informational_answers_and_trailers_give_one_answer_and_its_end() -> None:
    client, stream_id = _opened()
    events = client.receive(
        _frame(HEADERS, END_HEADERS, stream_id, _headers_block([(b":status", b"103")]))
        + _frame(HEADERS, END_HEADERS, stream_id, _headers_block([(b":status", b"200")]))
        + _frame(DATA, 0, stream_id, b"body")
        + _frame(
            HEADERS, END_HEADERS | END_STREAM, stream_id, _headers_block([(b"grpc-status", b"0")])
        )
    )
    assert [type(e) for e in events] == [ResponseReceived, DataReceived, StreamEnded]
    assert events[0].headers == [(b":status", b"200")]  # type: ignore[union-attr]


def test_what_arrives_for_a_stream_we_reset_is_dropped_and_its_window_given_back() -> None:
    client, stream_id = _opened()
    client.reset_stream(stream_id)
    assert client.data_to_send() == _frame(3, 0, stream_id, struct.pack(">L", 8))  # CANCEL
    assert not client.is_open(stream_id)
    late = _frame(HEADERS, END_HEADERS, stream_id, _headers_block([(b":status", b"200")]))
    late += b"".join(_frame(DATA, 0, stream_id, b"z" * 16_384) for _ in range(600))
    assert client.receive(late) == []
    # 600 frames of 16 KiB: past half the connection's window, which is given back.
    assert client.data_to_send() == _frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 512 * 16_384))
    client.reset_stream(stream_id)  # again: nothing more to say
    assert client.data_to_send() == b""


def test_a_ping_is_answered_with_its_payload_and_goaway_names_the_last_stream() -> None:
    client, stream_id = _opened()
    assert client.receive(_frame(PING, 0, 0, b"12345678")) == []
    assert client.data_to_send() == _frame(PING, 0x1, 0, b"12345678")
    [reset] = client.receive(_frame(3, 0, stream_id, struct.pack(">L", 7)))
    assert isinstance(reset, StreamReset)
    assert reset.error_code == 7
    [bye] = client.receive(_frame(7, 0, 0, struct.pack(">LL", 1, 0) + b"idle"))
    assert isinstance(bye, ConnectionTerminated)
    assert (bye.last_stream_id, bye.error_code, bye.additional_data) == (1, 0, b"idle")


def test_a_header_block_past_a_frame_goes_in_continuations() -> None:
    pair = _Pair()
    big = [*REQUEST, (b"x-large", b"v" * 40_000)]
    stream_id = pair.client.send_headers(big, end_stream=True)
    data = pair.client.data_to_send()
    assert _frame_types(data) == [HEADERS, CONTINUATION, CONTINUATION]
    [received, _] = pair.server.receive_data(data)
    assert isinstance(received, h2.events.RequestReceived)
    assert received.stream_id == stream_id
    assert received.headers == big


@pytest.mark.parametrize("value", [b"a\r\nInjected: yes", b"a\nb", b"a\rb", b"a\0b"])
def test_a_header_value_with_a_line_break_or_nul_is_never_sent(value: bytes) -> None:
    client = _client()
    client.data_to_send()
    with pytest.raises(ValueError, match="x-tag"):
        client.send_headers([*REQUEST, (b"x-tag", value)], end_stream=True)
    assert client.data_to_send() == b""
    assert client.open_streams == 0


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        (lambda s: _frame(DATA, 0, s, b"x" * 16_385), "a frame of 16385 bytes"),
        (lambda s: _frame(DATA, 0, s + 2, b"x"), "DATA on stream 3, not ours"),
        (lambda s: _frame(DATA, 0, 2, b"x"), "DATA on stream 2, not ours"),
        (lambda s: _frame(DATA, 0, s, b"x"), "DATA on stream 1 out of turn"),
        (lambda s: _frame(PUSH_PROMISE, END_HEADERS, s, b"\0\0\0\2"), "PUSH_PROMISE"),
        (lambda s: _frame(HEADERS, 0, s, b"") + _frame(PING, 0, 0, b"8" * 8), "cut by another"),
        (lambda s: _frame(CONTINUATION, END_HEADERS, s, b""), "CONTINUATION without"),
        (
            lambda s: _frame(HEADERS, 0, s, b"") + _frame(CONTINUATION, 0, s, b"\x00" * 16_384) * 5,
            "header block past 65536 bytes",
        ),
        (lambda s: _frame(HEADERS, END_HEADERS, s, b"\xff\xff\xff\xff"), "COMPRESSION_ERROR"),
        (lambda s: _frame(HEADERS, END_HEADERS | PADDED, s, b"\x09abc"), "padding longer"),
        (lambda s: _frame(WINDOW_UPDATE, 0, s, b"\0\0\0\0"), "WINDOW_UPDATE of 0"),
        (lambda s: _frame(WINDOW_UPDATE, 0, 0, b"\x7f\xff\xff\xff"), "FLOW_CONTROL_ERROR"),
        (lambda s: _frame(SETTINGS, 0, 0, struct.pack(">HL", 5, 100)), "MAX_FRAME_SIZE 100"),
        (lambda s: _frame(SETTINGS, 0, 0, b"\0\4\0"), "6-byte entries"),
        (lambda s: _frame(PING, 0, 0, b"short"), "PING not of 8 bytes"),
    ],
)
def test_a_server_that_breaks_the_protocol_is_a_connection_error_that_names_it(
    frames: object, message: str
) -> None:
    client, stream_id = _opened()
    with pytest.raises(ProtocolViolation, match=message):
        client.receive(frames(stream_id))  # type: ignore[operator]


def test_more_data_than_a_streams_window_is_a_flow_control_error() -> None:
    client, stream_id = _opened()
    client.receive(_frame(HEADERS, END_HEADERS, stream_id, _headers_block([(b":status", b"200")])))
    frames = _frame(DATA, 0, stream_id, b"d" * 16_384) * (STREAM_WINDOW // 16_384)
    assert len(client.receive(frames)) == STREAM_WINDOW // 16_384  # the window, exactly
    with pytest.raises(ProtocolViolation, match="stream 1's window"):
        client.receive(_frame(DATA, 0, stream_id, b"d"))
    client2, stream2 = _opened()
    client2.receive(_frame(HEADERS, END_HEADERS, stream2, _headers_block([(b":status", b"200")])))
    client2.receive(frames)
    client2.acknowledge(stream2, STREAM_WINDOW)  # read: the server may send that much again
    assert client2.data_to_send() == _frame(
        WINDOW_UPDATE, 0, stream2, struct.pack(">L", STREAM_WINDOW)
    )
    assert len(client2.receive(frames)) == STREAM_WINDOW // 16_384


@settings(max_examples=400, deadline=None)
@given(
    frames=st.lists(
        st.tuples(
            st.integers(0, 10),  # the frame types and one past them
            st.integers(0, 255),
            st.sampled_from([0, 1, 2, 3, 5]),
            st.one_of(
                st.binary(max_size=64),
                st.sampled_from(
                    [
                        hpack.Encoder().encode([(b":status", b"200")]),
                        hpack.Encoder().encode([(b":status", b"103")]),
                        struct.pack(">L", 1000),
                        struct.pack(">HL", 4, 1 << 20),
                        bytes(8),
                    ]
                ),
            ),
        ),
        max_size=12,
    ),
    cut=st.integers(1, 50),
)
def test_whatever_a_server_sends_is_events_or_a_protocol_violation(
    frames: list[tuple[int, int, int, bytes]], cut: int
) -> None:
    client, _ = _opened()
    client.send_headers(REQUEST, end_stream=False)  # stream 3, open both ways
    client.data_to_send()
    data = b"".join(_frame(kind, flags, sid, payload) for kind, flags, sid, payload in frames)
    try:
        for i in range(0, len(data), cut):
            for event in client.receive(data[i : i + cut]):
                assert isinstance(event, Event)
    except ProtocolViolation:
        pass
    # What it queued meanwhile is whole frames, and only acknowledgements, windows and
    # resets of malformed answers.
    assert set(_frame_types(client.data_to_send())) <= {SETTINGS, PING, WINDOW_UPDATE, 3}


# -- what a hostile server can make the client do, bounded ----------------------------------


def _answered() -> tuple[ClientState, int]:
    """A client with one stream answered (200), its body to come."""
    client, stream_id = _opened()
    client.receive(_frame(HEADERS, END_HEADERS, stream_id, _headers_block([(b":status", b"200")])))
    return client, stream_id


@pytest.mark.parametrize(
    ("frame", "per_frame"),
    [
        (_frame(PING, 0, 0, b"12345678"), "PING"),
        (_frame(PING, 0x1, 0, b"12345678"), "acknowledgement of no PING"),
        (_frame(SETTINGS, 0, 0, struct.pack(">HL", 1, 4096)), "SETTINGS"),
        (_frame(SETTINGS, 0x1, 0, b""), "acknowledgement of no SETTINGS"),
        (_frame(DATA, 0, 1, b""), "empty or tiny DATA"),
        (_frame(DATA, PADDED, 1, b"\x00"), "empty or tiny DATA"),
        (_frame(DATA, 0, 1, b"x" * 15), "empty or tiny DATA"),
        (_frame(2, 0, 1, bytes(5)), "PRIORITY"),  # PRIORITY
        (_frame(0x42, 0, 0, b"x"), "unknown type 66"),
        (_frame(3, 0, 3, struct.pack(">L", 8)), "RST_STREAM of a closed stream"),
        (_frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 1)), "WINDOW_UPDATE"),
        (_frame(HEADERS, END_HEADERS, 3, b"\x88"), "HEADERS on a closed stream"),
        (_frame(DATA, 0, 3, b"x"), "DATA on a closed stream"),
    ],
)
def test_a_flood_of_frames_that_carry_nothing_is_enhance_your_calm(
    frame: bytes, per_frame: str
) -> None:
    """CVE-2019-9512, -9515, -9518 and their kin: a thousand such frames pass (a server's
    housekeeping), a flood does not, and says which frame it was."""
    client, _ = _answered()
    client.send_headers(REQUEST, end_stream=True)  # stream 3, closed at once by us
    client.reset_stream(3)
    client.receive(_frame(SETTINGS, 0x1, 0, b""))  # the acknowledgement of ours: due
    client.data_to_send()
    client.receive(frame * 900)
    with pytest.raises(ProtocolViolation, match="ENHANCE_YOUR_CALM") as caught:
        client.receive(frame * 300)
    assert per_frame in str(caught.value)


def test_useful_data_earns_the_allowance_a_busy_server_needs() -> None:
    """A server at work sends window updates and empty frames in proportion to the data:
    never a flood, however long the connection lives."""
    client, stream_id = _answered()
    for _ in range(200):
        events = client.receive(
            _frame(DATA, 0, stream_id, b"d" * 16_384) + _frame(DATA, 0, stream_id, b"") * 10
        )
        assert [type(e) for e in events] == [DataReceived]  # no event for an empty frame
        client.acknowledge(stream_id, 16_384)
        client.data_to_send()


def test_small_answers_whose_end_comes_in_a_frame_of_its_own_are_never_a_flood() -> None:
    """A small body in a DATA frame, then an empty one that ends the stream (as h2's server
    and some proxies send an answer): thousands of calls in a row cost no allowance."""
    client, _ = _opened()
    client.reset_stream(1)
    for _ in range(3000):
        stream_id = client.send_headers(REQUEST, end_stream=True)
        events = client.receive(
            _frame(HEADERS, END_HEADERS, stream_id, b"\x88")
            + _frame(DATA, 0, stream_id, b'{"bytes": 9}')
            + _frame(DATA, END_STREAM, stream_id, b"")
        )
        assert [type(e) for e in events] == [ResponseReceived, DataReceived, StreamEnded]
        client.data_to_send()


def test_a_ping_acknowledgement_is_awaited_by_its_payload() -> None:
    client, _ = _opened()
    client.ping(b"probe-01")
    assert client.awaits_ping(b"probe-01")
    client.receive(_frame(PING, 0x1, 0, b"other-00") * 3)  # not ours: proves nothing
    assert client.awaits_ping(b"probe-01")
    client.receive(_frame(PING, 0x1, 0, b"probe-01"))
    assert not client.awaits_ping(b"probe-01")


def test_a_header_block_in_more_than_eight_continuations_is_refused() -> None:
    """CVE-2024-27316: empty CONTINUATION frames would keep a block open forever (the
    byte cap never reached) and hold every stream of the connection."""
    client, stream_id = _opened()
    start = _frame(HEADERS, 0, stream_id, b"\x88")
    client.receive(start + _frame(CONTINUATION, 0, stream_id, b"") * 8)
    with pytest.raises(ProtocolViolation, match="more than 8 CONTINUATIONs"):
        client.receive(_frame(CONTINUATION, 0, stream_id, b""))
    whole = _frame(HEADERS, 0, stream_id, b"") + _frame(CONTINUATION, 0, stream_id, b"") * 7
    client, stream_id = _opened()
    [answer] = client.receive(whole + _frame(CONTINUATION, END_HEADERS, stream_id, b"\x88"))
    assert isinstance(answer, ResponseReceived)


def test_a_malformed_answer_fails_its_stream_and_the_connection_goes_on() -> None:
    client, stream_id = _opened()
    upper = b"\x00\x10Content-Encoding\x04gzip"
    [malformed] = client.receive(_frame(HEADERS, END_HEADERS, stream_id, b"\x88" + upper))
    assert isinstance(malformed, StreamMalformed)
    assert "Content-Encoding" in malformed.reason
    assert client.data_to_send() == _frame(3, 0, stream_id, struct.pack(">L", 1))  # PROTOCOL
    assert not client.is_open(stream_id)
    second = client.send_headers(REQUEST, end_stream=True)
    [answer] = client.receive(_frame(HEADERS, END_HEADERS, second, b"\x88"))
    assert isinstance(answer, ResponseReceived)
    # Trailers may carry no pseudo-header.
    client.receive(_frame(DATA, 0, second, b"{}"))
    [malformed] = client.receive(_frame(HEADERS, END_HEADERS | END_STREAM, second, b"\x88"))
    assert isinstance(malformed, StreamMalformed)


def test_a_block_for_a_stream_we_closed_is_not_decoded() -> None:
    """No table is kept, so nothing of it is needed: a server cannot make us decode
    blocks that nobody reads."""
    client, stream_id = _opened()
    client.reset_stream(stream_id)
    garbage = b"\xff" * 100  # would be a compression error if decoded
    assert client.receive(_frame(HEADERS, END_HEADERS, stream_id, garbage)) == []


def test_a_table_size_change_is_said_once_whatever_the_server_sets() -> None:
    """SETTINGS floods of table sizes (each queued by hpack's encoder until the next
    request) leave one size update to 0 on the next block, and none after it."""
    client, _ = _opened()
    sizes = b"".join(struct.pack(">HL", 1, n) for n in (0, 4096, 100, 1 << 20))
    client.receive(_frame(SETTINGS, 0, 0, sizes) * 50)
    client.data_to_send()
    first = client.send_headers(REQUEST, end_stream=True)
    sent = client.data_to_send()
    assert sent[9:10] == b"\x20"  # the block starts with "table size 0"
    decoded = [(str(n), str(v)) for n, v in hpack.Decoder().decode(sent[9:])]
    assert decoded == [(n.decode(), v.decode()) for n, v in REQUEST]
    client.receive(_frame(SETTINGS, 0, 0, sizes))
    client.send_headers(REQUEST, end_stream=True)
    assert client.data_to_send()[9:10] != b"\x20"
    assert first == 3


def test_frames_are_taken_until_the_time_is_up_and_the_rest_kept() -> None:
    client, stream_id = _answered()
    frames = _frame(DATA, 0, stream_id, b"d" * 100) * 50
    taken = client.receive(frames, until=0.0)  # the time is up at once: one frame
    assert [len(e.data) for e in taken if isinstance(e, DataReceived)] == [100]
    assert client.backlog
    rest = client.receive(b"")
    assert sum(len(e.data) for e in rest if isinstance(e, DataReceived)) == 49 * 100
    assert not client.backlog


_ANY_FRAME = st.tuples(
    st.sampled_from(
        [DATA, HEADERS, 2, 3, SETTINGS, PUSH_PROMISE, PING, 7, WINDOW_UPDATE, CONTINUATION, 0x42]
    ),
    st.sampled_from([0, END_STREAM, END_HEADERS, END_STREAM | END_HEADERS, PADDED, 0xFF]),
    st.sampled_from([0, 1, 3, 5, 7]),
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [
                b"",
                b"\x88",
                b'\x88\x00\x04etag\x03"1"',
                b"\x00\x10Content-Encoding\x04gzip",
                b"\xbe",
                b"\x20\x88",
                struct.pack(">L", 1),
                struct.pack(">L", 0x7FFFFFFF),
                struct.pack(">HL", 1, 0) * 3,
                struct.pack(">HL", 4, 1 << 20),
                bytes(8),
                bytes(5),
            ]
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(_ANY_FRAME, max_size=200), cut=st.integers(1, 4096))
def test_random_frame_sequences_raise_only_protocol_violations_and_stay_bounded(
    frames: list[tuple[int, int, int, bytes]], cut: int
) -> None:
    """The framing state machine fuzzed: whatever a server sends, in whatever pieces, the
    client raises nothing but ProtocolViolation and holds nothing without bound (what it
    keeps and what it queues to send grow with what it was sent, never past its limits)."""
    client, _ = _opened()
    for _ in range(3):
        client.send_headers(REQUEST, end_stream=False)  # streams 3, 5, 7, open both ways
    client.data_to_send()
    data = b"".join(_frame(kind, flags, sid, payload) for kind, flags, sid, payload in frames)
    queued = 0
    try:
        for i in range(0, len(data), cut):
            for event in client.receive(data[i : i + cut], until=None):
                assert isinstance(event, Event)
            queued += len(client.data_to_send())
            assert len(client._pending) < 9 + 16_384 + cut
            assert client._block is None or len(client._block) <= 1 << 16
    except ProtocolViolation:
        pass
    # Acknowledgements, windows and resets: at most one frame of ours per frame received.
    assert queued <= 17 * len(frames)
    assert len(client._pings) <= 16
    assert client.open_streams <= 4


def test_answers_in_flight_to_streams_we_reset_are_no_flood() -> None:
    """Calls given up on (a sync cancelled, a deadline passed) still get their answers:
    a thousand of them at once cost nothing; headers again on such a stream do."""
    client, _ = _opened()
    streams = []
    for _ in range(1500):
        streams.append(client.send_headers(REQUEST, end_stream=True))
        client.reset_stream(streams[-1])
    client.data_to_send()
    answers = b"".join(
        _frame(HEADERS, END_HEADERS, s, b"\x88") + _frame(DATA, END_STREAM, s, b"{}" * 600)
        for s in streams[-1000:]
    )
    assert client.receive(answers) == []
    with pytest.raises(ProtocolViolation, match="HEADERS on a closed stream"):
        client.receive(_frame(HEADERS, END_HEADERS, streams[-1], b"\x88") * 1100)
