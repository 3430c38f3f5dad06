"""The async connection against a small local HTTP server: answers classified, watches
streamed, credentials sent as a header and never in a message."""

from __future__ import annotations

import gzip
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet.local.pki import CertificateAuthority
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import Credentials, ExecConfig
from kube.session import ConnectionOptions
from kube.transport import tls_error

SEEN: list[dict[str, Any]] = []


VERSION_ANSWER = [b'{"gitVersion": "v1.37.2"}']
"""What /version answers (set by a test)."""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        SEEN.append(
            {
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "accept-encoding": self.headers.get("Accept-Encoding"),
            }
        )
        path = self.path.split("?")[0]
        if path == "/ok":
            self._send(200, b'{"kind": "Status", "n": 1}')
        elif path == "/busy":
            self._send(
                429, b'{"reason": "TooManyRequests", "message": "slow down"}', {"Retry-After": "7"}
            )
        elif path == "/broken":
            self._send(503, b"<html>" + b"x" * 5000 + b"</html>")
        elif path == "/invalid":
            self._send(422, b'{"reason": "Invalid", "message": "spec.replicas: must be >= 0"}')
        elif path == "/bomb":  # 64 MiB of zeros in 64 KiB
            self._send(200, gzip.compress(bytes(64 << 20)), {"Content-Encoding": "gzip"})
        elif path == "/gzip-watch":
            event = {"type": "ADDED", "object": {"metadata": {"name": "a"}}}
            body = gzip.compress(json.dumps(event).encode() + b"\n")
            self._send(200, body, {"Content-Encoding": "gzip"})
        elif path == "/watch":
            events = [
                {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "1"}}},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "2"}}},
            ]
            self._send(200, b"".join(json.dumps(e).encode() + b"\n" for e in events))
        elif path == "/version":
            self._send(200, VERSION_ANSWER[0])
        elif path == "/quiet-watch":  # one event, then nothing for a while
            self.send_response(200)
            self.end_headers()
            event = {"type": "ADDED", "object": {"metadata": {"name": "a"}}}
            self.wfile.write(json.dumps(event).encode() + b"\n")
            self.wfile.flush()
            time.sleep(2)
        else:
            self._send(404, b'{"reason": "NotFound", "message": "no"}')


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _conn(server: str) -> KubeConnection:
    return KubeConnection("m1", Credentials(server=server, token="s3cret"), ConnectionOptions())


def _call(conn: KubeConnection, path: str) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        try:
            return await conn.request("GET", path)
        finally:
            await conn.close()

    return anyio.run(call)


def test_an_answer_is_decoded_and_the_token_sent_as_a_header(server: str) -> None:
    assert _call(_conn(server), "/ok") == {"kind": "Status", "n": 1}
    assert SEEN[-1]["authorization"] == "Bearer s3cret"


def test_an_https_server_without_http2_is_reached_over_http1(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path, "test-ca")
    serving = ca.issue("server", "server", server_hosts=["127.0.0.1"])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(serving.cert, serving.key)
    httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)  # ALPN: none offered
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    creds = Credentials(
        server=f"https://127.0.0.1:{httpd.server_address[1]}",
        ca_data=ca.pair.cert.read_bytes(),
        token="s3cret",
    )

    async def calls() -> list[Any]:
        conn = KubeConnection("m1", creds, ConnectionOptions())
        try:
            answers: list[Any] = [await conn.request("GET", "/ok") for _ in range(2)]
            answers.append([e async for e in conn.stream("/watch", {}, read_timeout_s=5)])
            return answers
        finally:
            await conn.close()

    try:
        first, second, events = anyio.run(calls)
    finally:
        httpd.shutdown()
    assert first == second == {"kind": "Status", "n": 1}
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]


