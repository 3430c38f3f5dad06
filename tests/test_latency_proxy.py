"""The benchmarks' latency proxy: what it delays, what it keeps in order, how it closes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from bench.latency_proxy import _Proxy

LATENCY_S = 0.05

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


def _run(test: Callable[[_Proxy], Awaitable[None]], serve: Serve = _echo) -> None:
    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        proxy = _Proxy(("127.0.0.1", server.sockets[0].getsockname()[1]), LATENCY_S)
        await proxy.start()
        try:
            await asyncio.wait_for(test(proxy), 30)  # a hang fails the test, not the run
        finally:
            proxy.close()
            server.close()

    asyncio.run(main())


def test_what_the_client_sends_arrives_late_and_in_order() -> None:
    async def test(proxy: _Proxy) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", proxy.port), 5)
        sent = time.monotonic()
        chunks = [f"chunk {n};".encode() for n in range(50)]
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        expected = b"".join(chunks)
        echoed = await reader.readexactly(len(expected))
        assert time.monotonic() - sent >= LATENCY_S
        assert echoed == expected
        writer.close()

    _run(test)


def test_more_than_it_holds_back_is_delivered_whole() -> None:
    async def test(proxy: _Proxy) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        payload = bytes(range(256)) * (5 * 4096)  # 5 MiB: the client is paused meanwhile

        async def send() -> None:
            writer.write(payload)
            await writer.drain()

        sending = asyncio.create_task(send())
        assert await reader.readexactly(len(payload)) == payload
        await sending
        writer.close()

    _run(test)


def test_a_client_that_stops_sending_still_gets_the_answer() -> None:
    async def answer_at_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.read()  # until the client's EOF
        writer.write(b"got " + request)
        await writer.drain()
        writer.close()

    async def test(proxy: _Proxy) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"question")
        writer.write_eof()
        assert await reader.read() == b"got question"

    _run(test, answer_at_eof)


def test_closing_cuts_open_connections_and_refuses_new_ones() -> None:
    async def test(proxy: _Proxy) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        proxy.close()
        assert await reader.read() == b""  # the member went away
        try:
            await asyncio.open_connection("127.0.0.1", proxy.port)
        except OSError:
            return
        raise AssertionError("a closed proxy accepted a connection")

    _run(test)


def test_a_server_that_refuses_closes_the_client() -> None:
    async def test(proxy: _Proxy) -> None:
        proxy.target = ("127.0.0.1", 1)  # nothing listens there
        reader, _ = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await reader.read() == b""

    _run(test)
