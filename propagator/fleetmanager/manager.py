"""The fleet manager: turns MemberClusters into live, probed connections, keeps their status
and taints and the Fleets' status current, and publishes the fleet snapshot.

Hub objects are watched (MemberClusters, the Secrets in the controller namespace, Fleets);
each member is probed every ``probe_interval_s`` on its own clock (:mod:`.probes`), and
its nodes and pods watched by its unit in the member registry. Any change — a probe's
verdict, discovery, capacity, the hub's objects — wakes one status pass, which writes
only what differs; a member's capacity alone (what its pods coming and going change) at
most every ``capacity_status_interval_s``.
"""

from __future__ import annotations

import base64
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from api.common import API_VERSION
from fleet.member import MemberMonitor, ProbeResult, namespaces_of
from fleet.readiness import HealthPolicy
from fleet.snapshot import ClusterInfo, ClusterInfoCache, SnapshotStore, cluster_info
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer, wait_synced
from propagator.conditions import WrittenStatuses, now_iso, status_changed
from propagator.fleetmanager import statuswriter as fleetstatus
from propagator.fleetmanager.probes import ProbeSchedule
from propagator.observability.metrics import Metrics
from propagator.runtime.bounded import each
from propagator.settings import Settings

log = logging.getLogger(__name__)

HEALTH_MANAGER = "propagator-health"
_DEBOUNCE_S = 0.2
WRITES_IN_FLIGHT = 16
"""Status and taint writes at once in a status pass: a region of members going NotReady
together, or a thousand members registered, is written in a fraction of the time one
write at a time takes, without flooding the hub."""

HANDOFF_S = 1.0
"""Seconds a prober waits for a member's probe (at most half the probe timeout); after
that the member is probed in a task of its own, which waits for the rest of the
timeout, and so are its next probes until it answers in time."""

FRESH_SCAN_REUSE_S = 1.0
"""Seconds a fresh scan of the members serves further decisions. On a stale snapshot every
decision asks for one, each O(members): at 1,000 members a burst of decisions kept the
event loop too busy for the status pass that would have refreshed the snapshot."""


