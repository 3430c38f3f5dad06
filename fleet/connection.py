"""A raw-JSON connection to one Kubernetes API server (the hub or a member), async.

Dicts in, dicts out: server-side apply, get, list, delete and watch go straight over
httpx on anyio, without conversion to generated model classes and without a thread per
call or per watch. Credentials stay in memory (a client certificate is loaded through an
anonymous memory file, never written to disk). Retries are not done here: callers decide
what is retryable from :class:`ApiError`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import re
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx

from fleet.answerbody import BodyDecoder, LineSplitter, UnreadableAnswer
from fleet.discovery import Discovery, ResourceInfo
from fleet.hpackread import READ_HEADERS
from fleet.http2 import Http2Transport, Origin, Sent
from fleet.http2conn import ResponseBody
from fleet.kubeconfig import Credentials, ExecConfig, token_problem
from fleet.redact import capped

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
MERGE_PATCH_CONTENT_TYPE = "application/merge-patch+json"
FIELD_MANAGER = "propagator"
NO_STORED_VERSION = "1"
"""A resourceVersion no stored object has: etcd's store starts at revision 1 and its
first write makes revision 2. As an apply's precondition it makes the apply a create."""


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
    of their own: :mod:`fleet.http2`); a server that does not offer HTTP/2 gets HTTP/1.1."""


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
        message = capped(message)  # what a member says may be large or echo our headers
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

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def not_new(self) -> bool:
        """An apply that had to create (``new``) was refused, nothing written: an object
        of that name exists (409 Conflict), or the API server takes no precondition on a
        create of this kind (Kubernetes 1.22 answers 500 for a Service)."""
        if self.status == 409:
            return self.reason == "Conflict"
        return self.status == 500 and "resourceVersion should not be set" in self.message


def _ssl_context(creds: Credentials, client: tuple[bytes, bytes] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=creds.ca_data.decode() if creds.ca_data else None)
    if client:
        cert, key = client
        _load_cert_chain(ctx, cert, key)
    return ctx


def tls_problem(creds: Credentials) -> str | None:
    """Why the CA, client certificate or key of ``creds`` cannot be loaded (they decode
    but do not parse), or None; without the key material in the message."""
    client = (creds.client_cert, creds.client_key) if creds.client_cert else None
    try:
        _ssl_context(creds, client)  # type: ignore[arg-type]
    except (ssl.SSLError, ValueError, OSError) as exc:
        part = "certificate-authority-data" if _ca_problem(creds) else "client certificate or key"
        return (
            f"its {part} does not load: {type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
        )
    return None


def _ca_problem(creds: Credentials) -> bool:
    try:
        ssl.create_default_context(cadata=creds.ca_data.decode() if creds.ca_data else None)
    except (ssl.SSLError, ValueError):
        return True
    return False


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
    token: str | None = field(repr=False)
    client: tuple[bytes, bytes] | None = field(repr=False)
    expires: dt.datetime | None


_EXEC_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ")
"""What a credential plugin inherits of the controller's environment (client-go passes
everything; the controller's environment holds its own settings and tokens)."""


