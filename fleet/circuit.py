"""A circuit breaker per member cluster: stop sending to a member that keeps failing.

Closed: calls go through. After ``failure_threshold`` consecutive failures it opens: calls
are refused at once for ``cool_down_s``. Then it is half-open: one trial call goes
through; success closes it, failure opens it again for another cool-down.
"""

from __future__ import annotations

import threading
import time
from typing import Literal

State = Literal["closed", "open", "half-open"]


class CircuitOpen(Exception):
    """The member's circuit is open: the call was not attempted."""

    def __init__(self, cluster: str, retry_in_s: float) -> None:
        super().__init__(
            f"{cluster}: circuit open after repeated failures; next trial in {retry_in_s:.0f}s"
        )
        self.cluster = cluster
        self.retry_in_s = retry_in_s


class CircuitBreaker:
    """Thread-safe breaker for one member."""

    def __init__(self, cluster: str, failure_threshold: int = 5, cool_down_s: float = 30.0) -> None:
        self.cluster = cluster
        self.failure_threshold = failure_threshold
        self.cool_down_s = cool_down_s
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False

    def state(self, now: float | None = None) -> State:
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._state(now)

    def _state(self, now: float) -> State:
        if self._opened_at is None:
            return "closed"
        return "open" if now - self._opened_at < self.cool_down_s else "half-open"

    def before_call(self, now: float | None = None) -> None:
        """Raise CircuitOpen unless a call may go now (one trial at a time when half-open)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            state = self._state(now)
            if state == "closed":
                return
            if state == "half-open" and not self._trial:
                self._trial = True
                return
            assert self._opened_at is not None
            raise CircuitOpen(self.cluster, max(0.0, self._opened_at + self.cool_down_s - now))

    def record(self, success: bool, now: float | None = None) -> None:
        """Count the outcome of a call that went through."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._trial = False
            if success:
                self._failures, self._opened_at = 0, None
                return
            self._failures += 1
            if self._opened_at is not None or self._failures >= self.failure_threshold:
                self._opened_at = now  # (re)open: a failed trial starts a new cool-down
