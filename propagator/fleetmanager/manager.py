"""The fleet manager: turns MemberClusters into live, probed connections, keeps their status
and taints and the Fleets' status current, and publishes the fleet snapshot.

Hub objects are watched (MemberClusters, the Secrets in the controller namespace, Fleets);
the monitors follow them (:mod:`.monitors`); each member is probed every
``probe_interval_s`` on its own clock (:mod:`.prober`), and its nodes and pods watched by
its unit in the member registry. Any change — a probe's verdict, discovery, capacity, the
hub's objects — wakes one status pass (:mod:`.statuswriter`), which writes only what
differs and publishes the snapshot (:mod:`.publisher`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from api.common import API_VERSION
from api.work import WORK_LABEL
from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from fleet.snapshot import ClusterInfo
from fleet.snapshotstore import SnapshotStore
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer, wait_synced
from propagator.fleetmanager.memberstatus import recorded_health
from propagator.fleetmanager.monitors import Monitors
from propagator.fleetmanager.prober import Prober
from propagator.fleetmanager.publisher import SnapshotPublisher
from propagator.fleetmanager.statuswriter import StatusWriter
from propagator.observability.metrics import Metrics
from propagator.runtime.ownership import Ownership
from propagator.runtime.shardplan import bucket_of, member_key
from propagator.settings import Settings

log = logging.getLogger(__name__)

_DEBOUNCE_S = 0.2


class FleetManager:
    """Runs until cancelled; ``store`` always holds the latest fleet snapshot."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        store: SnapshotStore,
        metrics: Metrics | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        """``ownership``: which members this replica probes and which statuses it writes
        (shards); default all."""
        self.ownership = ownership or Ownership()
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
        self.on_monitors: Callable[[Mapping[str, MemberMonitor]], None] | None = None
        """Told (in the event loop) whenever a monitor is added, rebuilt or dropped."""
        self._wake: anyio.Event | None = None
        self.member_clusters = Informer(hub, API_VERSION, "MemberCluster", self._on_hub_change)
        self.fleets = Informer(hub, API_VERSION, "Fleet", self._on_hub_change)
        self.secrets = Informer(
            hub, "v1", "Secret", self._on_hub_change, namespace=settings.namespace
        )
        # The Pull members' heartbeats (label-selected: no other Lease is read).
        self.leases = Informer(
            hub, "coordination.k8s.io/v1", "Lease", self._on_lease, label_selector=WORK_LABEL
        )
        self._monitors = Monitors(
            settings, self.policy, self.member_clusters, self.secrets, self._poke, self.leases
        )
        self.monitors = self._monitors.monitors
        self.status = StatusWriter(
            hub,
            settings,
            self.metrics,
            self.member_clusters,
            self.fleets,
            self.monitors,
            SnapshotPublisher(store, self.metrics),
        )
        self.prober = Prober(settings, self.metrics, self.monitors, self.status, self._poke)
        self.status.owns = self.ownership.owns
        self.prober.owns = lambda name: self.ownership.owns(member_key(name))
        self.ownership.on_gained.append(self._owners_changed)
        self.ownership.on_released.append(self._owners_changed)

    @property
    def _informers(self) -> tuple[Informer, ...]:
        return (self.member_clusters, self.fleets, self.secrets, self.leases)

    def ready(self) -> bool:
        """True once the hub watches have listed (the controller's /readyz)."""
        return all(i.synced for i in self._informers)

    def fresh_clusters(self) -> list[ClusterInfo]:
        """Every member as its probes see it now (see :meth:`StatusWriter.fresh_clusters`)."""
        return self.status.fresh_clusters()

    def _owners_changed(self, buckets: frozenset[int]) -> None:
        """Members taken or let go: a member taken starts from the verdict its last owner
        wrote (this replica's monitor of it was never probed here, and what it recorded
        at its making may be long past) and is probed at once; what changed is written."""
        moved = {n for n in self.monitors if bucket_of(member_key(n)) in buckets}
        taken = {n for n in moved if self.prober.owns(n)}
        for name in taken:
            monitor, member = self.monitors.get(name), self.member_clusters.get(name)
            if monitor is not None and member is not None and monitor.mode != "Pull":
                monitor.health = recorded_health(member, time.monotonic())
        self.prober.owners_changed(taken)
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _on_hub_change(self, _event: str, _old: Any, _new: Any) -> None:
        self._poke()

    def _on_lease(self, event: str, old: Any, new: Any) -> None:
        self._monitors.lease_changed(None if event == "DELETED" else new)

    def _sync_monitors(self) -> None:
        """Monitors to match the MemberClusters. The registry, told through
        ``on_monitors``, runs each monitor's watches in the member's unit and closes the
        connection of one dropped or replaced."""
        changes = self._monitors.sync()
        if not changes:
            return
        for name in changes.dropped:
            self.status.forget(name)
        self.prober.monitors_changed(changes.made, changes.dropped)
        if self.on_monitors is not None:
            self.on_monitors(self.monitors)

    async def _status_loop(self) -> None:
        while True:
            assert self._wake is not None
            due = self.status.capacity_due
            with anyio.move_on_after(None if due is None else due - time.monotonic()):
                await self._wake.wait()
            await anyio.sleep(_DEBOUNCE_S)  # let a burst of events settle into one pass
            self._wake = anyio.Event()
            try:
                self._sync_monitors()
                await self.status.write()
                self.metrics.shard_members.set(sum(1 for n in self.monitors if self.prober.owns(n)))
            except ApiError as exc:
                log.warning("fleet status pass failed: %s", exc)
                self._poke()  # retry on the next wake-up
                await anyio.sleep(1)
            except Exception:  # a bug, or what a member sent: the pass is tried again
                log.exception("fleet status pass failed")
                self._poke()
                await anyio.sleep(1)

    async def run(
        self,
        *,
        task_status: Any = anyio.TASK_STATUS_IGNORED,
        started: Callable[[], None] | None = None,
    ) -> None:
        """Watch, probe and write status until cancelled."""
        self._wake = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                for informer in self._informers:
                    tg.start_soon(informer.run)
                await wait_synced(list(self._informers))
                task_status.started()
                if started:
                    started()
                self._sync_monitors()
                tg.start_soon(self.prober.run)
                tg.start_soon(self._status_loop)
        finally:
            for informer in self._informers:
                informer.stop()
