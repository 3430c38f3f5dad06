"""The work queue between watches and reconcile workers.

A key is queued at most once however often it is added; a key being processed is never
handed to a second worker, and if it is added meanwhile it comes back once the first
worker is done. A key whose reconcile failed comes back after an exponential, capped
backoff of its own; success resets it.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

import anyio

from kube.retry import QUEUE_BACKOFF_S, backoff_delay


class WorkQueue:
    """Deduplicating, per-key rate-limited queue of reconcile keys (anyio)."""

    def __init__(self, base_delay_s: float = QUEUE_BACKOFF_S, max_delay_s: float = 300.0) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._ready: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._delayed: list[tuple[float, str]] = []
        self._soon: dict[str, float] = {}
        """Per key, when the entry :meth:`add_soon` made last is due (until it fires)."""
        self._failures: dict[str, int] = {}
        self._wake: anyio.Event | None = None  # made in the event loop, on first wait
        self._closed = False

    def __len__(self) -> int:
        """Depth: keys waiting now or later (not those being processed)."""
        return len(self._queued) + len({k for _, k in self._delayed} - self._queued)

    def busy(self) -> bool:
        """Whether there is work now: a key ready (or due) or being processed; keys due
        later do not count."""
        due = bool(self._delayed) and self._delayed[0][0] <= time.monotonic()
        return bool(self._ready or self._processing) or due

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def add(self, key: str) -> None:
        """Queue ``key`` now (no-op when already queued; deferred while it is processed)."""
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._notify()

    def add_after(self, key: str, delay_s: float, now: float | None = None) -> None:
        """Queue ``key`` once ``delay_s`` has passed."""
        due = (time.monotonic() if now is None else now) + delay_s
        heapq.heappush(self._delayed, (due, key))
        self._notify()

    def add_soon(self, key: str, delay_s: float, now: float | None = None) -> None:
        """Queue ``key`` once ``delay_s`` has passed, unless it is queued already or an
        earlier ``add_soon`` of it comes by then: what it is processed for (a status
        refresh reading the results so far) is done by that one, so a stream of results
        makes one refresh per delay."""
        now = time.monotonic() if now is None else now
        if key in self._queued or now <= self._soon.get(key, -math.inf) <= now + delay_s:
            return
        self._soon[key] = now + delay_s
        self.add_after(key, delay_s, now)

    def retry(self, key: str) -> float:
        """Queue ``key`` again after its backoff (the retry policy's, doubling per failure,
        without jitter); returns the delay."""
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = backoff_delay(failures, self.base_delay_s, self.max_delay_s, jitter=False)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (after a successful reconcile)."""
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def _promote_due(self, now: float) -> float | None:
        """Move due delayed keys to ready; returns seconds until the next one, if any."""
        while self._delayed and self._delayed[0][0] <= now:
            due, key = heapq.heappop(self._delayed)
            if self._soon.get(key) == due:
                del self._soon[key]
            self.add(key)
        return self._delayed[0][0] - now if self._delayed else None

    async def get(self) -> str | None:
        """The next key to process (marked as processing), or None once the queue is shut
        down."""
        while True:
            if self._closed:
                return None
            wait = self._promote_due(time.monotonic())
            if self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                self._processing.add(key)
                return key
            if self._wake is None or self._wake.is_set():
                self._wake = anyio.Event()  # one fresh event, shared by every waiting worker
            with anyio.move_on_after(wait if wait is not None else math.inf):
                await self._wake.wait()

    async def serve(
        self,
        handle: Callable[[str], Awaitable[None]],
        retried: tuple[type[Exception], ...],
        failed: Callable[[str, Exception], bool],
    ) -> None:
        """Hand each key to ``handle`` until the queue shuts down. A key ``handle`` raised
        one of ``retried`` for is told to ``failed(key, exc)``, and comes back after its
        backoff when that says so (True); otherwise its backoff is reset."""
        while (key := await self.get()) is not None:
            try:
                await handle(key)
                self.forget(key)
            except retried as exc:
                if failed(key, exc):
                    self.retry(key)
                else:
                    self.forget(key)
            finally:
                self.done(key)

    def done(self, key: str) -> None:
        """``key`` is processed; if it was added meanwhile, it is queued again now."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def shut_down(self) -> None:
        """Make every ``get`` return None (workers stop)."""
        self._closed = True
        self._notify()
