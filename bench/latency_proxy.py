"""A loopback TCP proxy that delays every client-to-server chunk by a fixed latency.

TLS passes through untouched (the client still verifies the real API server's
certificate). Every chunk the client sends is delivered ``latency_s`` after it arrived
(chunks of one request do not add up), so each request pays the latency once, like a
member cluster far away. Every proxy runs in one event loop in a child process of its
own: a far cluster's network costs the benchmark's process (which may be the controller
under test) no CPU, as a real one would not, and a thousand far clusters need no thread
per connection. That loop is uvloop's where it is installed (as for the controller): the
proxies still share the cores with the controller and the servers, and on asyncio's loop
they used 0.9 s of CPU in a rollout to 300 far clusters (6 % of what the rest used).
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
from typing import IO, Any, cast

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

    def hang(self) -> None:
        """From now on nothing goes through, either way, on open connections or new ones:
        a member that stops answering without closing anything (a dead host or link)."""
        self._host.call("hang", self.port)

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
        case ["hang", port]:
            proxies[port].hung = True
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
        self.hung = False
        """Nothing is delivered any more, either way (held until the proxy closes)."""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[_Client] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for client in list(self._open):
            client.abort()


class _Pipe(asyncio.Protocol):
    """One direction's sink: pauses the other side's reading while its own transport's
    buffer is full (what ``drain`` did for streams)."""

    transport: asyncio.Transport | None = None
    peer: _Pipe | None = None

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Client(_Pipe):
    """A client's connection: what it sends reaches the server ``latency_s`` after it
    arrived (in order, one timer at a time); the server's answers go back at once.
    Callbacks and timers in the event loop, no task or queue per connection: the proxies
    of a thousand far clusters cost their cores little."""

    def __init__(self, proxy: _Proxy) -> None:
        self.proxy = proxy
        self.server: _Server | None = None
        self.due: collections.deque[tuple[float, bytes]] = collections.deque()
        """Chunks (b"": the client's end) waiting for their time, oldest first."""
        self.timer: asyncio.TimerHandle | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        _no_delay(transport)
        self.proxy._open.add(self)
        # Kept: a task nothing refers to may be collected before it ends.
        self.connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, server = await loop.create_connection(_Server, *self.proxy.target)
        except OSError:
            self.abort()
            return
        if self.closed:
            server.transport.close()
            return
        self.server, server.peer, self.peer = server, self, server
        _no_delay(server.transport)
        self._schedule()

    def data_received(self, data: bytes) -> None:
        self._stamp(data)

    def eof_received(self) -> bool:
        self._stamp(b"")
        return True  # keep the transport open: answers may still come back

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.proxy._open.discard(self)
        if self.server is not None and not self.due:
            self.server.transport.close()

    def _stamp(self, data: bytes) -> None:
        """Stamp a chunk with when it may arrive: one-way latency, not per chunk."""
        loop = asyncio.get_running_loop()
        self.due.append((loop.time() + self.proxy.latency_s, data))
        self._schedule()

    def _schedule(self) -> None:
        if self.timer is None and self.due and self.server is not None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_at(self.due[0][0], self._deliver)

    def _deliver(self) -> None:
        self.timer = None
        assert self.server is not None
        if self.proxy.hung:
            return  # held: the timer is not set again
        now = asyncio.get_running_loop().time()
        sink = self.server.transport
        while self.due and self.due[0][0] <= now:
            _, data = self.due.popleft()
            if sink.is_closing():
                self.due.clear()
                break
            if data:
                sink.write(data)
            elif sink.can_write_eof():
                sink.write_eof()
        if self.closed and not self.due:
            sink.close()
        self._schedule()

    def abort(self) -> None:
        """Cut both sides (a member gone away)."""
        self.closed = True
        self.due.clear()
        if self.timer is not None:
            self.timer.cancel()
        for pipe in (self, self.server):
            if pipe is not None and pipe.transport is not None:
                pipe.transport.abort()
        self.proxy._open.discard(self)


class _Server(_Pipe):
    """The connection to the real server: its answers go straight back to the client."""

    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        sink = self.peer.transport if self.peer is not None else None
        if sink is not None and not sink.is_closing() and not self.proxy.hung:
            sink.write(data)

    @property
    def proxy(self) -> _Proxy:
        assert isinstance(self.peer, _Client)
        return self.peer.proxy

    def eof_received(self) -> bool:
        self.connection_lost(None)  # the server is done: so is the client's connection
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


def _no_delay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:  # uvloop is not on every platform
        asyncio.run(_commands(sys.stdin, sys.stdout))
    else:
        uvloop.run(_commands(sys.stdin, sys.stdout))
