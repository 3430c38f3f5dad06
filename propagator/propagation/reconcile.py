"""The application reconcile: resolve, schedule, render, record the work per cluster, and
the status — or, once the application is being deleted, its removal everywhere.

The reconcile does not talk to the members: it records a :class:`ClusterWork` per
cluster in the work table and queues the clusters whose work changed on their member's
own sync queue (``enqueue``). The member syncs report back, and a status refresh (no
resolve, schedule or render: the last :class:`Plan` with the current sync states) writes
the status when it changed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from pydantic import ValidationError

from api.application import ORPHAN_ANNOTATION, ApplicationPropagation, Override
from api.common import API_VERSION, duration_seconds
from api.finalizerpolicy import FINALIZER
from fleet.snapshot import ClusterInfo, FleetSnapshot, SnapshotStore
from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.informer import cache_key
from propagator.canary.analysis import Analysis
from propagator.canary.driver import CanarySteps, condition_of
from propagator.canary.plan import CanaryPlan
from propagator.conditions import WrittenStatuses, by_message, now_iso, some_of
from propagator.failover.decisions import unanswered
from propagator.failover.driver import FailoverSteps
from propagator.failover.state import FailoverDecision
from propagator.observability.metrics import Metrics
from propagator.observability.tracing import current_span_context
from propagator.propagation.placement import FleetNotFound, place
from propagator.propagation.plan import MemberAccess, Outcome, Plan
from propagator.propagation.report import plan_status
from propagator.propagation.resolve import resolve
from propagator.propagation.results import applied_summary, failures
from propagator.propagation.statusbuilder import StatusBuilder
from propagator.render.manifests import ApplicationRef, RenderError
from propagator.render.memo import RenderMemo
from propagator.render.worker import RenderTarget, render_bounded
from propagator.scheduler import Scheduler, demand_of, on_clusters
from propagator.settings import Settings
from propagator.tenancy.accounting import Use
from propagator.tenancy.boundary import check_rendered
from propagator.tenancy.hubquota import QuotaAdmission, QuotaRefusal
from propagator.tenancy.policy import Forbidden, policy_for
from propagator.work.objects import kinds_of
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable
from propagator.work.targets import Target, held_targets, running_targets, targets_of

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")
LOGGED_CLUSTERS = 5
"""Clusters a log line names before it says how many more."""

REMOVAL = "removal"
"""The revision of the work that removes an application from a cluster."""
PLACE_AGAIN_LIMIT = 2
"""How many times an application whose rendering asks more than the tenant's quota leaves
on some clusters is placed again without them before it is refused: each rendering can
show a new one (a templated value, an override, a LimitRange default)."""
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
        members: MemberAccess,
        metrics: Metrics,
        fresh_clusters: Callable[[], Iterable[ClusterInfo]] | None = None,
    ) -> None:
        """``fresh_clusters``: the members as their probes see them now, scanned when the
        snapshot is stale."""
        self.platform = settings.platform()
        self.sync_defaults = settings.sync_defaults()
        self.fresh_clusters = fresh_clusters
        self.hub = hub
        self.settings = settings
        self.store = store
        self.scheduler = scheduler
        self.admission = admission
        self.table = table
        self.members = members
        self.metrics = metrics
        self.failover = FailoverSteps(hub, table, members, metrics)
        self.canary = CanarySteps(
            hub, table, members, metrics, Analysis(settings.analysis_address_list())
        )
        self.plans: dict[str, Plan] = {}
        self.renders = RenderMemo(self._render_bounded)
        self.statuses = WrittenStatuses()

    def capacity_bound(self, key: str) -> bool:
        """Whether a change of the clusters' capacity alone could move ``key``'s placement
        (not planned yet: it could)."""
        plan = self.plans.get(key)
        return plan is None or plan.capacity_bound

    def forget(self, key: str) -> None:
        self.plans.pop(key, None)
        self.statuses.forget(key)
        self.renders.forget(key)
        self.table.forget(key)
        self.canary.forget(key)

    # -- hub writes -----------------------------------------------------------------------

    async def _write_status(self, obj: dict[str, Any], status: dict[str, Any]) -> None:
        meta, key = obj["metadata"], cache_key(obj)
        if not self.statuses.changed(key, obj, status):
            return
        self.metrics.status_writes.labels("ApplicationPropagation status").inc()
        try:
            await self.hub.merge_patch(
                API_VERSION,
                "ApplicationPropagation",
                meta["name"],
                {"status": status},
                namespace=meta.get("namespace"),
                subresource="status",
            )
        except ApiError as exc:
            if not exc.not_found:  # deleted meanwhile: nothing to report
                raise
        else:
            self.statuses.written(key, obj, status)

    async def _set_finalizers(self, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace the finalizers, only if the object is unchanged since it was read."""
        meta = obj["metadata"]
        guarded = {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}
        await self.hub.merge_patch(
            API_VERSION,
            "ApplicationPropagation",
            meta["name"],
            {"metadata": guarded},
            namespace=meta.get("namespace"),
        )

    # -- the reconcile --------------------------------------------------------------------

    async def reconcile(self, obj: dict[str, Any], *, replan: bool = True) -> Outcome:
        """Bring the work for ``obj`` (the cached ApplicationPropagation) in line and write
        its status if it changed. Without ``replan``, and when the last plan was made for
        this generation, only the status is refreshed from the member syncs' results."""
        key = cache_key(obj)
        plan = self.plans.get(key)
        if obj["metadata"].get("deletionTimestamp"):
            return await self._finalize(obj, key)
        if not replan and plan is not None and plan.generation == obj["metadata"].get("generation"):
            return Outcome(False, replan_after_s=await self._report(obj, key, plan))
        with (
            self.metrics.timed("reconcile") as timing,
            tracer.start_as_current_span("reconcile", attributes={"application": key}),
        ):
            outcome = await self._reconcile(obj, key)
            if outcome.error is not None:
                log.warning("%s: %s", key, outcome.error)
            timing.failed = outcome.retry
        return outcome

    async def _reconcile(self, obj: dict[str, Any], key: str) -> Outcome:
        meta = obj["metadata"]
        plan = Plan(meta.get("generation"))
        try:
            app = ApplicationPropagation.model_validate(obj)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            plan.conditions.append(("Scheduled", False, "InvalidSpec", problems))
            return await self._planned(obj, key, plan, Outcome(False, ValueError(problems)))
        if FINALIZER not in (meta.get("finalizers") or []):  # no admission policy added it
            await self._set_finalizers(obj, [*(meta.get("finalizers") or []), FINALIZER])
        namespace = meta.get("namespace", "default")
        tenant = self.admission.tenant_of(namespace)
        tenancy = policy_for(namespace, tenant, self.platform)
        try:
            objects = await resolve(app, self.hub, tenancy)
        except Forbidden as exc:
            return await self._forbidden(obj, key, plan, exc)
        except (ApiError, UnknownKind) as exc:
            plan.conditions.append(("Applied", False, "ResolveFailed", f"resources: {exc}"))
            return await self._planned(obj, key, plan, Outcome(True, exc))
        snapshot = self.store.current()
        previous = obj.get("status") or {}
        last = self.plans.get(key)
        running = running_targets(last.targets if last is not None else [], previous)
        step = self.failover.begin(app, last, previous, running, snapshot, time.time())
        plan.failover = step.carried  # unchanged unless a placement is made
        own, planned = self.admission.use(tenant, key, snapshot)
        over_room: dict[str, str] = {}
        """Clusters where the application as rendered asks more than the tenant's quota
        leaves (a templated value, an override, a LimitRange default) and where it does
        not run yet: placed without."""
        runs_on = {t.cluster for t in running}
        scheduled = len(plan.conditions)
        refusal: QuotaRefusal | None = None
        for attempt in range(PLACE_AGAIN_LIMIT + 1):
            del plan.conditions[scheduled:]  # the last placement's conditions only
            targets = self._place(
                app,
                objects,
                snapshot,
                running,
                plan,
                tenant,
                own,
                planned,
                step.decision,
                avoid=over_room,
            )
            if not targets and refusal is not None:
                # Placed without where it asks too much, nothing is left: refused as it was.
                del plan.conditions[scheduled:]
                plan.conditions.append(("QuotaExceeded", True, refusal.reason, refusal.message))
                _not_applied(plan, previous, refusal.reason, refusal.message)
                return await self._planned(obj, key, plan, Outcome(False))
            if not targets:
                # No fleet, or nothing fits: what runs stays where it is (no apply, no prune).
                _, _, reason, why = next(
                    (c for c in plan.conditions if c[0] == "Scheduled"),
                    ("Scheduled", False, "Unschedulable", "nothing placed"),
                )
                _not_applied(plan, previous, reason, why)
                return await self._planned(obj, key, plan, Outcome(False))
            if attempt == 0:
                plan.failover = step.decision.state
                if app.spec.failover.application is not None:
                    plan.unhealthy_after_s = duration_seconds(
                        app.spec.failover.application.unhealthy_after
                    )
                await self.failover.announce(obj, step)
            try:
                canary = await self.canary.begin(
                    app, obj, objects, targets, snapshot, self.plans.get(key), key, step.now
                )
            except ApiError as exc:  # the stable revision could not be read from the hub
                plan.conditions.append(("CanaryProgressing", False, "HubError", f"{exc}"))
                return await self._planned(obj, key, plan, Outcome(True, exc))
            try:
                moved = await self.failover.render(
                    step,
                    targets,
                    functools.partial(self._render, key, app, objects, snapshot, canary=canary),
                    key,
                    namespace,
                )
            except RenderError as exc:
                plan.conditions.append(
                    ("Applied", False, "RenderFailed", f"{exc}; nothing was applied")
                )
                return await self._planned(obj, key, plan, Outcome(False, exc))
            rendered = moved.rendered
            try:
                await check_rendered(
                    self.hub, tenancy, self.platform, rendered, namespace, moved.revisions
                )
            except Forbidden as exc:
                return await self._forbidden(obj, key, plan, exc)
            except ApiError as exc:  # hub discovery failed: try again, write nothing meanwhile
                plan.conditions.append(("Applied", False, "ResolveFailed", f"discovery: {exc}"))
                return await self._planned(obj, key, plan, Outcome(True, exc))
            refusal = self.admission.check(tenant, own, planned, rendered, snapshot, namespace)
            if refusal is None:
                break
            again = {c: why for c, why in refusal.over.items() if c not in over_room}
            # Where it runs already, it is not taken away for want of room: refused whole,
            # what runs stays as it is.
            if not again or attempt == PLACE_AGAIN_LIMIT or again.keys() & runs_on:
                plan.conditions.append(("QuotaExceeded", True, refusal.reason, refusal.message))
                _not_applied(plan, previous, refusal.reason, refusal.message)
                return await self._planned(obj, key, plan, Outcome(False))
            over_room.update(again)  # placed again without them
        if over_room:
            _note_over_room(plan, over_room)
        if canary is not None:  # it goes ahead: the canary's move is kept
            try:
                await self.canary.commit(obj, canary, step.now)
            except ApiError as exc:  # the new stable revision could not be kept on the hub
                plan.conditions.append(("CanaryProgressing", False, "HubError", f"{exc}"))
                return await self._planned(obj, key, plan, Outcome(True, exc))
            plan.canary = canary
            plan.conditions.append(condition_of(canary, objects))
        plan.targets, plan.rendered, plan.revisions = targets, rendered, moved.revisions
        plan.failover.moves = moved.kept
        plan.desired_kinds = set().union(*(kinds_of(o) for o in rendered.values()))
        plan.kinds = plan.desired_kinds | set(previous.get("propagatedKinds") or [])
        policy = SyncPolicy.of(app.spec.rollout, self.sync_defaults)
        uid, adopt = str(meta.get("uid", "")), app.spec.conflict_resolution == "Adopt"
        parent = current_span_context()
        works = {
            t.cluster: ClusterWork(
                key,
                t.cluster,
                tuple(rendered[t.cluster]),
                plan.revisions[t.cluster],
                frozenset(plan.kinds),
                policy,
                uid,
                adopt,
                trace_parent=parent,
            )
            for t in targets
        }
        leaving = self._leaving(key, previous, set(works))
        plan.removed = [c for c in leaving if c not in moved.kept]
        plan.unanswered = unanswered(plan.removed, snapshot, step.now)
        for cluster in plan.removed:
            works[cluster] = ClusterWork(
                key, cluster, (), REMOVAL, frozenset(plan.kinds), policy, uid, trace_parent=parent
            )
        queued = self._set_work(key, works, _reported(previous) if last is None else None)
        # Syncs in flight (queued now, or by an earlier plan of this revision) report back.
        pending = queued or self.table.pending(key)
        outcome = Outcome(
            False,
            refresh_after_s=STATUS_CATCH_UP_S if pending else None,
            replan_after_s=self.failover.next_plan(app, step, plan, snapshot),
        )
        return await self._planned(obj, key, plan, outcome)

    async def _forbidden(
        self, obj: dict[str, Any], key: str, plan: Plan, exc: Forbidden
    ) -> Outcome:
        """Refuse the whole application: nothing is applied or pruned anywhere; what an
        earlier allowed plan put on the members stays as it is."""
        self.metrics.tenant_rejections.labels(exc.policy.tenant or "", "forbidden").inc()
        plan.conditions.append(("Applied", False, "Forbidden", f"{exc}; nothing was applied"))
        return await self._planned(obj, key, plan, Outcome(False, exc))

    def _leaving(self, key: str, previous: Mapping[str, Any], wanted: set[str]) -> list[str]:
        """Clusters the application was on and is not wanted on, minus those it is known
        to be gone from."""
        was_on = {c["name"] for c in previous.get("clusters") or []}
        was_on |= {p["cluster"] for p in previous.get("placement") or []}
        was_on |= set(self.table.works_of(key))
        leaving = []
        for cluster in sorted(was_on - wanted):
            work, state = self.table.get(key, cluster), self.table.state(key, cluster)
            if work is not None and work.removal and state is not None and state.applied:
                continue  # removed already
            leaving.append(cluster)
        return leaving

    def _set_work(
        self,
        key: str,
        works: Mapping[str, ClusterWork],
        reported: Mapping[str, tuple[str, int]] | None = None,
    ) -> bool:
        """Record the work; queue the member syncs it needs. Returns whether any was
        queued. ``reported``: what the status of an earlier controller shows applied (the
        first plan since this one started)."""
        due = self.table.set_work(
            key,
            works,
            now=time.monotonic(),
            recheck_after_s=self.settings.resync_period_s,
            reported=reported,
        )
        # One line per change of the work (not per object, nor for the resync's rechecks:
        # a state not yet tried is new work).
        changed = [c for c in due if (s := self.table.state(key, c)) and s.tried_at is None]
        if changed:
            log.info(
                "%s: syncing %d clusters (%s)",
                key,
                len(changed),
                some_of(changed, ", ", LOGGED_CLUSTERS),
            )
        queued = False
        for cluster in due:
            why = self.members.enqueue(cluster, key)
            if why is None:
                queued = True
                continue
            self.table.record_unreachable(key, cluster, why)
        return queued

    async def _planned(
        self, obj: dict[str, Any], key: str, plan: Plan, outcome: Outcome
    ) -> Outcome:
        """Keep the plan and write the status, unless member syncs were just queued (their
        results will, or the catch-up refresh)."""
        self.plans[key] = plan
        if outcome.refresh_after_s is None:
            due = await self._report(obj, key, plan)
            if due is not None:
                soonest = min(due, outcome.replan_after_s or due)
                return dataclasses.replace(outcome, replan_after_s=soonest)
        return outcome

    async def _report(self, obj: dict[str, Any], key: str, plan: Plan) -> float | None:
        """Write the status of ``plan`` with the current sync states (if it changed);
        returns when the application must be planned again for failover, if it must."""
        now = time.time()
        status = plan_status(self.statuses.as_held(key, obj), plan, self.table, self.members, now)
        await self._write_status(obj, status)
        namespace = obj["metadata"].get("namespace", "default")
        due = [
            self.failover.refresh_due(key, plan, status, namespace, now),
            self.canary.due(key, plan, now),
        ]
        return min((d for d in due if d is not None), default=None)

    def _place(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        running: Sequence[Target],
        plan: Plan,
        tenant: Mapping[str, Any] | None,
        own: Use,
        planned: Use,
        failover: FailoverDecision,
        avoid: Collection[str] = (),
    ) -> list[Target]:
        """Schedule within ``tenant``'s room, without the clusters failover keeps it off
        (from scratch after a rebalance or failback) and those to ``avoid``, and keep what
        is placed under NoSchedule; adds ``Scheduled`` (and ``QuotaExceeded`` when the
        quota leaves no room)."""
        namespace = app.metadata.get("namespace", "default")
        away = set(failover.away) | set(avoid)
        held = held_targets(running, snapshot, app.spec.placement, away)
        kept = [f"{t.cluster} ({t.kept})" for t in held]
        placement = app.spec.placement
        demand = on_clusters(
            demand_of(objects, default_namespace=namespace),
            objects,
            {c: self.admission.limits.of(c) for c in snapshot.clusters},
            namespace,
        )
        covered = bool(held) and (
            sum(t.replicas or 0 for t in held) >= demand.replicas
            if placement.replicas.mode != "Duplicated"
            else placement.max_clusters is not None and len(held) >= placement.max_clusters
        )
        plan.capacity_bound = not covered and (
            demand.creates_pods
            or placement.replicas.mode != "Duplicated"
            or placement.max_clusters is not None
        )
        if covered:  # nothing to place anew: the held clusters carry it all
            plan.conditions.append(
                ("Scheduled", True, "Scheduled", f"kept where already placed: {', '.join(kept)}")
            )
            return targets_of(None, held)
        with tracer.start_as_current_span("schedule"):
            t0 = time.perf_counter()
            try:
                decision = place(
                    self.scheduler,
                    snapshot,
                    app,
                    demand,
                    self.admission.quotas(),
                    self.admission.namespace_labels(namespace),
                    age_s=self.store.age_s(),
                    own=own,
                    planned=planned,
                    evicted=away,
                    fresh=failover.fresh,
                    held={t.cluster: t.replicas for t in held},
                    fresh_clusters=self.fresh_clusters,
                    current={t.cluster: t.replicas or 0 for t in running},
                )
            except FleetNotFound as exc:
                self.metrics.scheduling_results.labels("fleet-not-found").inc()
                plan.conditions.append(("Scheduled", False, "FleetNotFound", str(exc)))
                return []
            self.metrics.scheduling_duration.observe(time.perf_counter() - t0)
            for stage, seconds in decision.timings.items():
                self.metrics.scheduling_stage_duration.labels(stage).observe(seconds)
            if decision.full_scan:
                self.metrics.scheduler_full_scans.inc()
        self.metrics.scheduling_results.labels(
            "scheduled" if decision.schedulable else "unschedulable"
        ).inc()
        # Every verdict is made on demand: only an unschedulable decision needs them.
        quota_blocked = (
            []
            if decision.schedulable
            else sorted(
                (v.cluster, v.detail or v.reason or "no room")
                for v in decision.evaluated.values()
                if v.filtered_by == "TenantQuota"
            )
        )
        if quota_blocked:
            name = (tenant or {}).get("metadata", {}).get("name", "")
            where = by_message(quota_blocked, "reasons")
            self.metrics.tenant_rejections.labels(name, "quota").inc()
            plan.conditions.append(
                (
                    "QuotaExceeded",
                    True,
                    "QuotaExceeded",
                    f"tenant {name}'s quota leaves no room on {where}",
                )
            )
        targets = targets_of(decision, held)
        plan.conditions.append(
            (
                "Scheduled",
                decision.schedulable,
                "Scheduled" if decision.schedulable else "Unschedulable",
                decision.summary
                + (f"; kept where already placed: {', '.join(kept)}" if kept else "")
                + (
                    f"; full scan of fresh cluster data: {decision.full_scan_reason}"
                    if decision.full_scan
                    else ""
                ),
            )
        )
        return targets

    async def _render_bounded(
        self,
        manifests: Sequence[Mapping[str, Any]],
        overrides: Sequence[Override],
        targets: Sequence[RenderTarget],
        ref: ApplicationRef,
    ) -> dict[str, list[dict[str, Any]]]:
        return await render_bounded(
            manifests,
            overrides,
            targets,
            ref,
            timeout_s=self.settings.render_timeout_s,
            max_bytes=self.settings.render_max_bytes,
        )

    async def _render(
        self,
        key: str,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        targets: list[Target],
        canary: CanaryPlan | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """The objects for each target cluster, rendered in a bounded worker unless the
        application's last renders had the same inputs (with a canary: as its state has
        each cluster run them); raises RenderError at the first problem."""
        shared = app.spec.placement.replicas.mode != "Duplicated"  # Divided, Aggregated
        ref = ApplicationRef(app.metadata["name"], app.metadata.get("namespace", "default"))
        facts = {}
        for t in targets:
            c = snapshot.clusters[t.cluster]
            replicas = t.replicas if shared else None
            facts[t.cluster] = RenderTarget(
                c.name, dict(c.labels), c.layer, c.region, c.zone, c.provider, replicas
            )

        async def render(
            manifests: Sequence[Mapping[str, Any]],
            overrides: Sequence[Override],
            clusters: Iterable[str],
        ) -> dict[str, list[dict[str, Any]]]:
            targets = [facts[c] for c in clusters]
            return await self.renders.render(key, manifests, overrides, targets, ref)

        with self.metrics.timed("render"), tracer.start_as_current_span("render"):
            rendered = await render(objects, app.spec.overrides, facts)
            if canary is None:
                return rendered
            return await self.canary.compose(canary, rendered, render)

    async def _finalize(self, obj: dict[str, Any], key: str) -> Outcome:
        """Remove what the application propagated from every cluster, then its finalizer."""
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return Outcome(False)
        status = obj.get("status") or {}
        clusters = {c["name"] for c in status.get("clusters") or []} | {
            p["cluster"] for p in status.get("placement") or []
        }
        clusters |= set(self.table.works_of(key))
        manifests = ((obj.get("spec") or {}).get("resources") or {}).get("manifests") or []
        kinds = frozenset(set(status.get("propagatedKinds") or []) | kinds_of(manifests))
        gone = sorted(c for c in clusters if not self.members.known(c))
        if gone:
            log.warning("%s: %s are no longer MemberClusters; left as they are", key, gone)
        try:
            rollout = ApplicationPropagation.model_validate(obj).spec.rollout
        except ValidationError:
            rollout = None  # the controller's defaults
        policy = SyncPolicy.of(rollout, self.sync_defaults)
        uid = str(meta.get("uid", ""))
        works = {
            c: ClusterWork(key, c, (), REMOVAL, kinds, policy, uid)
            for c in sorted(clusters - set(gone))
        }
        self._set_work(key, works)
        if self.table.pending(key):
            return Outcome(False)  # removals in flight: their results come back here
        states = self.table.states_of(key)
        failed = failures(states)
        orphan = (meta.get("annotations") or {}).get(ORPHAN_ANNOTATION) == "true"
        if failed is not None and not orphan:
            builder = StatusBuilder(self.statuses.as_held(key, obj), now_iso())
            builder.condition(
                "Applied",
                False,
                "CleanupFailed",
                "deleting: "
                + applied_summary(states).split("; ", 1)[-1]
                + f" (annotate {ORPHAN_ANNOTATION}=true to leave them)",
            )
            await self._write_status(obj, builder.build())
            return Outcome(False, failed)
        if failed is not None:
            orphaned = [c for c, s in sorted(states.items()) if s.failed]
            log.warning("%s: orphaned on %s", key, ", ".join(orphaned))
        rest = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            await self._set_finalizers(obj, rest)
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.forget(key)
        log.info("%s: removed from %d clusters", key, len(states))
        return Outcome(False)


def _reported(status: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """By cluster, the revision ``status`` shows applied there and the attempts it took."""
    out = {}
    for line in status.get("clusters") or []:
        if not isinstance(line, Mapping) or line.get("applied") is not True:
            continue
        name, revision, attempts = line.get("name"), line.get("revision"), line.get("attempts")
        if isinstance(name, str) and isinstance(revision, str):
            out[name] = (revision, attempts if isinstance(attempts, int) and attempts > 0 else 0)
    return out


def _note_over_room(plan: Plan, over_room: Mapping[str, str]) -> None:
    """Say on ``Scheduled`` which clusters the application was placed without because,
    as rendered, it asks more there than the tenant's quota leaves."""
    for i, (kind, status, reason, message) in enumerate(plan.conditions):
        if kind == "Scheduled":
            shortfalls = by_message(sorted(over_room.items()), "shortfalls")
            note = f"; placed without {shortfalls} (as rendered, over the tenant's quota)"
            plan.conditions[i] = (kind, status, reason, message + note)
            return


def _not_applied(plan: Plan, previous: Mapping[str, Any], reason: str, why: str) -> None:
    """A generation that stops before any work is not applied: ``Applied`` says so (with
    ``reason``), unless this generation was applied already (a replan that now finds no
    room leaves what runs, and the condition, as they are). Without it, ``Applied`` would
    stay True from the previous generation while ``observedGeneration`` says the new one."""
    applied = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == "Applied"), None
    )
    if (
        applied is not None
        and applied.get("status") == "True"
        and applied.get("observedGeneration") == plan.generation
    ):
        return
    runs = "; what runs stays as it is" if applied is not None else ""
    plan.conditions.append(
        ("Applied", False, reason, f"generation {plan.generation} is not applied: {why}{runs}")
    )
