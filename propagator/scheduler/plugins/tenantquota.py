"""The TenantQuota filter: a cluster where the tenant's quota leaves no room for the
application is left out."""

from __future__ import annotations

from collections.abc import Hashable

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.protocol import (
    Rejection,
)
from propagator.scheduler.plugins.replicaroom import fit
from propagator.scheduler.types import (
    SchedulingContext,
)


class TenantQuotaFilter:
    """Keeps the clusters where the tenant's remaining quota fits the demand."""

    name = "TenantQuota"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        remaining = ctx.quota_for(cluster.name)
        return None if remaining is None else fit(cluster, remaining, ctx, "quota")

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return "no quota" if ctx.quota is None else None

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        return 0 if ctx.quota is None else None
