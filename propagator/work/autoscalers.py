"""A divided application's autoscalers: each cluster's HorizontalPodAutoscaler gets a share
of ``minReplicas`` and ``maxReplicas`` by the same weights as the workload's replicas (the
cluster's share of them), every cluster at least 1, so the fleet scales between the
bounds the manifest gives (a little above them when there are more clusters than
``minReplicas``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from propagator.scheduler.replicas import apportion
from propagator.work.release import HPA_KINDS, identity, scale_target

Rendered = dict[str, list[dict[str, Any]]]


def divided_bounds(low: int, high: int, shares: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per cluster, its (minReplicas, maxReplicas): ``low`` and ``high`` apportioned by
    ``shares`` (equal shares when they are all 0), each at least 1, max at least min."""
    weights = dict(shares) if any(v > 0 for v in shares.values()) else dict.fromkeys(shares, 1)
    caps: dict[str, int | None] = dict.fromkeys(weights)
    lows = apportion(max(low, 0), weights, caps) or dict.fromkeys(weights, 0)
    highs = apportion(max(high, 0), weights, caps) or dict.fromkeys(weights, 0)
    out = {}
    for name in weights:
        floor = max(lows[name], 1)
        out[name] = (floor, max(highs[name], floor))
    return out


def divide_autoscalers(
    rendered: Rendered, shares: Mapping[str, int], scale_fields: Sequence[tuple[str, str, str]]
) -> Rendered:
    """``rendered`` with each autoscaler that scales a divided workload of its cluster
    given that cluster's bounds (see :func:`divided_bounds`); the others as they are."""
    kinds = {(a, k) for a, k, _ in scale_fields}
    bounds: dict[tuple[str, str, str, str], dict[str, tuple[int, int]]] = {}
    out: Rendered = {}
    for cluster, objects in rendered.items():
        workloads = {identity(o) for o in objects if (o.get("apiVersion"), o.get("kind")) in kinds}
        changed = []
        for obj in objects:
            target = _target(obj, workloads)
            spec = obj.get("spec") or {}
            low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
            if target is None or not _count(low) or not _count(high) or cluster not in shares:
                changed.append(obj)
                continue
            key = identity(obj)
            if key not in bounds:
                bounds[key] = divided_bounds(low, high, shares)
            divided = copy.deepcopy(obj)
            divided["spec"]["minReplicas"], divided["spec"]["maxReplicas"] = bounds[key][cluster]
            changed.append(divided)
        out[cluster] = changed
    return out


def _target(
    obj: Mapping[str, Any], workloads: set[tuple[str, str, str, str]]
) -> tuple[str, str, str, str] | None:
    if (obj.get("apiVersion"), obj.get("kind")) not in HPA_KINDS:
        return None
    target = scale_target(obj, str((obj.get("metadata") or {}).get("namespace") or ""))
    return target if target in workloads else None


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
