"""Where the fleet manager publishes the fleet snapshot and readers take it: one reference
swapped atomically, and a wait for the next generation."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import anyio

from fleet.snapshot import ClusterInfo, FleetSnapshot, build_snapshot


class SnapshotStore:
    """Holds the current snapshot; ``publish`` swaps in a new one atomically. Used from
    one event loop."""

    def __init__(self) -> None:
        self._current = build_snapshot((), {}, generation=0)
        self._published: anyio.Event | None = None
        self._confirmed_at = self._current.built_at

    def current(self) -> FleetSnapshot:
        return self._current  # one reference read: always a whole snapshot

    def confirm(self, now: float | None = None) -> None:
        """Record that the current snapshot still matches the fleet (nothing changed)."""
        self._confirmed_at = time.monotonic() if now is None else now

    def age_s(self, now: float | None = None) -> float:
        """Seconds since the current snapshot was built or last confirmed: its staleness."""
        return (time.monotonic() if now is None else now) - self._confirmed_at

    def publish(
        self, clusters: Iterable[ClusterInfo], fleets: Mapping[str, Iterable[str]]
    ) -> FleetSnapshot:
        """Build the next generation and make it current."""
        snapshot = build_snapshot(
            clusters, fleets, self._current.generation + 1, previous=self._current
        )
        self._current = snapshot
        self._confirmed_at = snapshot.built_at
        if self._published is not None:
            self._published.set()
            self._published = None
        return snapshot

    async def newer_than(self, generation: int) -> FleetSnapshot:
        """The current snapshot once it is newer than ``generation`` (waits for a
        publish)."""
        while self._current.generation <= generation:
            if self._published is None:
                self._published = anyio.Event()
            await self._published.wait()
        return self._current
