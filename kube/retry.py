"""The one retry policy: which failures are worth trying again, how long to wait before
each retry, and the defaults every queue starts from.

- Which: :func:`failure_of` (a call's timeout, connection error, 429 with its Retry-After,
  5xx: retryable; a refusal, 4xx, and a kind the server does not serve: not), from the
  classification :class:`kube.errors.ApiError` carries.
- How long: :func:`backoff_delay`, doubling from a base up to a cap. Member syncs add
  jitter (many clusters fail together when a network does; they must not come back
  together); the work queues of the controller do not (one key each, and a test of their
  order must hold), as client-go's per-item rate limiter does not.
- :func:`kube.connection.call_with_retries` retries a call by these rules.
- The defaults: an application's retries (attempts, backoff, maxBackoff) are
  ``api.rollout``'s ``DEFAULT_RETRY_*`` unless settings or the application say otherwise;
  a cluster that used them up comes back from :data:`REQUEUE_BACKOFF_S`; a reconcile
  key from :data:`QUEUE_BACKOFF_S`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kube.discovery import UnknownKind
from kube.errors import ApiError

REQUEUE_BACKOFF_S = 0.5
"""The first wait before a cluster that has used up its application's retries is tried
again (doubling with jitter, up to PROPAGATOR_REQUEUE_MAX_DELAY_S)."""
QUEUE_BACKOFF_S = 0.5
"""The first wait before a key whose processing failed is handed out again by a work
queue (doubling, up to the queue's cap)."""


def backoff_delay(
    retry: int,
    backoff_s: float,
    max_backoff_s: float,
    retry_after_s: float | None = None,
    *,
    jitter: bool = True,
) -> float:
    """Wait before retry number ``retry`` (1-based): the server's Retry-After if it gave
    one, else ``backoff_s`` doubling per retry, with ``jitter`` 50-100 % of the step;
    capped at ``max_backoff_s`` either way."""
    if retry_after_s is not None:
        return min(max_backoff_s, retry_after_s)
    # (past 64 doublings every step is the cap: 2**1024 would overflow a float)
    step = min(max_backoff_s, backoff_s * math.pow(2, min(64, max(0, retry - 1))))
    return step * (0.5 + random.random() / 2) if jitter else step


@dataclass(frozen=True)
class Failure:
    """A failed call as the retry policy judges it."""

    reason: str
    retryable: bool
    retry_after_s: float | None = None
    answered: bool = False
    """The server answered (a refusal): it works, whatever it said."""


def failure_of(exc: BaseException, timeout_s: float) -> Failure | None:
    """How a call that raised ``exc`` (within a deadline of ``timeout_s``) failed, or None
    when ``exc`` is not a failure of the call (a bug: let it raise)."""
    if isinstance(exc, TimeoutError):
        return Failure(f"timeout ({timeout_s:g}s)", retryable=True)
    if isinstance(exc, ApiError):
        # A refusal (4xx) comes from a server that works.
        answered = exc.status is not None and not exc.retryable
        return Failure(exc.message, exc.retryable, exc.retry_after_s, answered)
    if isinstance(exc, UnknownKind):
        return Failure(str(exc), retryable=False, answered=True)
    return None
