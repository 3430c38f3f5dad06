"""The ``Cost`` score: a cluster labelled ``cost.example.com/tier`` ``spot`` scores 100,
``standard`` 50, ``premium`` 0; an unlabelled cluster (or another tier) 50.

Turn it on with ``PROPAGATOR_SCHEDULER_PLUGINS=...,Cost=2`` (its weight among the
scores). It is a :class:`~propagator.scheduler.plugins.protocol.ScorePlugin` and
:class:`~propagator.scheduler.plugins.protocol.Memoized` (its answer depends on the
cluster alone, so the scheduler may keep it until the fleet changes); it has no columnar
method, so the scheduler asks it cluster by cluster.
"""

from __future__ import annotations

from collections.abc import Hashable

from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import SchedulingContext

TIER_LABEL = "cost.example.com/tier"
SCORES = {"spot": 100.0, "standard": 50.0, "premium": 0.0}


class Cost:
    """Prefers cheaper clusters."""

    name = "Cost"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        """0 to 100: the cheaper the cluster's tier, the higher."""
        return SCORES.get(cluster.labels.get(TIER_LABEL, ""), 50.0)

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        """Nothing but the cluster counts: one key for every decision."""
        return "Cost"
