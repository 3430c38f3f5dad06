"""Retrying calls that failed for a retryable reason (timeouts, connection errors, 429, 5xx)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from fleet.connection import ApiError

T = TypeVar("T")


def call_with_retries(
    fn: Callable[[], T], *, attempts: int = 4, backoff_s: float = 0.5, max_backoff_s: float = 10.0
) -> T:
    """Call ``fn``; retry retryable :class:`ApiError` up to ``attempts`` more times with
    exponential backoff and jitter, honouring a server's Retry-After. Other errors, and the
    last retryable one, are raised."""
    delay = backoff_s
    for attempt in range(attempts + 1):
        try:
            return fn()
        except ApiError as exc:
            if not exc.retryable or attempt == attempts:
                raise
            wait = exc.retry_after_s if exc.retry_after_s is not None else delay
            time.sleep(min(max_backoff_s, wait) * (0.5 + random.random() / 2))
            delay = min(max_backoff_s, delay * 2)
    raise AssertionError("unreachable")  # pragma: no cover
