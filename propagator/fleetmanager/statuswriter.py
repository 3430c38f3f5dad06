"""The status pass: every MemberCluster and Fleet status and taint set that changed
written (a member's capacity alone at most every ``capacity_status_interval_s``), then the
fleet snapshot published; and the same view of the members, fresh, for a decision when
the snapshot is stale."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from api.common import API_VERSION
from fleet.member import MemberMonitor
from fleet.snapshot import ClusterInfo, cluster_info
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer
from propagator.conditions import WrittenStatuses, now_iso, status_changed
from propagator.fleetmanager import memberstatus
from propagator.fleetmanager.publisher import SnapshotPublisher
from propagator.observability.metrics import Metrics
from propagator.runtime.bounded import each
from propagator.runtime.shardplan import fleet_key, member_key
from propagator.settings import Settings

HEALTH_MANAGER = "propagator-health"
WRITES_IN_FLIGHT = 16
"""Status and taint writes at once in a status pass: a region of members going NotReady
together, or a thousand members registered, is written in a fraction of the time one
write at a time takes, without flooding the hub."""
FRESH_SCAN_REUSE_S = 1.0
"""Seconds a fresh scan of the members serves further decisions. On a stale snapshot every
decision asks for one, each O(members): at 1,000 members a burst of decisions kept the
event loop too busy for the status pass that would have refreshed the snapshot."""


class StatusWriter:
    """Writes what the monitors observed to the hub, and publishes the snapshot."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        metrics: Metrics,
        member_clusters: Informer,
        fleets: Informer,
        monitors: Mapping[str, MemberMonitor],
        publisher: SnapshotPublisher,
    ) -> None:
        self.hub = hub
        self.settings = settings
        self.metrics = metrics
        self.member_clusters = member_clusters
        self.fleets = fleets
        self.monitors = monitors
        self.publisher = publisher
        self.owns: Callable[[str], bool] = lambda _key: True
        """Whether this replica writes a shard key's status (``member/<name>``,
        ``fleet/<name>``: shards divide them)."""
        self.statuses = WrittenStatuses()
        """Per member, the status the hub holds while its watch has not brought the last
        write back; also a status computed equal to the hub's, so the next pass compares
        with the monitor's own discovery and capacity objects (identical ones at once),
        not with the hub's copy element by element."""
        self._capacity_written: dict[str, float] = {}
        """Per member, when its status (and so its capacity) was last written by this
        manager (time.monotonic())."""
        self.capacity_due: float | None = None
        """When the earliest capacity change held back is to be written."""
        self.passed_at = -math.inf
        """When the last status pass began (time.monotonic())."""
        self._fresh: tuple[float, list[ClusterInfo]] | None = None
        """The last fresh scan and when it was made (time.monotonic())."""

    def forget(self, name: str) -> None:
        """Member ``name`` is gone."""
        self.statuses.forget(name)
        self.metrics.forget_cluster(name)

    async def write(self) -> None:
        """Write every MemberCluster and Fleet status and taint set that changed (up to
        :data:`WRITES_IN_FLIGHT` at once), then publish a new snapshot if the fleet looks
        different. After a write fails no new one starts, and the pass raises its error."""
        stamp, now = now_iso(), time.monotonic()
        self.passed_at = now
        members = {m["metadata"]["name"]: m for m in self.member_clusters.snapshot()}
        written, self._capacity_written = self._capacity_written, {}
        self.capacity_due = None
        writes: list[str] = []
        for name, member in members.items():
            if (last := written.get(name)) is not None:
                self._capacity_written[name] = last
            if not self.owns(member_key(name)):
                continue
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
            fleets[name] = memberstatus.fleet_members(fleet, members)
            if not self.owns(fleet_key(name)):
                continue
            fleet_status = memberstatus.fleet_status(fleet, members, stamp)
            if status_changed(fleet.get("status"), fleet_status):
                fleet_writes.append((name, fleet_status))

        async def write_fleet(write: tuple[str, dict[str, Any]]) -> None:
            await self._patch_status("Fleet", *write)

        await each(fleet_writes, write_fleet, WRITES_IN_FLIGHT, (ApiError,))
        # The snapshot shows what the hub holds; what was just written comes back through
        # the watch and wakes another pass.
        self.publisher.publish(self.member_clusters.snapshot(), fleets)

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
        unprobed = monitor is not None and monitor.usable and monitor.health.ready is None
        if unprobed and memberstatus.has_verdict(held):
            # Not probed yet here (a start, a member taken over from another replica, a
            # new Secret): what the hub holds stands until a verdict.
            return None
        status = memberstatus.member_status(self.statuses.as_held(name, member), monitor, stamp)
        self.metrics.cluster_ready.labels(name).set(memberstatus.is_ready({"status": status}))
        changed: dict[str, Any] | None = None
        last = self._capacity_written.get(name)
        if not status_changed(held, status):
            self.statuses.written(name, member, status)  # equal to the hub's: see statuses
        elif (due := self._capacity_held_back(held, status, last, now)) is not None:
            self.capacity_due = min(due, self.capacity_due or due)
        else:
            changed = status
        taints = memberstatus.desired_taints(monitor, now)
        retaint = None if taints == memberstatus.controller_taints(member) else taints
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
        if not any(k in (held or {}) for k in memberstatus.CAPACITY_FIELDS):
            return None
        if status_changed(
            memberstatus.without_capacity(held), memberstatus.without_capacity(status)
        ):
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
        for member in self.member_clusters.snapshot():
            name = member["metadata"]["name"]
            if not self.owns(member_key(name)):
                infos.append(cluster_info(member))  # as its own replica wrote it
                continue
            monitor = self.monitors.get(name)
            spec = dict(member.get("spec") or {})
            own = {(t["key"], t["effect"]) for t in memberstatus.controller_taints(member)}
            users = [
                t for t in spec.get("taints") or [] if (t.get("key"), t.get("effect")) not in own
            ]
            spec["taints"] = users + memberstatus.desired_taints(monitor, now)
            status = memberstatus.member_status(member, monitor, stamp)
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
