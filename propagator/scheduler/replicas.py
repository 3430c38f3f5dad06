"""Dividing replicas among clusters by weight, never above a cluster's cap."""

from __future__ import annotations

from collections.abc import Mapping


def divide(
    total: int, weights: Mapping[str, int], caps: Mapping[str, int | None]
) -> dict[str, int] | None:
    """Split ``total`` replicas in proportion to ``weights``, each cluster at most its cap
    (None: no cap). Remainders go to the largest fractional shares, ties by name, so the
    same input always gives the same answer. None when the caps cannot hold ``total``."""
    assigned = dict.fromkeys(weights, 0)
    active = {n for n, w in weights.items() if w > 0 and caps.get(n) != 0}
    remaining = total
    while remaining > 0 and active:
        weight_sum = sum(weights[n] for n in active)
        shares = {n: remaining * weights[n] // weight_sum for n in active}
        leftover = remaining - sum(shares.values())
        by_fraction = sorted(active, key=lambda n: (-(remaining * weights[n] % weight_sum), n))
        for n in by_fraction[:leftover]:
            shares[n] += 1
        capped = False
        for n in sorted(active):
            cap = caps.get(n)
            room = None if cap is None else cap - assigned[n]
            give = shares[n] if room is None else min(shares[n], room)
            assigned[n] += give
            remaining -= give
            if room is not None and shares[n] >= room:
                active.discard(n)
                capped = capped or shares[n] > room
        if not capped:
            break
    return assigned if remaining == 0 else None
