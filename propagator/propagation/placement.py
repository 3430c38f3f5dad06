"""Where an application goes: its tenant's remaining quota and the scheduler's decision.

One function (:func:`place`) for the controller's reconcile and for ``propagator
schedule``, so the command shows what the controller would decide; the reconcile's
:class:`Placer` adds what failover holds and the conditions and metrics of the decision.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from opentelemetry import trace

from api.application import ApplicationPropagation
from fleet.snapshot import ClusterInfo, FleetSnapshot
from fleet.snapshotstore import SnapshotStore
from propagator.conditions import by_message
from propagator.failover.state import FailoverDecision
from propagator.observability.metrics import Metrics
from propagator.propagation.plan import Condition
from propagator.scheduler import Decision, Demand, Scheduler, demand_of, on_clusters
from propagator.tenancy import quotamath
from propagator.tenancy.accounting import Use
from propagator.tenancy.hubquota import QuotaAdmission
from propagator.work.targets import Target, held_targets, targets_of

tracer = trace.get_tracer("propagator")


class FleetNotFound(LookupError):
    """The application's ``spec.fleet`` names no Fleet; the message lists those there are."""

    def __init__(self, fleet: str, fleets: Sequence[str]) -> None:
        known = ", ".join(sorted(fleets)) or "none"
        super().__init__(f"spec.fleet {fleet!r} is not a Fleet (fleets: {known})")


def place(
    scheduler: Scheduler,
    snapshot: FleetSnapshot,
    app: ApplicationPropagation,
    demand: Demand,
    quotas: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, str] | None,
    *,
    age_s: float,
    explain: bool = False,
    own: Mapping[str, Mapping[str, Decimal]] | None = None,
    planned: Mapping[str, Mapping[str, Decimal]] | None = None,
    evicted: Collection[str] = (),
    fresh: bool = False,
    held: Mapping[str, int | None] | None = None,
    fresh_clusters: Callable[[], Iterable[ClusterInfo]] | None = None,
    current: Mapping[str, int] | None = None,
) -> Decision:
    """Schedule ``app`` on ``snapshot`` within its tenant's remaining quota (the tenant is
    found among ``quotas`` by the application's namespace and that namespace's labels;
    ``own``: what the application's last plan asks there, per cluster; ``planned``: what
    the tenant's applications' last plans ask together), from where it runs now
    (``current``, replicas per cluster; default: its ``status.placement``; ``fresh``: as
    if it ran nowhere, for a rebalance or a failback), never on the
    ``evicted`` clusters, and around the ``held`` ones (clusters it keeps with their
    replicas while nothing new may land there: the rest of its replicas and of its
    ``maxClusters`` is placed on the others); ``fresh_clusters``: the freshest cluster
    data, scanned instead of the snapshot when that is stale; raises FleetNotFound."""
    if app.spec.fleet not in snapshot.fleets:
        raise FleetNotFound(app.spec.fleet, list(snapshot.fleets))
    namespace = app.metadata.get("namespace", "default")
    tenant = quotamath.tenant_of(list(quotas), namespace, namespace_labels)
    remaining = (
        quotamath.remaining(
            tenant, {n: c.labels for n, c in snapshot.clusters.items()}, own, planned
        )
        if tenant
        else None
    )
    placement = app.spec.placement
    held = held or {}
    away = (set(evicted) | set(held)) - set(placement.exclude_clusters)
    if away:
        update: dict[str, Any] = {"exclude_clusters": [*placement.exclude_clusters, *sorted(away)]}
        if held and placement.max_clusters is not None:
            update["max_clusters"] = max(1, placement.max_clusters - len(held))
        if held and placement.min_clusters is not None:
            update["min_clusters"] = max(0, placement.min_clusters - len(held))
        placement = placement.model_copy(update=update)
    if held and placement.replicas.mode != "Duplicated":
        kept = sum(n or 0 for n in held.values())
        demand = dataclasses.replace(demand, replicas=max(0, demand.replicas - kept))
    if fresh:
        current = {}
    elif current is None:
        current = current_placement(app)
    return scheduler.schedule(
        snapshot,
        app.spec.fleet,
        placement,
        demand,
        remaining,
        age_s=age_s,
        explain=explain,
        current={c: n for c, n in current.items() if c not in evicted and c not in held},
        application=str(app.metadata.get("uid", "")),
        fresh_clusters=fresh_clusters,
    )


def current_placement(app: ApplicationPropagation) -> dict[str, int]:
    """Where the application runs now: replicas per cluster from its ``status.placement``."""
    placed = app.status.placement if app.status is not None else []
    return {p.cluster: p.replicas or 0 for p in placed}


