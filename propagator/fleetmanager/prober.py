"""Probing the members: each on its own clock (:mod:`.probeschedule`), by probers that
share a queue, with members that stopped answering probed apart from those that answer."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from fleet.member import MemberMonitor, ProbeResult
from propagator.fleetmanager import memberstatus
from propagator.fleetmanager.probeschedule import ProbeSchedule
from propagator.fleetmanager.statuswriter import StatusWriter
from propagator.observability.metrics import Metrics
from propagator.settings import Settings

HANDOFF_S = 1.0
"""Seconds a prober waits for a member's probe (at most half the probe timeout); after
that the member is probed in a task of its own, which waits for the rest of the
timeout, and so are its next probes until it answers in time."""


class Prober:
    """Probes the members and asks for a status pass when what their status would show
    changed (and once a probe interval at least)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        monitors: Mapping[str, MemberMonitor],
        status: StatusWriter,
        on_change: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.monitors = monitors
        self.status = status
        self.on_change = on_change
        self.owns: Callable[[str], bool] = lambda _name: True
        """Whether this replica probes a member (shards divide them)."""
        self._synced_size = -1
        """How many monitors there were when the schedule was last synced."""
        self._resync = False
        self._probes_wake: anyio.Event | None = None
        """Wakes the probe loop: the monitors changed, or a member is due earlier."""
        self._probes_due: float | None = None
        """When the probe loop wakes next by itself (time.monotonic(); None: not before
        it is woken)."""
        self._unprobed: set[str] = set()
        """Members whose monitor is new (added, or rebuilt from a new Secret): probed at
        once."""
        self._hanging: set[str] = set()
        """Members whose last probe did not end within HANDOFF_S: probed in a task of
        their own, not by the probers."""
        self._shown: dict[str, tuple[object, ...]] = {}
        """Per member, what its status showed after its last probe (:func:`shown`)."""

    def monitors_changed(self, made: set[str], dropped: set[str]) -> None:
        """Probe the ``made`` monitors at once; forget the ``dropped``."""
        self._unprobed |= made
        for name in dropped:
            self._shown.pop(name, None)
        if self._probes_wake is not None:
            self._probes_wake.set()

    def owners_changed(self, gained: set[str]) -> None:
        """The members this replica probes changed: probe ``gained`` at once."""
        self._unprobed |= gained
        self._resync = True
        if self._probes_wake is not None:
            self._probes_wake.set()

    async def run(self) -> None:
        """Probe each member when its :class:`ProbeSchedule` says. Members that answered
        their last probe and the others (failing, NotReady, not probed yet) have
        ``max_concurrency`` probers each (sharing a queue, not a task per member: at a
        thousand members, starting the tasks cost as much as the probes): members that
        stopped answering never hold back the probes of those that answer. A probe not
        ended within :data:`HANDOFF_S` leaves its prober (:meth:`_prober`), and a member
        whose probe did that is probed in a task of its own until it answers in time."""
        schedule = ProbeSchedule(self.settings.probe_interval_s)
        to_answering, answering = anyio.create_memory_object_stream[MemberMonitor](math.inf)
        to_others, others = anyio.create_memory_object_stream[MemberMonitor](math.inf)
        async with anyio.create_task_group() as tg, to_answering, to_others:
            for receive in (answering, others):
                for _ in range(self.settings.max_concurrency):
                    tg.start_soon(self._prober, receive.clone(), schedule, tg)
                receive.close()
            while True:
                self._probes_wake = wake = anyio.Event()
                now = time.monotonic()
                if self._unprobed or self._resync or len(self.monitors) != self._synced_size:
                    mine = [n for n in self.monitors if self.owns(n)]
                    schedule.sync(mine, now, self._unprobed.intersection(mine))
                    self._synced_size, self._resync = len(self.monitors), False
                    self._hanging.intersection_update(self.monitors)
                    self._hanging.difference_update(self._unprobed)  # a new connection
                    self._unprobed = set()
                for name in schedule.take(now):
                    if (monitor := self.monitors.get(name)) is None or not self.owns(name):
                        continue
                    if name in self._hanging:
                        timeout_s = self.settings.probe_timeout_s
                        tg.start_soon(self._probe_alone, monitor, schedule, now, timeout_s)
                        continue
                    health = monitor.health
                    answered = health.ready and not health.failures
                    (to_answering if answered else to_others).send_nowait(monitor)
                self._probes_due = schedule.next_due()
                due = self._probes_due
                with anyio.move_on_after(None if due is None else due - time.monotonic()):
                    await wake.wait()

    async def _prober(
        self,
        monitors: MemoryObjectReceiveStream[MemberMonitor],
        schedule: ProbeSchedule,
        tg: TaskGroup,
    ) -> None:
        """Probe the members received, one at a time. A probe that has not ended within
        :data:`HANDOFF_S` is abandoned (nothing of it is recorded) and the member probed
        again in a task of its own (:meth:`_probe_alone`) for the rest of the timeout:
        a region of members hanging at once holds the probers a second each, not a
        timeout each (at 100 members, 10 probers and a 5 s timeout: 10 s once, not 50 s,
        and not again while they hang), and its probes still end when the first would
        have, so an outage is noticed as soon."""
        timeout_s = self.settings.probe_timeout_s
        async with monitors:
            async for monitor in monitors:
                started = time.monotonic()
                result: ProbeResult | None = None
                with anyio.move_on_after(self._handoff_s):
                    result = await monitor.probe(timeout_s)
                if result is None:
                    self._hanging.add(monitor.name)
                    rest_s = timeout_s - (time.monotonic() - started)
                    tg.start_soon(self._probe_alone, monitor, schedule, started, rest_s)
                else:
                    self._probed(monitor, result, schedule, started)

    async def _probe_alone(
        self, monitor: MemberMonitor, schedule: ProbeSchedule, started: float, timeout_s: float
    ) -> None:
        """Probe a member that did not answer its last probe within :data:`HANDOFF_S`;
        once it answers in time (or fails at once), the probers take it back."""
        began = time.monotonic()
        result = await monitor.probe(max(timeout_s, 0.1))
        if result.ok or time.monotonic() - began < self._handoff_s:
            self._hanging.discard(monitor.name)
        self._probed(monitor, result, schedule, started)

    @property
    def _handoff_s(self) -> float:
        return min(HANDOFF_S, self.settings.probe_timeout_s / 2)

    def _probed(
        self, monitor: MemberMonitor, result: ProbeResult, schedule: ProbeSchedule, started: float
    ) -> None:
        """Record the probe of ``monitor`` begun at ``started``, ask for a status pass if
        needed, and schedule its next probe."""
        self.metrics.member_probes.labels(monitor.name, "ok" if result.ok else "failed").inc()
        # A status pass when what the status would show changed since this member's last
        # probe (its not-ready time passing too: the taints), and one an interval at
        # least, which confirms the snapshot still holds: an older one is stale, and
        # decisions scan the members instead.
        now = time.monotonic()
        shown = memberstatus.shown(monitor, now)
        if self._shown.get(monitor.name) != shown:
            self._shown[monitor.name] = shown
            self.on_change()
        elif now - self.status.passed_at >= self.settings.probe_interval_s:
            self.on_change()
        due = schedule.done(monitor.name, started)
        if due is not None and (self._probes_due is None or due < self._probes_due):
            assert self._probes_wake is not None
            self._probes_wake.set()
