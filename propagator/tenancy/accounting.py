"""What a tenant's applications are planned to use on each cluster (from the work table):
the room the hub's scheduler must not give away before the members report the use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from api.quantity import arithmetic
from fleet.snapshot import FleetSnapshot
from propagator.propagation.work import WorkTable
from propagator.scheduler import demand_of
from propagator.scheduler.demand import REPLICATED_KINDS

Use = dict[str, dict[str, Decimal]]
"""cluster -> resource -> amount."""


def objects_use(objects: Iterable[Mapping[str, Any]], nodes: int) -> dict[str, Decimal]:
    """What ``objects`` request in all on a cluster of ``nodes`` ready nodes."""
    objects = list(objects)
    demand = demand_of(objects)
    total = demand.beside_replicas(nodes)
    if any((o.get("apiVersion"), o.get("kind")) in REPLICATED_KINDS for o in objects):
        with arithmetic():
            for resource, amount in demand.per_replica.items():
                total[resource] = total.get(resource, Decimal(0)) + amount * demand.replicas
    return total


def planned_use(table: WorkTable, apps: Iterable[str], snapshot: FleetSnapshot) -> Use:
    """What the last plans of ``apps`` ask on each cluster, together."""
    use: Use = {}
    for app in apps:
        for cluster, work in table.work.get(app, {}).items():
            info = snapshot.clusters.get(cluster)
            amounts = objects_use(work.objects, info.nodes if info else 0)
            into = use.setdefault(cluster, {})
            with arithmetic():
                for resource, amount in amounts.items():
                    into[resource] = into.get(resource, Decimal(0)) + amount
    return use
