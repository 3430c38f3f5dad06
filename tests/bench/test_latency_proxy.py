"""The benchmarks' latency proxy: what a client sends reaches the server in order, whole,
and no sooner than the latency; the server's answers come straight back; closing cuts
the connections."""

from __future__ import annotations

import asyncio

import pytest

from bench.latency_proxy import _Proxy


async def _echo_server() -> tuple[asyncio.Server, list[bytes]]:
    """Echoes every chunk back; records what arrived."""
    received: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            received.append(data)
            writer.write(data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), received


def test_chunks_arrive_in_order_after_the_latency_and_answers_come_back() -> None:
    async def main() -> None:
        server, received = await _echo_server()
        proxy = _Proxy(("127.0.0.1", server.sockets[0].getsockname()[1]), 0.05)
        await proxy.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        chunks = [bytes([i]) * 1000 for i in range(50)]
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        echoed = await reader.readexactly(50_000)
        assert loop.time() - sent_at >= 0.05  # one latency, not one per chunk
        assert echoed == b"".join(chunks)
        assert b"".join(received) == echoed
        big = bytes(range(256)) * 8192  # 2 MiB back through the proxy's flow control
        writer.write(big)
        assert await reader.readexactly(len(big)) == big
        writer.write_eof()  # the client's end reaches the server: it closes
        assert await reader.read() == b""
        writer.close()
        proxy.close()
        server.close()

    asyncio.run(main())


def test_closing_cuts_open_connections_and_refuses_new_ones() -> None:
    async def main() -> None:
        server, _ = await _echo_server()
        proxy = _Proxy(("127.0.0.1", server.sockets[0].getsockname()[1]), 0.0)
        await proxy.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        proxy.close()
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await reader.readexactly(1)
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.close()
        server.close()

    asyncio.run(main())


def test_a_hung_proxy_lets_nothing_through_either_way_and_closes_nothing() -> None:
    async def main() -> None:
        writers: list[asyncio.StreamWriter] = []
        received: list[bytes] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            while data := await reader.read(65536):
                received.append(data)
                writer.write(data)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        proxy = _Proxy(("127.0.0.1", server.sockets[0].getsockname()[1]), 0.0)
        await proxy.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        proxy.hung = True
        writer.write(b"more")  # a request: never reaches the server
        writers[0].write(b"push")  # the server's own (a watch event): never arrives
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.3)
        assert received == [b"ping"]
        assert not writer.is_closing()  # nothing is closed: the client waits
        other_reader, other = await asyncio.open_connection("127.0.0.1", proxy.port)
        other.write(b"hello")  # a new connection is taken, and gets nothing either
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(other_reader.read(1), 0.3)
        assert received == [b"ping"]
        for w in (writer, other):
            w.close()
        proxy.close()
        server.close()

    asyncio.run(main())
