"""Which work this replica may do now: the gate every write to a member, a Work or a
status passes, and the count of work in flight per bucket that a handoff waits for.

With one replica (the default, or leader-only mode) everything is owned. With shards
(:mod:`.shards`), a key is owned while its bucket is held in the shard table as last
confirmed, and that confirmation is younger than the renew deadline: a replica that cannot
renew stops taking work before anybody may take its buckets over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator

import anyio

from propagator.runtime.shardplan import BUCKETS, bucket_of


class Ownership:
    """The buckets this replica holds, and its work in flight in each."""

    def __init__(self, *, everything: bool = True, deadline_s: float = float("inf")) -> None:
        """``everything``: one replica does all the work (no shards); else nothing is
        owned until :meth:`confirm`; ``deadline_s``: how long a confirmation holds."""
        self.everything = everything
        self.deadline_s = deadline_s
        self.held: frozenset[int] = frozenset(range(BUCKETS)) if everything else frozenset()
        self._confirmed_at = -float("inf")
        self._in_flight = [0] * BUCKETS
        self._drained = anyio.Event()
        self.on_gained: list[Callable[[frozenset[int]], None]] = []
        """Told (in the event loop) of buckets this replica now holds."""
        self.on_released: list[Callable[[frozenset[int]], None]] = []
        """Told of buckets this replica no longer holds (their work is drained)."""

    def owns(self, key: str) -> bool:
        """Whether the work of shard key ``key`` is this replica's now."""
        if self.everything:
            return True
        return bucket_of(key) in self.held and self.confirmed()

    def confirmed(self) -> bool:
        """Whether the holdings were confirmed within the deadline."""
        return time.monotonic() - self._confirmed_at <= self.deadline_s

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[bool]:
        """Work on ``key`` if owned (yields True) and count it in flight meanwhile; yields
        False (do nothing) when it is not this replica's."""
        if self.everything:
            yield True
            return
        bucket = bucket_of(key)
        if bucket not in self.held or not self.confirmed():
            yield False
            return
        self._in_flight[bucket] += 1
        try:
            yield True
        finally:
            self._in_flight[bucket] -= 1
            if not self._in_flight[bucket]:
                self._drained.set()

    def confirm(self, held: Iterable[int], at: float) -> None:
        """The table, read in a round that began at ``at`` (time.monotonic()) after this
        replica's Lease was renewed, shows it holding ``held``."""
        now_held = frozenset(held)
        gained, lost = now_held - self.held, self.held - now_held
        self.held = now_held
        self._confirmed_at = at
        if lost:
            for told in self.on_released:
                told(lost)
        if gained:
            for told in self.on_gained:
                told(gained)

    def stop(self, buckets: Iterable[int]) -> None:
        """Take no new work in ``buckets`` (they are being handed over)."""
        stopped = frozenset(buckets) & self.held
        if stopped:
            self.held -= stopped
            for told in self.on_released:
                told(stopped)

    def in_flight(self, buckets: Iterable[int]) -> int:
        return sum(self._in_flight[b] for b in buckets)

    async def drained(self, buckets: Iterable[int], timeout_s: float) -> frozenset[int]:
        """Wait up to ``timeout_s`` for the work in flight in ``buckets`` to end; the
        buckets with none left."""
        wanted = frozenset(buckets)
        with anyio.move_on_after(timeout_s):
            while self.in_flight(wanted):
                self._drained = anyio.Event()
                await self._drained.wait()
        return frozenset(b for b in wanted if not self._in_flight[b])

    def share(self) -> int:
        """How many buckets this replica holds."""
        return len(self.held)


Hold = Callable[[str], contextlib.AbstractContextManager[bool]]
"""``hold(key)``: a context yielding whether this replica works on ``key`` now (and
counting that work in flight)."""


def always(_key: str) -> contextlib.AbstractContextManager[bool]:
    """The hold of a process that does all the work (one replica, an agent)."""
    return contextlib.nullcontext(True)
