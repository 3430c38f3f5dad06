"""The TaintToleration filter: a cluster with a NoSchedule or NoExecute taint the
application does not tolerate is left out."""

from __future__ import annotations

from collections.abc import Hashable

from api.taints import (
    FILTERING_EFFECTS,
    untolerated,
)
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.common import taint_name
from propagator.scheduler.plugins.protocol import (
    Rejection,
)
from propagator.scheduler.types import (
    SchedulingContext,
)


class TaintToleration:
    """Drops clusters with a taint the placement does not tolerate, and NotReady ones."""

    name = "TaintToleration"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        for taint in untolerated(cluster.taints, ctx.placement.tolerations):
            if taint.effect in FILTERING_EFFECTS:
                short = taint_name(taint.key)
                return (
                    f"tainted {short}",
                    f"taint {taint.key}={taint.value}:{taint.effect} not tolerated",
                )
        if not cluster.ready:
            return "not ready", "the cluster's Ready condition is not True"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.tolerations_key

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        tolerations = ctx.placement.tolerations
        bad = cols.all & ~cols.ready
        for taint, bits in cols.taints.values():
            if (
                bits & alive
                and taint.effect in FILTERING_EFFECTS
                and not any(t.tolerates(taint) for t in tolerations)
            ):
                bad |= bits
        return alive & bad
