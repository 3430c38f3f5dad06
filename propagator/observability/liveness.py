"""Liveness: the event loop runs, and the hub answers.

A heartbeat task stamps the time every second; the health server (a thread of its own)
compares. When the hub has said nothing for a while (no call, no watch event), the task
asks it for ``/version``, so that a quiet controller is not taken for one that lost its hub.
"""

from __future__ import annotations

import contextlib
import time

import anyio

from kube.connection import KubeConnection
from kube.errors import ApiError

BEAT_S = 1.0


class Liveness:
    """``problem()`` is None while the process is live, else why not (for /healthz)."""

    def __init__(self, hub: KubeConnection, stall_s: float, hub_lost_after_s: float) -> None:
        self.hub = hub
        self.stall_s = stall_s
        self.hub_lost_after_s = hub_lost_after_s
        self.beat = time.monotonic()
        self.started = self.beat

    def problem(self) -> str | None:
        now = time.monotonic()
        if now - self.beat > self.stall_s:
            return f"event loop has not run for {now - self.beat:.0f}s"
        last = self.hub.answered_at if self.hub.answered_at is not None else self.started
        if now - last > self.hub_lost_after_s:
            return f"hub {self.hub.server} has not answered for {now - last:.0f}s"
        return None

    async def run(self) -> None:
        """Beat until cancelled; ask the hub when it has been quiet for a quarter of the
        bound."""
        while True:
            self.beat = time.monotonic()
            last = self.hub.answered_at or self.started
            if self.beat - last > self.hub_lost_after_s / 4:
                # Any answer, even an error status, stamps answered_at; none leaves it.
                with (
                    anyio.move_on_after(min(10.0, self.hub_lost_after_s / 4)),
                    contextlib.suppress(ApiError),
                ):
                    await self.hub.request("GET", "/version")
            await anyio.sleep(BEAT_S)
