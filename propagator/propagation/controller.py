"""The propagation controller's runtime: two levels of work.

Applications are planned again (resolve, schedule, render) when their spec (or deletion,
finalizers, annotations) changes, when a hub object one of them selects changes, when a
cluster of their Fleet changes in the fleet snapshot (readiness, taints, capacity,
membership; a change of capacity alone, only those whose placement it can move), when a
TenantQuota or the labels of their namespace change, and every resync period. Their
status is refreshed (no planning) when a member sync reports or a workload they
propagated changes health on a member. A key is never reconciled twice at once, and a
failed reconcile comes back after a per-key backoff.

Member syncs run in the member registry: a queue per member, keyed by application. An
object of ours that changes on a member (anything we set) or disappears there is synced
again at once: drift is healed from the watch caches.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio
import anyio.abc

from api.common import API_VERSION
from api.finalizerpolicy import FINALIZER
from fleet.snapshot import FleetSnapshot
from fleet.snapshotstore import SnapshotStore
from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.informer import Informer, wait_synced
from kube.keys import KindKey, cache_key
from propagator.fleetmanager import FleetManager
from propagator.interpreter.registry import Interpreters
from propagator.observability.metrics import Metrics
from propagator.propagation.driftevent import drift_event
from propagator.propagation.interpreterwatch import InterpreterWatch
from propagator.propagation.membersync import MemberSync
from propagator.propagation.memberview import RegistryView
from propagator.propagation.pullsync import PullWorks
from propagator.propagation.reconcile import Reconciler
from propagator.propagation.routing import fleet_change, route_member_event, to_plan_again
from propagator.propagation.selected import SelectedWatches, picks
from propagator.propagation.workers import ReconcileWorkers
from propagator.render.worker import warm_up
from propagator.runtime.bounded import each
from propagator.runtime.memberregistry import LIMIT_RANGES, Member, MemberRegistry
from propagator.runtime.ownership import Ownership
from propagator.runtime.shardplan import application_key, bucket_of, interpreter_key, tenant_key
from propagator.scheduler import Profile, Scheduler
from propagator.settings import Settings
from propagator.tenancy.hubquota import QuotaAdmission
from propagator.tenancy.keeper import KEPT_KINDS, NamespaceKeeper
from propagator.tenancy.limits import LimitDefaults
from propagator.tenancy.memberquota import RESOURCE_QUOTA, QuotaEnforcer
from propagator.tenancy.policy import TenantPolicy, policy_for
from propagator.tenancy.quotastatus import TenantStatusWriter
from propagator.work.objects import member_selector, owner_label_of
from propagator.work.table import ClusterWork, WorkTable

log = logging.getLogger(__name__)

STATUS_DEBOUNCE_S = 0.02
"""Member results and workload changes within this long make one status refresh."""
STATUS_PROGRESS_S = 0.25
"""While an application's clusters are still to report, its status waits this long per
:data:`PROGRESS_CLUSTERS` of them (at least this long): the progress of a rollout shows,
the write of the last result (made at once) is not held up behind writes of partial
progress on a busy hub, and the hub's work on a large application's progress stays that
of a small one (each write carries, and the hub validates and stores, every cluster's
line, and the controller builds and checks it: 1 s between writes at 100 clusters, 10 s at
1,000; a fixed, shorter wait made the hub spend several times the CPU of a bare loop's
same writes in a rollout to 1,000: docs/benchmarks.md)."""
PROGRESS_CLUSTERS = 25
SHARE_EVERY_S = 5.0
"""How often the applications this replica handles are counted (a metric)."""


def status_refresh_delay(table: WorkTable, app: str, settled: bool) -> float:
    """How long a status refresh of ``app`` waits after a member sync reported
    (``settled``: it settled its cluster) or a workload of it changed: none when that
    settled the last cluster of the work (nothing more is coming: a new application's
    Applied, a change's rollout done); :data:`STATUS_PROGRESS_S` (per
    :data:`PROGRESS_CLUSTERS` clusters) while clusters are still to report; else the
    debounce."""
    if table.pending(app):
        return STATUS_PROGRESS_S * max(1.0, table.clusters(app) / PROGRESS_CLUSTERS)
    return 0.0 if settled else STATUS_DEBOUNCE_S


def _namespace_labels(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "labels": meta.get("labels") or {},
            "resourceVersion": meta.get("resourceVersion"),
        }
    }


def _listed(member: Member, obj: Mapping[str, Any]) -> bool:
    """Whether the member's cache of ``obj``'s kind has listed: the events of its first list
    refresh no status (each application's sync there waits for that list and refreshes its
    status once it is done; a refresh per listed object, after a restart, was a second
    status pass over every application whose objects have health rules)."""
    cache = member.cached(str(obj.get("apiVersion")), str(obj.get("kind")))
    return cache is not None and cache.synced


def _quota_exceeded(app: dict[str, Any]) -> bool:
    conditions = (app.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaExceeded" and c.get("status") == "True" for c in conditions)


def _spec_changed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether an update matters to the controller. Its own writes do not: the status, and
    the finalizer its first plan adds (that plan went on; planning again would render and
    compare everything a second time for nothing). Its finalizer taken away does: the next
    plan puts it back."""
    if old is None or new is None:
        return True
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    ours_removed = FINALIZER in (before.get("finalizers") or []) and FINALIZER not in (
        after.get("finalizers") or []
    )
    return ours_removed or any(
        before.get(k) != after.get(k)
        for k in ("generation", "deletionTimestamp", "annotations", "labels")
    )


