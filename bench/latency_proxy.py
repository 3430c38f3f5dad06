"""A loopback TCP proxy that delays every client-to-server chunk by a fixed latency.

TLS passes through untouched (the client still verifies the real API server's
certificate). Every chunk the client sends is delivered ``latency_s`` after it arrived
(chunks of one request do not add up), so each request pays the latency once, like a
member cluster far away. Every proxy of the process runs in one asyncio event loop on one
thread of its own, so a benchmark can stand up a thousand far clusters without a thread
per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _proxy_loop() -> asyncio.AbstractEventLoop:
    """The event loop every proxy runs in, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="latency-proxy", daemon=True).start()
        return _loop


class LatencyProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int], latency_s: float) -> None:
        self.target = target
        self.latency_s = latency_s
        self._loop = _proxy_loop()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result()
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._open: set[asyncio.StreamWriter] = set()

    async def _serve(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        try:
            server_in, server_out = await asyncio.open_connection(*self.target)
        except OSError:
            client_out.close()
            return
        for writer in (client_out, server_out):
            self._open.add(writer)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        await asyncio.gather(
            self._read(client_in, chunks),
            self._deliver(chunks, server_out),
            self._pump(server_in, client_out),
            return_exceptions=True,
        )
        self._open.difference_update((client_out, server_out))

    async def _read(
        self, source: asyncio.StreamReader, chunks: asyncio.Queue[tuple[float, bytes]]
    ) -> None:
        """Stamp each chunk with when it may arrive: one-way latency, not per chunk."""
        try:
            while data := await source.read(65536):
                chunks.put_nowait((time.monotonic() + self.latency_s, data))
        except OSError:
            pass
        chunks.put_nowait((0.0, b""))

    async def _deliver(
        self, chunks: asyncio.Queue[tuple[float, bytes]], sink: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                due, data = await chunks.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                sink.write_eof()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                sink.close()

    def close(self) -> None:
        """Stop: refuse new connections and cut the open ones (a member gone away)."""

        def cut() -> None:
            self._server.close()
            for writer in self._open:
                writer.close()

        self._loop.call_soon_threadsafe(cut)
