"""A loopback TCP proxy that delays every client-to-server chunk by a fixed latency.

TLS passes through untouched (the client still verifies the real API server's
certificate). Every chunk the client sends is delivered ``latency_s`` after it arrived
(chunks of one request do not add up), so each request pays the latency once, like a
member cluster far away. Every proxy runs in one asyncio event loop in a child process of
its own: a far cluster's network costs the benchmark's process (which may be the
controller under test) no CPU, as a real one would not, and a thousand far clusters need
no thread per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from fleet.local import process

_host: _ProxyHost | None = None
_host_lock = threading.Lock()


class _ProxyHost:
    """The child process all proxies run in (``python -m bench.latency_proxy``), driven
    by one JSON command per line on its stdin, answered on its stdout."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_proxy"],
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, *command: Any) -> Any:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        with self._lock:
            self._process.stdin.write(json.dumps(command) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"latency proxy: the proxy process exited ({self._process.poll()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"latency proxy: {answer['error']}")
        return answer["ok"]


def _proxy_host() -> _ProxyHost:
    global _host
    with _host_lock:
        if _host is None:
            _host = _ProxyHost()
        return _host


def host_cpu_seconds() -> float:
    """CPU time the proxies' child process has used (0 before the first proxy): on the
    cores the controller and the servers share, as a real network's would not be."""
    with _host_lock:
        return 0.0 if _host is None else process.cpu_seconds_of(_host.pid)


class LatencyProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int], latency_s: float) -> None:
        self.target = target
        self._latency_s = latency_s
        self._host = _proxy_host()
        self.port: int = self._host.call("open", target, latency_s)

    @property
    def latency_s(self) -> float:
        return self._latency_s

    @latency_s.setter
    def latency_s(self, value: float) -> None:
        """From now on, every chunk waits ``value`` (a member getting slow)."""
        self._host.call("latency", self.port, value)
        self._latency_s = value

    def close(self) -> None:
        """Stop: refuse new connections and cut the open ones (a member gone away)."""
        self._host.call("close", self.port)


# -- the child process ---------------------------------------------------------------------


async def _commands(commands: IO[str], answers: IO[str]) -> None:
    loop = asyncio.get_running_loop()
    proxies: dict[int, _Proxy] = {}
    while line := await loop.run_in_executor(None, commands.readline):  # "" : caller gone
        try:
            answer = {"ok": await _run(json.loads(line), proxies)}
        except Exception as exc:  # the caller raises it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


async def _run(command: list[Any], proxies: dict[int, _Proxy]) -> Any:
    match command:
        case ["open", [host, port], latency_s]:
            proxy = _Proxy((host, port), latency_s)
            await proxy.start()
            proxies[proxy.port] = proxy
            return proxy.port
        case ["latency", port, latency_s]:
            proxies[port].latency_s = latency_s
        case ["close", port]:
            if port in proxies:  # closing twice is fine
                proxies.pop(port).close()
        case _:
            raise ValueError(f"unknown command {command!r}")
    return None


class _Proxy:
    def __init__(self, target: tuple[str, int], latency_s: float) -> None:
        self.target = target
        self.latency_s = latency_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

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
        if self._server is not None:
            self._server.close()
        for writer in self._open:
            writer.close()


if __name__ == "__main__":
    asyncio.run(_commands(sys.stdin, sys.stdout))
