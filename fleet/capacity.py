"""A member's capacity: allocatable from its nodes, allocated from its pods' requests.

Computed from the informers' caches (kept current by watching), never by listing on every
probe. Only the fields used here are cached (see ``slim_node`` and ``slim_pod``).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from api.pods import pod_requests
from api.quantity import Format, QuantityError, arithmetic, format_quantity, parse_quantity

TRACKED = ("cpu", "memory", "pods")
_TERMINAL = ("Succeeded", "Failed")


def slim_node(node: dict[str, Any]) -> dict[str, Any]:
    status = node.get("status") or {}
    return {
        "metadata": {k: node["metadata"].get(k) for k in ("name", "resourceVersion")},
        "spec": {"unschedulable": (node.get("spec") or {}).get("unschedulable", False)},
        "status": {
            "allocatable": status.get("allocatable") or {},
            # Without its heartbeat times: a heartbeat alone changes nothing summed here.
            "conditions": [
                {"type": "Ready", "status": c.get("status")}
                for c in status.get("conditions") or []
                if c.get("type") == "Ready"
            ],
        },
    }


def _requests(containers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only what the pod's requests depend on (the API server defaulted them already)."""
    out = []
    for c in containers:
        slim: dict[str, Any] = {
            "resources": {"requests": (c.get("resources") or {}).get("requests") or {}}
        }
        if c.get("restartPolicy"):
            slim["restartPolicy"] = c["restartPolicy"]
        out.append(slim)
    return out


_POD_METADATA = ("name", "namespace", "resourceVersion", "deletionTimestamp")
"""deletionTimestamp: :func:`quota_usage` leaves out a pod being deleted (its quota stops
counting it once its grace period ends, and that sum must be a floor of the quota's own);
capacity counts it until it is gone (it holds its node's resources)."""


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    return {
        "metadata": {k: pod["metadata"].get(k) for k in _POD_METADATA},
        "spec": {
            "nodeName": spec.get("nodeName"),
            "containers": _requests(spec.get("containers") or []),
            "initContainers": _requests(spec.get("initContainers") or []),
            "overhead": spec.get("overhead") or {},
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def _parse(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)  # a member's own API server validated it; ignore what we cannot read


def node_is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def summarize(nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``{"nodes": {total, ready}, "resources": {allocatable, allocated, available}}``.

    Allocatable counts Ready, schedulable nodes; allocated counts non-terminated pods bound
    to a node.
    """
    with arithmetic():
        return _summarize(nodes, pods)


def _summarize(nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total = ready = 0
    allocatable = dict.fromkeys(TRACKED, Decimal(0))
    for node in nodes:
        total += 1
        if not node_is_ready(node):
            continue
        ready += 1
        if node["spec"].get("unschedulable"):
            continue
        for resource in TRACKED:
            allocatable[resource] += _parse(node["status"]["allocatable"].get(resource, 0))
    allocated = dict.fromkeys(TRACKED, Decimal(0))
    for pod in pods:
        if not pod["spec"].get("nodeName") or pod["status"].get("phase") in _TERMINAL:
            continue
        for resource, amount in pod_requests(pod["spec"]).items():
            allocated[resource] += amount

    def fmt(values: dict[str, Decimal]) -> dict[str, str]:
        # as the kubelet reports them: memory in binary units, cpu and pods in decimal ones
        return {
            r: format_quantity(v, Format.BINARY_SI if r == "memory" else Format.DECIMAL_SI)
            for r, v in values.items()
        }

    available = {r: max(Decimal(0), allocatable[r] - allocated[r]) for r in TRACKED}
    return {
        "nodes": {"total": total, "ready": ready},
        "resources": {
            "allocatable": fmt(allocatable),
            "allocated": fmt(allocated),
            "available": fmt(available),
        },
    }


def same_but_version(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when two slim forms of an object differ at most in resourceVersion: the
    change was to something not summed here (a heartbeat, a container's status)."""
    return _unversioned(old) == _unversioned(new)


def _unversioned(slim: dict[str, Any]) -> dict[str, Any]:
    return {**slim, "metadata": {**slim.get("metadata", {}), "resourceVersion": None}}


def quota_usage(pods: Iterable[dict[str, Any]]) -> dict[str, Decimal]:
    """What the pods among ``pods`` (slim) that a namespace's quota counts — neither
    terminated nor being deleted, bound to a node or not — request together: ``pods``,
    and ``cpu`` and ``memory`` where any asks for them."""
    total: dict[str, Decimal] = {}
    with arithmetic():
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") in _TERMINAL:
                continue
            for resource, amount in pod_requests(pod["spec"]).items():
                total[resource] = total.get(resource, Decimal(0)) + amount
    return total
