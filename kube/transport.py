"""Calls and watches to one API server over its session: a whole answer read within a
bound, a call sent at once and answered later, a conditional GET, and a watch read event
by event with a deadline for the next one. Errors are raised as :class:`ApiError`."""

from __future__ import annotations

import contextlib
import json
import math
import re
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from kube.answerbody import BodyDecoder, LineSplitter, UnreadableAnswer
from kube.errors import ApiError, error_for
from kube.hpackread import READ_HEADERS
from kube.http2 import Sent
from kube.http2conn import ResponseBody
from kube.session import Session

_WATCH_HEADERS = {"Accept-Encoding": "identity"}
"""What a watch asks for: an uncompressed stream. The API server compresses a watch that
begins with the objects there are, flushing a gzip member per event: a compressor's work
on the member for every event of a few hundred bytes, and a decoder's here."""
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


class Progress:
    """When a watch's body must have brought its next event: set again by each event,
    and never past the watch's end. Over HTTP/2 the body itself stops there
    (:attr:`kube.http2conn.ResponseBody.deadline`); over HTTP/1.1 the reader checks
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


class ApiTransport(Session):
    """Calls and watches to one API server."""

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
            raise transport_error(
                self.name, self.server, httpx.ReadTimeout(str(exc)), what
            ) from exc
        except httpx.TransportError as exc:
            raise transport_error(self.name, self.server, exc, what) from exc
        except UnreadableAnswer as exc:
            raise ApiError(self.name, f"{what}: {exc}") from None
        self.answered_at = time.monotonic()
        if status >= 400:
            raise error_for(self.name, status, data, found.get("retry-after"), what)
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
                    raise error_for(self.name, status, data, headers.get("retry-after"), what)
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
                raise transport_error(self.name, self.server, exc, what) from exc
            # Quiet for too long (a bookmark comes about every minute): watch again.
        except httpx.TransportError as exc:
            raise transport_error(self.name, self.server, exc, what) from exc
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


def transport_error(cluster: str, server: str, exc: BaseException, what: str) -> ApiError:
    """What a call that failed before the server answered says: TLS (not retryable), or
    a timeout, refusal or broken connection (retryable)."""
    tls = tls_error(exc)
    if tls is not None:
        return ApiError(cluster, f"{what}: TLS failed: {tls}")
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
    return ApiError(cluster, f"{what}: {problem}: {server}", retryable=True)


def tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure behind a transport error (httpx wraps it twice), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return None
