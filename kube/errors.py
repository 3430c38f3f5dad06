"""What a failed call to an API server says, classified: which failures are worth
retrying (timeouts, connection errors, 429, 5xx) is decided here, once; how long to wait
is :mod:`kube.retry`'s."""

from __future__ import annotations

import json
import ssl

import httpx

from kube.redact import capped

ERROR_BODY_LIMIT = 300
"""Characters of a non-JSON error body kept in a message (member answers are capped)."""


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


def error_for(
    cluster: str, status: int, data: bytes, retry_after_s: str | None, what: str
) -> ApiError:
    """What the server's error answer says: its message (a non-JSON body cut short), its
    reason, whether a retry may help (429, 5xx) and after how long (Retry-After)."""
    try:
        body = json.loads(data or b"{}")
        if not isinstance(body, dict):
            body = {}
    except ValueError:
        body = {}
    message = body.get("message") or data.decode(errors="replace")[:ERROR_BODY_LIMIT]
    retry_after = None
    if status == 429:
        try:
            retry_after = float(retry_after_s or "1")
        except ValueError:
            retry_after = 1.0
    return ApiError(
        cluster,
        f"{what}: {status} {body.get('reason', '')}: {message}".replace(": :", ":"),
        status=status,
        reason=str(body.get("reason", ""))[:64],
        retryable=status == 429 or status >= 500,
        retry_after_s=retry_after,
    )


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