def _run_exec(spec: ExecConfig, cluster: str) -> _ExecToken:
    env = {k: os.environ[k] for k in _EXEC_ENV if k in os.environ}
    env.update(dict(spec.env))
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": spec.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    what = f"credential plugin {spec.command!r}"  # never its arguments: they may hold secrets
    try:
        done = subprocess.run(
            [spec.command, *spec.args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ApiError(cluster, f"{what} did not finish within 60s") from exc
    except OSError as exc:
        raise ApiError(cluster, f"{what} cannot run: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        said = capped(done.stderr.strip(), 200)
        raise ApiError(cluster, f"{what} exited {done.returncode}" + (f": {said}" if said else ""))
    try:
        status = json.loads(done.stdout).get("status") or {}
    except (ValueError, AttributeError) as exc:
        raise ApiError(cluster, f"{what} did not print an ExecCredential (JSON)") from exc
    client = None
    if status.get("clientCertificateData") and status.get("clientKeyData"):
        client = (status["clientCertificateData"].encode(), status["clientKeyData"].encode())
    expires = status.get("expirationTimestamp")
    if status.get("token") is not None and (problem := token_problem(status["token"])):
        raise ApiError(cluster, f"{what} printed a token that cannot be used: it {problem}")
    return _ExecToken(
        token=status.get("token"),
        client=client,
        expires=dt.datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None,
    )


_WATCH_HEADERS = {"Accept-Encoding": "identity"}
"""What a watch asks for: an uncompressed stream. The API server compresses a watch that
begins with the objects there are, flushing a gzip member per event: a compressor's work
on the member for every event of a few hundred bytes, and a decoder's here."""
_ERROR_BODY_LIMIT = 300
"""Characters of a non-JSON error body kept in a message (member answers are capped)."""
_ETAG = re.compile(r'(W/)?"[\x21\x23-\x7e]*"')
"""An entity tag (RFC 9110), the only ETag sent back in If-None-Match."""


def _read_headers(headers: Mapping[bytes, bytes] | httpx.Headers) -> dict[str, str]:
    """The headers read of an answer (names in lower case), from the HTTP/2 path's
    headers or httpx's."""
    if isinstance(headers, httpx.Headers):
        return {n: headers[n] for n in READ_HEADERS if n in headers}
    found = {n: headers.get(n.encode()) for n in READ_HEADERS}
    return {n: v.decode(errors="replace") for n, v in found.items() if v is not None}


_MINOR = re.compile(r"v?(\d+)\.(\d+)")
WATCH_LIST_SINCE = (1, 32)


def serves_watch_list(git_version: str) -> bool:
    """Whether to ask a server of ``git_version`` (``v1.34.2``, ``v1.33.1-eks-...``) for
    watches that begin with the current objects: from 1.32, where they are on by default
    (1.27 to 1.31 have them off; a server older than 1.27 ignores the request and would
    never say the initial objects ended); an unreadable version: no."""
    found = _MINOR.match(git_version)
    return found is not None and (int(found.group(1)), int(found.group(2))) >= WATCH_LIST_SINCE


def _query(params: dict[str, Any] | None) -> str:
    if not params:
        return ""
    return "?" + "&".join(
        f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None
    )


def _tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure behind a transport error (httpx wraps it twice), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return None


class _ServiceAccountFiles(httpx.Auth):
    """A pod's token and CA, re-read like client-go does: the token sent with each request
    is the file's content, read again when the file changed (checked at most every
    ``CHECK_EVERY_S``) and at least every ``REREAD_EVERY_S``; a changed CA bundle is added
    to the TLS context, so new connections trust it while open ones (and their watches)
    carry on."""

    CHECK_EVERY_S = 1.0
    REREAD_EVERY_S = 60.0

    def __init__(self, creds: Credentials, tls: ssl.SSLContext) -> None:
        self._token_file = creds.token_file
        self._ca_file = creds.ca_file
        self._tls = tls
        self._token = creds.token or ""
        self._stamps: dict[str, float] = {}
        self._checked = self._read_at = time.monotonic()
        for path in (self._token_file, self._ca_file):
            if path:
                self._stamps[path] = self._mtime(path)

    @staticmethod
    def _mtime(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return -1.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.CHECK_EVERY_S:
            return
        self._checked = now
        due = now - self._read_at >= self.REREAD_EVERY_S
        if self._token_file and (
            due or self._mtime(self._token_file) != self._stamps.get(self._token_file)
        ):
            try:
                token = Path(self._token_file).read_text().strip()
                self._stamps[self._token_file] = self._mtime(self._token_file)
                if token and token_problem(token) is None:  # else: keep the last good one
                    self._token = token
            except OSError:
                pass  # mid-rotation: keep the last token, try again next time
        if self._ca_file and self._mtime(self._ca_file) != self._stamps.get(self._ca_file):
            try:
                self._tls.load_verify_locations(cadata=Path(self._ca_file).read_text())
                self._stamps[self._ca_file] = self._mtime(self._ca_file)
            except (OSError, ssl.SSLError, ValueError):
                pass  # a half-written bundle: try again next time
        if due:
            self._read_at = now

    def authorization(self) -> str:
        """The Authorization header's value now."""
        self._refresh()
        return f"Bearer {self._token}"

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = self.authorization()
        yield request


class Call:
    """A call under way (:meth:`KubeConnection.send_now`): its result, or dropped."""

    def __init__(
        self,
        result: Callable[[], Awaitable[dict[str, Any]]],
        drop: Callable[[], None] | None = None,
    ) -> None:
        """``result``: reads (or makes) the call; ``drop``: given up on a call that went out
        already (None: it did not)."""
        self._result: Callable[[], Awaitable[dict[str, Any]]] | None = result
        self._drop = drop

    @property
    def sent(self) -> bool:
        """It went out already (else it is sent when :meth:`result` is awaited)."""
        return self._drop is not None

    async def result(self) -> dict[str, Any]:
        """The decoded answer, or :class:`ApiError`, as :meth:`KubeConnection.request`
        gives; once."""
        result, self._result = self._result, None
        if result is None:
            raise RuntimeError("a call's result is read once")
        return await result()

    def drop(self) -> None:
        """Give up on the call (a sent one's stream is reset) unless its result was read."""
        if self._result is not None and self._drop is not None:
            self._drop()
        self._result = None


def _prepared(
    body: Any, content_type: str, accept: str | None
) -> tuple[dict[str, str], bytes | None]:
    """A call's own headers and its body, encoded."""
    headers = {}
    content = None
    if body is not None:
        content = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    if accept:
        headers["Accept"] = accept
    return headers, content


def _apply_call(
    info: ResourceInfo, obj: dict[str, Any], field_manager: str, dry_run: bool, new: bool
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A server-side apply's path, query and body (see :meth:`KubeConnection.apply`)."""
    meta = obj.get("metadata") or {}
    if new:  # a precondition no stored object meets: a create, or 409 Conflict
        obj = {**obj, "metadata": {**meta, "resourceVersion": NO_STORED_VERSION}}
    path = info.path(meta.get("namespace") if info.namespaced else None, meta["name"])
    params = {"fieldManager": field_manager, "force": "true", "dryRun": "All" if dry_run else None}
    return path, params, obj


class Progress:
    """When a watch's body must have brought its next event: set again by each event,
    and never past the watch's end. Over HTTP/2 the body itself stops there
    (:attr:`fleet.http2conn.ResponseBody.deadline`); over HTTP/1.1 the reader checks
    :meth:`overdue` after each read (each bounded by the read timeout)."""

    def __init__(self, body: ResponseBody | None = None) -> None:
        self._body = body
        self._end = math.inf
        self.deadline = math.inf

    def ends_in(self, lifetime_s: float | None) -> None:
        """The watch ends ``lifetime_s`` from now, whatever comes (None: when the server
        ends it)."""
        if lifetime_s is not None:
            self._end = anyio.current_time() + lifetime_s
            self.made(math.inf)

    def made(self, quiet_s: float) -> None:
        """An event came: the next one must come within ``quiet_s``."""
        self.deadline = min(anyio.current_time() + quiet_s, self._end)
        if self._body is not None:
            self._body.deadline = None if self.deadline == math.inf else self.deadline

    def overdue(self) -> bool:
        return anyio.current_time() >= self.deadline


class KubeConnection:
    """Calls to one API server. One instance per cluster, used from one event loop."""

    def __init__(self, name: str, creds: Credentials, options: ConnectionOptions) -> None:
        self.name = name
        self.server = creds.server
        self._creds = creds
        self._options = options
        self._exec: _ExecToken | None = None
        self._client: httpx.AsyncClient | None = None
        self._direct: Http2Transport | None = None
        """The client's HTTP/2 transport, for calls that skip httpx's objects."""
        self._auth: _ServiceAccountFiles | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        """What every direct call sends besides its own headers."""
        self._origin = Origin.of(creds.server, creds.tls_server_name)
        self._client_lock: anyio.Lock | None = None
        self.discovery = Discovery(self)
        self.answered_at: float | None = None
        """time.monotonic() of the server's last answer (any status, a watch event too)."""
        self.server_version: str | None = None
        """The server's gitVersion, from its last :meth:`version` answer."""
        self.watch_list: bool | None = None
        """Whether a watch may start with the current objects (None: not known yet)."""

    async def _client_material(self) -> tuple[tuple[bytes, bytes] | None, str | None]:
        creds = self._creds
        if creds.exec is None:
            client = (creds.client_cert, creds.client_key) if creds.client_cert else None
            return client, creds.token  # type: ignore[return-value]
        now = dt.datetime.now(dt.UTC)
        if self._exec is None or (self._exec.expires and self._exec.expires <= now):
            self._exec = await anyio.to_thread.run_sync(_run_exec, creds.exec, self.name)
        return self._exec.client, self._exec.token

    async def _new_client(self) -> httpx.AsyncClient:
        client, token = await self._client_material()
        # Only gzip: answers are decoded here, within a limit (fleet.answerbody).
        headers = {
            "User-Agent": "propagator",
            "Accept": "application/json",
            "Accept-Encoding": "gzip",
        }
        tls = _ssl_context(self._creds, client)
        auth = None
        if self._creds.token_file or self._creds.ca_file:
            auth = _ServiceAccountFiles(self._creds, tls)
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

    # -- raw calls -----------------------------------------------------------------------

    def _error_for(
        self, status: int, data: bytes, retry_after_s: str | None, what: str
    ) -> ApiError:
        try:
            body = json.loads(data or b"{}")
            if not isinstance(body, dict):
                body = {}
        except ValueError:
            body = {}
        message = body.get("message") or data.decode(errors="replace")[:_ERROR_BODY_LIMIT]
        retry_after = None
        if status == 429:
            try:
                retry_after = float(retry_after_s or "1")
            except ValueError:
                retry_after = 1.0
        return ApiError(
            self.name,
            f"{what}: {status} {body.get('reason', '')}: {message}".replace(": :", ":"),
            status=status,
            reason=str(body.get("reason", ""))[:64],
            retryable=status == 429 or status >= 500,
            retry_after_s=retry_after,
        )

    def _transport_error(self, exc: Exception, what: str) -> ApiError:
        tls = _tls_error(exc)
        if tls is not None:
            return ApiError(self.name, f"{what}: TLS failed: {tls}")
        if isinstance(exc, httpx.ConnectTimeout):
            problem = "timeout"
        elif isinstance(exc, httpx.ConnectError):
            problem = "connection refused or unreachable"
        elif isinstance(exc, httpx.TimeoutException):
            problem = "timeout"
        elif isinstance(exc, httpx.RemoteProtocolError):  # what the server got wrong
            problem = f"protocol error: {exc}"
        else:
            problem = f"connection error ({type(exc).__name__})"
        return ApiError(self.name, f"{what}: {problem}: {self.server}", retryable=True)

    def _extensions(self) -> dict[str, Any]:
        name = self._creds.tls_server_name
        return {"sni_hostname": name} if name else {}

    async def request(
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
        headers, content = _prepared(body, content_type, accept)
        _, _, data = await self._call(method, path, params, headers, content, timeout_s)
        return json.loads(data) if decode and data else {}

    def send_now(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Call:
        """A call as :meth:`request` makes it, sent at once (no round of the event loop)
        when the connection to the server is open and has room, else once its result is
        asked for. Calls sent so one after the other go out together. Every Call is
        either awaited (:meth:`Call.result`) or dropped (:meth:`Call.drop`)."""
        headers, content = _prepared(body, content_type, None)

        async def later() -> dict[str, Any]:
            return await self.request(
                method, path, params=params, body=body, content_type=content_type
            )

        direct, origin = self._direct, self._origin
        if direct is None or origin is None or self._client is None or self._exec_expired():
            return Call(later)
        sent = direct.send_now(
            origin, method, path + _query(params), self._direct_headers(headers), content or b""
        )
        if sent is None:
            return Call(later)

        async def answer() -> dict[str, Any]:
            _, _, data = await self._call(method, path, params, headers, content, None, sent)
            return json.loads(data) if data else {}

        return Call(answer, sent.drop)

    async def get_if_changed(
        self, path: str, accept: str, etag: str | None
    ) -> tuple[dict[str, Any] | None, str | None]:
        """GET ``path`` unless it still has ``etag`` (If-None-Match): its decoded body
        (None when unchanged: the server answered 304 without one) and its ETag."""
        headers = {"Accept": accept}
        if etag:
            headers["If-None-Match"] = etag
        status, found, data = await self._call("GET", path, None, headers, None, None)
        if status == 304:
            if not etag:  # nothing to be unchanged from: a broken (or hostile) answer
                raise ApiError(self.name, f"GET {path}: 304 Not Modified without If-None-Match")
            return None, etag
        echoed = found.get("etag")  # sent back as is: only what a header may carry
        if echoed is not None and not _ETAG.fullmatch(echoed):
            echoed = None
        return (json.loads(data) if data else {}), echoed

    async def _call(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        headers: dict[str, str],
        content: bytes | None,
        timeout_s: float | None,
        sent: Sent | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One call: its status (raises :class:`ApiError` from 400 on), the headers read
        of it (``READ_HEADERS``) and its body, decoded. ``sent``: the call, sent already
        (:meth:`send_now`), whose answer is read."""
        what = f"{method} {path}"
        client = await self._http()
        direct, origin = self._direct, self._origin
        try:
            answer = None
            if sent is not None and direct is not None and origin is not None:
                answer = await direct.answer(
                    origin, sent, self._timeouts(timeout_s), self._options.max_answer_bytes
                )
            elif direct is not None and origin is not None:
                answer = await direct.exchange(
                    origin,
                    method,
                    path + _query(params),
                    self._direct_headers(headers),
                    content or b"",
                    self._timeouts(timeout_s),
                    self._options.max_answer_bytes,
                )
            if answer is not None:
                status, found, data = answer.status, _read_headers(answer.headers), answer.content
            else:
                # The whole answer within the call's time, as over HTTP/2 (httpx's timeouts
                # bound each read: a server trickling bytes would hold it for ever).
                with anyio.fail_after(timeout_s or self._options.read_timeout_s):
                    async with client.stream(
                        method,
                        path + _query(params),
                        content=content,
                        headers=headers,
                        timeout=httpx.Timeout(timeout_s, connect=self._options.connect_timeout_s)
                        if timeout_s
                        else httpx.USE_CLIENT_DEFAULT,
                        extensions=self._extensions(),
                    ) as resp:
                        status, found = resp.status_code, _read_headers(resp.headers)
                        encoding = found.get("content-encoding", "")
                        data = await self._read_whole(encoding, resp.aiter_raw())
        except TimeoutError as exc:
            raise self._transport_error(httpx.ReadTimeout(str(exc)), what) from exc
        except httpx.TransportError as exc:
            raise self._transport_error(exc, what) from exc
        except UnreadableAnswer as exc:
            raise ApiError(self.name, f"{what}: {exc}") from None
        self.answered_at = time.monotonic()
        if status >= 400:
            raise self._error_for(status, data, found.get("retry-after"), what)
        return status, found, data

    async def _read_whole(self, encoding: str, chunks: AsyncIterator[bytes]) -> bytes:
        """A body in ``encoding`` decoded, within ``max_answer_bytes``."""
        decoder = BodyDecoder(encoding, self._options.max_answer_bytes)
        return b"".join([piece async for chunk in chunks for piece in decoder.decode(chunk)])

    def _direct_headers(self, headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
        """What a direct call sends: the client's headers, then the call's own (Accept
        and Accept-Encoding the call's, else JSON and gzip)."""
        out = [
            *self._headers,
            (b"accept", headers.get("Accept", "application/json").encode()),
            (b"accept-encoding", headers.get("Accept-Encoding", "gzip").encode()),
        ]
        if self._auth is not None:
            out.append((b"authorization", self._auth.authorization().encode()))
        out.extend(
            (k.lower().encode(), v.encode())
            for k, v in headers.items()
            if k not in ("Accept", "Accept-Encoding")
        )
        return out

    def _timeouts(self, timeout_s: float | None) -> dict[str, float | None]:
        """``timeout_s`` (default: the read timeout) for the whole answer (headers and
        body), for writing and for waiting for a free stream (a connection whose streams
        are all taken fails the call, retryably, rather than holding it forever)."""
        every = timeout_s or self._options.read_timeout_s
        return {
            "connect": self._options.connect_timeout_s,
            "read": every,
            "write": every,
            "pool": every,
        }

    async def stream(
        self,
        path: str,
        params: dict[str, Any],
        read_timeout_s: float,
        lifetime_s: float | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """A watch: yields each event ({"type", "object"}) until the server ends the
        stream, or sends no whole event for ``read_timeout_s``, or ``lifetime_s`` passed
        (then the stream just ends: the caller watches again from the last version it
        saw). Only whole events count as the server answering (:attr:`answered_at`):
        bytes that trickle in without making one neither keep a watch open nor a member
        look healthy."""
        what = f"WATCH {path}"
        opened = False
        try:
            async with self._answer_as_it_arrives(path + _query(params), read_timeout_s) as (
                status,
                headers,
                chunks,
                progress,
            ):
                self.answered_at = time.monotonic()
                encoding = headers.get("content-encoding", "")
                if status >= 400:
                    data = await self._read_whole(encoding, chunks)
                    raise self._error_for(status, data, headers.get("retry-after"), what)
                opened = True
                progress.ends_in(lifetime_s)
                progress.made(read_timeout_s)
                decoder = BodyDecoder(encoding, None)
                lines = LineSplitter(self._options.max_event_bytes)
                async for chunk in chunks:
                    for piece in decoder.decode(chunk):
                        for line in lines.feed(piece):
                            if line.strip():
                                event = json.loads(line)
                                self.answered_at = time.monotonic()
                                progress.made(read_timeout_s)
                                yield event
                    if progress.overdue():  # (over HTTP/1.1: a read at a time is bounded)
                        return
                if lines.rest().strip():
                    yield json.loads(lines.rest())
        except httpx.ReadTimeout as exc:
            if not opened:
                raise self._transport_error(exc, what) from exc
            # Quiet for too long (a bookmark comes about every minute): watch again.
        except httpx.TransportError as exc:
            raise self._transport_error(exc, what) from exc
        except httpx.StreamError as exc:
            raise ApiError(self.name, f"{what}: stream ended: {exc}", retryable=True) from exc
        except UnreadableAnswer as exc:
            raise ApiError(self.name, f"{what}: {exc}") from None

    @contextlib.asynccontextmanager
    async def _answer_as_it_arrives(
        self, target: str, read_timeout_s: float
    ) -> AsyncIterator[tuple[int, dict[str, str], AsyncIterator[bytes], Progress]]:
        """A GET's status, headers (names in lower case), body as it arrives, and its
        deadline (:class:`Progress`): straight over HTTP/2 when the server speaks it (a
        watch started through httpx's objects cost a third more; at 1,000 members a few
        restart every second at rest), else through httpx. The stream is closed on
        leaving."""
        client = await self._http()
        direct, origin = self._direct, self._origin
        if direct is not None and origin is not None:
            headers = self._direct_headers(_WATCH_HEADERS)
            streamed = await direct.open(origin, target, headers, self._timeouts(read_timeout_s))
            if streamed is not None:
                status, found, body = streamed
                try:
                    yield status, _read_headers(found), aiter(body), Progress(body)
                finally:
                    await body.aclose()
                return
        async with client.stream(
            "GET",
            target,
            headers=_WATCH_HEADERS,
            timeout=httpx.Timeout(read_timeout_s, connect=self._options.connect_timeout_s),
            extensions=self._extensions(),
        ) as resp:
            yield resp.status_code, _read_headers(resp.headers), resp.aiter_raw(), Progress()

    # -- resources -----------------------------------------------------------------------

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """How ``kind`` is served (plural, namespaced), from discovery (refreshed on a miss)."""
        return await self.discovery.resource(api_version, kind)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        info = await self.resource(api_version, kind)
        return await self.request("GET", info.path(namespace, name))

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **params: Any
    ) -> dict[str, Any]:
        info = await self.resource(api_version, kind)
        return await self.request("GET", info.path(namespace), params=params)

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str = FIELD_MANAGER,
        dry_run: bool = False,
        timeout_s: float | None = None,
        new: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` (force: Propagator owns what it propagates). With
        ``new``, only as a create: if an object of that name exists, nothing is written
        and ApiError (``not_new``) is raised."""
        info = await self.resource(obj["apiVersion"], obj["kind"])
        path, params, body = _apply_call(info, obj, field_manager, dry_run, new)
        return await self.request(
            "PATCH",
            path,
            params=params,
            body=body,
            content_type=APPLY_CONTENT_TYPE,
            timeout_s=timeout_s,
        )

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Calls :meth:`send_now` sends within the block (which must not wait) go out to
        the server in one write."""
        if self._direct is None:
            yield
            return
        with self._direct.together():
            yield

    def send_apply(self, obj: dict[str, Any], *, new: bool = False) -> Call:
        """:meth:`apply` as a :class:`Call` sent at once (see :meth:`send_now`) when the
        kind's discovery is known already; else applied when its result is asked for."""
        info = self.discovery.known(obj["apiVersion"], obj["kind"])
        if info is None:

            async def later() -> dict[str, Any]:
                return await self.apply(obj, new=new)

            return Call(later)
        path, params, body = _apply_call(info, obj, FIELD_MANAGER, False, new)
        return self.send_now(
            "PATCH", path, params=params, body=body, content_type=APPLY_CONTENT_TYPE
        )

    async def create(
        self, obj: dict[str, Any], *, field_manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """Create ``obj``; raises ApiError (``already_exists``) if it exists: unlike an
        apply, a create never writes over what someone else made."""
        info = await self.resource(obj["apiVersion"], obj["kind"])
        namespace = (obj.get("metadata") or {}).get("namespace")
        path = info.path(namespace if info.namespaced else None)
        return await self.request("POST", path, params={"fieldManager": field_manager}, body=obj)

    async def merge_patch(
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
        path = (await self.resource(api_version, kind)).path(namespace, name)
        return await self.request(
            "PATCH",
            f"{path}/{subresource}" if subresource else path,
            body=body,
            content_type=MERGE_PATCH_CONTENT_TYPE,
        )

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Delete an object (background propagation); False if it was gone."""
        info = await self.resource(api_version, kind)
        try:
            await self.request(
                "DELETE", info.path(namespace, name), body={"propagationPolicy": "Background"}
            )
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def ping(self, timeout_s: float) -> bool:
        """An HTTP/2 PING over the open connection to the server, answered by the API
        server itself (no request, no handler, no etcd): a liveness check at a quarter of
        a call's cost. False when there is no such connection to ping (nothing sent);
        raises :class:`ApiError` when the server does not answer within ``timeout_s``."""
        if self._direct is None:
            return False
        try:
            if not await self._direct.ping(timeout_s):
                return False
        except httpx.TransportError as exc:
            raise self._transport_error(exc, "HTTP/2 PING") from exc
        self.answered_at = time.monotonic()
        return True

    async def readyz(self, timeout_s: float) -> None:
        """Raise :class:`ApiError` unless ``/readyz`` answers 200 within ``timeout_s``."""
        await self.request("GET", "/readyz", timeout_s=timeout_s, accept="text/plain", decode=False)

    async def version(self) -> dict[str, Any]:
        answer = await self.request("GET", "/version")
        found = answer.get("gitVersion") if isinstance(answer, dict) else None
        self.server_version = found if isinstance(found, str) else ""
        return answer

    async def streams_initial_events(self) -> bool:
        """Whether a watch can begin with the objects there are (``sendInitialEvents``,
        Kubernetes' streaming list), which saves the list request before it: judged from
        the server's version (1.32 on, where it is on by default) until a watch asking for
        it is refused (:meth:`refuse_watch_list`)."""
        if self.watch_list is None:
            if self.server_version is None:
                await self.version()
            self.watch_list = serves_watch_list(self.server_version or "")
        return self.watch_list

    def refuse_watch_list(self) -> None:
        """The server refused a watch that begins with its objects (1.33 has it off by
        default; a feature gate may turn it off anywhere): list, then watch, from now on."""
        self.watch_list = False