class FleetManager:
    """Runs until cancelled; ``store`` always holds the latest fleet snapshot."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        store: SnapshotStore,
        metrics: Metrics | None = None,
    ) -> None:
        self.hub = hub
        self.metrics = metrics or Metrics()
        self.settings = settings
        self.store = store
        self.policy = HealthPolicy(
            failure_threshold=settings.probe_failure_threshold,
            success_threshold=settings.probe_success_threshold,
            unreachable_after_s=settings.unreachable_after_s,
            readyz_interval_s=settings.probe_readyz_interval_s,
        )
        self.monitors: dict[str, MemberMonitor] = {}
        self.on_monitors: Callable[[Mapping[str, MemberMonitor]], None] | None = None
        """Told (in the event loop) whenever a monitor is added, rebuilt or dropped."""
        self._infos = ClusterInfoCache()
        self._fresh: tuple[float, list[ClusterInfo]] | None = None
        """The last fresh scan and when it was made (time.monotonic())."""
        self.statuses = WrittenStatuses()
        """Per member, the status the hub holds while its watch has not brought the last
        write back; also a status computed equal to the hub's, so the next pass compares
        with the monitor's own discovery and capacity objects (identical ones at once),
        not with the hub's copy element by element."""
        self._capacity_written: dict[str, float] = {}
        """Per member, when its status (and so its capacity) was last written by this
        manager (time.monotonic())."""
        self._capacity_due: float | None = None
        """When the earliest capacity change held back is to be written."""
        self._wake: anyio.Event | None = None
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
        self._passed_at = -math.inf
        """When the last status pass began (time.monotonic())."""
        self.members = Informer(hub, API_VERSION, "MemberCluster", self._on_hub_change)
        self.fleets = Informer(hub, API_VERSION, "Fleet", self._on_hub_change)
        self.secrets = Informer(
            hub, "v1", "Secret", self._on_hub_change, namespace=settings.namespace
        )

    def ready(self) -> bool:
        """True once the hub watches have listed (the controller's /readyz)."""
        return all(i.synced for i in (self.members, self.fleets, self.secrets))

    # -- waking the status pass ------------------------------------------------------------

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _on_hub_change(self, _event: str, _old: Any, _new: Any) -> None:
        self._poke()

    # -- member connections ---------------------------------------------------------------

    def _kubeconfig_of(self, member: dict[str, Any]) -> tuple[str | None, str]:
        """The member's kubeconfig as its Secret holds it (base64: every pass asks, and
        only a changed version is decoded) and the version of that Secret."""
        ref = (member.get("spec") or {}).get("secretRef") or {}
        if ref.get("namespace") != self.settings.namespace:
            return None, f"outside:{ref.get('namespace')}"
        secret = self.secrets.get(f"{ref['namespace']}/{ref.get('name')}")
        if secret is None:
            return None, "missing"
        data = (secret.get("data") or {}).get(ref.get("key", "kubeconfig"))
        return data, str(secret["metadata"].get("resourceVersion"))

    def _sync_monitors(self) -> None:
        """Create, rebuild (Secret or spec.namespaces changed) or drop monitors to match
        the MemberClusters. The registry, told through ``on_monitors``, runs each monitor's
        watches in the member's unit and closes the connection of one dropped or replaced."""
        wanted = {m["metadata"]["name"]: m for m in self.members.snapshot()}
        changed = False
        for name in list(self.monitors):
            if name not in wanted:
                del self.monitors[name]  # its registry unit stops its watches, closes it
                self._shown.pop(name, None)
                self.statuses.forget(name)
                self.metrics.forget_cluster(name)
                changed = True
        for name, member in wanted.items():
            encoded, version = self._kubeconfig_of(member)
            namespaces = namespaces_of(member)
            current = self.monitors.get(name)
            if current is not None and (current.secret_version, current.namespaces) == (
                version,
                namespaces,
            ):
                continue
            changed = True
            monitor = self._monitor(name, encoded, version, namespaces)
            if monitor.config_error and version.startswith("outside:"):
                monitor.config_error = (
                    f"secretRef namespace {version.removeprefix('outside:')!r} is not the "
                    f"controller namespace {self.settings.namespace!r}"
                )
            if current is not None:
                monitor.health = current.health  # a new Secret does not reset readiness
            else:  # taken over: from the last verdict on the hub, until probes say more
                monitor.health = fleetstatus.recorded_health(member, time.monotonic())
            self.monitors[name] = monitor
            self._unprobed.add(name)
        if changed:
            if self._probes_wake is not None:
                self._probes_wake.set()
            if self.on_monitors is not None:
                self.on_monitors(self.monitors)

    def _monitor(
        self, name: str, encoded: str | None, version: str, namespaces: tuple[str, ...]
    ) -> MemberMonitor:
        """A monitor for member ``name`` from its Secret's kubeconfig (base64); whatever
        that holds, a monitor (one that says why it cannot connect, at worst)."""
        try:
            kubeconfig = (
                None
                if encoded is None
                else base64.b64decode(encoded, validate=True).decode(errors="replace")
            )
        except ValueError:  # (the hub's API server never stores that)
            error = "the kubeconfig Secret's data is not base64"
            return MemberMonitor(
                name, version, self.policy, config_error=error, namespaces=namespaces
            )
        return MemberMonitor.from_kubeconfig(
            name,
            kubeconfig,
            version,
            options=self.settings.member_connection(),
            policy=self.policy,
            allow_exec=self.settings.allow_exec_kubeconfigs,
            on_change=self._poke,
            namespaces=namespaces,
        )

    # -- loops ----------------------------------------------------------------------------

    async def _probe_loop(self) -> None:
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
                if self._unprobed or len(self.monitors) != schedule.size:
                    schedule.sync(self.monitors.keys(), now, self._unprobed)
                    self._hanging.intersection_update(self.monitors)
                    self._hanging.difference_update(self._unprobed)  # a new connection
                    self._unprobed = set()
                for name in schedule.take(now):
                    if (monitor := self.monitors.get(name)) is None:
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
        shown = fleetstatus.shown(monitor, now)
        if self._shown.get(monitor.name) != shown:
            self._shown[monitor.name] = shown
            self._poke()
        elif now - self._passed_at >= self.settings.probe_interval_s:
            self._poke()
        due = schedule.done(monitor.name, started)
        if due is not None and (self._probes_due is None or due < self._probes_due):
            assert self._probes_wake is not None
            self._probes_wake.set()

    async def _status_loop(self) -> None:
        while True:
            assert self._wake is not None
            due = self._capacity_due
            with anyio.move_on_after(None if due is None else due - time.monotonic()):
                await self._wake.wait()
            await anyio.sleep(_DEBOUNCE_S)  # let a burst of events settle into one pass
            self._wake = anyio.Event()
            try:
                self._sync_monitors()
                await self.write_status()
            except ApiError as exc:
                log.warning("fleet status pass failed: %s", exc)
                self._poke()  # retry on the next wake-up
                await anyio.sleep(1)
            except Exception:  # a bug, or what a member sent: the pass is tried again
                log.exception("fleet status pass failed")
                self._poke()
                await anyio.sleep(1)

    # -- the status pass -------------------------------------------------------------------

    async def write_status(self) -> None:
        """Write every MemberCluster and Fleet status and taint set that changed (up to
        :data:`WRITES_IN_FLIGHT` at once), then publish a new snapshot if the fleet looks
        different. After a write fails no new one starts, and the pass raises its error."""
        stamp, now = now_iso(), time.monotonic()
        self._passed_at = now
        members = {m["metadata"]["name"]: m for m in self.members.snapshot()}
        written, self._capacity_written = self._capacity_written, {}
        self._capacity_due = None
        writes: list[str] = []
        for name, member in members.items():
            if (last := written.get(name)) is not None:
                self._capacity_written[name] = last
            if self._member_write(name, member, now, stamp) is not None:
                writes.append(name)

        async def write_member(name: str) -> None:
            # Decided again now: what a probe, discovery or the caches brought while the
            # pass wrote others goes in this write, not in one more next pass (at
            # registration most members' discovery and capacity come during a pass).
            at = time.monotonic()
            change = self._member_write(name, members[name], at, now_iso())
            if change is None:
                return
            status, taints = change
            if status is not None:
                await self._patch_status("MemberCluster", name, status)
                self._capacity_written[name] = at
                # Until the watch brings the written object, a pass compares with what
                # was written, not with what the hub held before.
                self.statuses.written(name, members[name], status)
                members[name] = {**members[name], "status": status}
            if taints is not None:
                self.metrics.status_writes.labels("MemberCluster taints").inc()
                await self.hub.apply(
                    {
                        "apiVersion": API_VERSION,
                        "kind": "MemberCluster",
                        "metadata": {"name": name},
                        "spec": {"taints": taints},
                    },
                    field_manager=HEALTH_MANAGER,
                )

        await each(writes, write_member, WRITES_IN_FLIGHT, (ApiError,))
        # The fleets count their members as just written.
        fleets: dict[str, list[str]] = {}
        fleet_writes: list[tuple[str, dict[str, Any]]] = []
        for fleet in self.fleets.snapshot():
            name = fleet["metadata"]["name"]
            fleet_status = fleetstatus.fleet_status(fleet, members, stamp)
            if status_changed(fleet.get("status"), fleet_status):
                fleet_writes.append((name, fleet_status))
            fleets[name] = fleetstatus.fleet_members(fleet, members)

        async def write_fleet(write: tuple[str, dict[str, Any]]) -> None:
            await self._patch_status("Fleet", *write)

        await each(fleet_writes, write_fleet, WRITES_IN_FLIGHT, (ApiError,))
        # The snapshot shows what the hub holds; what was just written comes back through
        # the watch and wakes another pass.
        self._publish(self.members.snapshot(), fleets)

    def _member_write(
        self,
        name: str,
        member: dict[str, Any],
        now: float,
        stamp: str,
    ) -> tuple[dict[str, Any] | None, list[dict[str, str]] | None] | None:
        """What to write of member ``name`` (its new status, its new taints; None: as
        they are) for what its monitor has observed by ``now``, against the status the
        hub holds for it and its last capacity write; None: nothing. A capacity held
        back sets when the status loop wakes for it."""
        monitor = self.monitors.get(name)
        # Built over what the hub holds (the last write, before its watch brings it
        # back), so a condition keeps the transition time written.
        held = self.statuses.held(name, member)
        status = fleetstatus.member_status(self.statuses.as_held(name, member), monitor, stamp)
        self.metrics.cluster_ready.labels(name).set(fleetstatus.is_ready({"status": status}))
        changed: dict[str, Any] | None = None
        last = self._capacity_written.get(name)
        if not status_changed(held, status):
            self.statuses.written(name, member, status)  # equal to the hub's: see statuses
        elif (due := self._capacity_held_back(held, status, last, now)) is not None:
            self._capacity_due = min(due, self._capacity_due or due)
        else:
            changed = status
        taints = fleetstatus.desired_taints(monitor, now)
        retaint = None if taints == fleetstatus.controller_taints(member) else taints
        return None if changed is None and retaint is None else (changed, retaint)

    def _capacity_held_back(
        self,
        held: Mapping[str, Any] | None,
        status: Mapping[str, Any],
        last: float | None,
        now: float,
    ) -> float | None:
        """When a change of ``status`` from ``held`` is to be written, if it changes the
        capacity alone and the last write was less than ``capacity_status_interval_s``
        ago; None: at once (readiness, discovery and a member's first capacity never
        wait: until then the status says nothing of its room)."""
        interval = self.settings.capacity_status_interval_s
        if last is None or now - last >= interval:
            return None
        if not any(k in (held or {}) for k in fleetstatus.CAPACITY_FIELDS):
            return None
        if status_changed(fleetstatus.without_capacity(held), fleetstatus.without_capacity(status)):
            return None
        return last + interval

    def fresh_clusters(self) -> list[ClusterInfo]:
        """Every member as its probes see it now — the status and taints the next status
        pass would write — for a scheduling decision when the snapshot is stale (status
        writes failing, say). One scan serves the decisions of the next
        ``FRESH_SCAN_REUSE_S``."""
        stamp, now = now_iso(), time.monotonic()
        if self._fresh is not None and now - self._fresh[0] < FRESH_SCAN_REUSE_S:
            return self._fresh[1]
        infos = []
        for member in self.members.snapshot():
            name = member["metadata"]["name"]
            monitor = self.monitors.get(name)
            spec = dict(member.get("spec") or {})
            own = {(t["key"], t["effect"]) for t in fleetstatus.controller_taints(member)}
            users = [
                t for t in spec.get("taints") or [] if (t.get("key"), t.get("effect")) not in own
            ]
            spec["taints"] = users + fleetstatus.desired_taints(monitor, now)
            status = fleetstatus.member_status(member, monitor, stamp)
            infos.append(cluster_info({**member, "spec": spec, "status": status}))
        self._fresh = (now, infos)
        return infos

    async def _patch_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        self.metrics.status_writes.labels(f"{kind} status").inc()
        try:
            await self.hub.merge_patch(
                API_VERSION, kind, name, {"status": status}, subresource="status"
            )
        except ApiError as exc:
            if not exc.not_found:  # deleted meanwhile: nothing to report
                raise

    def _publish(self, members: list[dict[str, Any]], fleets: dict[str, list[str]]) -> None:
        infos = {info.name: info for info in self._infos.infos(members)}
        current = self.store.current()
        same_fleets = {k: frozenset(v) for k, v in fleets.items()} == dict(current.fleets)
        if dict(current.clusters) == infos and same_fleets and current.generation:
            self.store.confirm()
            return
        snapshot = self.store.publish(infos.values(), fleets)
        self.metrics.snapshot_generation.set(snapshot.generation)
        ready = sum(i.ready for i in infos.values())
        self.metrics.snapshot_clusters.set(len(infos))
        self.metrics.snapshot_ready_clusters.set(ready)
        log.info("fleet snapshot %d: %d clusters, %d ready", snapshot.generation, len(infos), ready)

    async def run(
        self,
        *,
        task_status: Any = anyio.TASK_STATUS_IGNORED,
        started: Callable[[], None] | None = None,
    ) -> None:
        """Watch, probe and write status until cancelled."""
        self._wake, self._probes_wake = anyio.Event(), anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                for informer in (self.members, self.fleets, self.secrets):
                    tg.start_soon(informer.run)
                await wait_synced([self.members, self.fleets, self.secrets])
                task_status.started()
                if started:
                    started()
                self._sync_monitors()
                tg.start_soon(self._probe_loop)
                tg.start_soon(self._status_loop)
        finally:
            for informer in (self.members, self.fleets, self.secrets):
                informer.stop()
