"""What a tenant's applications are planned to use on each cluster (from the work table):
the room the hub's scheduler must not give away before the members report the use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from api.quantity import arithmetic
from fleet.snapshot import FleetSnapshot
from propagator.interpreter.registry import Interpreters
from propagator.scheduler import demand_of
from propagator.tenancy.limits import LimitDefaults
from propagator.tenancy.memberquota import written
from propagator.work.table import ClusterWork, WorkTable

Use = dict[str, dict[str, Decimal]]
"""cluster -> resource -> amount."""


def objects_use(
    objects: Iterable[Mapping[str, Any]],
    nodes: int,
    defaults: Mapping[str, Mapping[str, Decimal]] | None,
    default_namespace: str,
    interpreters: Interpreters,
) -> dict[str, Decimal]:
    """What ``objects`` request in all on a cluster of ``nodes`` ready nodes whose
    LimitRanges give containers ``defaults`` (per namespace), each object as its kind's
    replicas rule reads it."""
    objects = list(objects)
    demand = demand_of(objects, (), defaults, default_namespace, interpreters)
    total = demand.beside_replicas(nodes)
    if any(
        interpreters.replica_field(str(o.get("apiVersion")), str(o.get("kind"))) is not None
        for o in objects
    ):
        with arithmetic():
            for resource, amount in demand.per_replica.items():
                total[resource] = total.get(resource, Decimal(0)) + amount * demand.replicas
    return total


class UseCache:
    """``objects_use`` per work, node count and LimitRange defaults, kept while they are
    the same (a tenant of many applications sums them at every reconcile)."""

    def __init__(self, limits: LimitDefaults, interpreters: Interpreters, size: int = 4096) -> None:
        self.limits = limits
        self.interpreters = interpreters
        self.size = size
        self._by_key: dict[tuple[str, str, str, int, int, int], dict[str, Decimal]] = {}

    def use(self, work: ClusterWork, nodes: int) -> dict[str, Decimal]:
        key = (
            work.app,
            work.cluster,
            work.revision,
            nodes,
            self.limits.version(work.cluster),
            self.interpreters.generation,
        )
        found = self._by_key.get(key)
        if found is None:
            if len(self._by_key) >= self.size:
                self._by_key.clear()  # simplest bound; refilled on the next pass
            found = self._by_key[key] = objects_use(
                work.objects,
                nodes,
                self.limits.of(work.cluster),
                work.app.split("/", 1)[0],
                self.interpreters,
            )
        return found


def planned_use(
    table: WorkTable, apps: Iterable[str], snapshot: FleetSnapshot, cache: UseCache
) -> Use:
    """What the last plans of ``apps`` ask on each cluster, together."""
    use: Use = {}
    for app in apps:
        for cluster, work in table.works_of(app).items():
            info = snapshot.clusters.get(cluster)
            amounts = cache.use(work, info.nodes if info else 0)
            into = use.setdefault(cluster, {})
            with arithmetic():
                for resource, amount in amounts.items():
                    into[resource] = into.get(resource, Decimal(0)) + amount
    return use


def over_room(
    rendered: Mapping[str, Iterable[Mapping[str, Any]]],
    room: Mapping[str, Mapping[str, Decimal]],
    snapshot: FleetSnapshot,
    limits: LimitDefaults,
    namespace: str,
    interpreters: Interpreters,
) -> list[tuple[str, str]]:
    """Clusters where what was rendered for them (templates and overrides applied; objects
    without a namespace in ``namespace``) asks more than ``room`` (the tenant's remaining
    quota there), each with the first resource short: ``("member-1", "cpu 1500m asked, 1
    left")``."""
    over = []
    for cluster, objects in sorted(rendered.items()):
        left = room.get(cluster)
        if left is None:
            continue
        info = snapshot.clusters.get(cluster)
        asked = objects_use(
            objects, info.nodes if info else 0, limits.of(cluster), namespace, interpreters
        )
        short = next((r for r, v in asked.items() if r in left and v > left[r]), None)
        if short is not None:
            asked_text, left_text = written(short, asked[short]), written(short, left[short])
            over.append((cluster, f"{short} {asked_text} asked, {left_text} left"))
    return over
