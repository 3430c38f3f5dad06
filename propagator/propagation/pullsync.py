"""The hub's side of Pull members: each (application, cluster)'s work written as a Work in
the cluster's hub namespace, and what its agent reports taken back into the work table.

A Push member's sync writes to the member; a Pull member's writes one Work (when what it
holds differs), and its agent — which runs the same member sync there — reports the
outcome in the Work's status: in line, failed, conflicts, drift, and its copies of the
objects, from which health is judged here by the same rules as for a Push member's
caches (:meth:`PullWorks.cached`). The report is an answer from a member, checked and
bounded as any (:func:`propagator.work.workobject.reported`); it counts only for the
Work's current generation and the revision the hub wants. A Work nobody wants any more
(its application forgot it, or moved off the cluster) is deleted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import ValidationError

from api.common import API_VERSION
from api.work import (
    WORK_LABEL,
    WorkSpec,
    WorkStatus,
    cluster_of_namespace,
    pull_namespace,
    work_name,
)
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import cache_key
from propagator.observability.metrics import Metrics
from propagator.runtime.ownership import Hold, always
from propagator.runtime.workqueue import WorkQueue
from propagator.work.table import ClusterWork, WorkTable
from propagator.work.workobject import reported, work_object

log = logging.getLogger(__name__)

WORK_MANAGER = "propagator-work"
"""The field manager of the Works the hub writes."""
MAX_WORK_BYTES = 1024 * 1024
"""A Work's size at most (its JSON): etcd keeps an object within 1.5 MiB by default, and
the API server adds its metadata and managed fields."""
SWEEP_EVERY_S = 60.0


@dataclass
class ReportedCache:
    """A Pull member's objects as its agent last reported them, by kind: read as a watch
    cache is (``synced``, ``get``) by the health rules."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    synced: bool = True

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)


def _key(cluster: str, app: str) -> str:
    return f"{cluster}/{app}"  # (a cluster name has no '/')


