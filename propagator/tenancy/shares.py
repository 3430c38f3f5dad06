"""How a tenant's limit on one member is split into per-namespace ResourceQuota ``hard``
values whose sum never exceeds the limit (pure).

Each namespace the tenant's applications write gets what it uses plus an equal share of
the room left, rounded down to the resource's unit (one no longer written keeps its use).
The member's own quota admission then makes overflow impossible: a namespace can only
grow into room no other namespace was given. When use already exceeds the limit (the
limit was lowered), every namespace is held below its use in proportion, so nothing
grows until use is back under the limit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from decimal import ROUND_FLOOR, Decimal

from api.quantity import arithmetic

MILLI_RESOURCES = frozenset({"cpu", "requests.cpu", "limits.cpu"})
"""Resources whose hard values may carry milli-units; the others are whole numbers."""


def unit_of(resource: str) -> Decimal:
    return Decimal("0.001") if resource in MILLI_RESOURCES else Decimal(1)


def _floor(value: Decimal, unit: Decimal) -> Decimal:
    return (value / unit).to_integral_value(rounding=ROUND_FLOOR) * unit


def split(
    limit: Decimal, used: Mapping[str, Decimal], resource: str, active: Collection[str]
) -> dict[str, Decimal]:
    """``hard`` per namespace for one resource: the sum is at most ``limit``. The room
    left goes to the ``active`` namespaces (those the tenant's applications write now);
    the others keep what they use."""
    if not used:
        return {}
    unit = unit_of(resource)
    with arithmetic():
        total = sum(used.values(), Decimal(0))
        if limit <= 0:
            return dict.fromkeys(used, Decimal(0))
        if total > limit:  # over the limit: nobody grows; the sum is still within it
            return {ns: _floor(limit * u / total, unit) for ns, u in used.items()}
        growing = [ns for ns in used if ns in active]
        room = _floor((limit - total) / len(growing), unit) if growing else Decimal(0)
        return {ns: u + room if ns in active else u for ns, u in used.items()}


def split_all(
    limits: Mapping[str, Decimal],
    used: Mapping[str, Mapping[str, Decimal]],
    active: Collection[str],
) -> dict[str, dict[str, Decimal]]:
    """``hard`` per namespace for every limited resource; ``used`` maps every namespace
    to its use per resource (missing: none)."""
    hard: dict[str, dict[str, Decimal]] = {ns: {} for ns in used}
    for resource, limit in limits.items():
        per_namespace = {ns: max(Decimal(0), u.get(resource, Decimal(0))) for ns, u in used.items()}
        for ns, value in split(limit, per_namespace, resource, active).items():
            hard[ns][resource] = value
    return hard
