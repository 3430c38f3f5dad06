"""A loopback TCP proxy that delays every client-to-server chunk by a fixed latency.

TLS passes through untouched (the client still verifies the real API server's
certificate). Every chunk the client sends is delivered ``latency_s`` after it arrived
(chunks of one request do not add up), so each request pays the latency once, like a
member cluster far away. Three threads per connection.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time


class LatencyProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int], latency_s: float) -> None:
        self.target = target
        self.latency_s = latency_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
            threading.Thread(target=self._read, args=(client, chunks), daemon=True).start()
            threading.Thread(target=self._deliver, args=(chunks, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _read(self, source: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        """Stamp each chunk with when it may arrive: one-way latency, not per chunk."""
        try:
            while data := source.recv(65536):
                chunks.put((time.monotonic() + self.latency_s, data))
        except OSError:
            pass
        chunks.put((0.0, b""))

    def _deliver(self, chunks: queue.Queue[tuple[float, bytes]], sink: socket.socket) -> None:
        try:
            while True:
                due, data = chunks.get()
                if not data:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
