"""Retrying calls that failed for a retryable reason (timeouts, connection errors, 429, 5xx),
and the one backoff rule every retry in the project follows."""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from fleet.connection import ApiError

T = TypeVar("T")

REQUEUE_BACKOFF_S = 0.5
"""The first wait before a cluster that has used up its application's retries is tried
again (doubling with jitter, up to PROPAGATOR_REQUEUE_MAX_DELAY_S)."""


def backoff_delay(
    retry: int, backoff_s: float, max_backoff_s: float, retry_after_s: float | None = None
) -> float:
    """Wait before retry number ``retry`` (1-based): the server's Retry-After if it gave
    one, else ``backoff_s`` doubling per retry with jitter (50-100 % of the step); capped
    at ``max_backoff_s`` either way."""
    if retry_after_s is not None:
        return min(max_backoff_s, retry_after_s)
    step = min(max_backoff_s, backoff_s * math.pow(2, max(0, retry - 1)))
    return step * (0.5 + random.random() / 2)


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    backoff_s: float = 0.5,
    max_backoff_s: float = 10.0,
) -> T:
    """Call ``fn``; retry retryable :class:`ApiError` up to ``attempts`` more times with
    exponential backoff and jitter, honouring a server's Retry-After. Other errors, and the
    last retryable one, are raised."""
    for attempt in range(attempts + 1):
        try:
            return await fn()
        except ApiError as exc:
            if not exc.retryable or attempt == attempts:
                raise
            await anyio.sleep(
                backoff_delay(attempt + 1, backoff_s, max_backoff_s, exc.retry_after_s)
            )
    raise AssertionError("unreachable")  # pragma: no cover
