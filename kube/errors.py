"""What a failed call to an API server says, classified: which failures are worth
retrying (timeouts, connection errors, 429, 5xx) is decided here and in
:func:`kube.transport.transport_error` (a call that got no answer), once; how long to
wait is :mod:`kube.retry`'s."""

from __future__ import annotations

import json

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
