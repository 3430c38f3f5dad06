"""The LayerOrder score: clusters of earlier layers of the placement score higher."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    SchedulingContext,
)


class LayerOrder:
    """Favours clusters in earlier layers of placement.layers."""

    name = "LayerOrder"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        if not ctx.layer_rank:
            return 0.0
        rank = ctx.layer_rank.get(cluster.layer, len(ctx.layer_rank))
        return 100 * (1 - rank / len(ctx.layer_rank))

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return tuple(ctx.layer_rank.items())

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        ranks = ctx.layer_rank
        if not ranks:
            return [0.0] * len(positions)
        layers, n = cols.layers, len(ranks)
        return [100 * (1 - ranks.get(layers[i], n) / n) for i in positions]
