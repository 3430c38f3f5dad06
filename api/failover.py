"""Failover: how long an application tolerates an unreachable member before it is placed
without it, and how it comes back."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Duration, duration_rule
from api.model import KubeModel

DEFAULT_CLUSTER_UNREACHABLE_AFTER = "300s"

REBALANCE_ANNOTATION = "propagator.io/rebalance"
"""Set (or change) its value on an application to place it again from scratch, once: the
clusters it runs on lose their precedence and replicas may move, with the graceful rules
of an eviction."""


class Failover(KubeModel):
    """When replicas leave a member that stopped answering."""

    cluster_unreachable_after: Duration = Field(default=DEFAULT_CLUSTER_UNREACHABLE_AFTER)
    """How long a member the application runs on may be NotReady before the application
    is placed without it (its replicas go to clusters with room); what ran there is removed
    once the replacement is Available and the member answers again."""

    failback: Literal["Never", "WhenReady"] = "Never"
    """Never: nothing moves back by itself when an evicted cluster answers again (it gets
    replicas at a later scale-up or rebalance). WhenReady: once it has been Ready for
    failbackAfter, the application is placed again from scratch, so its replicas return."""
    failback_after: Duration = Field(default="60s")
    """How long an evicted cluster must have been Ready before WhenReady moves back."""

    rules = (
        duration_rule("clusterUnreachableAfter", "cluster_unreachable_after", "24h", "1s"),
        duration_rule("failbackAfter", "failback_after", "24h", "1s"),
    )
