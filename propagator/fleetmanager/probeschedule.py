"""When each member is probed: every ``interval_s`` from the start of its own last probe.

Each member keeps its own clock, so a member whose probe waits for its timeout (one that
stopped answering) delays no other member's probes, and a member added is probed at once.
A member is handed out up to :data:`EARLY_S` (a tenth of the interval at most) before it is
due, with every other member due by then: the probe loop wakes a few times a second, not
once per member (a thousand members joined over a minute have clocks that all differ,
and waking for each cost several times the CPU of waking in rounds).
Pure bookkeeping, no I/O: the fleet manager's probe loop asks what is due and hands it to
its probers.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection

EARLY_S = 0.25
"""At most this many seconds early (and at most a tenth of the interval)."""


class ProbeSchedule:
    """The next probe of each member; a member is either waiting (with a due time) or
    being probed (busy) until :meth:`done`."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.early_s = min(EARLY_S, interval_s / 10)
        self._due: dict[str, float] = {}
        """Waiting members, by name: when their next probe is due (time.monotonic())."""
        self._heap: list[tuple[float, str]] = []
        """``_due`` by time; an entry that no longer matches ``_due`` is stale, skipped."""
        self._busy: set[str] = set()

    @property
    def size(self) -> int:
        """How many members the schedule follows."""
        return len(self._due) + len(self._busy)

    def sync(self, names: Collection[str], now: float, fresh: Collection[str] = ()) -> None:
        """Follow the member set: a member not seen before, or one in ``fresh`` (its
        connection rebuilt), is due ``now`` unless being probed; one gone is forgotten
        (its probe under way, if any, is not rescheduled)."""
        for name in names:
            if name in self._busy:
                continue
            if name not in self._due or (name in fresh and self._due[name] > now):
                self._push(name, now)
        for name in [n for n in self._due if n not in names]:
            del self._due[name]
        self._busy.intersection_update(names)

    def take(self, now: float) -> list[str]:
        """The members due by ``now`` (``early_s`` later), earliest first, now busy."""
        taken = []
        while self._heap and self._heap[0][0] <= now + self.early_s:
            due, name = heapq.heappop(self._heap)
            if self._due.get(name) != due:
                continue
            del self._due[name]
            self._busy.add(name)
            taken.append(name)
        return taken

    def done(self, name: str, started: float) -> float | None:
        """``name``'s probe, started at ``started``, has finished: its next is due one
        interval after that start (at once if the probe took longer). Returns that time;
        None when the member was dropped meanwhile."""
        if name not in self._busy:
            return None
        self._busy.discard(name)
        due = started + self.interval_s
        self._push(name, due)
        return due

    def next_due(self) -> float | None:
        """When the earliest waiting member is due (None: none waits)."""
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _push(self, name: str, due: float) -> None:
        self._due[name] = due
        heapq.heappush(self._heap, (due, name))
