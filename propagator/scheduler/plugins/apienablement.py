"""The ApiEnablement filter: a cluster that does not serve every kind the application
propagates is left out."""

from __future__ import annotations

from collections.abc import Hashable

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.protocol import (
    Rejection,
)
from propagator.scheduler.types import (
    SchedulingContext,
)


class ApiEnablementFilter:
    """Keeps the clusters that serve every kind being propagated."""

    name = "ApiEnablement"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        missing = ctx.demand.kinds - cluster.api_enablements
        if missing:
            api_version, kind = sorted(missing)[0]
            return f"no {kind}", f"does not serve {kind} in {api_version}"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.demand.kinds

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        serving = cols.all
        for kind in ctx.demand.kinds:
            serving &= cols.serves.get(kind, 0)
        return alive & ~serving
