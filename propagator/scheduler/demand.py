"""What an application asks of a cluster, read from its manifests.

Every kind that creates pods counts, as Kubernetes counts its pods' requests: the largest
replicated workload (Deployment, StatefulSet, ReplicaSet) is the divisible one; other
replicated workloads, Jobs and CronJobs (``parallelism``, default 1) and bare Pods are
needed on every cluster; DaemonSets once per node. Each pod as Kubernetes counts it
(``api.pods``).

Values still holding a template expression are unknown here (rendering is per cluster);
the members' own quotas count the rendered objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from api.pods import pod_requests
from api.quantity import arithmetic
from propagator.scheduler.types import Demand

REPLICATED_KINDS = frozenset(
    {("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "ReplicaSet")}
)
"""Kinds whose ``spec.replicas`` counts as demand and that ``Divided`` placement scales."""


def _count(value: Any, default: int = 1) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


def _add(into: dict[str, Decimal], amounts: Mapping[str, Decimal], times: int) -> None:
    with arithmetic():
        for resource, amount in amounts.items():
            into[resource] = into.get(resource, Decimal(0)) + amount * times


def _template(obj: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    node: Any = obj
    for key in path:
        node = (node or {}).get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def demand_of(
    manifests: Iterable[Mapping[str, Any]], selected_kinds: Iterable[tuple[str, str]] = ()
) -> Demand:
    """Replicas and per-replica requests of the largest workload, what everything else
    that creates pods needs, and every kind."""
    kinds = set(selected_kinds)
    workloads: list[tuple[int, dict[str, Decimal]]] = []
    fixed: dict[str, Decimal] = {}
    per_node: dict[str, Decimal] = {}
    for obj in manifests:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        kinds.add(key)
        spec = _template(obj, "spec")
        if key in REPLICATED_KINDS:
            pod = pod_requests(_template(spec, "template", "spec"))
            workloads.append((_count(spec.get("replicas")), pod))
        elif key == ("apps/v1", "DaemonSet"):
            _add(per_node, pod_requests(_template(spec, "template", "spec")), 1)
        elif key == ("batch/v1", "Job"):
            pod = pod_requests(_template(spec, "template", "spec"))
            _add(fixed, pod, _count(spec.get("parallelism")))
        elif key == ("batch/v1", "CronJob"):
            job = _template(spec, "jobTemplate", "spec")
            pod = pod_requests(_template(job, "template", "spec"))
            _add(fixed, pod, _count(job.get("parallelism")))
        elif key == ("v1", "Pod"):
            _add(fixed, pod_requests(spec), 1)
    if not workloads:
        return Demand(1, {"pods": Decimal(1)}, frozenset(kinds), fixed, per_node)
    # The divisible workload: the one asking most cpu in all (ties: the first).
    main = max(
        range(len(workloads)),
        key=lambda i: (workloads[i][1].get("cpu", Decimal(0)) * workloads[i][0], -i),
    )
    for i, (replicas, pod) in enumerate(workloads):
        if i != main:
            _add(fixed, pod, replicas)
    replicas, per_replica = workloads[main]
    return Demand(replicas, per_replica, frozenset(kinds), fixed, per_node)
