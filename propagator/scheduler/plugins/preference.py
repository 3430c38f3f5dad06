"""The Preference score: the placement's weighted cluster preferences (label selectors)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.common import selector_key
from propagator.scheduler.types import (
    SchedulingContext,
)


class Preference:
    """Favours clusters matching placement.preferred selectors, by their weights."""

    name = "Preference"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        preferred = ctx.placement.preferred
        if not preferred:
            return 0.0
        total = sum(p.weight for p in preferred)
        got = sum(p.weight for p in preferred if p.selector.matches(cluster.labels))
        return 100 * got / total

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return tuple([(p.weight, selector_key(p.selector)) for p in ctx.placement.preferred])

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        preferred = ctx.placement.preferred
        if not preferred:
            return [0.0] * len(positions)
        total = sum(p.weight for p in preferred)
        got = [0] * len(positions)
        for term in preferred:
            bits = cols.selected(term.selector)
            for j, i in enumerate(positions):
                if (bits >> i) & 1:
                    got[j] += term.weight
        return [100 * g / total for g in got]
