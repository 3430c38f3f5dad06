"""Where an application goes: its tenant's remaining quota and the scheduler's decision.

One function for the controller's reconcile and for ``propagator schedule``, so the
command shows what the controller would decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from api.application import ApplicationPropagation
from fleet.snapshot import ClusterInfo, FleetSnapshot
from propagator.scheduler import Decision, Demand, Scheduler
from propagator.tenancy import quotamath


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
