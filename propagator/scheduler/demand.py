"""What an application asks of a cluster, read from its manifests.

Every kind that creates pods counts, as its interpreter rules' ``replicas`` read it (the
built-in rules for core kinds, a ResourceInterpreter's for any other): the largest
divisible workload (one whose rule says where a cluster's share is written: Deployment,
StatefulSet, ReplicaSet, or a custom kind) is the one ``Divided`` placement scales; other
divisible workloads, kinds that are not divided (Jobs and CronJobs run ``parallelism``
pods, a Pod one) are needed whole on every cluster; per-node kinds (DaemonSets) once per
node. Each pod as Kubernetes counts it (``api.pods``).

Values still holding a template expression are unknown here (rendering is per cluster);
the members' own quotas count the rendered objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from api.charts import is_chart_release
from api.pods import pod_requests
from api.quantity import arithmetic
from propagator.interpreter.pointer import read_pointer
from propagator.interpreter.registry import Interpreters, Replicas, RuleFailed, builtin_rules
from propagator.scheduler.types import Demand


def _count(value: Any, default: int = 1) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


def _add(into: dict[str, Decimal], amounts: Mapping[str, Decimal], times: int) -> None:
    with arithmetic():
        for resource, amount in amounts.items():
            into[resource] = into.get(resource, Decimal(0)) + amount * times


def _replicas(obj: Mapping[str, Any], interpreters: Interpreters) -> Replicas | None:
    """What ``obj`` runs by its kind's replicas rule; a count the rule cannot read (a
    template expression, a value the object does not hold yet) is 1."""
    try:
        return interpreters.replicas(obj)
    except RuleFailed:
        rules = interpreters.rules_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        spec = rules.spec.replicas if rules is not None else None
        if spec is None:
            return None
        template = read_pointer(obj, spec.pod_template) if spec.pod_template is not None else None
        return Replicas(
            1, template if isinstance(template, Mapping) else {}, spec.field, spec.per_node
        )


def pod_spec_of(
    obj: Mapping[str, Any], interpreters: Interpreters | None = None
) -> Mapping[str, Any] | None:
    """The pod spec ``obj`` creates pods from (its own for a Pod), by its kind's replicas
    rule, or None for a kind that creates none."""
    replicas = _replicas(obj, interpreters or builtin_rules())
    if replicas is None or replicas.pod_template is None:
        return None
    spec = replicas.pod_template.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def demand_of(
    manifests: Iterable[Mapping[str, Any]],
    selected_kinds: Iterable[tuple[str, str]] = (),
    defaults: Mapping[str, Mapping[str, Decimal]] | None = None,
    default_namespace: str = "",
    interpreters: Interpreters | None = None,
) -> Demand:
    """Replicas and per-replica requests of the largest divisible workload, what
    everything else that creates pods needs, and every kind — each object as its kind's
    replicas rule reads it (``interpreters``; the built-in rules by default).
    ``defaults``: per namespace, the default requests of its LimitRanges (containers that
    state none get them); objects without a namespace are in ``default_namespace``."""
    rules = interpreters or builtin_rules()
    kinds = set(selected_kinds)
    workloads: list[tuple[int, dict[str, Decimal]]] = []
    stated_cpu: list[Decimal] = []
    """Per workload, the cpu its pods state (LimitRange defaults aside)."""
    fixed: dict[str, Decimal] = {}
    per_node: dict[str, Decimal] = {}
    for obj in manifests:
        if is_chart_release(obj):  # its objects are known once rendered, per cluster
            continue
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        kinds.add(key)
        replicas = _replicas(obj, rules)
        if replicas is None or replicas.pod_template is None:
            continue
        pod_spec = replicas.pod_template.get("spec")
        pod_spec = pod_spec if isinstance(pod_spec, Mapping) else {}
        namespace = str((obj.get("metadata") or {}).get("namespace") or default_namespace)
        pod = pod_requests(pod_spec, (defaults or {}).get(namespace))
        count = _count(replicas.count)
        if replicas.per_node:
            _add(per_node, pod, 1)
        elif replicas.field is not None:
            workloads.append((count, pod))
            stated = pod if not defaults else pod_requests(pod_spec, None)
            stated_cpu.append(stated.get("cpu", Decimal(0)) * count)
        else:
            _add(fixed, pod, count)
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
    for i, (count, pod) in enumerate(workloads):
        if i != main:
            _add(fixed, pod, count)
    count, per_replica = workloads[main]
    return Demand(count, per_replica, frozenset(kinds), fixed, per_node)


def on_clusters(
    base: Demand,
    manifests: Sequence[Mapping[str, Any]],
    defaults: Mapping[str, Mapping[str, Mapping[str, Decimal]] | None],
    default_namespace: str = "",
    interpreters: Interpreters | None = None,
) -> Demand:
    """``base`` (:func:`demand_of` without defaults) with what it asks instead on each
    cluster whose LimitRanges give its containers defaults (``defaults``: per cluster, per
    namespace, the default requests of a container; :attr:`Demand.on`). Clusters with the
    same defaults share one reckoning."""
    namespaces = {
        str((obj.get("metadata") or {}).get("namespace") or default_namespace)
        for obj in manifests
        if pod_spec_of(obj, interpreters) is not None
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
            variant = demand_of(manifests, base.kinds, relevant, default_namespace, interpreters)
            same = variant.resources_key == base.resources_key
            reckoned[key] = None if same else variant
        if (variant_for := reckoned[key]) is not None:
            on[cluster] = variant_for
    return replace(base, on=on) if on else base
