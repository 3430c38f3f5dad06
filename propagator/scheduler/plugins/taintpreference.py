"""The TaintPreference score: clusters with PreferNoSchedule taints the application does not
tolerate score lower."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from api.taints import (
    untolerated,
)
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    SchedulingContext,
)


class TaintPreference:
    """Favours clusters without PreferNoSchedule taints the placement does not tolerate
    (100 with none, 50 with one, 33 with two…), as kube-scheduler's TaintToleration
    score does for nodes."""

    name = "TaintPreference"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        avoided = [
            t
            for t in untolerated(cluster.taints, ctx.placement.tolerations)
            if t.effect == "PreferNoSchedule"
        ]
        return 100 / (1 + len(avoided))

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.tolerations_key

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        if not cols.taints_exact:
            return None  # a taint listed twice counts twice: per cluster
        counts = [0] * len(positions)
        tolerations = ctx.placement.tolerations
        for taint, bits in cols.taints.values():
            if taint.effect != "PreferNoSchedule" or any(t.tolerates(taint) for t in tolerations):
                continue
            for j, i in enumerate(positions):
                counts[j] += (bits >> i) & 1
        return [100 / (1 + n) for n in counts]