class PropagationController:
    """Keeps every ApplicationPropagation applied; runs until cancelled or drained."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        store: SnapshotStore,
        manager: FleetManager,
        profile: Profile,
        metrics: Metrics,
        ownership: Ownership | None = None,
    ) -> None:
        """``ownership``: which applications are this replica's (shards); default all."""
        self.ownership = ownership or Ownership()
        self.hub = hub
        self.settings = settings
        self.store = store
        self.manager = manager
        self.metrics = metrics
        self.platform = settings.platform()
        self.limiter = anyio.CapacityLimiter(settings.max_concurrency)
        self.apps = Informer(hub, API_VERSION, "ApplicationPropagation", self._on_app)
        self.quotas = Informer(hub, API_VERSION, "TenantQuota", self._on_quota)
        # Namespace labels decide which TenantQuota (namespaceSelector) owns an application.
        self.namespaces = Informer(
            hub, "v1", "Namespace", self._on_namespace, transform=_namespace_labels
        )
        self.selected = SelectedWatches(hub, self._on_selected)
        self.interpreters = Interpreters(
            time_limit_s=settings.rule_time_limit_s,
            pause_s=settings.rule_pause_s,
            failed=lambda kind, reason: metrics.rule_failures.labels(kind, reason).inc(),
        )
        self.rules = InterpreterWatch(
            hub, self.interpreters, metrics, lambda: self._enqueue(*self._keys())
        )
        self.table = WorkTable()
        self._tenancy()
        self._member_registry()
        self.reconciler = Reconciler(
            hub,
            settings,
            store,
            Scheduler(
                profile,
                stale_after_s=settings.snapshot_stale_after_s,
                fresh_for_s=settings.snapshot_fresh_for_s,
            ),
            self.admission,
            self.table,
            self.view,
            self.view,
            metrics,
            manager.fresh_clusters,
        )
        self.workers = ReconcileWorkers(
            self.apps,
            self.reconciler,
            metrics,
            settings.workers,
            settings.requeue_max_delay_s,
            self._forget,
            self._hold_app,
            self._release,
        )
        self.enforcer.hold = self.tenant_status.hold = self.rules.hold = self.ownership.hold
        self.keeper.hold = self._hold_app
        self.ownership.on_gained.append(self._gained)
        self.ownership.on_released.append(self._released)
        metrics.queue_depth.set_function(lambda: len(self.workers.queue))
        metrics.member_sync_depth.set_function(
            lambda: sum(len(m.queue) for m in self.registry.units.values())
        )
        metrics.operations_in_flight.set_function(lambda: self.limiter.borrowed_tokens)
        self._warm = False

    def _tenancy(self) -> None:
        """The tenant quotas enforced on the members and checked on the hub, the
        platform's part of tenant namespaces, and the TenantQuota status."""
        namespace_labels = self._namespace_labels
        self.enforcer = QuotaEnforcer(
            self.quotas.snapshot,
            namespace_labels,
            self._cluster_labels,
            self.table,
            self._caches,
            self.settings.cluster_timeout_s,
            lambda tenant: self.tenant_status.changed(tenant),
        )
        self.keeper = NamespaceKeeper(
            self._policy_of, self._caches, self.settings.cluster_timeout_s
        )
        self.limits = LimitDefaults(self._limit_ranges)
        self.admission = QuotaAdmission(
            self.quotas.snapshot,
            namespace_labels,
            self.table,
            self.limits,
            self.metrics,
            self.interpreters,
        )
        store = self.store
        self.tenant_status = TenantStatusWriter(
            self.hub,
            self.quotas.snapshot,
            self.enforcer.usage,
            self.metrics,
            lambda tenant: self.admission.tenant_plans(tenant, store.current()),
        )

    def _member_registry(self) -> None:
        """The member syncs, the registry that runs them per member (with its watch
        caches), and the registry as the reconcile sees it."""
        settings = self.settings
        self.sync = MemberSync(
            settings,
            self.table,
            self.metrics,
            self.limiter,
            self._caches,
            self._refresh,
            self._guard,
            functools.partial(drift_event, self.hub),
            self._hold_app,
        )
        self.registry = MemberRegistry(
            selector=member_selector,
            index=owner_label_of,
            sync=self.sync.sync,
            on_object=self._on_member_object,
            on_added=self._on_member_added,
            on_pods=lambda member, namespace: self.enforcer.pods_changed(member.name, namespace),
            workers_per_member=settings.member_workers,
            circuit_failure_threshold=settings.circuit_failure_threshold,
            circuit_cool_down_s=settings.circuit_cool_down_s,
            requeue_max_delay_s=settings.requeue_max_delay_s,
        )
        self.manager.on_monitors = self.registry.sync
        self.pull = PullWorks(
            self.hub,
            self.table,
            self.metrics,
            self._refresh,
            functools.partial(drift_event, self.hub),
            # Each one write to the hub: as many at once as member operations may be.
            workers=settings.max_concurrency,
            interprets=self.interpreters.interprets,
            hold=self._hold_app,
        )
        self.view = RegistryView(
            self.registry, self.manager.monitors, self.table, self.interpreters, self.pull
        )

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        labels: Mapping[str, str] = (self.namespaces.get(namespace) or {}).get("metadata", {}).get(
            "labels"
        ) or {}
        return labels

    def _limit_ranges(self, cluster: str) -> Informer | None:
        member = self.registry.get(cluster)
        return member.cached(*LIMIT_RANGES) if member else None

    def _cluster_labels(self, cluster: str) -> Mapping[str, str] | None:
        info = self.store.current().clusters.get(cluster)
        return None if info is None else info.labels

    def not_ready(self) -> str | None:
        """Why the controller cannot reconcile at full speed yet, or None: its hub watches
        have listed and its render workers have started (the first applications after a
        start would otherwise wait a second or more for them)."""
        if not all(
            i.synced for i in (self.apps, self.quotas, self.namespaces, self.rules.informer)
        ):
            return "the propagation controller's hub watches have not listed yet"
        if not self._warm:
            return "the render workers are starting"
        return None

    def busy(self) -> bool:
        """Whether an application or a member sync is waiting to run now or running."""
        return self.workers.queue.busy() or any(
            m.queue.busy() for m in self.registry.units.values()
        )

    # -- what the reconcile and the member syncs use --------------------------------------

    async def _caches(
        self, member: Member, kinds: Iterable[KindKey], timeout_s: float
    ) -> dict[KindKey, Informer]:
        return await self.registry.caches_synced(member, kinds, timeout_s)

    def _refresh(self, app: str, settled: bool = False) -> None:
        """Refresh ``app``'s status (a member sync reported, a workload changed): at once,
        or soon (:func:`status_refresh_delay`)."""
        self.workers.refresh(app, status_refresh_delay(self.table, app, settled))

    async def drain(self, grace_s: float) -> None:
        """Take no new work; give reconciles in flight ``grace_s`` to finish (and write
        their status)."""
        await self.workers.drain(grace_s)

    # -- events (every watch calls in the event loop) ------------------------------------

    def _replan_now(self, keys: list[str]) -> None:
        self.workers.replan(keys)

    def _enqueue(self, *keys: str) -> None:
        self._replan_now(list(keys))

    def _keys(self, predicate: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[str]:
        return [cache_key(a) for a in self.apps.snapshot() if predicate(a)]

    def _on_app(self, event: str, old: Any, new: Any) -> None:
        key = cache_key(new or old)
        if event == "DELETED":
            self._forget(key)
        elif _spec_changed(old, new):
            self._replan_now([key])
            if new is not None:
                self.selected.watch([new])

    def _forget(self, key: str) -> None:
        self.reconciler.forget(key)
        self.sync.forget(key)
        self.pull.forget(key)
        self.workers.forget(key)

    # -- shards ---------------------------------------------------------------------------

    def _shard_key(self, app: str) -> str:
        """An application's shard key: its tenant's (a tenant's applications, quotas and
        status stay on one replica), else its own."""
        quota = self.enforcer.tenant_of_app(app)
        return application_key(app) if quota is None else tenant_key(quota["metadata"]["name"])

    def _hold_app(self, app: str) -> AbstractContextManager[bool]:
        if self.ownership.everything:
            return nullcontext(True)
        return self.ownership.hold(self._shard_key(app))

    def _in(self, buckets: frozenset[int]) -> list[str]:
        return [k for k in self._keys() if bucket_of(self._shard_key(k)) in buckets]

    def _gained(self, buckets: frozenset[int]) -> None:
        """Buckets taken: their applications planned now, the status of their tenants and
        ResourceInterpreters written."""
        self.metrics.shard_handoffs.labels("gained").inc(len(buckets))
        self._replan_now(self._in(buckets))
        for quota in self.quotas.snapshot():
            tenant = str(quota["metadata"]["name"])
            if bucket_of(tenant_key(tenant)) in buckets:
                self.tenant_status.changed(tenant)
        for rule in list(self.rules.results):
            if bucket_of(interpreter_key(rule)) in buckets:
                self.rules.queue.add(rule)

    def _released(self, buckets: frozenset[int]) -> None:
        """Buckets let go: what this replica held of their applications goes (nothing on
        the members or the hub changes: the next holder takes them as they are)."""
        self.metrics.shard_handoffs.labels("released").inc(len(buckets))
        for app in self.table.apps():
            if bucket_of(self._shard_key(app)) in buckets:
                self._release(app)

    def _release(self, key: str) -> None:
        """``key`` is another replica's: forget it here, writing nothing."""
        self.reconciler.forget(key)
        self.sync.forget(key)
        self.workers.forget(key)

    async def _share_loop(self) -> None:
        """Count the applications this replica handles (in the event loop: a scrape's
        thread must not walk the caches the loop changes)."""
        while True:
            if self.ownership.everything:
                handled = len(self.apps.snapshot())
            else:
                handled = sum(1 for k in self._keys() if self.ownership.owns(self._shard_key(k)))
            self.metrics.shard_applications.set(handled)
            await anyio.sleep(SHARE_EVERY_S)

    def _policy_of(self, app: str) -> tuple[TenantPolicy, Mapping[str, Any] | None]:
        """An application's tenant policy and TenantQuota (None: it has no tenant)."""
        quota = self.enforcer.tenant_of_app(app)
        return policy_for(app.split("/", 1)[0], quota, self.platform), quota

    async def _guard(self, member: Member, work: ClusterWork) -> None:
        """Before a sync writes into the member's namespaces: the platform's labels and
        defaults there, and the tenant's quotas, at once (each raises ApiError when it
        cannot be written)."""
        guards = (self.keeper.guard, self.enforcer.guard)
        await each(guards, lambda guard: guard(member, work), 2, (ApiError, UnknownKind))

    def _on_quota(self, _event: str, old: Any, new: Any) -> None:
        if (old or {}).get("spec") != (new or {}).get("spec") or old is None or new is None:
            self.keeper.tenant_changed(str((new or old)["metadata"]["name"]))
            self._enqueue(*self._keys())  # limits or namespaces changed: every placement may
            return
        # Only the use changed (our own status write): what waits for room may fit now.
        self._enqueue(*self._keys(_quota_exceeded))

    def _on_namespace(self, _event: str, old: Any, new: Any) -> None:
        labels = [((o or {}).get("metadata") or {}).get("labels") for o in (old, new)]
        if labels[0] != labels[1]:  # the namespace may belong to another tenant now
            name = (new or old)["metadata"]["name"]
            self._enqueue(*self._keys(lambda a: a["metadata"].get("namespace") == name))

    def _on_member_added(self, member: Member) -> None:
        self.registry.cache(member, *LIMIT_RANGES)
        self.limits.changed(member.name)
        for app in self.table.apps_on(member.name):
            self.view.queue(member, app)
            if (quota := self.enforcer.tenant_of_app(app)) is not None:
                self.enforcer.changed(member.name, quota["metadata"]["name"])

    def _on_member_object(
        self, member: Member, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        obj = new or old or {}
        if (obj.get("apiVersion"), obj.get("kind")) == RESOURCE_QUOTA:
            self.enforcer.observed(member.name, old, new)  # its use changed: share again
            return
        if (obj.get("apiVersion"), obj.get("kind")) in KEPT_KINDS:
            self.keeper.observed(member.name, old, new)  # the platform's part, undone?
        if (obj.get("apiVersion"), obj.get("kind")) == LIMIT_RANGES:
            # Defaults changed: what waits for them (or for room) may fit now.
            self.limits.changed(member.name)
            self._enqueue(*self._keys(_quota_exceeded))
            return
        route = route_member_event(member, self.table, old, new, self.interpreters.interprets)
        if route.sync:
            member.queue.add(route.sync)
        if route.refresh and _listed(member, obj):
            self._refresh(route.refresh)

    def _on_selected(self, kind: tuple[str, str], meta: Mapping[str, Any]) -> None:
        self._enqueue(*self._keys(lambda app: picks(app, kind, meta)))

    # -- loops ----------------------------------------------------------------------------

    async def _resync_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.resync_period_s)
            self._replan_now(self._keys())

    async def _snapshot_loop(self) -> None:
        """Plan again the applications of every Fleet whose clusters changed (when only
        their capacity did, those whose placement it can move)."""
        before = self.store.current()
        while True:
            after: FleetSnapshot = await self.store.newer_than(before.generation)
            change, before = fleet_change(before, after), after
            apps = self.apps.snapshot()
            self._replan_now(to_plan_again(change, apps, self.reconciler.capacity_bound))

    async def _warm_up(self) -> None:
        await warm_up()
        self._warm = True

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch and reconcile until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                # The rules first: the first plans judge with the platform's rules.
                hub_watches = [self.apps, self.quotas, self.namespaces, self.rules.informer]
                for informer in hub_watches:
                    tg.start_soon(informer.run)
                await wait_synced(hub_watches)
                # Decisions need the fleet: wait for the fleet manager's first snapshot.
                await self.store.newer_than(0)
                await tg.start(self.registry.run)
                await tg.start(self.pull.run)
                self.registry.sync(self.manager.monitors)
                self.selected.start(tg, self.apps.snapshot())
                self._replan_now(self._keys())
                task_status.started()
                tg.start_soon(self._warm_up)
                tg.start_soon(self.workers.run)
                tg.start_soon(self.enforcer.run, self.registry.get)
                tg.start_soon(self.keeper.run, self.registry.get)
                tg.start_soon(self.tenant_status.run)
                tg.start_soon(self.rules.run)
                tg.start_soon(self._resync_loop)
                tg.start_soon(self._snapshot_loop)
                tg.start_soon(self._share_loop)
        finally:
            self.workers.queue.shut_down()
            self.enforcer.queue.shut_down()
            self.keeper.queue.shut_down()
            self.tenant_status.queue.shut_down()
            self.rules.queue.shut_down()
            for informer in (self.apps, self.quotas, self.namespaces, self.rules.informer):
                informer.stop()
            self.selected.stop()
