"""The HTTP client behind one API server's connection: one HTTP/2 connection (with an
HTTP/1.1 fallback pool) made with the server's credentials, and made again when an exec
credential expires."""

from __future__ import annotations

import datetime as dt
import ssl
from dataclasses import dataclass

import anyio
import anyio.to_thread
import httpx

from kube.credentials import ExecToken, ServiceAccountFiles, run_exec, ssl_context, tls_problem
from kube.errors import ApiError
from kube.http2 import Http2Transport, Origin
from kube.kubeconfig import Credentials


@dataclass(frozen=True)
class ConnectionOptions:
    """Timeouts and pool size of a connection."""

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    pool_size: int = 16
    """Idle connections kept per server (more are opened while calls and watches need
    them; the callers bound how many run at once)."""
    max_answer_bytes: int = 256 << 20
    """The largest answer read (decoded): a list of every pod of a large member fits; a
    member's compression bomb does not."""
    max_event_bytes: int = 16 << 20
    """The largest watch event read (an object: etcd keeps them under 1.5 MiB)."""
    http2: bool = True
    """Calls and watches to a server share one HTTP/2 connection (a fresh member's objects
    go out in one round trip, not a TLS handshake each, and its watches hold no connection
    of their own: :mod:`kube.http2`); a server that does not offer HTTP/2 gets HTTP/1.1."""


class Session:
    """The HTTP client of one API server, made with its credentials on first use and made
    again when an exec credential expires; the state the calls share."""

    def __init__(self, name: str, creds: Credentials, options: ConnectionOptions) -> None:
        self.name = name
        self.server = creds.server
        self.ca_data = creds.ca_data
        """The CA bundle the connection trusts (None: the system's)."""
        self._creds = creds
        self._options = options
        self._exec: ExecToken | None = None
        self._client: httpx.AsyncClient | None = None
        self._direct: Http2Transport | None = None
        """The client's HTTP/2 transport, for calls that skip httpx's objects."""
        self._auth: ServiceAccountFiles | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        """What every direct call sends besides its own headers."""
        self._origin = Origin.of(creds.server, creds.tls_server_name)
        self._client_lock: anyio.Lock | None = None
        self.answered_at: float | None = None
        """time.monotonic() of the server's last answer (any status, a watch event too)."""

    async def _client_material(self) -> tuple[tuple[bytes, bytes] | None, str | None]:
        creds = self._creds
        if creds.exec is None:
            client = (creds.client_cert, creds.client_key) if creds.client_cert else None
            return client, creds.token  # type: ignore[return-value]
        now = dt.datetime.now(dt.UTC)
        if self._exec is None or (self._exec.expires and self._exec.expires <= now):
            self._exec = await anyio.to_thread.run_sync(run_exec, creds.exec, self.name)
        return self._exec.client, self._exec.token

    async def _new_client(self) -> httpx.AsyncClient:
        client, token = await self._client_material()
        # Only gzip: answers are decoded here, within a limit (kube.answerbody).
        headers = {
            "User-Agent": "propagator",
            "Accept": "application/json",
            "Accept-Encoding": "gzip",
        }
        tls = ssl_context(self._creds, client)
        auth = None
        if self._creds.token_file or self._creds.ca_file:
            auth = ServiceAccountFiles(self._creds, tls)
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        self._auth = auth
        self._headers = [(b"user-agent", b"propagator")]
        if token and auth is None:
            self._headers.append((b"authorization", f"Bearer {token}".encode()))
        options = self._options
        # Without HTTP/2 each watch holds a connection for its whole life: the pool must not
        # make a call wait behind watches, so only idle connections are capped. Idle
        # connections live a minute: a far member's syncs come in bursts, and a new TLS
        # connection costs round trips.
        transport: httpx.AsyncBaseTransport = httpx.AsyncHTTPTransport(
            verify=tls,
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=options.pool_size,
                keepalive_expiry=60.0,
            ),
            trust_env=False,
        )
        self._direct = None
        if options.http2:
            transport = self._direct = Http2Transport(tls, fallback=transport)
        return httpx.AsyncClient(
            base_url=self.server,
            headers=headers,
            auth=auth,
            transport=transport,
            timeout=httpx.Timeout(
                options.read_timeout_s, connect=options.connect_timeout_s, pool=None
            ),
            trust_env=False,  # a proxy from the environment never sees member credentials
        )

    def _exec_expired(self) -> bool:
        """Whether the exec credential the client was made with has expired."""
        return (
            self._exec is not None
            and self._exec.expires is not None
            and self._exec.expires <= dt.datetime.now(dt.UTC)
        )

    async def _http(self) -> httpx.AsyncClient:
        """The client for calls and watches; (re)made on first use and when an exec
        credential expired."""
        if self._client is not None and not self._exec_expired():
            # The common case, without the lock: taking an anyio Lock yields to the event
            # loop, and this runs for every call and watch.
            return self._client
        if self._client_lock is None:
            self._client_lock = anyio.Lock()
        async with self._client_lock:
            expired = self._exec_expired()
            stale = self._client if expired else None
            if expired:
                self._client = None
            if self._client is None:
                try:
                    self._client = await self._new_client()
                except (ssl.SSLError, ValueError, OSError) as exc:  # unusable TLS material
                    raise ApiError(self.name, tls_problem(self._creds) or str(exc)) from exc
            if stale is not None:
                await stale.aclose()
            return self._client

    async def close(self) -> None:
        """Drop the connection (watches on it end)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
