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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
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


def pod_spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec ``obj`` creates pods from (its own for a Pod), or None for a kind
    that creates none."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    spec = _template(obj, "spec")
    if key in REPLICATED_KINDS or key in (("apps/v1", "DaemonSet"), ("batch/v1", "Job")):
        return _template(spec, "template", "spec")
    if key == ("batch/v1", "CronJob"):
        return _template(spec, "jobTemplate", "spec", "template", "spec")
    if key == ("v1", "Pod"):
        return spec
    return None


def demand_of(
    manifests: Iterable[Mapping[str, Any]],
    selected_kinds: Iterable[tuple[str, str]] = (),
    defaults: Mapping[str, Mapping[str, Decimal]] | None = None,
    default_namespace: str = "",
) -> Demand:
    """Replicas and per-replica requests of the largest workload, what everything else
    that creates pods needs, and every kind. ``defaults``: per namespace, the default
    requests of its LimitRanges (containers that state none get them); objects without a
    namespace are in ``default_namespace``."""
    kinds = set(selected_kinds)
    workloads: list[tuple[int, dict[str, Decimal]]] = []
    stated_cpu: list[Decimal] = []
    """Per workload, the cpu its pods state (LimitRange defaults aside)."""
    fixed: dict[str, Decimal] = {}
    per_node: dict[str, Decimal] = {}
    for obj in manifests:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        kinds.add(key)
        pod_spec = pod_spec_of(obj)
        if pod_spec is None:
            continue
        namespace = str((obj.get("metadata") or {}).get("namespace") or default_namespace)
        pod = pod_requests(pod_spec, (defaults or {}).get(namespace))
        spec = _template(obj, "spec")
        if key in REPLICATED_KINDS:
            workloads.append((_count(spec.get("replicas")), pod))
            stated = pod if not defaults else pod_requests(pod_spec, None)
            stated_cpu.append(stated.get("cpu", Decimal(0)) * workloads[-1][0])
        elif key == ("apps/v1", "DaemonSet"):
            _add(per_node, pod, 1)
        elif key == ("batch/v1", "Job"):
            _add(fixed, pod, _count(spec.get("parallelism")))
        elif key == ("batch/v1", "CronJob"):
            job = _template(spec, "jobTemplate", "spec")
            _add(fixed, pod, _count(job.get("parallelism")))
        else:  # a Pod
            _add(fixed, pod, 1)
    if not workloads:
        return Demand(
            1,
            {"pods": Decimal(1)},
            frozenset(kinds),
            fixed,
            per_node,
            creates_pods=bool(fixed or per_node),
        )
    # The divisible workload: the one asking most cpu in all as stated (ties: the first),
    # the same one whatever a cluster's LimitRanges add.
    main = max(range(len(workloads)), key=lambda i: (stated_cpu[i], -i))
    for i, (replicas, pod) in enumerate(workloads):
        if i != main:
            _add(fixed, pod, replicas)
    replicas, per_replica = workloads[main]
    return Demand(replicas, per_replica, frozenset(kinds), fixed, per_node)


def on_clusters(
    base: Demand,
    manifests: Sequence[Mapping[str, Any]],
    defaults: Mapping[str, Mapping[str, Mapping[str, Decimal]] | None],
    default_namespace: str = "",
) -> Demand:
    """``base`` (:func:`demand_of` without defaults) with what it asks instead on each
    cluster whose LimitRanges give its containers defaults (``defaults``: per cluster, per
    namespace, the default requests of a container; :attr:`Demand.on`). Clusters with the
    same defaults share one reckoning."""
    namespaces = {
        str((obj.get("metadata") or {}).get("namespace") or default_namespace)
        for obj in manifests
        if pod_spec_of(obj) is not None
    }
    on: dict[str, Demand] = {}
    reckoned: dict[tuple[Any, ...], Demand | None] = {}
    for cluster, by_namespace in defaults.items():
        relevant = {
            ns: by_namespace[ns] for ns in namespaces if by_namespace and ns in by_namespace
        }
        if not relevant:
            continue
        key = tuple(sorted((ns, tuple(sorted(d.items()))) for ns, d in relevant.items()))
        if key not in reckoned:
            variant = demand_of(manifests, base.kinds, relevant, default_namespace)
            same = variant.resources_key == base.resources_key
            reckoned[key] = None if same else variant
        if (variant_for := reckoned[key]) is not None:
            on[cluster] = variant_for
    return replace(base, on=on) if on else base
