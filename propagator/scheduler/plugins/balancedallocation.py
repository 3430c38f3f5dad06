"""The BalancedAllocation score: clusters whose CPU and memory use stay balanced after the
application score higher."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    Demand,
    SchedulingContext,
)


def _balanced(
    cpu: float | None,
    memory: float | None,
    total_cpu: float,
    total_memory: float,
    demand: Demand,
) -> float:
    if cpu is None or memory is None:
        return 0.0
    # Fractions used once one replica more runs there.
    used_cpu = 1 - cpu + demand.cpu / total_cpu
    used_memory = 1 - memory + demand.memory / total_memory
    return 100 * (1 - abs(min(1.0, used_cpu) - min(1.0, used_memory)))


class BalancedAllocation:
    """Favours clusters whose cpu and memory would be used in equal proportion."""

    name = "BalancedAllocation"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        return _balanced(
            cluster.free_cpu,
            cluster.free_memory,
            cluster.total_cpu,
            cluster.total_memory,
            ctx.demand_on(cluster.name),
        )

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        if ctx.demand.on:
            return None  # some clusters' LimitRanges change what it asks there
        return ctx.demand.cpu, ctx.demand.memory

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        if ctx.demand.on:
            return None  # scored per cluster
        free_cpu, free_memory = cols.free_cpu, cols.free_memory
        total_cpu, total_memory = cols.total_cpu, cols.total_memory
        want_cpu, want_memory = ctx.demand.cpu, ctx.demand.memory
        out = []
        for i in positions:  # _balanced, inlined: this runs for every candidate
            cpu, memory = free_cpu[i], free_memory[i]
            if cpu is None or memory is None:
                out.append(0.0)
                continue
            used_cpu = 1 - cpu + want_cpu / total_cpu[i]
            used_memory = 1 - memory + want_memory / total_memory[i]
            used_cpu = used_cpu if used_cpu < 1.0 else 1.0
            used_memory = used_memory if used_memory < 1.0 else 1.0
            out.append(100 * (1 - abs(used_cpu - used_memory)))
        return out
