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
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from pydantic import ValidationError

from api.application import ORPHAN_ANNOTATION, ApplicationPropagation
from api.common import API_VERSION, duration_seconds
from api.failover import REBALANCE_ANNOTATION
from fleet.connection import ApiError, KubeConnection
from fleet.discovery import UnknownKind
from fleet.informer import cache_key
from fleet.snapshot import FleetSnapshot, SnapshotStore
from propagator.conditions import now_iso, status_changed
from propagator.observability.events import record_event
from propagator.observability.metrics import Metrics
from propagator.propagation.failover import evicting, next_change, unhealthy_due
from propagator.propagation.failoverstate import (
    FailoverDecision,
    FailoverState,
    decide,
    unhealthy_clocks,
)
from propagator.propagation.health import WorkloadHealth
from propagator.propagation.moves import (
    Move,
    grace_left,
    graceful_moves,
    release,
    with_kept_replicas,
)
from propagator.propagation.placement import FleetNotFound, place
from propagator.propagation.plan import MemberAccess, Outcome, Plan
from propagator.propagation.render import ApplicationRef, RenderError
from propagator.propagation.renderworker import RenderTarget, render_bounded
from propagator.propagation.report import plan_status
from propagator.propagation.resources import kinds_of, resolve, revision_of
from propagator.propagation.results import applied_summary, failures
from propagator.propagation.status import StatusBuilder
from propagator.propagation.targets import Target, held_targets, targets_of
from propagator.propagation.work import ClusterWork, SyncPolicy, WorkTable
from propagator.scheduler import Scheduler, demand_of
from propagator.settings import Settings
from propagator.tenancy.accounting import Use
from propagator.tenancy.admission import QuotaAdmission
from propagator.tenancy.boundary import check_rendered
from propagator.tenancy.policy import Forbidden, policy_for

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")

