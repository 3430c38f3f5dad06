"""A loopback TCP proxy that delays every client-to-server chunk by a fixed latency.

TLS passes through untouched (the client still verifies the real API server's
certificate), and an HTTP/1.1 request is one chunk, so each request pays the latency once,
like a member cluster far away. One thread per direction per connection.
"""

from __future__ import annotations

import contextlib
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
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, delayed: bool) -> None:
        try:
            while data := source.recv(65536):
                if delayed:
                    time.sleep(self.latency_s)
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