@dataclass(frozen=True)
class Placed:
    """One placement of an application: its targets and what ``Scheduled`` (and
    ``QuotaExceeded``) say of it."""

    targets: list[Target]
    conditions: list[Condition]
    capacity_bound: bool
    """Whether a change of the clusters' capacity alone could move it (see
    :attr:`propagator.propagation.plan.Plan.capacity_bound`)."""


class Placer:
    """Places applications: the scheduler within the tenant's room, around the clusters
    failover keeps them off, keeping what is placed under NoSchedule; timed and counted."""

    def __init__(
        self,
        scheduler: Scheduler,
        admission: QuotaAdmission,
        store: SnapshotStore,
        metrics: Metrics,
        fresh_clusters: Callable[[], Iterable[ClusterInfo]] | None = None,
    ) -> None:
        """``fresh_clusters``: the members as their probes see them now, scanned when the
        snapshot is stale."""
        self.scheduler = scheduler
        self.admission = admission
        self.store = store
        self.metrics = metrics
        self.fresh_clusters = fresh_clusters

    def place(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        running: Sequence[Target],
        tenant: Mapping[str, Any] | None,
        own: Use,
        planned: Use,
        failover: FailoverDecision,
        avoid: Collection[str] = (),
    ) -> Placed:
        """Schedule within ``tenant``'s room, without the clusters failover keeps it off
        (from scratch after a rebalance or failback) and those to ``avoid``, and keep what
        is placed under NoSchedule. No targets: no fleet, or nothing fits."""
        namespace = app.metadata.get("namespace", "default")
        away = set(failover.away) | set(avoid)
        held = held_targets(running, snapshot, app.spec.placement, away)
        kept = [f"{t.cluster} ({t.kept})" for t in held]
        placement = app.spec.placement
        interpreters = self.admission.interpreters
        demand = on_clusters(
            demand_of(objects, default_namespace=namespace, interpreters=interpreters),
            objects,
            {c: self.admission.limits.of(c) for c in snapshot.clusters},
            namespace,
            interpreters,
        )
        covered = bool(held) and (
            sum(t.replicas or 0 for t in held) >= demand.replicas
            if placement.replicas.mode != "Duplicated"
            else placement.max_clusters is not None and len(held) >= placement.max_clusters
        )
        capacity_bound = not covered and (
            demand.creates_pods
            or placement.replicas.mode != "Duplicated"
            or placement.max_clusters is not None
        )
        if covered:  # nothing to place anew: the held clusters carry it all
            why = f"kept where already placed: {', '.join(kept)}"
            return Placed(
                targets_of(None, held), [("Scheduled", True, "Scheduled", why)], capacity_bound
            )
        try:
            decision = self._schedule(
                app, snapshot, demand, namespace, running, held, own, planned, failover, away
            )
        except FleetNotFound as exc:
            self.metrics.scheduling_results.labels("fleet-not-found").inc()
            return Placed([], [("Scheduled", False, "FleetNotFound", str(exc))], capacity_bound)
        self.metrics.scheduling_results.labels(
            "scheduled" if decision.schedulable else "unschedulable"
        ).inc()
        conditions = self._quota_blocked(decision, tenant)
        conditions.append(
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
        return Placed(targets_of(decision, held), conditions, capacity_bound)

    def _schedule(
        self,
        app: ApplicationPropagation,
        snapshot: FleetSnapshot,
        demand: Demand,
        namespace: str,
        running: Sequence[Target],
        held: Sequence[Target],
        own: Use,
        planned: Use,
        failover: FailoverDecision,
        away: Collection[str],
    ) -> Decision:
        """The scheduler's decision, timed by stage; raises FleetNotFound."""
        with tracer.start_as_current_span("schedule"):
            t0 = time.perf_counter()
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
            self.metrics.scheduling_duration.observe(time.perf_counter() - t0)
            for stage, seconds in decision.timings.items():
                self.metrics.scheduling_stage_duration.labels(stage).observe(seconds)
            if decision.full_scan:
                self.metrics.scheduler_full_scans.inc()
        return decision

    def _quota_blocked(
        self, decision: Decision, tenant: Mapping[str, Any] | None
    ) -> list[Condition]:
        """``QuotaExceeded`` when the tenant's quota is what left an unschedulable
        application no room. Every verdict is made on demand: only an unschedulable
        decision needs them."""
        if decision.schedulable:
            return []
        blocked = sorted(
            (v.cluster, v.detail or v.reason or "no room")
            for v in decision.evaluated.values()
            if v.filtered_by == "TenantQuota"
        )
        if not blocked:
            return []
        name = (tenant or {}).get("metadata", {}).get("name", "")
        self.metrics.tenant_rejections.labels(name, "quota").inc()
        where = by_message(blocked, "reasons")
        why = f"tenant {name}'s quota leaves no room on {where}"
        return [("QuotaExceeded", True, "QuotaExceeded", why)]
