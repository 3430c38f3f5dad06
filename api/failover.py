"""Failover: how long an application tolerates an unreachable member, or an unhealthy one,
before it is placed without it; how gracefully its replicas leave; how they come back."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Duration, duration_rule
from api.model import KubeModel

DEFAULT_CLUSTER_UNREACHABLE_AFTER = "300s"

REBALANCE_ANNOTATION = "propagator.io/rebalance"
"""Set (or change) its value on an application to place it again from scratch, once: the
clusters it runs on lose their precedence, the clusters it was evicted from may take it
again, and replicas move with the graceful rules of an eviction."""

EvictionReason = Literal["ClusterUnreachable", "ApplicationUnhealthy", "Rebalance", "Failback"]
"""Why replicas leave a cluster."""


class ApplicationFailover(KubeModel):
    """Moving the application off a cluster where it stays unhealthy (set to turn it on)."""

    unhealthy_after: Duration = Field(default="300s")
    """How long the application may be not Healthy on a cluster (Degraded, or not all
    replicas Available) before it is placed without that cluster — only while it runs
    Healthy on another one: an application unhealthy everywhere is a bad release, not a bad
    cluster, and stays. It is not placed there again until a rebalance."""

    purge_mode: Literal["Graciously", "Immediately"] = "Graciously"
    """Graciously: what runs on the unhealthy cluster stays until the replacement is
    Available (or gracePeriod passes). Immediately: it is removed at once."""

    rules = (duration_rule("unhealthyAfter", "unhealthy_after", "24h", "1s"),)


class Failover(KubeModel):
    """When replicas leave a member that stopped answering, or where the application stays
    unhealthy, and how they come back."""

    cluster_unreachable_after: Duration = Field(default=DEFAULT_CLUSTER_UNREACHABLE_AFTER)
    """How long a member the application runs on may be NotReady before the application
    is placed without it (its replicas go to clusters with room); what ran there is removed
    once the replacement is Available and the member answers again."""

    application: ApplicationFailover | None = None
    """Application failover (off unless set)."""

    grace_period: Duration = Field(default="600s")
    """How long replicas leaving a cluster (eviction, rebalance, failback) wait at most for
    their replacement to be Available before they are removed anyway."""

    failback: Literal["Never", "WhenReady"] = "Never"
    """Never: nothing moves back by itself when an evicted cluster answers again (it gets
    replicas at a later scale-up or rebalance). WhenReady: once it has been Ready for
    failbackAfter, the application is placed again from scratch, so its replicas return."""
    failback_after: Duration = Field(default="60s")
    """How long an evicted cluster must have been Ready before WhenReady moves back."""

    rules = (
        duration_rule("clusterUnreachableAfter", "cluster_unreachable_after", "24h", "1s"),
        duration_rule("gracePeriod", "grace_period", "24h", "1s"),
        duration_rule("failbackAfter", "failback_after", "24h", "1s"),
    )
