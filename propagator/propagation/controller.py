"""The propagation controller's runtime: watches, work queue, workers, resync.

ApplicationPropagations are queued when their spec (or deletion, finalizers, annotations)
changes, when a hub object one of them selects changes, when a cluster of their Fleet
changes in the fleet snapshot (readiness, taints, capacity, membership), when a
TenantQuota or the labels of their namespace change, when a workload they propagated
changes on a member (health), and every resync period. Workers take keys from the queue;
a key is never reconciled twice at once, and a failed reconcile comes back after a per-key
backoff.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from api.common import API_VERSION
from api.selectors import LabelSelector
from fleet.connection import ApiError, KubeConnection
from fleet.informer import Informer, key_of, wait_synced
from fleet.snapshot import FleetSnapshot, SnapshotStore
from propagator.fleetmanager import FleetManager
from propagator.observability.metrics import Metrics
from propagator.propagation.reconcile import Reconciler
from propagator.propagation.workloads import WorkloadWatches
from propagator.runtime.workqueue import WorkQueue
from propagator.scheduler import Profile, Scheduler
from propagator.settings import Settings

log = logging.getLogger(__name__)

_CIRCUIT_VALUES = {"closed": 0, "half-open": 1, "open": 2}
_HOUSEKEEPING_S = 1.0


def _namespace_labels(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "labels": meta.get("labels") or {},
            "resourceVersion": meta.get("resourceVersion"),
        }
    }


def _spec_changed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether an update matters to the controller (its own status writes do not)."""
    if old is None or new is None:
        return True
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    return any(
        before.get(k) != after.get(k)
        for k in ("generation", "deletionTimestamp", "finalizers", "annotations", "labels")
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
    ) -> None:
        self.hub = hub
        self.settings = settings
        self.store = store
        self.manager = manager
        self.metrics = metrics
        self.queue = WorkQueue(max_delay_s=settings.requeue_max_delay_s)
        self.limiter = anyio.CapacityLimiter(settings.max_concurrency)
        self.apps = Informer(hub, API_VERSION, "ApplicationPropagation", self._on_app)
        self.quotas = Informer(hub, API_VERSION, "TenantQuota", self._on_quota)
        # Namespace labels decide which TenantQuota (namespaceSelector) owns an application.
        self.namespaces = Informer(
            hub, "v1", "Namespace", self._on_namespace, transform=_namespace_labels
        )
        self.selected: dict[tuple[str, str], Informer] = {}
        self.workloads = WorkloadWatches(self._on_workload)
        self.reconciler = Reconciler(
            hub,
            settings,
            store,
            Scheduler(
                profile,
                stale_after_s=settings.snapshot_stale_after_s,
                fresh_for_s=settings.snapshot_fresh_for_s,
            ),
            manager.monitors.get,
            self.quotas.snapshot,
            lambda ns: (self.namespaces.get(ns) or {}).get("metadata", {}).get("labels") or {},
            self.workloads,
            metrics,
            self.limiter,
        )
        metrics.queue_depth.set_function(lambda: len(self.queue))
        metrics.operations_in_flight.set_function(lambda: self.limiter.borrowed_tokens)
        self._token: Any = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._watch_limiter = anyio.CapacityLimiter(1000)
        self._workers_started = False
        self._workers_done = anyio.Event()

    def ready(self) -> bool:
        return all(i.synced.is_set() for i in (self.apps, self.quotas, self.namespaces))

    # -- events (from watch threads) ------------------------------------------------------

    def _in_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the event loop: the queue and what is known applied live there."""
        with contextlib.suppress(RuntimeError):  # the event loop is gone: shutting down
            anyio.from_thread.run_sync(fn, token=self._token)

    def _enqueue(self, *keys: str) -> None:
        def add() -> None:
            for key in keys:
                self.queue.add(key)

        self._in_loop(add)

    def _keys(self, predicate: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[str]:
        return [key_of(a) for a in self.apps.snapshot() if predicate(a)]

    def _on_app(self, event: str, old: Any, new: Any) -> None:
        key = key_of(new or old)
        if event == "DELETED":
            self._in_loop(lambda: self.reconciler.members.forget(key))
        elif _spec_changed(old, new):
            self._enqueue(key)

    def _on_quota(self, _event: str, _old: Any, _new: Any) -> None:
        self._enqueue(*self._keys())

    def _on_namespace(self, _event: str, old: Any, new: Any) -> None:
        labels = [((o or {}).get("metadata") or {}).get("labels") for o in (old, new)]
        if labels[0] != labels[1]:  # the namespace may belong to another tenant now
            name = (new or old)["metadata"]["name"]
            self._enqueue(*self._keys(lambda a: a["metadata"].get("namespace") == name))

    def _on_workload(self, cluster: str, key: str, event: str) -> None:
        def forget_and_add() -> None:
            if event == "DELETED":  # something removed it: read the member back
                self.reconciler.members.forget(key, cluster)
            self.queue.add(key)

        self._in_loop(forget_and_add)

    def _on_selected(self, kind_key: tuple[str, str], _event: str, old: Any, new: Any) -> None:
        meta = (new or old).get("metadata") or {}
        api_version, kind = kind_key  # listed items carry no apiVersion/kind

        def selects(app: dict[str, Any]) -> bool:
            if app["metadata"].get("namespace") != meta.get("namespace"):
                return False
            for sel in ((app.get("spec") or {}).get("resources") or {}).get("selectors") or []:
                if sel.get("apiVersion") != api_version or sel.get("kind") != kind:
                    continue
                if sel.get("name") == meta.get("name"):
                    return True
                labels = sel.get("labelSelector")
                if labels is not None and LabelSelector.model_validate(labels).matches(
                    meta.get("labels") or {}
                ):
                    return True
            return False

        self._enqueue(*self._keys(selects))

    # -- watches started on demand --------------------------------------------------------

    def _start(self, informer: Informer) -> None:
        assert self._task_group is not None
        self._task_group.start_soon(self._run_informer, informer)

    async def _run_informer(self, informer: Informer) -> None:
        await anyio.to_thread.run_sync(
            informer.run, abandon_on_cancel=True, limiter=self._watch_limiter
        )

    def _watch_selected_kinds(self) -> None:
        """One hub watch per kind the applications select (so edits re-trigger them)."""
        for app in self.apps.snapshot():
            for sel in ((app.get("spec") or {}).get("resources") or {}).get("selectors") or []:
                kind = (str(sel.get("apiVersion")), str(sel.get("kind")))
                if kind not in self.selected:
                    self.selected[kind] = Informer(
                        self.hub, *kind, functools.partial(self._on_selected, kind)
                    )
                    self._start(self.selected[kind])

    def _housekeeping(self) -> None:
        """Follow member connections with workload watches, publish circuit states."""
        connections = {n: m.connection for n, m in self.manager.monitors.items()}
        for informer in self.workloads.sync(connections):
            self._start(informer)
        self._watch_selected_kinds()
        for name, breaker in list(self.reconciler.members.breakers.items()):
            if name in connections:
                self.metrics.circuit_state.labels(name).set(_CIRCUIT_VALUES[breaker.state()])

    # -- loops ----------------------------------------------------------------------------

    async def _housekeeping_loop(self) -> None:
        while True:
            self._housekeeping()
            await anyio.sleep(_HOUSEKEEPING_S)

    async def _resync_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.resync_period_s)
            for key in self._keys():
                self.queue.add(key)

    async def _snapshot_loop(self) -> None:
        """Queue the applications of every Fleet whose clusters changed."""
        before = self.store.current()
        while True:
            after: FleetSnapshot = await anyio.to_thread.run_sync(
                self.store.wait_for, before.generation, 5.0, abandon_on_cancel=True
            )
            if after.generation == before.generation:
                continue
            changed = {
                n
                for n in set(before.clusters) | set(after.clusters)
                if before.clusters.get(n) != after.clusters.get(n)
            }
            fleets = {
                f
                for f in set(before.fleets) | set(after.fleets)
                if before.fleets.get(f) != after.fleets.get(f)
                or changed & after.fleets.get(f, frozenset())
            }
            before = after
            for app in self.apps.snapshot():
                if (app.get("spec") or {}).get("fleet") in fleets:
                    self.queue.add(key_of(app))

    async def _worker(self) -> None:
        while (key := await self.queue.get()) is not None:
            try:
                obj = self.apps.get(key)
                if obj is None:
                    self.reconciler.members.forget(key)
                    continue
                try:
                    outcome = await self.reconciler.reconcile(obj)
                except Exception as exc:
                    if isinstance(exc, ApiError):  # the hub said no (e.g. a conflict): retry
                        log.warning("%s: reconcile failed: %s", key, exc)
                    else:
                        log.exception("%s: reconcile failed", key)
                    self.metrics.reconciles.labels("error").inc()
                    self.metrics.reconcile_errors.labels(type(exc).__name__).inc()
                    self.queue.retry(key)
                    continue
                if outcome.retry:
                    self.metrics.reconciles.labels("error").inc()
                    self.metrics.reconcile_errors.labels(type(outcome.error).__name__).inc()
                    self.queue.retry(key)
                else:
                    self.metrics.reconciles.labels("success").inc()
                    self.queue.forget(key)
            finally:
                self.queue.done(key)

    async def _workers(self) -> None:
        self._workers_started = True
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(self.settings.workers):
                    tg.start_soon(self._worker)
        finally:
            self._workers_done.set()

    async def drain(self, grace_s: float) -> None:
        """Take no new work; give reconciles in flight ``grace_s`` to finish (and write
        their status)."""
        self.queue.shut_down()
        if not self._workers_started:
            return  # never led, or still starting: nothing in flight
        with anyio.move_on_after(grace_s):
            await self._workers_done.wait()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch and reconcile until cancelled."""
        self._token = anyio.lowlevel.current_token()
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                hub_watches = [self.apps, self.quotas, self.namespaces]
                for informer in hub_watches:
                    self._start(informer)
                await anyio.to_thread.run_sync(
                    wait_synced, hub_watches, None, abandon_on_cancel=True
                )
                # Decisions need the fleet: wait for the fleet manager's first snapshot.
                while self.store.current().generation == 0:
                    await anyio.to_thread.run_sync(
                        self.store.wait_for, 0, 1.0, abandon_on_cancel=True
                    )
                self._housekeeping()
                for key in self._keys():
                    self.queue.add(key)
                task_status.started()
                tg.start_soon(self._workers)
                tg.start_soon(self._housekeeping_loop)
                tg.start_soon(self._resync_loop)
                tg.start_soon(self._snapshot_loop)
        finally:
            self.queue.shut_down()
            for informer in (self.apps, self.quotas, self.namespaces, *self.selected.values()):
                informer.stop()
            self.workloads.stop()
