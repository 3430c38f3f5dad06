"""How a tenant's limit on one member is split into per-namespace ResourceQuota ``hard``
values whose sum never exceeds the limit (pure).

Each namespace the tenant's applications write gets what it uses plus an equal share of
the room left, in whole units of the resource; what rounding leaves over goes a unit each
to the first of them by name, so the shares add up to the limit and stay put from one
rebalance to the next (one no longer written keeps its use).
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
        growing = sorted(ns for ns in used if ns in active)
        if not growing:
            return dict(used)
        room = _floor((limit - total) / len(growing), unit)
        left_over = int(_floor(limit - total - room * len(growing), unit) / unit)
        extra = dict.fromkeys(growing[:left_over], unit)
        return {
            ns: u + room + extra.get(ns, Decimal(0)) if ns in active else u
            for ns, u in used.items()
        }


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


def capped_raise(
    limits: Mapping[str, Decimal],
    namespace: str,
    target: Mapping[str, Decimal],
    in_force: Mapping[str, Mapping[str, Decimal]],
    used: Mapping[str, Mapping[str, Decimal]],
) -> dict[str, Decimal]:
    """``target`` for ``namespace`` with every raise capped so that, with the other
    namespaces' room, the tenant still fits its limit. A namespace may hold more than its
    ``hard`` (a quota lowered below use evicts nothing), so another's room is the larger of
    its ``in_force`` hard and its ``used`` — both as the member answered just now, not as a
    cache last saw them. Never below what is in force for ``namespace``."""
    own = in_force.get(namespace, {})
    out = dict(target)
    with arithmetic():
        for resource, value in target.items():
            limit = limits.get(resource)
            current = own.get(resource)
            if limit is None or (current is not None and value <= current):
                continue  # not a raise
            others = sum(
                (
                    max(
                        in_force.get(ns, {}).get(resource, Decimal(0)),
                        used.get(ns, {}).get(resource, Decimal(0)),
                    )
                    for ns in (set(in_force) | set(used)) - {namespace}
                ),
                Decimal(0),
            )
            allowed = _floor(limit - others, unit_of(resource))
            out[resource] = max(current or Decimal(0), min(value, allowed))
    return out
