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
import collections
import json
import socket
import subprocess
import sys
import threading
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


_HELD_MAX = 1 << 20
"""Bytes a connection may hold back (arrived, not yet due) before its client is paused."""


class _Proxy:
    def __init__(self, target: tuple[str, int], latency_s: float) -> None:
        self.target = target
        self.latency_s = latency_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self.open: set[_ClientSide] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ClientSide(self), "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for client in list(self.open):
            client.close()


# The data path is asyncio's protocol callbacks, not a task per direction reading a
# stream: at a thousand far clusters the proxies' CPU is on the cores the controller and
# the API servers share, and callbacks cost it about half as much per request.


def _no_delay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _ClientSide(asyncio.Protocol):
    """A client's connection: each chunk it sends goes to the server ``latency_s`` after
    it arrived, in order; what the server sends comes back at once."""

    def __init__(self, proxy: _Proxy) -> None:
        self._proxy = proxy
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._server: _ServerSide | None = None
        self._due: collections.deque[tuple[float, bytes]] = collections.deque()
        self._held = 0
        self._timer: asyncio.TimerHandle | None = None
        self._eof = False
        self._pauses: set[str] = set()
        """Why the client is not read: the server not yet connected, too much held back,
        the server not taking more."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _no_delay(transport)
        self._proxy.open.add(self)
        self.pause("connecting")
        self._loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            _, server = await self._loop.create_connection(
                lambda: _ServerSide(self), *self._proxy.target
            )
        except OSError:
            self.close()
            return
        self._server = server
        if self.transport is None or self.transport.is_closing():
            server.close()
            return
        self._schedule()  # anything that arrived before reading was paused
        self.resume("connecting")

    def pause(self, reason: str) -> None:
        if not self._pauses and self.transport is not None:
            self.transport.pause_reading()
        self._pauses.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self._pauses:
            return
        self._pauses.discard(reason)
        if not self._pauses and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._due.append((self._loop.time() + self._proxy.latency_s, data))
        self._held += len(data)
        if self._held > _HELD_MAX:
            self.pause("held")
        self._schedule()

    def eof_received(self) -> bool:
        self._eof = True
        self._deliver()
        return True  # the server's answers may still come back

    def _schedule(self) -> None:
        if self._timer is None and self._due and self._server is not None:
            self._timer = self._loop.call_at(self._due[0][0], self._deliver)

    def _deliver(self) -> None:
        """Write every chunk that is due to the server (then its EOF, once all are)."""
        self._timer = None
        server = self._server
        if server is None or server.transport is None:
            return
        now = self._loop.time()
        while self._due and self._due[0][0] <= now:
            _, data = self._due.popleft()
            self._held -= len(data)
            server.transport.write(data)
        if self._held <= _HELD_MAX:
            self.resume("held")
        if self._due:
            self._schedule()
        elif self._eof and server.transport.can_write_eof():
            server.transport.write_eof()

    def pause_writing(self) -> None:
        if self._server is not None:
            self._server.pause()

    def resume_writing(self) -> None:
        if self._server is not None:
            self._server.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        self._proxy.open.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        self._due.clear()
        if self._server is not None:
            self._server.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self._server is not None:
            self._server.close()


class _ServerSide(asyncio.Protocol):
    """The proxy's connection to the server for one client connection."""

    def __init__(self, client: _ClientSide) -> None:
        self._client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _no_delay(transport)

    def data_received(self, data: bytes) -> None:
        if self._client.transport is not None:
            self._client.transport.write(data)

    def eof_received(self) -> bool:
        self._client.close()
        return False

    def pause_writing(self) -> None:
        self._client.pause("server full")

    def resume_writing(self) -> None:
        self._client.resume("server full")

    def connection_lost(self, exc: Exception | None) -> None:
        self._client.close()

    def pause(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


if __name__ == "__main__":
    asyncio.run(_commands(sys.stdin, sys.stdout))