FINALIZER = "propagator.io/cleanup"
"""Holds a deleted application until what it propagated is removed from the members."""
REMOVAL = "removal"
"""The revision of the work that removes an application from a cluster."""
STATUS_CATCH_UP_S = 1.0
"""A reconcile with member syncs in flight leaves the status write to their results; this
long at most."""
DEADLINE_MARGIN_S = 0.5
"""Planned again this long after a toleration, failback or grace period runs out."""
OVERDUE_RECHECK_S = 10.0
"""An application unhealthy beyond its toleration and not moved (unhealthy everywhere) is
looked at again this often."""


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
    ) -> None:
        self.platform = settings.platform()
        self.hub = hub
        self.settings = settings
        self.store = store
        self.scheduler = scheduler
        self.admission = admission
        self.table = table
        self.members = members
        self.metrics = metrics
        self.plans: dict[str, Plan] = {}

    def forget(self, key: str) -> None:
        self.plans.pop(key, None)
        self.table.forget(key)

    # -- hub writes -----------------------------------------------------------------------

    async def _write_status(self, obj: Mapping[str, Any], status: dict[str, Any]) -> None:
        if not status_changed(obj.get("status"), status):
            return
        self.metrics.status_writes.labels("ApplicationPropagation status").inc()
        meta = obj["metadata"]
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
        if FINALIZER not in (meta.get("finalizers") or []):
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
        carried = last.failover if last is not None else FailoverState.from_status(previous)
        plan.failover = carried  # unchanged unless a placement is made
        before = _placed_before(last, previous)
        failover, now = app.spec.failover, time.time()
        decision = decide(
            failover,
            carried,
            list(before),
            snapshot,
            self._healths(key, last, namespace) if failover.application else {},
            unhealthy_clocks(previous),
            (meta.get("annotations") or {}).get(REBALANCE_ANNOTATION),
            now,
        )
        own, planned = self.admission.use(tenant, key, snapshot)
        targets = self._place(
            app, objects, snapshot, previous, plan, tenant, own, planned, decision
        )
        if not targets:
            # No fleet, or nothing fits: what runs stays where it is (no apply, no prune).
            return await self._planned(obj, key, plan, Outcome(False))
        plan.failover = decision.state
        if failover.application is not None:
            plan.unhealthy_after_s = duration_seconds(failover.application.unhealthy_after)
        await self._announce(obj, decision, carried)
        grace_s = duration_seconds(failover.grace_period)
        moves = graceful_moves(
            before,
            {t.cluster: t.replicas for t in targets},
            carried.moves,
            decision.cause,
            decision.evicted,
            decision.immediate,
            grace_s,
            now,
        )
        try:
            rendered = await self._render(
                app, objects, snapshot, with_kept_replicas(targets, moves)
            )
            revisions = {c: revision_of(objs) for c, objs in rendered.items()}
            replaced = self._replaced(key, targets, rendered, revisions, namespace, set(moves))
            kept, released = release(moves, replaced, grace_s, now)
            if any(m.cluster in revisions and m.replicas is not None for m in released.values()):
                # a cluster that kept replicas now scales down to its placement
                rendered = await self._render(
                    app, objects, snapshot, with_kept_replicas(targets, kept)
                )
                revisions = {c: revision_of(objs) for c, objs in rendered.items()}
        except RenderError as exc:
            plan.conditions.append(
                ("Applied", False, "RenderFailed", f"{exc}; nothing was applied")
            )
            return await self._planned(obj, key, plan, Outcome(False, exc))
        try:
            await check_rendered(self.hub, tenancy, self.platform, rendered, namespace)
        except Forbidden as exc:
            return await self._forbidden(obj, key, plan, exc)
        except ApiError as exc:  # hub discovery failed: try again, write nothing meanwhile
            plan.conditions.append(("Applied", False, "ResolveFailed", f"discovery: {exc}"))
            return await self._planned(obj, key, plan, Outcome(True, exc))
        if refusal := self.admission.check(tenant, own, planned, rendered, snapshot, namespace):
            plan.conditions.append(("QuotaExceeded", True, refusal.reason, refusal.message))
            return await self._planned(obj, key, plan, Outcome(False))
        plan.targets, plan.rendered, plan.revisions = targets, rendered, revisions
        plan.failover.moves = kept
        self._failed_over(released, replaced, now)
        plan.desired_kinds = set().union(*(kinds_of(o) for o in rendered.values()))
        plan.kinds = plan.desired_kinds | set(previous.get("propagatedKinds") or [])
        policy = SyncPolicy.of(app.spec.rollout, self.settings)
        uid, adopt = str(meta.get("uid", "")), app.spec.conflict_resolution == "Adopt"
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
            )
            for t in targets
        }
        leaving = self._leaving(key, previous, set(works))
        plan.removed = [c for c in leaving if c not in kept]
        plan.unanswered = evicting(plan.removed, snapshot, now)
        for cluster in plan.removed:
            works[cluster] = ClusterWork(
                key, cluster, (), REMOVAL, frozenset(plan.kinds), policy, uid
            )
        queued = self._set_work(key, works)
        # Syncs in flight (queued now, or by an earlier plan of this revision) report back.
        pending = queued or any(
            not s.applied and not s.failed for s in self.table.states_of(key).values()
        )
        # Plan again when a toleration, a failback period or a grace period runs out:
        # nothing else would trigger it (a replacement turning Available triggers it from
        # the status refresh).
        waits = [w for w in (grace_left(kept, grace_s, now),) if w is not None]
        due = next_change(
            [t.cluster for t in targets],
            [n for n, e in plan.failover.evicted.items() if e.reason == "ClusterUnreachable"],
            snapshot,
            duration_seconds(failover.cluster_unreachable_after),
            duration_seconds(failover.failback_after) if failover.failback == "WhenReady" else None,
            now,
        )
        if due is not None:
            waits.append(due)
        outcome = Outcome(
            False,
            refresh_after_s=STATUS_CATCH_UP_S if pending else None,
            replan_after_s=min(waits) + DEADLINE_MARGIN_S if waits else None,
        )
        return await self._planned(obj, key, plan, outcome)

    def _healths(self, key: str, last: Plan | None, namespace: str) -> dict[str, WorkloadHealth]:
        """The application's health on each cluster its last plan placed it on."""
        if last is None:
            return {}
        return {
            t.cluster: self.members.health(t.cluster, last.rendered[t.cluster], namespace)
            for t in last.targets
        }

    def _replaced(
        self,
        key: str,
        targets: Sequence[Target],
        rendered: Mapping[str, Sequence[Mapping[str, Any]]],
        revisions: Mapping[str, str],
        namespace: str,
        moving: Collection[str],
    ) -> bool:
        """Whether the application is applied, at the revision planned, and Healthy on
        every target that is not ``moving``: the replicas that move may go."""
        for t in targets:
            if t.cluster in moving:
                continue
            state = self.table.state(key, t.cluster)
            if state is None or not state.applied or state.revision != revisions[t.cluster]:
                return False
            if self.members.health(t.cluster, rendered[t.cluster], namespace) != "Healthy":
                return False
        return True

    def _failed_over(self, released: Mapping[str, Move], replaced: bool, now: float) -> None:
        """Time from a cluster lost to its replacement Available, once per eviction: when
        its move is released because the replacement is Available."""
        if not replaced:
            return
        for move in released.values():
            if move.lost is not None:
                self.metrics.failover_duration.observe(max(0.0, now - move.lost))

    async def _announce(
        self, obj: dict[str, Any], decision: FailoverDecision, carried: FailoverState
    ) -> None:
        """Events and metrics for the evictions, failbacks and rebalance of ``decision``."""
        for eviction in decision.evicted.values():
            if eviction.cluster in carried.moves or eviction.cluster in carried.evicted:
                continue  # announced when it was evicted (an earlier plan did not stick)
            metric = "unreachable" if eviction.reason == "ClusterUnreachable" else "unhealthy"
            self.metrics.evictions.labels(eviction.cluster, metric).inc()
            how = (
                "removed at once"
                if eviction.cluster in decision.immediate
                else "removed once the replacement is Available"
                + (" and it answers" if eviction.reason == "ClusterUnreachable" else "")
            )
            await record_event(
                self.hub,
                obj,
                "Warning",
                "Evicted",
                f"placed again without {eviction.cluster}: {eviction.message}; what runs there "
                f"is {how}",
            )
        for cluster in decision.returning:
            await record_event(
                self.hub,
                obj,
                "Normal",
                "FailedBack",
                f"{cluster} has been Ready for failbackAfter: placed again from scratch "
                "(failback WhenReady)",
            )
        if decision.rebalance is not None:
            await record_event(
                self.hub,
                obj,
                "Normal",
                "Rebalanced",
                f"placed again from scratch ({REBALANCE_ANNOTATION}={decision.rebalance})",
            )

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
        was_on |= set(self.table.work.get(key, {}))
        leaving = []
        for cluster in sorted(was_on - wanted):
            work, state = self.table.get(key, cluster), self.table.state(key, cluster)
            if work is not None and work.removal and state is not None and state.applied:
                continue  # removed already
            leaving.append(cluster)
        return leaving

    def _set_work(self, key: str, works: Mapping[str, ClusterWork]) -> bool:
        """Record the work; queue the member syncs it needs. Returns whether any was
        queued."""
        due = self.table.set_work(
            key, works, now=time.monotonic(), recheck_after_s=self.settings.resync_period_s
        )
        queued = False
        for cluster in due:
            why = self.members.enqueue(cluster, key)
            if why is None:
                queued = True
                continue
            state = self.table.state(key, cluster)
            assert state is not None
            state.applied, state.failed, state.error = False, True, f"cannot connect: {why}"
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
        returns when the application must be planned again for failover: at once once the
        moving replicas are replaced, or when an application failover toleration runs
        out."""
        now = time.time()
        status = plan_status(obj, plan, self.table, self.members, now)
        await self._write_status(obj, status)
        namespace = obj["metadata"].get("namespace", "default")
        moving = plan.failover.moves
        if moving and self._replaced(
            key, plan.targets, plan.rendered, plan.revisions, namespace, set(moving)
        ):
            return 0.0
        if plan.unhealthy_after_s is None:
            return None
        due = unhealthy_due(unhealthy_clocks(status), plan.unhealthy_after_s, now)
        if due is None:
            return None
        return due + DEADLINE_MARGIN_S if due > 0 else OVERDUE_RECHECK_S

    def _place(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        previous: Mapping[str, Any],
        plan: Plan,
        tenant: Mapping[str, Any] | None,
        own: Use,
        planned: Use,
        failover: FailoverDecision,
    ) -> list[Target]:
        """Schedule within ``tenant``'s room, without the clusters failover keeps it off
        (from scratch after a rebalance or failback), and keep what is placed under
        NoSchedule; adds ``Scheduled`` (and ``QuotaExceeded`` when the quota leaves no
        room)."""
        namespace = app.metadata.get("namespace", "default")
        away = failover.away
        held = held_targets(previous.get("placement") or [], snapshot, app.spec.placement, away)
        kept = [f"{t.cluster} ({t.kept})" for t in held]
        placement = app.spec.placement
        demand = demand_of(objects)
        covered = bool(held) and (
            sum(t.replicas or 0 for t in held) >= demand.replicas
            if placement.replicas.mode != "Duplicated"
            else placement.max_clusters is not None and len(held) >= placement.max_clusters
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
                )
            except FleetNotFound as exc:
                self.metrics.scheduling_results.labels("fleet-not-found").inc()
                plan.conditions.append(("Scheduled", False, "FleetNotFound", str(exc)))
                return []
            self.metrics.scheduling_duration.observe(time.perf_counter() - t0)
        self.metrics.scheduling_results.labels(
            "scheduled" if decision.schedulable else "unschedulable"
        ).inc()
        quota_blocked = [
            f"{v.cluster} ({v.detail or v.reason})"
            for v in decision.evaluated.values()
            if v.filtered_by == "TenantQuota"
        ]
        if not decision.schedulable and quota_blocked:
            name = (tenant or {}).get("metadata", {}).get("name", "")
            self.metrics.tenant_rejections.labels(name, "quota").inc()
            plan.conditions.append(
                (
                    "QuotaExceeded",
                    True,
                    "QuotaExceeded",
                    f"tenant {name}'s quota leaves no room on {', '.join(sorted(quota_blocked))}",
                )
            )
        targets = targets_of(decision, held)
        plan.conditions.append(
            (
                "Scheduled",
                decision.schedulable,
                "Scheduled" if decision.schedulable else "Unschedulable",
                decision.summary
                + (f"; kept where already placed: {', '.join(kept)}" if kept else ""),
            )
        )
        if app.spec.canary is not None:
            plan.conditions.append(
                (
                    "CanaryProgressing",
                    False,
                    "NotSupportedYet",
                    "this controller version does not run canary steps: the manifests are "
                    "applied to every placed cluster as they are",
                )
            )
        return targets

    async def _render(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        targets: list[Target],
    ) -> dict[str, list[dict[str, Any]]]:
        """The objects for each target cluster, rendered in a bounded worker; raises
        RenderError at the first problem."""
        shared = app.spec.placement.replicas.mode != "Duplicated"  # Divided, Aggregated
        ref = ApplicationRef(app.metadata["name"], app.metadata.get("namespace", "default"))
        facts = []
        for t in targets:
            c = snapshot.clusters[t.cluster]
            replicas = t.replicas if shared else None
            facts.append(
                RenderTarget(
                    c.name, dict(c.labels), c.layer, c.region, c.zone, c.provider, replicas
                )
            )
        with self.metrics.timed("render"), tracer.start_as_current_span("render"):
            return await render_bounded(
                objects,
                app.spec.overrides,
                facts,
                ref,
                timeout_s=self.settings.render_timeout_s,
                max_bytes=self.settings.render_max_bytes,
            )

    async def _finalize(self, obj: dict[str, Any], key: str) -> Outcome:
        """Remove what the application propagated from every cluster, then its finalizer."""
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return Outcome(False)
        status = obj.get("status") or {}
        clusters = {c["name"] for c in status.get("clusters") or []} | {
            p["cluster"] for p in status.get("placement") or []
        }
        clusters |= set(self.table.work.get(key, {}))
        manifests = ((obj.get("spec") or {}).get("resources") or {}).get("manifests") or []
        kinds = frozenset(set(status.get("propagatedKinds") or []) | kinds_of(manifests))
        gone = sorted(c for c in clusters if not self.members.known(c))
        if gone:
            log.warning("%s: %s are no longer MemberClusters; left as they are", key, gone)
        try:
            rollout = ApplicationPropagation.model_validate(obj).spec.rollout
        except ValidationError:
            rollout = None  # the controller's defaults
        policy = SyncPolicy.of(rollout, self.settings)
        uid = str(meta.get("uid", ""))
        works = {
            c: ClusterWork(key, c, (), REMOVAL, kinds, policy, uid)
            for c in sorted(clusters - set(gone))
        }
        self._set_work(key, works)
        states = self.table.states_of(key)
        if not all(s.applied or s.failed for s in states.values()):
            return Outcome(False)  # removals in flight: their results come back here
        failed = failures(states)
        orphan = (meta.get("annotations") or {}).get(ORPHAN_ANNOTATION) == "true"
        if failed is not None and not orphan:
            builder = StatusBuilder(obj, now_iso())
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


def _placed_before(last: Plan | None, status: Mapping[str, Any]) -> dict[str, int | None]:
    """Where the application runs now, replicas per cluster (None: Duplicated): its last
    plan's placement, or the status's after a restart or a plan that placed nothing."""
    if last is not None and last.targets:
        return {t.cluster: t.replicas for t in last.targets}
    out: dict[str, int | None] = {}
    for entry in status.get("placement") or []:
        replicas = entry.get("replicas")
        out[str(entry.get("cluster"))] = replicas if isinstance(replicas, int) else None
    return out
