"""How a step's weight becomes replicas: the canary copy's share of a workload's replicas,
and so of the traffic its Services send (no mesh: both copies' pods back one Service)."""

from __future__ import annotations


def split(replicas: int, weight: int) -> tuple[int, int]:
    """(stable, canary) replicas of a workload of ``replicas`` at ``weight`` percent:
    canary = ceil(replicas * weight / 100), at least 1 above 0 % (when there is a replica
    at all), stable = the rest. Raises ValueError outside 0-100 % or below 0 replicas."""
    if not 0 <= weight <= 100:
        raise ValueError(f"weight {weight} is outside 0-100")
    if replicas < 0:
        raise ValueError(f"replicas {replicas} is below 0")
    canary = -(-replicas * weight // 100)  # ceil, in integers: 1 or more above 0 %
    return replicas - canary, canary
