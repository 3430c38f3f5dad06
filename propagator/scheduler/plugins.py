"""Scheduler plugins: the protocol, the built-in filters and scores.

A plugin has a ``name`` and a ``filter`` method (returns None to keep the cluster, or a
short reason to drop it) and/or a ``score`` method (0 to 100). Plugins are found through
the entry point group ``propagator.scheduler.plugins`` (see ``registry.py``); the built-ins
below are registered there by this package's own pyproject.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from api.selectors import selects
from api.taints import FILTERING_EFFECTS, NOT_READY_TAINT, UNREACHABLE_TAINT, untolerated
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    ResourceAmounts,
    SchedulingContext,
    first_short,
    left_after,
    replicas_that_fit,
)

Rejection = tuple[str, str]
"""(short reason counted in summaries, detail for explanations)."""


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        """None to keep ``cluster``; (reason, detail) to drop it."""


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        """How good ``cluster`` is for this placement, 0 to 100."""


_SHORT_TAINTS = {NOT_READY_TAINT: "not-ready", UNREACHABLE_TAINT: "unreachable"}


def taint_name(key: str) -> str:
    """How summaries name a taint: the controller's own by their short names."""
    return _SHORT_TAINTS.get(key, key)


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


class ApiEnablement:
    """Keeps the clusters that serve every kind being propagated."""

    name = "ApiEnablement"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        missing = ctx.demand.kinds - cluster.api_enablements
        if missing:
            api_version, kind = sorted(missing)[0]
            return f"no {kind}", f"does not serve {kind} in {api_version}"
        return None


def _fit(
    cluster: ClusterInfo, available: ResourceAmounts, ctx: SchedulingContext, what: str
) -> Rejection | None:
    demand = ctx.demand
    beside = demand.beside_replicas(cluster.nodes)
    short = first_short(available, beside, 1)
    if short is not None:
        return (
            f"insufficient {short}" if what == "capacity" else f"quota {short}",
            f"DaemonSets, Jobs, Pods and other workloads need {beside[short]} {short}; "
            f"{what} left: {available.get(short)}",
        )
    # Duplicated: every replica lands here; Divided and Aggregated: at least one must.
    need = demand.replicas if ctx.placement.replicas.mode == "Duplicated" else 1
    if need <= 0:
        return None
    available = left_after(available, beside)
    short = first_short(available, demand.per_replica, need)
    if short is None:
        return None
    have = available.get(short)
    return (
        f"insufficient {short}" if what == "capacity" else f"quota {short}",
        f"{need} replica(s) need {demand.per_replica[short] * need} {short}; {what} left: {have}",
    )


class Capacity:
    """Keeps the clusters with room: all replicas (Duplicated) or at least one (Divided,
    Aggregated). The application's own use there counts as room."""

    name = "Capacity"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        return _fit(cluster, ctx.available(cluster), ctx, "capacity")


class TenantQuota:
    """Keeps the clusters where the tenant's remaining quota fits the demand."""

    name = "TenantQuota"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        remaining = ctx.quota_for(cluster.name)
        return None if remaining is None else _fit(cluster, remaining, ctx, "quota")


class LeastAllocated:
    """Favours clusters with more of their cpu and memory free."""

    name = "LeastAllocated"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        cpu, memory = cluster.free_cpu, cluster.free_memory
        if cpu is None or memory is None:
            return 0.0 if cpu is None and memory is None else 100 * (cpu or memory or 0.0)
        return 50 * (cpu + memory)


class BalancedAllocation:
    """Favours clusters whose cpu and memory would be used in equal proportion."""

    name = "BalancedAllocation"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        cpu, memory = cluster.free_cpu, cluster.free_memory
        if cpu is None or memory is None:
            return 0.0
        demand = ctx.demand
        # Fractions used once one replica more runs there.
        used_cpu = 1 - cpu + demand.cpu / cluster.total_cpu
        used_memory = 1 - memory + demand.memory / cluster.total_memory
        return 100 * (1 - abs(min(1.0, used_cpu) - min(1.0, used_memory)))


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


class LayerOrder:
    """Favours clusters in earlier layers of placement.layers."""

    name = "LayerOrder"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        if not ctx.layer_rank:
            return 0.0
        rank = ctx.layer_rank.get(cluster.layer, len(ctx.layer_rank))
        return 100 * (1 - rank / len(ctx.layer_rank))


def replicas_capacity(cluster: ClusterInfo, ctx: SchedulingContext) -> int | None:
    """Replicas of this demand that fit the cluster (its own use there counted back) and
    the tenant's quota there."""
    beside = ctx.demand.beside_replicas(cluster.nodes)
    fits = replicas_that_fit(left_after(ctx.available(cluster), beside), ctx.demand.per_replica)
    remaining = ctx.quota_for(cluster.name)
    if remaining is not None:
        quota_fits = replicas_that_fit(left_after(remaining, beside), ctx.demand.per_replica)
        if quota_fits is not None:
            fits = quota_fits if fits is None else min(fits, quota_fits)
    return fits
