"""The HTTP/2 transport against a real HTTP/2 server (tests/kube/h2server.py): a member's calls
and watches share one connection, and nothing one request does stalls the others."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import hpack
import pytest

import kube.http2
import kube.http2conn
import kube.http2state
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import Credentials
from kube.session import ConnectionOptions
from propagator.runtime import eventloop
from propagator.runtime.eventloop import EventLoop
from tests.kube.h2server import H2Server

_EVENT_LOOP: list[EventLoop] = [eventloop.DEFAULT]


@pytest.fixture(autouse=True, params=["uvloop", "asyncio"])
def event_loop_of_the_connection(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test here on both event loops the controller may run on."""
    _EVENT_LOOP[0] = request.param
    yield
    _EVENT_LOOP[0] = eventloop.DEFAULT


def _run(
    tmp_path: Path,
    test: Callable[[KubeConnection, H2Server], Awaitable[None]],
    *,
    max_streams: int = 100,
    options: ConnectionOptions | None = None,
) -> H2Server:
    server = H2Server(tmp_path, max_streams=max_streams)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            creds = Credentials(
                server=f"https://127.0.0.1:{server.port}", ca_data=server.ca_pem, token="t"
            )
            conn = KubeConnection("m1", creds, options or ConnectionOptions())
            try:
                with anyio.fail_after(60):  # a hang fails the test instead of the run
                    await test(conn, server)
            finally:
                await conn.close()
                tg.cancel_scope.cancel()

    eventloop.run(main, event_loop=_EVENT_LOOP[0])
    return server


async def _events(conn: KubeConnection, path: str, count: int) -> list[dict[str, Any]]:
    seen = []
    async for event in conn.stream(path, {}, read_timeout_s=10):
        seen.append(event)
        if len(seen) == count:
            break
    return seen


def test_calls_and_watches_share_one_connection(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(_events, conn, "/watch", 5)
            for _ in range(20):
                tg.start_soon(conn.request, "GET", "/ok")
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 1


def test_watches_closed_early_are_reset_and_never_stall_the_connection(tmp_path: Path) -> None:
    # Each abandoned flood would fill its stream's window (1 MiB); 40 of them, unreset and
    # unacknowledged, are more than the whole connection's window (16 MiB).
    async def test(conn: KubeConnection, server: H2Server) -> None:
        for _ in range(40):
            assert len(await _events(conn, "/flood", 1)) == 1
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        assert len(await _events(conn, "/watch", 3)) == 3

    server = _run(tmp_path, test)
    assert server.resets >= 40
    assert server.connections == 1


def test_a_timeout_fails_only_its_own_request(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        events: list[dict[str, Any]] = []

        async def watch() -> None:
            events.extend(await _events(conn, "/watch", 100))

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            with pytest.raises(ApiError, match="GET /slow: timeout") as caught:
                await conn.request("GET", "/slow", timeout_s=0.3)
            assert caught.value.retryable
        assert len(events) == 100  # the watch went on through the timeout
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    server = _run(tmp_path, test)
    assert server.connections == 1
    assert server.resets >= 1  # the timed-out request was reset, the server stops working on it


def test_a_server_that_stops_answering_gets_a_new_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube.http2conn, "PING_TIMEOUT_S", 0.3)

    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        with pytest.raises(ApiError, match="timeout"):
            await conn.request("GET", "/freeze", timeout_s=0.3)
        # the PING went unanswered: the next call does not wait on the frozen connection
        assert await conn.request("GET", "/ok", timeout_s=5) == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 2


def test_a_request_to_a_server_that_stops_answering_fails_at_its_own_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube.http2conn, "PING_TIMEOUT_S", 2.0)

    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        # The connection's check for life (an unanswered PING, 2 s) goes on without it:
        # waiting for the check too, it failed after 2.3 s.
        with anyio.fail_after(1.5), pytest.raises(ApiError, match="timeout"):
            await conn.request("GET", "/freeze", timeout_s=0.3)
        # The next call waits for the check, not on the frozen connection: a new one.
        assert await conn.request("GET", "/ok", timeout_s=5) == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 2


