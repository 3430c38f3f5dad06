"""Failover decisions (pure): which clusters an application is placed without, and when it
comes back.

A cluster the application runs on that has not been Ready for longer than the
application's ``failover.clusterUnreachableAfter`` is evicted (like a ``NoExecute``
taint): it is placed again without it, its replicas go where there is room. With
application failover on, a cluster where the application has not been Healthy for
``failover.application.unhealthyAfter`` is evicted too — only while it runs Healthy on
another cluster. A cluster that comes back within the toleration moves nothing: the clock
restarts with every NotReady (or unhealthy) spell. With failback WhenReady, a cluster
evicted for being unreachable and Ready again for ``failbackAfter`` makes the application
be placed again from scratch; a rebalance does that at once, for every evicted cluster.
How the replicas leave is :mod:`propagator.failover.moves`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from fleet.snapshot import ClusterInfo, FleetSnapshot
from propagator.interpreter.health import WorkloadHealth

EvictedFor = Literal["ClusterUnreachable", "ApplicationUnhealthy"]

UNHEALTHY: frozenset[WorkloadHealth] = frozenset({"Progressing", "Degraded"})
"""Healths that run application failover's clock (Unknown neither runs nor stops it)."""


@dataclass(frozen=True)
class Eviction:
    cluster: str
    reason: EvictedFor
    since: float
    """When the cluster stopped being Ready, or the application Healthy there (epoch s)."""
    message: str


def seconds(value: float) -> str:
    """``75`` as ``1m15s``."""
    whole = int(value)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def evictions(
    placed: Iterable[str], snapshot: FleetSnapshot, tolerate_s: float, now: float
) -> dict[str, Eviction]:
    """The clusters of ``placed`` that have not been Ready for ``tolerate_s`` or longer."""
    out = {}
    for name in placed:
        info = snapshot.clusters.get(name)
        if info is None or info.ready or info.not_ready_since is None:
            continue
        down = now - info.not_ready_since
        if down >= tolerate_s:
            out[name] = Eviction(
                name,
                "ClusterUnreachable",
                info.not_ready_since,
                f"not Ready for {seconds(down)} (clusterUnreachableAfter {seconds(tolerate_s)})",
            )
    return out


def unhealthy_since(health: WorkloadHealth, previous: float | None, now: float) -> float | None:
    """Application failover's clock on one cluster: since when the application has not
    been Healthy there (``previous``: the clock so far)."""
    if health in UNHEALTHY:
        return previous if previous is not None else now
    return previous if health == "Unknown" else None


def unhealthy_evictions(
    healths: Mapping[str, WorkloadHealth],
    since: Mapping[str, float],
    after_s: float,
    now: float,
) -> dict[str, Eviction]:
    """The clusters of ``healths`` (the application's health on each cluster it runs on)
    where it has not been Healthy since ``since`` for ``after_s`` or longer — none unless
    it is Healthy on another cluster."""
    if not any(h == "Healthy" for h in healths.values()):
        return {}
    out = {}
    for name, health in sorted(healths.items()):
        start = since.get(name)
        if health in UNHEALTHY and start is not None and now - start >= after_s:
            out[name] = Eviction(
                name,
                "ApplicationUnhealthy",
                start,
                f"{health} for {seconds(now - start)} (unhealthyAfter {seconds(after_s)})",
            )
    return out


def unhealthy_due(since: Mapping[str, float], after_s: float, now: float) -> float | None:
    """Seconds until the first of the application failover clocks ``since`` passes
    ``after_s`` (negative: overdue); None without a clock."""
    return min(since.values()) + after_s - now if since else None


def unanswered(leaving: Iterable[str], snapshot: FleetSnapshot, now: float) -> dict[str, str]:
    """The clusters of ``leaving`` that are not Ready, each with why: their removal waits
    for them to answer, and does not hold ``Applied`` back."""
    out = {}
    for name in leaving:
        info = snapshot.clusters.get(name)
        if info is None or info.ready:
            continue
        down = f" for {seconds(now - info.not_ready_since)}" if info.not_ready_since else ""
        out[name] = f"not Ready{down}"
    return out


def _returned(info: ClusterInfo | None) -> float | None:
    """Since when ``info`` is back (epoch seconds): Ready, and with a Ready node (a member
    whose nodes all lost their heartbeat during its outage has no room until its node
    controller sees them again); None while it is not."""
    if info is None or not info.ready or info.allocatable.get("pods") == 0:
        return None
    return info.ready_since


def failing_back(
    evicted_from: Iterable[str], snapshot: FleetSnapshot, after_s: float, now: float
) -> list[str]:
    """The clusters of ``evicted_from`` that have been back (Ready, with a Ready node) for
    ``after_s`` or longer."""
    back = []
    for name in evicted_from:
        since = _returned(snapshot.clusters.get(name))
        if since is not None and now - since >= after_s:
            back.append(name)
    return back


def next_change(
    placed: Iterable[str],
    evicted_from: Iterable[str],
    snapshot: FleetSnapshot,
    tolerate_s: float,
    failback_after_s: float | None,
    now: float,
) -> float | None:
    """Seconds until a placed cluster that is not Ready passes the toleration, or an
    evicted one has been Ready long enough to fail back to (``failback_after_s`` None: no
    failback) — when the application must be planned again although nothing else changes;
    None when neither is pending."""
    due = []
    for name in placed:
        info = snapshot.clusters.get(name)
        if info is not None and not info.ready and info.not_ready_since is not None:
            due.append(info.not_ready_since + tolerate_s - now)
    if failback_after_s is not None:
        for name in evicted_from:
            # one without a Ready node yet is planned again when its nodes change
            since = _returned(snapshot.clusters.get(name))
            if since is not None:
                due.append(since + failback_after_s - now)
    return max(0.0, min(due)) if due else None
