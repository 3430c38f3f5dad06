"""The LeastAllocated score: clusters with more of their CPU and memory free score higher."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    SchedulingContext,
)


def _least_allocated(cpu: float | None, memory: float | None) -> float:
    if cpu is None or memory is None:
        return 0.0 if cpu is None and memory is None else 100 * (cpu or memory or 0.0)
    return 50 * (cpu + memory)


class LeastAllocated:
    """Favours clusters with more of their cpu and memory free."""

    name = "LeastAllocated"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        return _least_allocated(cluster.free_cpu, cluster.free_memory)

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ()

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        cpu, memory = cols.free_cpu, cols.free_memory
        return [_least_allocated(cpu[i], memory[i]) for i in positions]
