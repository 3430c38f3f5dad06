"""What a member's tenant quotas do not count of what their namespaces' pods use, and
the limit left once that is held back (pure).

A member's quota controller recounts a quota whose ``hard`` changed from its own pod
cache, which may not hold a pod admitted a moment before; the count then stays short
until its next full recount (every 5 minutes by default), and the member's admission
counts on from the short figure. What is missed is held back from the tenant's limit
before it is split, so that admission still cannot let the tenant past its limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal

from api.quantity import arithmetic

POD_USAGE = {
    "pods": "pods",
    "cpu": "cpu",
    "requests.cpu": "cpu",
    "memory": "memory",
    "requests.memory": "memory",
}
"""Quota resources a namespace's pods use, each with what it is summed from
(:func:`fleet.capacity.quota_usage`), to check the member's count against."""


def uncounted(
    limits: Mapping[str, Decimal],
    counted: Mapping[str, Mapping[str, Decimal]],
    seen: Callable[[str], Mapping[str, Decimal] | None],
) -> dict[str, dict[str, Decimal]]:
    """Per namespace of ``counted`` (its quota's use, as the member counts it) and
    limited resource: what its pods use beyond that, by ``seen(namespace)`` (what the
    pods there request together; None: not known)."""
    out: dict[str, dict[str, Decimal]] = {}
    with arithmetic():
        for ns, by_quota in counted.items():
            by_pods = seen(ns) or {}
            missed = {}
            for resource, source in POD_USAGE.items():
                beyond = by_pods.get(source, Decimal(0)) - by_quota.get(resource, Decimal(0))
                if resource in limits and beyond > 0:
                    missed[resource] = beyond
            if missed:
                out[ns] = missed
    return out


def held_back(
    limits: Mapping[str, Decimal], missed: Iterable[Mapping[str, Decimal]]
) -> dict[str, Decimal]:
    """``limits`` less what the members' counts miss (``missed``, per namespace)."""
    held = dict(limits)
    with arithmetic():
        for per_namespace in missed:
            for resource, amount in per_namespace.items():
                held[resource] -= amount
    return held
