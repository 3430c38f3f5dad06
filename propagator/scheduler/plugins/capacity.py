"""The Capacity filter: a cluster without room (allocatable less allocated, and its nodes'
pods) for the application's replicas is left out."""

from __future__ import annotations

from collections.abc import Hashable
from decimal import Decimal

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.protocol import (
    Rejection,
)
from propagator.scheduler.plugins.replicaroom import fit
from propagator.scheduler.types import (
    SchedulingContext,
    add,
    mul,
    sub,
)

_ZERO = Decimal(0)


class Capacity:
    """Keeps the clusters with room: all replicas (Duplicated) or at least one (Divided,
    Aggregated). The application's own use there counts as room."""

    name = "Capacity"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        return fit(cluster, ctx.available(cluster), ctx, "capacity")

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        if ctx.demand.on:
            return None  # some clusters' LimitRanges change what it asks there
        duplicated = ctx.placement.replicas.mode == "Duplicated"
        return ctx.demand.resources_key, ctx.demand.replicas if duplicated else 1

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        """The clusters without room, as ``_fit`` judges them, from the available columns
        (where the application runs, with its own use counted back as
        ``SchedulingContext.available`` counts it)."""
        demand = ctx.demand
        if demand.per_node or demand.on:
            return None  # what it asks depends on each cluster's nodes or LimitRanges
        beside = demand.fixed
        need = demand.replicas if ctx.placement.replicas.mode == "Duplicated" else 1
        # (resource, column, taken beside the replicas, what the replicas need) per check
        checks: list[tuple[str, list[Decimal | None], Decimal | None, Decimal]] = []
        for r, amount in beside.items():  # first_short(available, beside, 1)
            if (column := cols.available.get(r)) is not None:
                checks.append((r, column, None, amount))
        if need > 0:  # first_short(left_after(available, beside), per_replica, need)
            for r, amount in demand.per_replica.items():
                if (column := cols.available.get(r)) is not None:
                    checks.append((r, column, beside.get(r), mul(amount, need)))
        current = ctx.current
        mine = cols.bits(current) & alive if current else 0
        rejected = 0
        for i in cols.each(alive & ~mine):
            for _, column, taken, wanted in checks:
                have = column[i]
                if have is None:
                    continue
                if taken is not None:
                    have = sub(have, taken)
                if wanted > have:
                    rejected |= 1 << i
                    break
        per_replica = demand.per_replica
        for i in cols.each(mine):
            replicas = current[cols.names[i]]
            for r, column, taken, wanted in checks:
                have = column[i]
                if have is None:
                    continue
                own = beside.get(r, _ZERO)  # SchedulingContext.own_use
                if r in per_replica:
                    own = add(own, mul(per_replica[r], replicas))
                have = add(have, own)
                if taken is not None:
                    have = sub(have, taken)
                if wanted > have:
                    rejected |= 1 << i
                    break
        return rejected
