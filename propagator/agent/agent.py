"""The agent: one Pull member's side of propagation, run in the member.

It watches only its own namespace on the hub (its Works), takes each Work in as the work
of one application (checked as any input, then against what the member allows locally:
:mod:`.allowlist`), and runs it with the hub's own member sync — the registry's unit for
the member (its watch caches, what was last applied, its queue and workers),
:class:`propagator.propagation.membersync.MemberSync` and
:func:`propagator.propagation.clustersync.sync_cluster` — over its local connection. It
heals drift from those caches as the hub does, and reports each Work's outcome and the
member's copies of its objects in the Work's status (written when it changes). The hub
being away changes nothing on the member: the agent keeps its work, heals drift, and
reports once the hub answers again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from api.common import API_VERSION
from api.work import pull_namespace
from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import KindKey, cache_key
from propagator.agent.allowlist import Allowlist
from propagator.conditions import now_iso
from propagator.observability.metrics import Metrics
from propagator.propagation.membersync import MemberSync
from propagator.propagation.routing import route_member_event
from propagator.runtime.memberregistry import Member, MemberRegistry
from propagator.runtime.statuswrites import status_not_written
from propagator.runtime.workqueue import WorkQueue
from propagator.settings import Settings
from propagator.work.objects import member_selector, owner_label_of
from propagator.work.table import SyncState, WorkTable
from propagator.work.workobject import WorkRefused, cluster_work, report_kinds, work_status

log = logging.getLogger(__name__)

REPORT_DELAY_S = 1.0
"""A report of objects' changes waits this long after the first (a rollout's status
changes come in bursts: one status write per Work a second is plenty); a sync's outcome
is reported at once."""


class Agent:
    """One member's agent (see the module); runs until cancelled."""

    def __init__(
        self,
        cluster: str,
        hub: KubeConnection,
        local: KubeConnection,
        settings: Settings,
        allowlist: Allowlist,
        metrics: Metrics,
    ) -> None:
        self.cluster, self.hub, self.settings = cluster, hub, settings
        self.allowlist, self.metrics = allowlist, metrics
        self.namespace = pull_namespace(cluster)
        self.table = WorkTable()
        self.monitor = MemberMonitor(
            cluster,
            "local",
            HealthPolicy(),
            namespaces=tuple(sorted(allowlist.namespaces)),
        )
        self.monitor.watch(local, lambda: None)
        self.sync = MemberSync(
            settings,
            self.table,
            metrics,
            anyio.CapacityLimiter(settings.max_concurrency),
            self._caches,
            self._synced,
        )
        self.registry = MemberRegistry(
            selector=member_selector,
            index=owner_label_of,
            sync=self.sync.sync,
            on_object=self._on_object,
            on_added=self._on_added,
            workers_per_member=settings.member_workers,
            circuit_failure_threshold=settings.circuit_failure_threshold,
            circuit_cool_down_s=settings.circuit_cool_down_s,
            requeue_max_delay_s=settings.requeue_max_delay_s,
        )
        self.works = Informer(hub, API_VERSION, "Work", self._on_work, namespace=self.namespace)
        self.reports = WorkQueue(max_delay_s=settings.requeue_max_delay_s)
        """Status writes to make, by Work name."""
        self._generations: dict[str, tuple[str, int | None]] = {}
        """By application: its Work's name and metadata.generation when taken."""
        self._reported: dict[str, dict[str, Any]] = {}
        """By Work name: the status last written (reportedAt aside)."""
        self._refused: dict[str, SyncState] = {}
        """By application: the Work refused whole (with why), not synced."""
        self._report_kinds: dict[str, frozenset[str]] = {}
        """By application: the kinds whose copies its Work asks to be reported."""

    # -- the member -------------------------------------------------------------------

    @property
    def member(self) -> Member | None:
        return self.registry.get(self.cluster)

    async def _caches(
        self, member: Member, kinds: Iterable[KindKey], timeout_s: float
    ) -> dict[KindKey, Informer]:
        return await self.registry.caches_synced(member, kinds, timeout_s)

    def _on_added(self, member: Member) -> None:
        for app in self.table.apps():
            self._queue(member, app)

    def _queue(self, member: Member, app: str) -> None:
        work = self.table.get(app, self.cluster)
        self.registry.queue(member, app, work.kinds if work is not None else ())

    def _on_object(
        self, member: Member, _event: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        # Every change of a Work's object is reported: health is judged on the hub, by
        # rules (its ResourceInterpreters) the agent does not hold.
        route = route_member_event(member, self.table, old, new, lambda _v, _k: True)
        if route.sync:
            member.queue.add(route.sync)  # drifted: healed as the hub would
        if route.refresh:
            self._report_soon(route.refresh)

    def _synced(self, app: str, _settled: bool = False) -> None:
        self.reports.add(app)

    # -- the hub ----------------------------------------------------------------------

    def _on_work(self, event: str, old: Any, new: Any) -> None:
        obj = new if event != "DELETED" else None
        if obj is None:
            app = str(((old or {}).get("spec") or {}).get("application") or "")
            self._forget(app)  # the hub sent its removal first: nothing left to do
            return
        generation = obj["metadata"].get("generation")
        if old is not None and old["metadata"].get("generation") == generation:
            return  # its status (our own write)
        self._take(obj)

    def _take(self, obj: dict[str, Any]) -> None:
        """Take a Work in: sync it, or report why it is refused."""
        name = str(obj["metadata"].get("name"))
        try:
            work = cluster_work(obj, self.cluster, self.settings.max_concurrency)
        except WorkRefused as exc:
            log.warning("%s", exc)
            app = str((obj.get("spec") or {}).get("application") or name)
            self._refuse(app, name, obj, str(exc))
            return
        generation = obj["metadata"].get("generation")
        self._generations[work.app] = (name, generation if isinstance(generation, int) else None)
        refusals = self.allowlist.refusals(work.objects, work.namespace)
        if refusals:
            message = self.allowlist.explain(refusals)
            log.warning("Work %s: %s", name, message)
            self._refuse(work.app, name, obj, message, work.revision)
            return
        self._refused.pop(work.app, None)
        self._report_kinds[work.app] = report_kinds(obj)
        due = self.table.set_work(
            work.app,
            {self.cluster: work},
            now=time.monotonic(),
            recheck_after_s=self.settings.resync_period_s,
        )
        member = self.member
        if due and member is not None:
            self._queue(member, work.app)
        self._report_soon(work.app)

    def _refuse(
        self, app: str, name: str, obj: Mapping[str, Any], message: str, revision: str = ""
    ) -> None:
        generation = (obj.get("metadata") or {}).get("generation")
        self._generations[app] = (name, generation if isinstance(generation, int) else None)
        revision = revision or str((obj.get("spec") or {}).get("revision") or "")[:128]
        self._refused[app] = SyncState(revision, failed=True, error=message[:4096])
        self.metrics.applies.labels(self.cluster, "failed").inc()
        self.reports.add(app)

    def _forget(self, app: str) -> None:
        self.table.forget(app)
        self.sync.forget(app)
        self._refused.pop(app, None)
        self._report_kinds.pop(app, None)
        name, _ = self._generations.pop(app, ("", None))
        self._reported.pop(name, None)

    def _report_soon(self, app: str) -> None:
        self.reports.add_soon(app, REPORT_DELAY_S)

    def _live(self, app: str) -> list[dict[str, Any]]:
        """The member's cached copies of the application's objects of the kinds its Work
        asks to be reported."""
        member, work = self.member, self.table.get(app, self.cluster)
        if member is None or work is None:
            return []
        kinds = self._report_kinds.get(app, frozenset())
        found = []
        for obj in work.objects:
            api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
            if f"{api_version}/{kind}" not in kinds:
                continue
            cache = member.cached(api_version, kind)
            if cache is None:
                continue
            meta = obj.get("metadata") or {}
            live = cache.get(f"{meta.get('namespace') or work.namespace}/{meta.get('name')}")
            live = live or cache.get(cache_key(obj))
            if live is not None:
                found.append(live)
        return found

    async def _report(self, app: str) -> None:
        """Write the application's Work status, if it changed."""
        name, generation = self._generations.get(app, ("", None))
        state = self._refused.get(app) or self.table.state(app, self.cluster)
        if not name or state is None:
            return
        status = work_status(state, generation, self._live(app), now_iso())
        compared = {k: v for k, v in status.items() if k != "reportedAt"}
        if self._reported.get(name) == compared:
            return
        try:
            await self.hub.merge_patch(
                API_VERSION,
                "Work",
                name,
                {"status": status},
                namespace=self.namespace,
                subresource="status",
            )
        except ApiError as exc:
            if exc.not_found:
                return  # deleted meanwhile
            raise
        self._reported[name] = compared
        self.metrics.status_writes.labels("Work status").inc()
        self._count()

    async def _resync(self) -> None:
        """Every ``resync_period_s``, each Work taken again: a cluster whose last sync is
        that old is synced again (what the watch caches cannot show, as on the hub)."""
        while True:
            await anyio.sleep(self.settings.resync_period_s)
            for obj in self.works.snapshot():
                self._take(obj)

    def _count(self) -> None:
        """The agent_works gauge, by state."""
        counts = dict.fromkeys(("applied", "failed", "pending", "refused"), 0)
        counts["refused"] = len(self._refused)
        for app in self.table.apps():
            state = self.table.state(app, self.cluster)
            if state is not None and app not in self._refused:
                key = "applied" if state.applied else "failed" if state.failed else "pending"
                counts[key] += 1
        for key, value in counts.items():
            self.metrics.agent_works.labels(key).set(value)

    def ready(self) -> str | None:
        """Why the agent is not ready (None: it is): its Works listed, its member up."""
        if not self.works.synced:
            return "its Works on the hub have not listed yet"
        if self.member is None:
            return "its member's connection is not up"
        return None

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the member until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self.registry.run)
                self.registry.sync({self.cluster: self.monitor})
                tg.start_soon(self.works.run)
                tg.start_soon(
                    self.reports.serve,
                    self._report,
                    (ApiError,),
                    status_not_written("Work", log),
                )
                tg.start_soon(self._resync)
                task_status.started()
        finally:
            self.reports.shut_down()
            self.works.stop()
