"""What an application asks of a cluster, read from its manifests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from api.quantity import QuantityError, arithmetic, parse_quantity
from propagator.scheduler.types import Demand

REPLICATED_KINDS = frozenset(
    {("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "ReplicaSet")}
)
"""Kinds whose ``spec.replicas`` counts as demand and that ``Divided`` placement scales."""


def _requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    with arithmetic():
        return _sum_requests(pod_spec)


def _sum_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    for resource in ("cpu", "memory"):
        amount = Decimal(0)
        for container in pod_spec.get("containers") or []:
            value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
            if value is None:
                continue
            try:
                amount += parse_quantity(value)
            except QuantityError:
                continue  # a template expression: rendered per cluster, unknown here
        if amount:
            total[resource] = amount
    return total


def demand_of(
    manifests: Iterable[Mapping[str, Any]], selected_kinds: Iterable[tuple[str, str]] = ()
) -> Demand:
    """Replicas and per-replica requests of the (largest) workload, and every kind."""
    kinds = set(selected_kinds)
    replicas, per_replica = 1, {"pods": Decimal(1)}
    best = Decimal(-1)
    for obj in manifests:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        kinds.add(key)
        if key not in REPLICATED_KINDS:
            continue
        spec = obj.get("spec") or {}
        requests = _requests(((spec.get("template") or {}).get("spec")) or {})
        count = spec.get("replicas", 1)
        count = count if isinstance(count, int) else 1
        with arithmetic():
            weight = requests.get("cpu", Decimal(0)) * count
        if weight > best:
            best, replicas, per_replica = weight, count, requests
    return Demand(replicas=replicas, per_replica=per_replica, kinds=frozenset(kinds))
