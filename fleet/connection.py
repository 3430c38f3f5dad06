"""A raw-JSON connection to one Kubernetes API server (the hub or a member).

Dicts in, dicts out: server-side apply, get, list, delete and watch go straight over a
urllib3 pool without conversion to generated model classes. Credentials stay in memory (a
client certificate is loaded through an anonymous memory file, never written to disk).
Retries are not done here: callers decide what is retryable from :class:`ApiError`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
    SSLError,
)

from fleet.discovery import Discovery, ResourceInfo
from fleet.kubeconfig import Credentials, ExecConfig

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
MERGE_PATCH_CONTENT_TYPE = "application/merge-patch+json"
FIELD_MANAGER = "propagator"


@dataclass(frozen=True)
class ConnectionOptions:
    """Timeouts and pool size of a connection."""

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    pool_size: int = 16


class ApiError(Exception):
    """A failed call, classified: ``retryable`` for timeouts, connection errors, 429, 5xx."""

    def __init__(
        self,
        cluster: str,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{cluster}: {message}")
        self.cluster = cluster
        self.message = message
        self.status = status
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s

    @property
    def not_found(self) -> bool:
        return self.status == 404


def _ssl_context(creds: Credentials, client: tuple[bytes, bytes] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=creds.ca_data.decode() if creds.ca_data else None)
    if client:
        cert, key = client
        _load_cert_chain(ctx, cert, key)
    return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads client keys from files: use an anonymous memory file where possible."""
    pem = cert.rstrip(b"\n") + b"\n" + key
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("propagator-client-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory() as private:  # pragma: no cover - non-Linux
        path = os.path.join(private, "client.pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path)


@dataclass
class _ExecToken:
    token: str | None
    client: tuple[bytes, bytes] | None
    expires: dt.datetime | None


def _run_exec(spec: ExecConfig, cluster: str) -> _ExecToken:
    env = {**os.environ, **dict(spec.env)}
    try:
        out = subprocess.run(
            [spec.command, *spec.args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        ).stdout
        status = json.loads(out).get("status") or {}
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise ApiError(cluster, f"credential plugin {spec.command!r} failed: {exc}") from exc
    client = None
    if status.get("clientCertificateData") and status.get("clientKeyData"):
        client = (status["clientCertificateData"].encode(), status["clientKeyData"].encode())
    expires = status.get("expirationTimestamp")
    return _ExecToken(
        token=status.get("token"),
        client=client,
        expires=dt.datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None,
    )


class KubeConnection:
    """Calls to one API server. Thread-safe; one instance per cluster."""

    def __init__(self, name: str, creds: Credentials, options: ConnectionOptions) -> None:
        self.name = name
        self.server = creds.server
        self._creds = creds
        self._options = options
        self._lock = threading.Lock()
        self._exec: _ExecToken | None = None
        self._streams: set[urllib3.BaseHTTPResponse] = set()
        self._pool = self._new_pool()
        self.discovery = Discovery(self)

    def _client_material(self) -> tuple[tuple[bytes, bytes] | None, str | None]:
        creds = self._creds
        if creds.exec is None:
            client = (creds.client_cert, creds.client_key) if creds.client_cert else None
            return client, creds.token  # type: ignore[return-value]
        now = dt.datetime.now(dt.UTC)
        if self._exec is None or (self._exec.expires and self._exec.expires <= now):
            self._exec = _run_exec(creds.exec, self.name)
        return self._exec.client, self._exec.token

    def _new_pool(self) -> urllib3.PoolManager:
        client, token = self._client_material()
        headers = {"User-Agent": "propagator", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        kwargs: dict[str, Any] = {}
        if self._creds.tls_server_name:
            kwargs["server_hostname"] = self._creds.tls_server_name
        return urllib3.PoolManager(
            num_pools=2,
            maxsize=self._options.pool_size,
            block=False,
            headers=headers,
            ssl_context=_ssl_context(self._creds, client),
            retries=False,
            timeout=urllib3.Timeout(
                connect=self._options.connect_timeout_s, read=self._options.read_timeout_s
            ),
            **kwargs,
        )

    def _pool_now(self) -> urllib3.PoolManager:
        if self._creds.exec is not None:
            with self._lock:
                expires = self._exec.expires if self._exec else None
                if expires and expires <= dt.datetime.now(dt.UTC):
                    self._pool = self._new_pool()
        return self._pool

    def close(self) -> None:
        """Abort open watches (their threads return at once) and drop pooled connections."""
        with self._lock:
            streams, self._streams = list(self._streams), set()
        for resp in streams:
            with contextlib.suppress(Exception):
                resp.shutdown()
        self._pool.clear()

    # -- raw calls -----------------------------------------------------------------------

    def _raise_for(self, resp: urllib3.BaseHTTPResponse, method: str, path: str) -> None:
        try:
            body = json.loads(resp.data or b"{}")
        except ValueError:
            body = {}
        message = body.get("message") or (resp.data or b"").decode(errors="replace")[:300]
        status = resp.status
        retry_after = None
        if status == 429:
            try:
                retry_after = float(resp.headers.get("Retry-After", "1"))
            except ValueError:
                retry_after = 1.0
        raise ApiError(
            self.name,
            f"{method} {path}: {status} {body.get('reason', '')}: {message}".replace(": :", ":"),
            status=status,
            reason=body.get("reason", ""),
            retryable=status == 429 or status >= 500,
            retry_after_s=retry_after,
        )

    def _transport_error(self, exc: Exception, method: str, path: str) -> ApiError:
        if isinstance(exc, SSLError):
            return ApiError(self.name, f"{method} {path}: TLS failed: {exc.__cause__ or exc}")
        # NewConnectionError subclasses ConnectTimeoutError: test it first.
        if isinstance(exc, NewConnectionError):
            what = "connection refused or unreachable"
        elif isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
            what = "timeout"
        else:
            what = f"connection error ({type(exc).__name__})"
        return ApiError(self.name, f"{method} {path}: {what}: {self.server}", retryable=True)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout_s: float | None = None,
        accept: str | None = None,
        decode: bool = True,
    ) -> dict[str, Any]:
        """One call; returns the decoded JSON body ({} if ``decode`` is false) or raises
        :class:`ApiError`."""
        url = self.server + path
        if params:
            url += "?" + "&".join(
                f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None
            )
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        timeout = (
            urllib3.Timeout(connect=self._options.connect_timeout_s, read=timeout_s)
            if timeout_s
            else None
        )
        try:
            resp = self._pool_now().request(
                method, url, body=data, headers=headers or None, timeout=timeout
            )
        except HTTPError as exc:
            raise self._transport_error(exc, method, path) from exc
        if resp.status >= 400:
            self._raise_for(resp, method, path)
        return json.loads(resp.data) if decode and resp.data else {}

    def stream(
        self, path: str, params: dict[str, Any], read_timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """A watch: yields each event ({"type", "object"}) until the server ends the stream."""
        url = (
            self.server
            + path
            + "?"
            + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None)
        )
        try:
            resp = self._pool_now().request(
                "GET",
                url,
                preload_content=False,
                timeout=urllib3.Timeout(
                    connect=self._options.connect_timeout_s, read=read_timeout_s
                ),
            )
        except HTTPError as exc:
            raise self._transport_error(exc, "WATCH", path) from exc
        with self._lock:
            self._streams.add(resp)
        try:
            if resp.status >= 400:
                resp.read()
                self._raise_for(resp, "WATCH", path)
            buffer = b""
            for chunk in resp.stream(65536):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        except (HTTPError, OSError) as exc:
            raise self._transport_error(exc, "WATCH", path) from exc
        finally:
            with self._lock:
                self._streams.discard(resp)
            resp.release_conn()

    # -- resources -----------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """How ``kind`` is served (plural, namespaced), from discovery (refreshed on a miss)."""
        return self.discovery.resource(api_version, kind)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        return self.request("GET", self.resource(api_version, kind).path(namespace, name))

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, **params: Any
    ) -> dict[str, Any]:
        return self.request("GET", self.resource(api_version, kind).path(namespace), params=params)

    def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str = FIELD_MANAGER,
        dry_run: bool = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` (force: Propagator owns what it propagates)."""
        info = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata") or {}
        path = info.path(meta.get("namespace") if info.namespaced else None, meta["name"])
        params = {
            "fieldManager": field_manager,
            "force": "true",
            "dryRun": "All" if dry_run else None,
        }
        return self.request(
            "PATCH",
            path,
            params=params,
            body=obj,
            content_type=APPLY_CONTENT_TYPE,
            timeout_s=timeout_s,
        )

    def merge_patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch of an object (or its ``subresource``, e.g. ``status``)."""
        path = self.resource(api_version, kind).path(namespace, name)
        return self.request(
            "PATCH",
            f"{path}/{subresource}" if subresource else path,
            body=body,
            content_type=MERGE_PATCH_CONTENT_TYPE,
        )

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete an object (foreground-free, background propagation); False if it was gone."""
        try:
            self.request(
                "DELETE",
                self.resource(api_version, kind).path(namespace, name),
                body={"propagationPolicy": "Background"},
            )
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    def readyz(self, timeout_s: float) -> None:
        """Raise :class:`ApiError` unless ``/readyz`` answers 200 within ``timeout_s``."""
        self.request("GET", "/readyz", timeout_s=timeout_s, accept="text/plain", decode=False)

    def version(self) -> dict[str, Any]:
        return self.request("GET", "/version")
