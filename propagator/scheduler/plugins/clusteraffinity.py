"""The ClusterAffinity filter: the placement's cluster names, exclusions, label and field
selectors."""

from __future__ import annotations

from collections.abc import Hashable

from api.selectors import selects
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.protocol import (
    Rejection,
)
from propagator.scheduler.types import (
    SchedulingContext,
)


class ClusterAffinity:
    """Keeps the clusters that placement's selector, names and exclusions allow."""

    name = "ClusterAffinity"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        if ctx.affinity_indexed:
            return None
        p = ctx.placement
        if cluster.name in p.exclude_clusters:
            return "excluded", "listed in placement.excludeClusters"
        if p.cluster_names and cluster.name not in p.cluster_names:
            return "not in clusterNames", "not listed in placement.clusterNames"
        if p.cluster_selector is not None and not selects(p.cluster_selector, cluster.labels):
            return "selector mismatch", "labels do not match placement.clusterSelector"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return "indexed" if ctx.affinity_indexed else None  # else: names differ per placement

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        if ctx.affinity_indexed:
            return 0
        p = ctx.placement
        allowed = cols.all & ~cols.bits(p.exclude_clusters)
        if p.cluster_names:
            allowed &= cols.bits(p.cluster_names)
        if p.cluster_selector is not None:
            allowed &= cols.selected(p.cluster_selector)
        return alive & ~allowed