class _Lookups:
    """A meta-path finder that records every module the import system searches for."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, *_: Any) -> None:
        self.names.append(name)


def test_a_request_searches_for_no_module(server: str) -> None:
    conn = _conn(server)
    _call(conn, "/ok")  # the modules a first call imports are loaded now
    lookups = _Lookups()
    sys.meta_path.insert(0, lookups)
    try:
        for _ in range(3):
            _call(_conn(server), "/ok")
    finally:
        sys.meta_path.remove(lookups)
    # httpcore asks sniffio for the event loop on every lock it sets up; were sniffio
    # missing, each ask would scan sys.path (~100 us, several times per request)
    assert lookups.names == []


def test_answers_are_classified(server: str) -> None:
    with pytest.raises(ApiError) as busy:
        _call(_conn(server), "/busy")
    assert busy.value.retryable
    assert busy.value.retry_after_s == 7.0
    assert busy.value.status == 429
    with pytest.raises(ApiError) as broken:
        _call(_conn(server), "/broken")
    assert broken.value.retryable
    assert len(broken.value.message) < 400  # a member's error body is capped
    with pytest.raises(ApiError) as invalid:
        _call(_conn(server), "/invalid")
    assert not invalid.value.retryable
    assert "spec.replicas: must be >= 0" in invalid.value.message
    with pytest.raises(ApiError) as missing:
        _call(_conn(server), "/nothing")
    assert missing.value.not_found
    assert "s3cret" not in str(invalid.value) + str(missing.value)


def test_a_server_that_is_not_there_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ApiError) as down:
        _call(_conn(f"http://127.0.0.1:{port}"), "/ok")
    assert down.value.retryable
    assert "connection refused or unreachable" in down.value.message


def test_a_watch_yields_each_event(server: str) -> None:
    conn = _conn(server)

    async def watch() -> list[str]:
        try:
            return [e["type"] async for e in conn.stream("/watch", {"watch": "1"}, 5)]
        finally:
            await conn.close()

    assert anyio.run(watch) == ["ADDED", "BOOKMARK"]
    assert SEEN[-1]["accept-encoding"] == "identity"  # over HTTP/1.1 too: no gzip per event


def test_answers_over_http1_are_decoded_within_the_limit(server: str) -> None:
    conn = KubeConnection(
        "m1", Credentials(server=server, token="t"), ConnectionOptions(max_answer_bytes=1 << 20)
    )

    async def call() -> list[str]:
        try:
            with pytest.raises(ApiError, match="GET /bomb: the answer is larger than 1 MiB"):
                await conn.request("GET", "/bomb")
            return [e["type"] async for e in conn.stream("/gzip-watch", {"watch": "1"}, 5)]
        finally:
            await conn.close()

    assert anyio.run(call) == ["ADDED"]


def test_a_quiet_watch_just_ends_so_that_it_is_started_again(server: str) -> None:
    events: list[str] = []
    conn = _conn(server)

    async def watch() -> None:
        try:
            async for event in conn.stream("/quiet-watch", {"watch": "1"}, 0.3):
                events.append(event["type"])
        finally:
            await conn.close()

    anyio.run(watch)  # no error: the informer watches again from the last version
    assert events == ["ADDED"]


def test_a_tls_failure_is_found_behind_the_wrappers() -> None:
    inner = ssl.SSLCertVerificationError("CERTIFICATE_VERIFY_FAILED")
    outer = ConnectionError("connect failed")
    outer.__cause__ = OSError("wrapped")
    outer.__cause__.__context__ = inner
    assert tls_error(outer) is inner
    assert tls_error(ValueError("x")) is None


@pytest.mark.parametrize(
    ("answer", "streams"),
    [
        (b'{"gitVersion": "v1.34.1"}', True),
        (b'{"gitVersion": "v1.31.0"}', False),
        (b'{"gitVersion": 134}', False),  # a member's answer is not trusted to be well formed
        (b'["v1.34.1"]', False),
    ],
)
def test_whether_watches_begin_with_the_objects_is_judged_once_from_the_version(
    server: str, answer: bytes, streams: bool
) -> None:
    VERSION_ANSWER[0] = answer
    conn = _conn(server)

    async def judge() -> tuple[bool, bool, bool]:
        try:
            first = await conn.streams_initial_events()
            again = await conn.streams_initial_events()
            conn.refuse_watch_list()
            return first, again, await conn.streams_initial_events()
        finally:
            await conn.close()

    asked = len(SEEN)
    assert anyio.run(judge) == (streams, streams, False)
    assert [seen["path"] for seen in SEEN[asked:]] == ["/version"]  # once


def test_an_expired_exec_credential_is_run_again_and_a_current_one_reused(
    server: str, tmp_path: Path
) -> None:
    # Each run of the plugin prints the next token; the first two have expired already.
    runs = tmp_path / "runs"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, pathlib\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "n = int(runs.read_text()) + 1 if runs.exists() else 1\n"
        "runs.write_text(str(n))\n"
        "expires = '2000-01-01T00:00:00Z' if n < 3 else '2999-01-01T00:00:00Z'\n"
        "status = {'token': f'token-{n}', 'expirationTimestamp': expires}\n"
        "print(json.dumps({'kind': 'ExecCredential', 'status': status}))\n"
    )
    exec_spec = ExecConfig(command=sys.executable, args=(str(script),))
    conn = KubeConnection("m1", Credentials(server=server, exec=exec_spec), ConnectionOptions())

    async def calls() -> None:
        try:
            for _ in range(4):
                await conn.request("GET", "/ok")
        finally:
            await conn.close()

    asked = len(SEEN)
    anyio.run(calls)
    sent = [seen["authorization"] for seen in SEEN[asked:]]
    assert sent == ["Bearer token-1", "Bearer token-2", "Bearer token-3", "Bearer token-3"]
