"""The application reconcile as a flat pipeline: validate → resolve → failover decision →
place (within the tenant's quota, placed again without the clusters where the rendering
asks too much) → render → tenant boundary and quota check → canary commit → record the
work → status; or, once the application is being deleted, its removal everywhere.

Each step takes values and returns values (the :class:`Plan` accumulates what the status
reports); a step that stops the plan raises :class:`Stop` with the conditions it adds.
Errors have one channel: a reconcile returns a :class:`Result` (the status says what went
wrong, if anything) or raises — :class:`Requeue` for a failure already reported and worth
retrying, anything else for a bug or a hub that refused a write.

The reconcile does not talk to the members: it records a :class:`ClusterWork` per cluster
in the work table and queues the clusters whose work changed on their member's own sync
queue. The member syncs report back, and a status refresh (no resolve, schedule or
render: the last :class:`Plan` with the current sync states) writes the status when it
changed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import trace
from pydantic import ValidationError

from api.application import ApplicationPropagation
from api.finalizerpolicy import FINALIZER
from fleet.snapshot import ClusterInfo
from fleet.snapshotstore import SnapshotStore
from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.keys import cache_key
from propagator.canary.analysis import Analysis
from propagator.canary.driver import CanaryDriver
from propagator.canary.plan import CanaryPlan
from propagator.canary.running import condition_of
from propagator.charts.releases import ChartError, ChartReleases
from propagator.charts.store import ChartStore
from propagator.failover.decisions import unanswered
from propagator.failover.driver import FailoverDriver, FailoverPass
from propagator.observability.metrics import Metrics
from propagator.observability.tracing import current_span_context
from propagator.propagation.appwrites import ApplicationWrites
from propagator.propagation.charts import chart_stop, charts_condition
from propagator.propagation.choose import Chooser, Chosen, forbidden
from propagator.propagation.dependencies import (
    DependencyError,
    bring,
    dependencies_condition,
)
from propagator.propagation.placement import Placer
from propagator.propagation.plan import Given, Plan, Requeue, Result, Stop, heal_asked
from propagator.propagation.removal import Removal
from propagator.propagation.rendering import Renderer, served_by
from propagator.propagation.report import plan_status
from propagator.propagation.resolve import resolve
from propagator.propagation.statusnotes import note_over_room
from propagator.propagation.workrecord import WorkRecorder, Written, reported, works_for
from propagator.render.helm import ChartRenderer
from propagator.rollout.driver import RolloutDriver, RolloutPlan
from propagator.rollout.status import rollout_condition
from propagator.scheduler import Scheduler
from propagator.settings import Settings
from propagator.tenancy.hubquota import QuotaAdmission
from propagator.tenancy.policy import Forbidden, TenantPolicy, policy_for
from propagator.work.members import MemberView, SyncQueues
from propagator.work.objects import kinds_of
from propagator.work.release import Release, scale_fields
from propagator.work.table import SyncPolicy, WorkTable
from propagator.work.targets import running_targets

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")

STATUS_CATCH_UP_S = 1.0
"""A reconcile with member syncs in flight leaves the status write to their results; this
long at most."""


class Reconciler:
    """Reconciles ApplicationPropagations (several at once, one per key)."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        store: SnapshotStore,
        scheduler: Scheduler,
        admission: QuotaAdmission,
        table: WorkTable,
        view: MemberView,
        queues: SyncQueues,
        metrics: Metrics,
        fresh_clusters: Callable[[], Iterable[ClusterInfo]] | None = None,
    ) -> None:
        """``fresh_clusters``: the members as their probes see them now, scanned when the
        snapshot is stale."""
        self.hub = hub
        self.platform = settings.platform()
        self.sync_defaults = settings.sync_defaults()
        self.store = store
        self.admission = admission
        self.table = table
        self.view = view
        self.metrics = metrics
        self.charts = ChartReleases(
            ChartStore(
                settings.chart_fetcher(),
                cache_bytes=settings.chart_cache_bytes,
                resolve_every_s=settings.chart_resolve_interval_s,
            )
        )
        self.renderer = Renderer(
            settings.render_timeout_s,
            settings.render_max_bytes,
            metrics,
            admission.interpreters,
            hub,
            self.charts,
            ChartRenderer(settings.chart_renderer, settings.render_max_bytes),
        )
        self.failover = FailoverDriver(hub, table, view, metrics)
        self.canary = CanaryDriver(
            hub,
            table,
            view,
            metrics,
            Analysis(settings.analysis_address_list()),
            admission.interpreters,
        )
        self.rollout = RolloutDriver(hub, table, view, metrics)
        self.chooser = Chooser(
            hub,
            self.platform,
            admission,
            Placer(scheduler, admission, store, metrics, fresh_clusters),
            self.renderer,
            self.failover,
            self.canary,
            self.rollout,
            metrics,
        )
        self.writes = ApplicationWrites(hub, metrics)
        self.work = WorkRecorder(table, queues, settings.resync_period_s)
        self.removal = Removal(table, view, self.writes, self.work, self.sync_defaults)
        self.plans: dict[str, Plan] = {}

    def capacity_bound(self, key: str) -> bool:
        """Whether a change of the clusters' capacity alone could move ``key``'s placement
        (not planned yet: it could)."""
        plan = self.plans.get(key)
        return plan is None or plan.capacity_bound

    def forget(self, key: str) -> None:
        self.plans.pop(key, None)
        self.writes.forget(key)
        self.renderer.forget(key)
        self.table.forget(key)
        self.canary.forget(key)
        self.rollout.forget(key)

    async def reconcile(self, obj: dict[str, Any], *, replan: bool = True) -> Result:
        """Bring the work for ``obj`` (the cached ApplicationPropagation) in line and write
        its status if it changed. Without ``replan``, and when the last plan was made for
        this generation, only the status is refreshed from the member syncs' results.
        Raises :class:`Requeue` when it failed for a reason worth retrying (the status
        says so)."""
        key = cache_key(obj)
        plan = self.plans.get(key)
        if obj["metadata"].get("deletionTimestamp"):
            done = await self.removal.remove(obj, key)
            if done:
                self.forget(key)
            return Result()
        if not replan and plan is not None and plan.generation == obj["metadata"].get("generation"):
            return Result(replan_after_s=await self._report(obj, key, plan))
        with (
            self.metrics.timed("reconcile"),
            tracer.start_as_current_span("reconcile", attributes={"application": key}),
        ):
            return await self._reconcile(obj, key)

    async def _reconcile(self, obj: dict[str, Any], key: str) -> Result:
        plan = Plan(obj["metadata"].get("generation"))
        previous = obj.get("status") or {}
        try:
            result = await self._plan(obj, key, plan, previous)
        except Stop as stop:
            plan.conditions.extend(stop.conditions)
            result = await self._planned(obj, key, plan, Result())
            if stop.cause is not None:
                log.warning("%s: %s", key, stop.cause)
                if stop.retry:
                    raise Requeue(stop.cause) from stop.cause
            return result
        return await self._planned(obj, key, plan, result)

    async def _plan(
        self, obj: dict[str, Any], key: str, plan: Plan, previous: Mapping[str, Any]
    ) -> Result:
        """The pipeline: each step returns what the next takes, or raises Stop."""
        app = _validated(obj)
        await self._finalizer_on(obj)
        namespace = app.metadata.get("namespace", "default")
        tenant = self.admission.tenant_of(namespace)
        tenancy = policy_for(namespace, tenant, self.platform)
        objects = await self._resolve(app, tenancy, plan)
        last = self.plans.get(key)
        running = running_targets(last.targets if last is not None else [], previous)
        g = Given(
            obj, key, app, objects, self.store.current(), previous, last, running, tenant, tenancy
        )
        step = self.failover.begin(app, last, previous, running, g.snapshot, time.time())
        plan.failover = step.carried  # unchanged unless a placement is made
        chosen = await self.chooser.choose(g, step, plan)
        if chosen.over_room:
            note_over_room(plan, chosen.over_room)
        if chosen.canary is not None:  # it goes ahead: the canary's move is kept
            await self._commit_canary(obj, chosen.canary, step.now)
            plan.canary = chosen.canary
            plan.conditions.append(condition_of(chosen.canary, objects))
        await self._commit_rollout(obj, chosen.rollout, plan, step.now)
        queued = self._record(g, plan, chosen, step)
        # Syncs in flight (queued now, or by an earlier plan of this revision) report back.
        pending = queued or self.table.pending(key)
        replan = self.failover.next_plan(app, step, plan, g.snapshot)
        if app.spec.resources.charts:  # a moved tag or a new version in range is followed
            every = self.charts.store.resolve_every_s
            replan = every if replan is None else min(replan, every)
        return Result(refresh_after_s=STATUS_CATCH_UP_S if pending else None, replan_after_s=replan)

    # -- the steps ------------------------------------------------------------------------

    async def _finalizer_on(self, obj: Mapping[str, Any]) -> None:
        """Put the cleanup finalizer on, unless the hub's admission policy did."""
        finalizers = obj["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            await self.writes.finalizers(obj, [*finalizers, FINALIZER])

    async def _resolve(
        self, app: ApplicationPropagation, tenancy: TenantPolicy, plan: Plan
    ) -> list[dict[str, Any]]:
        """The application's objects, with what its workloads use when it brings that
        along; Stop when the tenant may not read them (Forbidden), they cannot be brought,
        or the hub did not answer (retried)."""
        deps = app.spec.dependencies
        namespace = app.metadata.get("namespace", "default")
        try:
            objects = await resolve(app, self.hub, tenancy)
            if app.spec.resources.charts:
                releases, plan.charts = await self.charts.releases(
                    app.spec.resources.charts, app.metadata["name"], namespace, self.hub
                )
                plan.conditions.append(charts_condition(plan.charts))
                objects += releases
            if deps is None or not deps.propagate:
                return objects
            brought = await bring(
                objects, namespace, self.hub, self.admission.interpreters, deps.roll_on_change
            )
        except Forbidden as exc:
            raise forbidden(exc, self.metrics) from exc
        except ChartError as exc:
            raise chart_stop(exc) from exc
        except DependencyError as exc:
            raise Stop([("Applied", False, "DependenciesRefused", str(exc))], exc) from exc
        except (ApiError, UnknownKind) as exc:
            why = f"resources: {exc}"
            raise Stop([("Applied", False, "ResolveFailed", why)], exc, retry=True) from exc
        plan.conditions.append(dependencies_condition(brought))
        return objects + brought.objects

    async def _commit_canary(self, obj: dict[str, Any], canary: CanaryPlan, now: float) -> None:
        try:
            await self.canary.commit(obj, canary, now)
        except ApiError as exc:  # the new stable revision could not be kept on the hub
            why = f"{exc}"
            raise Stop([("CanaryProgressing", False, "HubError", why)], exc, retry=True) from exc

    async def _commit_rollout(
        self, obj: dict[str, Any], rollout: RolloutPlan, plan: Plan, now: float
    ) -> None:
        try:
            note = await self.rollout.commit(obj, rollout, now)
        except ApiError as exc:  # the spec's revision could not be kept on the hub
            why = f"revisions: {exc}"
            raise Stop([("Applied", False, "HubError", why)], exc, retry=True) from exc
        plan.rollout = rollout
        plan.conditions.append(rollout_condition(rollout, note))

    def _record(self, g: Given, plan: Plan, chosen: Chosen, step: FailoverPass) -> bool:
        """Record the plan's work per cluster (and the removals from those it leaves);
        returns whether member syncs were queued."""
        key, app, previous = g.key, g.app, g.previous
        moved = chosen.moved
        plan.targets, plan.rendered, plan.revisions = (
            chosen.targets,
            moved.rendered,
            moved.revisions,
        )
        plan.failover.moves = moved.kept
        plan.desired_kinds = set().union(*(kinds_of(o) for o in moved.rendered.values()))
        plan.kinds = plan.desired_kinds | set(previous.get("propagatedKinds") or [])
        leaving = self.work.leaving(key, previous, {t.cluster for t in chosen.targets})
        plan.removed = [c for c in leaving if c not in moved.kept]
        plan.unanswered = unanswered(plan.removed, g.snapshot, step.now)
        plan.heal = heal_asked(g.obj)
        works = works_for(
            key,
            Written(
                str(g.obj["metadata"].get("uid", "")),
                SyncPolicy.of(app.spec.rollout, self.sync_defaults),
                frozenset(plan.kinds),
                app.spec.conflict_resolution == "Adopt",
                current_span_context(),
                Release(
                    tuple(app.spec.member_owned),
                    scale_fields(
                        g.objects,
                        self.admission.interpreters,
                        served_by(g.snapshot, chosen.targets, g.objects),
                    ),
                ),
                app.spec.drift_policy == "Heal",
                plan.heal,
                chosen.rollout.held,
                app.spec.suspend,
            ),
            [t.cluster for t in chosen.targets],
            moved.rendered,
            plan.revisions,
            plan.removed,
        )
        return self.work.record(key, works, reported(previous) if g.last is None else None)

    # -- the status -----------------------------------------------------------------------

    async def _planned(self, obj: dict[str, Any], key: str, plan: Plan, result: Result) -> Result:
        """Keep the plan and write the status, unless member syncs were just queued (their
        results will, or the catch-up refresh)."""
        self.plans[key] = plan
        if result.refresh_after_s is None:
            due = await self._report(obj, key, plan)
            if due is not None:
                soonest = min(due, result.replan_after_s or due)
                return dataclasses.replace(result, replan_after_s=soonest)
        return result

    async def _report(self, obj: dict[str, Any], key: str, plan: Plan) -> float | None:
        """Write the status of ``plan`` with the current sync states (if it changed);
        returns when the application must be planned again for failover, if it must."""
        now = time.time()
        status = plan_status(self.writes.as_held(key, obj), plan, self.table, self.view, now)
        await self.writes.status(obj, status)
        namespace = obj["metadata"].get("namespace", "default")
        due = [
            self.failover.refresh_due(key, plan, status, namespace, now),
            self.canary.due(key, plan, now),
            self.rollout.due(key, plan, now),
        ]
        return min((d for d in due if d is not None), default=None)


def _validated(obj: Mapping[str, Any]) -> ApplicationPropagation:
    """The application's spec, or Stop (InvalidSpec) naming every problem."""
    try:
        return ApplicationPropagation.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise Stop([("Scheduled", False, "InvalidSpec", problems)], ValueError(problems)) from exc
