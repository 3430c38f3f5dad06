"""``/metrics`` on the metrics port, ``/healthz`` and ``/readyz`` on the health port.

A small threaded HTTP server each (port 0 in settings turns one off). ``/healthz`` answers
500 when the process should be restarted (its event loop stalled, its hub lost), ``/readyz``
503 while it cannot serve its role yet; both say why.
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


def _check(problem: Callable[[], str | None], failing: int, what: str) -> tuple[int, str, bytes]:
    found = problem()
    if found is None:
        return 200, "text/plain", b"ok\n"
    return failing, "text/plain", f"{what}: {found}\n".encode()


def health_routes(
    live: Callable[[], str | None], ready: Callable[[], str | None]
) -> dict[str, Callable[[], tuple[int, str, bytes]]]:
    """``/healthz`` from ``live`` and ``/readyz`` from ``ready``: each returns None when
    all is well, else why not."""
    return {
        "/healthz": lambda: _check(live, 500, "not live"),
        "/readyz": lambda: _check(ready, 503, "not ready"),
    }


def endpoints(
    address: str,
    metrics_port: int,
    health_port: int,
    registry: CollectorRegistry,
    live: Callable[[], str | None],
    ready: Callable[[], str | None],
) -> list[ThreadingHTTPServer]:
    """``/metrics`` on ``metrics_port`` and ``/healthz``, ``/readyz`` on ``health_port``
    (0: that one off), started; the caller shuts them down."""
    servers = []
    if metrics_port:
        servers.append(serve(address, metrics_port, metrics_routes(registry)))
    if health_port:
        servers.append(serve(address, health_port, health_routes(live, ready)))
    return servers
