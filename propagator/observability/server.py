"""``/metrics`` on the metrics port, ``/healthz`` and ``/readyz`` on the health port.

A small threaded HTTP server each (port 0 in settings turns one off). ``/healthz`` answers
while the process serves requests; ``/readyz`` once the controller says it is ready (its
hub watches have listed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def _handler(routes: dict[str, Callable[[], tuple[int, str, bytes]]]) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            status, content_type, body = route() if route else (404, "text/plain", b"not found\n")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes and probes every few seconds would drown the logs

    return Handler


def serve(
    address: str, port: int, routes: dict[str, Callable[[], tuple[int, str, bytes]]]
) -> ThreadingHTTPServer:
    """Start serving ``routes`` in a daemon thread; the caller shuts the server down.
    Raises OSError naming the address when it cannot listen."""
    try:
        server = ThreadingHTTPServer((address, port), _handler(routes))
    except OSError as exc:
        raise OSError(
            f"cannot listen on {address}:{port} for {', '.join(routes)}: {exc.strerror or exc}"
        ) from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{port}", daemon=True).start()
    return server


def metrics_routes(registry: CollectorRegistry) -> dict[str, Callable[[], tuple[int, str, bytes]]]:
    return {"/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))}


def health_routes(ready: Callable[[], bool]) -> dict[str, Callable[[], tuple[int, str, bytes]]]:
    return {
        "/healthz": lambda: (200, "text/plain", b"ok\n"),
        "/readyz": lambda: (
            (200, "text/plain", b"ok\n")
            if ready()
            else (503, "text/plain", b"not ready: hub watches have not listed yet\n")
        ),
    }