def test_a_connection_given_up_while_it_is_made_is_closed(tmp_path: Path) -> None:
    server = H2Server(tmp_path, preface_delay_s=0.5)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            creds = Credentials(
                server=f"https://127.0.0.1:{server.port}", ca_data=server.ca_pem, token="t"
            )
            conn = KubeConnection("m1", creds, ConnectionOptions())
            # Given up (a probe's bound) while the server's SETTINGS are awaited.
            with anyio.move_on_after(0.2):
                await conn.request("GET", "/ok", timeout_s=5)
            assert server.connections == 1
            # Left open, nobody would ever close it: the server would wait forever.
            with anyio.fail_after(10):  # a safety net: it ends in about 0.3 s
                while True:
                    if server.ended:
                        break
                    await anyio.sleep(0.05)
            # The next call makes a connection of its own, and it works.
            assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
            await conn.close()
            tg.cancel_scope.cancel()

    eventloop.run(main, event_loop=_EVENT_LOOP[0])
    assert server.connections == 2


def test_a_ping_is_answered_on_the_open_connection_without_a_request(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.ping(5) is False  # no connection yet: nothing to ping, nothing sent
        assert server.pings == 0
        await conn.request("GET", "/ok")
        answered = conn.answered_at
        for _ in range(3):
            assert await conn.ping(5) is True
        assert server.pings == 3
        assert len(server.authorizations) == 1  # the one call: a PING is no request
        assert conn.answered_at is not None
        assert answered is not None
        assert conn.answered_at > answered

    assert _run(tmp_path, test).connections == 1


def test_an_unanswered_ping_fails_the_probe_not_the_calls_still_waiting(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        await conn.request("GET", "/ok")
        failed: list[ApiError] = []

        async def slow_call() -> None:
            try:
                await conn.request("GET", "/freeze", timeout_s=30)
            except ApiError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await anyio.sleep(0.2)  # the server has stopped reading
            with pytest.raises(ApiError, match="HTTP/2 PING: timeout") as caught:
                await conn.ping(0.3)
            assert caught.value.retryable
            await anyio.sleep(0.2)
            # A slow link is not a dead one: the call waits on, up to its own timeout.
            assert not failed
            tg.cancel_scope.cancel()

    assert _run(tmp_path, test).connections == 1


def test_bodies_larger_than_the_windows_go_both_ways(tmp_path: Path) -> None:
    big = {"data": {"blob": "y" * (3 << 20)}}  # 3 MiB: past the server's 64 KiB window

    async def test(conn: KubeConnection, server: H2Server) -> None:
        answer = await conn.request("POST", "/echo", body=big)
        assert answer["bytes"] > 3 << 20
        client = await conn._http()
        response = await client.get(f"/big?n={5 << 20}")
        assert len(response.content) == 5 << 20

    _run(tmp_path, test)


async def _watch_idle(conn: KubeConnection) -> None:
    """A watch that holds its stream until cancelled."""
    with contextlib.suppress(ApiError):
        async for _ in conn.stream("/idle", {}, read_timeout_s=30):
            pass


async def _calls_beside_watches(conn: KubeConnection, watches: int, calls: int) -> int:
    """``watches`` idle watches opened one by one, then ``calls`` GETs at once (each with
    a 5 s timeout, its pool timeout too): how many were answered."""
    answers: list[dict[str, Any]] = []

    async def call() -> None:
        answers.append(await conn.request("GET", "/ok", timeout_s=5))

    async with anyio.create_task_group() as tg:
        for _ in range(watches):
            tg.start_soon(_watch_idle, conn)
            await anyio.sleep(0.1)
        async with anyio.create_task_group() as group:
            for _ in range(calls):
                group.start_soon(call)
        tg.cancel_scope.cancel()
    return len(answers)


def test_a_server_stream_limit_never_starves_a_request(tmp_path: Path) -> None:
    # kube-apiserver allows 100 streams per connection; here 2, both held by watches.
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await _calls_beside_watches(conn, watches=3, calls=10) == 10

    assert _run(tmp_path, test, max_streams=2).connections >= 3  # 3 watches, then the calls


def test_an_answer_is_taken_at_once_while_other_requests_wait_for_theirs(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        async def wait_forever() -> None:
            with pytest.raises(ApiError, match="timeout"):
                await conn.request("GET", "/slow", timeout_s=10)

        await conn.request("GET", "/ok")  # connected
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_forever)
            tg.start_soon(wait_forever)
            await anyio.sleep(0.1)  # both wait, one of them reading the socket
            # The answer must not wait behind a request that has nothing to read
            assert await conn.request("GET", "/ok", timeout_s=5) == {"kind": "Status", "n": 1}
            tg.cancel_scope.cancel()

    _run(tmp_path, test)


def test_a_request_the_server_refused_with_goaway_is_sent_again_on_a_new_connection(
    tmp_path: Path,
) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        assert await conn.request("GET", "/goaway") == {"after": "goaway"}
        assert server.went_away

    assert _run(tmp_path, test).connections == 2


def test_a_connection_the_server_drops_fails_its_requests_retryably_then_is_made_again(
    tmp_path: Path,
) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        with pytest.raises(ApiError, match="GET /drop: connection error") as caught:
            await conn.request("GET", "/drop")
        assert caught.value.retryable
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 2


def test_a_connection_out_of_stream_ids_ends_its_streams_then_closes_and_new_ones_go_elsewhere(
    tmp_path: Path,
) -> None:
    # A client's stream ids are odd and end at 2^31 - 1; a connection that lived long
    # enough has none left for a new request, though its watches still run.
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        assert conn._direct is not None
        first = conn._direct._connections[0]
        first._state._next_id = kube.http2state.LAST_STREAM_ID  # the last one left
        async with contextlib.aclosing(conn.stream("/watch", {}, read_timeout_s=10)) as watch:
            n = (await anext(watch))["object"]["n"]  # it took the last id
            for _ in range(3):  # new requests go to a new connection
                assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
            assert server.connections == 2
            assert [(await anext(watch))["object"]["n"] for _ in range(3)] == [n + 1, n + 2, n + 3]
            assert server.ended == 0
        with anyio.fail_after(10):  # its last stream done, it closes (a safety net)
            while True:
                if server.ended:
                    break
                await anyio.sleep(0.01)
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_used_again(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/bye") == {}
        await anyio.sleep(0.5)  # the server said GOAWAY and closed; nobody was reading
        for _ in range(3):
            assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    assert _run(tmp_path, test).connections == 2


def test_a_call_sends_its_path_escaped_and_reads_gzip_and_retry_after(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        answer = await conn.request("GET", "/gzip", params={"labelSelector": "a in (b c)"})
        assert answer == {"path": "/gzip?labelSelector=a%20in%20%28b%20c%29"}
        assert await conn.request("GET", "/gzip x#y") == {"path": "/gzip%20x%23y"}
        with pytest.raises(ApiError) as caught:
            await conn.request("GET", "/busy")
        assert (caught.value.status, caught.value.retry_after_s) == (429, 7.0)

    _run(tmp_path, test)


def test_an_answer_past_the_limit_is_refused_and_the_connection_keeps_serving(
    tmp_path: Path,
) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        # 64 MiB of zeros is 64 KiB compressed: counted as decoded, it is refused early
        for path in ("/bomb?n=67108864", "/big?n=20000000"):
            with pytest.raises(ApiError, match="larger than 1 MiB") as caught:
                await conn.request("GET", path)
            assert not caught.value.retryable
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        # (after a call: the resets went out before it, on the same connection)
        assert server.resets >= 1  # the 20 MB one at least (the small bomb may be sent whole)

    options = ConnectionOptions(max_answer_bytes=1 << 20)
    assert _run(tmp_path, test, options=options).connections == 1


def test_a_watch_is_decoded_as_it_arrives_and_an_endless_event_refused(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        events = await _events(conn, "/gzip-watch", 3)
        assert [e["object"]["n"] for e in events] == [1, 2, 3]
        with pytest.raises(ApiError, match="watch event is larger than 1 MiB"):
            await _events(conn, "/endless-event", 1)

    _run(tmp_path, test, options=ConnectionOptions(max_event_bytes=1 << 20))


def test_a_get_if_changed_reads_the_etag_and_takes_a_304_for_unchanged(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.get_if_changed("/etag", "application/json", None) == (
            {"kinds": 1},
            '"v1"',
        )
        assert await conn.get_if_changed("/etag", "application/json", '"v1"') == (None, '"v1"')
        assert await conn.get_if_changed("/etag", "application/json", '"v0"') == (
            {"kinds": 1},
            '"v1"',
        )
        with pytest.raises(ApiError, match="304 Not Modified without If-None-Match"):
            await conn.get_if_changed("/etag?always-304", "application/json", None)

    _run(tmp_path, test)


def test_an_etag_that_is_no_entity_tag_is_not_sent_back(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.get_if_changed("/etag?bare", "application/json", None) == ({}, None)
        # Echoed in If-None-Match, a line break would add a header to our request: such
        # an answer is malformed (RFC 9113 8.2.1), and fails, retryably.
        with pytest.raises(ApiError, match="malformed answer: etag has a line break") as caught:
            await conn.get_if_changed("/etag?crlf", "application/json", None)
        assert caught.value.retryable
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}  # still serves
        assert server.connections == 1

    _run(tmp_path, test)


@pytest.mark.parametrize(
    ("query", "says"),
    [("v=2x0", "invalid :status b'2x0'"), ("v=2000", "invalid :status"), ("", "no :status")],
)
def test_an_answer_without_a_valid_status_is_an_error_and_the_connection_goes_on(
    tmp_path: Path, query: str, says: str
) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        with pytest.raises(ApiError, match=says):
            await conn.request("GET", f"/bad-status?{query}")
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}

    _run(tmp_path, test)


def test_a_refused_watch_says_why_and_closed_watches_free_their_streams(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        with pytest.raises(ApiError, match="WATCH /busy: 429 TooManyRequests") as caught:
            await _events(conn, "/busy", 1)
        assert caught.value.retryable
        assert caught.value.retry_after_s == 7
        # More watches started and left than the server allows streams at once: each
        # closed watch's stream was reset and freed, on the one connection.
        for _ in range(12):
            assert len(await _events(conn, "/watch", 2)) == 2

    assert _run(tmp_path, test, max_streams=4).connections == 1


def test_a_token_goes_out_whole_on_every_request_never_in_the_compression_table(
    tmp_path: Path,
) -> None:
    token = "eyJhbGciOiJSUzI1NiJ9." + "a" * 900  # as long as a service account's
    server = H2Server(tmp_path)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            creds = Credentials(
                server=f"https://127.0.0.1:{server.port}", ca_data=server.ca_pem, token=token
            )
            conn = KubeConnection("m1", creds, ConnectionOptions())
            try:
                for _ in range(3):
                    await conn.request("GET", "/ok")
                await _events(conn, "/watch", 1)
            finally:
                await conn.close()
                tg.cancel_scope.cancel()

    eventloop.run(main, event_loop=_EVENT_LOOP[0])
    assert server.authorizations == [(f"Bearer {token}".encode(), True)] * 4
    # Calls take gzip (a list may be large); a watch asks for no compression: the API
    # server would flush a gzip member per event of a watch that begins with the objects.
    assert server.encodings == [("/ok", b"gzip")] * 3 + [("/watch", b"identity")]


def test_a_call_wakes_once_for_its_whole_answer_however_it_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's task is woken when the answer ended, not for its headers and each part
    (each wake-up is a round of the event loop on the answer's way back), unless half the
    stream's window is waiting to be read: then it reads, and the server may send on."""
    wakes: list[int] = []
    wake = kube.http2conn.Stream.wake

    def counted(stream: kube.http2conn.Stream) -> None:
        if stream.whole and stream.woken is not None and not stream.woken.is_set():
            wakes.append(stream.id)
        wake(stream)

    monkeypatch.setattr(kube.http2conn.Stream, "wake", counted)

    async def test(conn: KubeConnection, server: H2Server) -> None:
        answer = await conn.request("GET", "/trickle?n=5&size=1000")
        assert answer == {"parts": ["x" * 1000] * 5}
        assert len(wakes) == 1  # headers, five parts and the end: one wake-up
        wakes.clear()
        # 4 MB, four times the stream's window: read as it comes, half a window at a time
        answer = await conn.request("GET", "/trickle?n=40&size=100000", timeout_s=30)
        assert answer == {"parts": ["x" * 100000] * 40}
        assert 2 <= len(wakes) <= 40

    options = ConnectionOptions(max_answer_bytes=8 << 20)
    assert _run(tmp_path, test, options=options).connections == 1


def test_request_headers_are_sent_as_literals_that_no_decoder_keeps() -> None:
    """What the connection's HPACK encoder writes decodes to the headers as given, in
    order, whatever their length; nothing enters the server's table (so nothing a
    request sent is kept there) and credentials are marked never to be indexed."""
    encoder, decoder = kube.http2conn.encode_headers, hpack.Decoder()
    for i in range(3):
        headers = [
            (b":method", b"GET"),  # in the static table whole
            (b":path", f"/api/v1/namespaces/n{i}/configmaps/".encode() + b"c" * 200 * i),
            (b":scheme", b"https"),
            (b"authorization", b"Bearer " + b"t" * 1000),
            (b"x-not-in-the-table", b"v" * 126 + b"w" * i),  # lengths around 127
        ]
        decoded = decoder.decode(encoder(headers), raw=True)
        assert [(bytes(n), bytes(v)) for n, v in decoded] == headers
        never = [bytes(h[0]) for h in decoded if isinstance(h, hpack.NeverIndexedHeaderTuple)]
        assert never == [b"authorization"]
        assert len(decoder.header_table.dynamic_entries) == 0


@pytest.mark.parametrize("seed", range(3))
def test_watches_and_calls_racing_with_cancellations_all_finish(tmp_path: Path, seed: int) -> None:
    """Informer-like watches (some left by an error, some cancelled, slow readers) and
    calls (timeouts, large bodies both ways) on one connection: every watch gets all its
    events and nothing stalls."""
    rnd = random.Random(seed)
    wanted = 150

    async def test(conn: KubeConnection, server: H2Server) -> None:
        finished: list[int] = []

        async def informer(i: int) -> None:
            seen = 0
            while seen < wanted:
                cancelled_after = rnd.random() * 0.5 if rnd.random() < 0.3 else None
                with anyio.move_on_after(cancelled_after):
                    async with contextlib.aclosing(conn.stream("/watch", {}, 2)) as events:
                        async for _ in events:
                            seen += 1
                            if seen >= wanted or rnd.random() < 0.05:  # done, or an ERROR
                                break
                            if rnd.random() < 0.2:
                                await anyio.sleep(rnd.random() * 0.02)
            finished.append(i)

        async def calls() -> None:
            for _ in range(80):
                draw = rnd.random()
                with contextlib.suppress(ApiError):
                    if draw < 0.15:
                        await conn.request("GET", "/slow", timeout_s=rnd.random() * 0.1 + 0.01)
                    elif draw < 0.25:
                        await conn.request(
                            "POST", "/echo", body={"x": "y" * rnd.randint(1, 300_000)}
                        )
                    elif draw < 0.3:
                        await (await conn._http()).get(f"/big?n={rnd.randint(1, 3_000_000)}")
                    else:
                        await conn.request("GET", "/ok")
                await anyio.sleep(rnd.random() * 0.01)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(informer, i)
            for _ in range(4):
                tg.start_soon(calls)
        assert sorted(finished) == list(range(8))

    assert _run(tmp_path, test).connections == 1


def test_a_server_that_allows_no_stream_gets_a_few_connections_and_a_clear_timeout(
    tmp_path: Path,
) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        for _ in range(6):
            with pytest.raises(ApiError, match="GET /ok: timeout") as caught:
                await conn.request("GET", "/ok", timeout_s=0.2)
            assert caught.value.retryable

    assert _run(tmp_path, test, max_streams=0).connections == kube.http2.MAX_CONNECTIONS


def test_requests_waiting_for_a_stream_on_full_connections_are_all_served(
    tmp_path: Path,
) -> None:
    """One stream per connection, three held by watches: the fourth connection serves six
    calls one after another, each waiting for a stream to free on any connection."""

    async def test(conn: KubeConnection, server: H2Server) -> None:
        # Each waiter is woken when a stream frees: one left asleep would fail with its
        # pool timeout.
        assert await _calls_beside_watches(conn, kube.http2.MAX_CONNECTIONS - 1, 6) == 6

    assert _run(tmp_path, test, max_streams=1).connections == kube.http2.MAX_CONNECTIONS


def test_calls_sent_now_go_out_at_once_and_each_reads_its_own_answer(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        first = conn.send_now("GET", "/ok")  # no connection yet: sent once awaited
        assert not first.sent
        assert await first.result() == {"kind": "Status", "n": 1}
        bodies = [{"pad": "x" * n} for n in (1, 100, 10_000)]
        calls = [conn.send_now("POST", "/echo", body=b) for b in bodies]
        busy, slow = conn.send_now("GET", "/busy"), conn.send_now("GET", "/slow")
        assert all(c.sent for c in [*calls, busy, slow])
        # Read in any order: each call has its own answer, and its own error.
        for call, body in reversed(list(zip(calls, bodies, strict=True))):
            assert await call.result() == {"bytes": len(json.dumps(body))}
        with pytest.raises(ApiError) as caught:
            await busy.result()
        assert (caught.value.status, caught.value.retry_after_s) == (429, 7.0)
        with pytest.raises(RuntimeError, match="read once"):
            await busy.result()
        slow.drop()  # given up: its stream is reset, the connection serves on
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        assert server.resets == 1

    assert _run(tmp_path, test).connections == 1


def test_a_call_sent_now_that_the_server_refused_unseen_is_sent_again(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        call = conn.send_now("GET", "/goaway")
        assert call.sent
        assert await call.result() == {"after": "goaway"}
        assert server.went_away

    assert _run(tmp_path, test).connections == 2


def test_a_body_past_the_send_window_is_not_sent_now_but_once_awaited(tmp_path: Path) -> None:
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        body = {"pad": "x" * 300_000}  # past the server's window: written as it is read
        call = conn.send_now("POST", "/echo", body=body)
        assert not call.sent
        assert await call.result() == {"bytes": len(json.dumps(body))}

    _run(tmp_path, test)


class _CountingTransport:
    """A transport that counts its writes (their sizes) and passes all on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[int] = []

    def write(self, data: Any) -> None:
        self.writes.append(len(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_calls_sent_together_go_out_in_one_write(tmp_path: Path) -> None:
    # The first write wakes the server: on a busy machine the processor may go to it
    # before the rest are written, so the calls of one round go in one write.
    async def test(conn: KubeConnection, server: H2Server) -> None:
        assert await conn.request("GET", "/ok") == {"kind": "Status", "n": 1}
        assert conn._direct is not None
        connection = conn._direct._connections[0]
        assert connection._transport is not None
        # (a stand-in that counts: uvloop's transports take no new attributes)
        counting = _CountingTransport(connection._transport)
        connection._transport = counting  # type: ignore[assignment]
        writes = counting.writes
        with conn.together():
            calls = [conn.send_now("POST", "/echo", body={"n": n}) for n in range(3)]
            assert writes == []
        assert len(writes) == 1
        assert [await c.result() for c in calls] == [{"bytes": 8}] * 3
        apart = [conn.send_now("POST", "/echo", body={"n": n}) for n in range(3)]
        assert len(writes) == 4  # one each
        assert [await c.result() for c in apart] == [{"bytes": 8}] * 3

    _run(tmp_path, test)


class _Transport:
    """Just enough of an asyncio transport to watch the connection pause its reading."""

    def __init__(self) -> None:
        self.paused = False
        self.written = bytearray()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written += data

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_reading_pauses_while_the_server_takes_nothing_or_frames_wait_their_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that does not read what we send (our acknowledgements of its PINGs among
    it) is not read from either, so they pile up no further; and frames past a time slice
    wait for the loop's next round, reading paused meanwhile."""
    import struct

    async def main() -> None:
        transport = _Transport()
        conn = kube.http2conn.Http2Connection()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.pause_writing()
        assert transport.paused
        conn.resume_writing()
        assert not transport.paused
        monkeypatch.setattr(kube.http2conn, "RECEIVE_SLICE_S", -1.0)  # one frame a round
        pings = b"".join(
            struct.pack(">HBBBL", 0, 8, kube.http2state.PING, 0, 0) + bytes(8) for _ in range(5)
        )
        conn.data_received(struct.pack(">HBBBL", 0, 0, kube.http2state.SETTINGS, 0, 0) + pings)
        assert transport.paused  # four PINGs wait
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert not transport.paused
        ack = struct.pack(">HBBBL", 0, 8, kube.http2state.PING, kube.http2state.ACK, 0)
        assert transport.written.count(ack + bytes(8)) == 5  # each PING acknowledged

    eventloop.run(main, event_loop=_EVENT_LOOP[0])