class PullWorks:
    """Writes Pull members' Works and takes their agents' reports; runs until cancelled."""

    def __init__(
        self,
        hub: KubeConnection,
        table: WorkTable,
        metrics: Metrics,
        on_result: Callable[[str, bool], None],
        on_drift: Callable[[ClusterWork, Sequence[str]], Awaitable[None]] | None = None,
        workers: int = 16,
        interprets: Callable[[str, str], bool] = lambda _v, _k: True,
        hold: Hold = always,
    ) -> None:
        """``on_result(app, settled)``: an agent reported on ``app`` (``settled``: its
        cluster is in line or failed where it was neither); ``on_drift``: told of drift
        an agent found first; ``workers``: Works written at once; ``interprets(apiVersion,
        kind)``: whether the kind's copies matter (its health or status rules)."""
        self.hub, self.table, self.metrics = hub, table, metrics
        self.interprets = interprets
        self.hold = hold
        self.workers = workers
        self.on_result, self.on_drift = on_result, on_drift
        self.queue = WorkQueue()
        self.works = Informer(
            hub,
            API_VERSION,
            "Work",
            self._on_work,
            label_selector=WORK_LABEL,
            index=lambda w: str((w.get("spec") or {}).get("application") or ""),
        )
        self._live: dict[str, dict[tuple[str, str], ReportedCache]] = {}
        """By cluster, then (apiVersion, kind): what its agent reported, per application."""
        self._by_app: dict[tuple[str, str], list[tuple[tuple[str, str], str]]] = {}
        """By (cluster, application): the cache entries its last report made."""
        self._drift_tasks: list[tuple[ClusterWork, list[str]]] = []
        self._wake = anyio.Event()

    # -- what the reconcile asks ----------------------------------------------------------

    def enqueue(self, cluster: str, app: str) -> None:
        """Write ``app``'s work for ``cluster`` (or delete it, when there is none)."""
        self.queue.add(_key(cluster, app))

    def forget(self, app: str) -> None:
        """``app`` is gone: its Works go too."""
        for work in self.works.indexed(app):
            cluster = cluster_of_namespace(str(work["metadata"].get("namespace")))
            if cluster is not None:
                self.queue.add(_key(cluster, app))

    def cached(self, cluster: str) -> Callable[[str, str], ReportedCache | None]:
        """The reported objects of ``cluster`` as caches by (apiVersion, kind): unsynced
        until its agent first reported."""
        kinds = self._live.get(cluster)

        def cache(api_version: str, kind: str) -> ReportedCache | None:
            if kinds is None:
                return ReportedCache(synced=False)
            return kinds.get((api_version, kind)) or ReportedCache()

        return cache

    # -- writing --------------------------------------------------------------------------

    async def _publish(self, key: str) -> None:
        cluster, app = key.split("/", 1)
        with self.hold(app) as mine:
            if mine:  # (another replica's application: its Work is that one's to write)
                await self._write(cluster, app)

    async def _write(self, cluster: str, app: str) -> None:
        work = self.table.get(app, cluster)
        namespace, name = pull_namespace(cluster), work_name(app)
        existing = self.works.get(f"{namespace}/{name}")
        if work is None:
            if existing is not None:
                await self._delete(namespace, name, cluster)
            return
        kinds = {(str(o.get("apiVersion")), str(o.get("kind"))) for o in work.objects}
        desired = work_object(work, (f"{v}/{k}" for v, k in kinds if self.interprets(v, k)))
        if existing is not None and _same_spec(existing, desired):
            self._take(existing)  # written before (this controller, or one before it)
            return
        size = len(json.dumps(desired, separators=(",", ":")))
        if size > MAX_WORK_BYTES:
            self._refused(
                work,
                f"its objects for Pull member {cluster} are {size / 2**20:.1f} MiB; a Work "
                f"holds at most {MAX_WORK_BYTES / 2**20:g} MiB (one object on the hub): "
                "nothing was sent",
            )
            return
        self.metrics.work_writes.labels(cluster, "apply").inc()
        try:
            await self.hub.apply(desired, field_manager=WORK_MANAGER)
        except ApiError as exc:
            if exc.retryable:
                raise
            self._refused(work, f"the hub refused its Work: {exc}")

    def _refused(self, work: ClusterWork, reason: str) -> None:
        """The cluster's Work cannot be written (until its work changes): it failed."""
        state = self.table.state(work.app, work.cluster)
        if state is None or self.table.get(work.app, work.cluster) != work:
            return
        was_pending = not state.applied and not state.failed
        self.table.record_failure(
            work.app,
            work.cluster,
            state,
            reason,
            within_retries=False,
            over_quota=False,
            now=time.monotonic(),
        )
        self.metrics.applies.labels(work.cluster, "failed").inc()
        self.on_result(work.app, was_pending)

    async def _delete(self, namespace: str, name: str, cluster: str) -> None:
        self.metrics.work_writes.labels(cluster, "delete").inc()
        try:
            await self.hub.delete(API_VERSION, "Work", name, namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
        self._drop_report(cluster, f"{namespace}/{name}")

    async def _sweep(self) -> None:
        """Delete the Works of applications that no longer want their cluster."""
        while True:
            await anyio.sleep(SWEEP_EVERY_S)
            known = set(self.table.apps())
            for work in self.works.snapshot():
                app = str((work.get("spec") or {}).get("application") or "")
                cluster = cluster_of_namespace(str(work["metadata"].get("namespace")))
                if cluster is not None and app in known and self.table.get(app, cluster) is None:
                    self.queue.add(_key(cluster, app))

    # -- reading the agents' reports ------------------------------------------------------

    def _on_work(self, event: str, old: Any, new: Any) -> None:
        if event == "DELETED" or new is None:
            meta = (old or {}).get("metadata") or {}
            cluster = cluster_of_namespace(str(meta.get("namespace")))
            if cluster is not None:
                self._drop_report(cluster, cache_key(old))
            return
        if (old or {}).get("status") != new.get("status") or old is None:
            self._take(new)

    def _take(self, obj: dict[str, Any]) -> None:
        """Record what the agent reports in ``obj``'s status, if it reports on the work
        the table holds now."""
        meta = obj.get("metadata") or {}
        cluster = cluster_of_namespace(str(meta.get("namespace")))
        app = str((obj.get("spec") or {}).get("application") or "")
        if cluster is None or (meta.get("labels") or {}).get(WORK_LABEL) != cluster:
            return
        work, state = self.table.get(app, cluster), self.table.state(app, cluster)
        if work is None or state is None or meta.get("name") != work_name(app):
            return
        taken = reported(obj)
        if taken.problem is not None:
            if state.error != taken.problem:
                self._refused(work, taken.problem)
            return
        status = taken.status
        if status is None:
            return
        self._keep_report(cluster, app, cache_key(obj), status)
        current = status.observed_generation == meta.get("generation")
        if not current or status.revision != work.revision:
            self.on_result(app, False)  # its health may have changed all the same
            return
        self._record(work, status)

    def _record(self, work: ClusterWork, status: WorkStatus) -> None:
        app, cluster = work.app, work.cluster
        state = self.table.state(app, cluster)
        assert state is not None
        was_pending = not state.applied and not state.failed
        now = time.monotonic()
        if status.applied or status.conflict:
            newly = sorted(set(status.drift) - set(state.drift))
            conflicts = []
            if status.conflict and status.error:
                conflicts = [status.error.removeprefix("conflict: ")]
            state.tries = status.attempts
            self.table.record_applied(
                app, cluster, state, conflicts, now, status.drift, time.time(), status.healed
            )
            self.metrics.applies.labels(cluster, "conflict" if conflicts else "applied").inc()
            if newly and self.on_drift is not None:
                self.metrics.drift_detected.labels(cluster).inc(len(newly))
                self._drift_tasks.append((work, newly))
                self._wake.set()
        elif status.error is not None:
            state.tries = status.attempts
            self.table.record_failure(
                app,
                cluster,
                state,
                status.error,
                within_retries=not status.failed,
                over_quota=status.quota_exceeded,
                now=now,
            )
            if status.failed:
                self.metrics.applies.labels(cluster, "failed").inc()
        self.on_result(app, was_pending and (state.applied or state.failed))

    def _keep_report(self, cluster: str, app: str, work: str, status: WorkStatus) -> None:
        self._drop_report(cluster, work)
        kinds = self._live.setdefault(cluster, {})
        entries = []
        for obj in status.objects:
            meta = obj.get("metadata")
            if not isinstance(meta, dict):
                continue
            kind = (str(obj.get("apiVersion")), str(obj.get("kind")))
            key = cache_key(obj)
            kinds.setdefault(kind, ReportedCache()).objects[key] = obj
            entries.append((kind, key))
        self._by_app[cluster, work] = entries

    def _drop_report(self, cluster: str, work: str) -> None:
        kinds = self._live.get(cluster, {})
        for kind, key in self._by_app.pop((cluster, work), []):
            cache = kinds.get(kind)
            if cache is not None:
                cache.objects.pop(key, None)

    async def _drifts(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            tasks, self._drift_tasks = self._drift_tasks, []
            for work, newly in tasks:
                assert self.on_drift is not None
                try:
                    await self.on_drift(work, newly)
                except ApiError as exc:
                    log.warning("%s: drift on %s not reported: %s", work.app, work.cluster, exc)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch the Works, write them, take their reports, until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.works.run)
                for _ in range(self.workers):
                    tg.start_soon(self.queue.serve, self._publish, (ApiError,), _not_written)
                tg.start_soon(self._sweep)
                tg.start_soon(self._drifts)
                task_status.started()
        finally:
            self.queue.shut_down()
            self.works.stop()


def _not_written(key: str, exc: Exception) -> bool:
    log.warning("Work %s not written (retried): %s", key, exc)
    return True


def _same_spec(existing: dict[str, Any], desired: dict[str, Any]) -> bool:
    """Whether the Work on the hub asks what ``desired`` asks (defaults filled alike)."""
    try:
        return WorkSpec.model_validate(existing.get("spec")) == WorkSpec.model_validate(
            desired["spec"]
        )
    except ValidationError:
        return False
