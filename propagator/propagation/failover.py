"""Cluster failover (pure): which clusters an application is moved off, and when what ran
there may be removed.

A cluster the application runs on that has not been Ready for longer than the
application's ``failover.clusterUnreachableAfter`` is evicted: it is placed again without
it (like a ``NoExecute`` taint; its replicas go where there is room). What ran there is
removed gracefully: only once the replacement is Available everywhere, and only when the
member answers again (until then the removal waits and is retried). A cluster that comes
back within the toleration moves nothing: the clock restarts with every NotReady spell.
With failback WhenReady, an evicted cluster Ready again for ``failbackAfter`` makes the
application be placed again from scratch (its replicas return).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleet.snapshot import FleetSnapshot


@dataclass(frozen=True)
class Eviction:
    cluster: str
    since: float
    """When the cluster stopped being Ready (epoch seconds)."""
    reason: str


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
                info.not_ready_since,
                f"not Ready for {seconds(down)} (clusterUnreachableAfter {seconds(tolerate_s)})",
            )
    return out


def evicting(leaving: Iterable[str], snapshot: FleetSnapshot, now: float) -> dict[str, str]:
    """The clusters of ``leaving`` that are not Ready, each with why: their removal waits
    for the replacement to be Available (and for them to answer)."""
    out = {}
    for name in leaving:
        info = snapshot.clusters.get(name)
        if info is None or info.ready:
            continue
        down = f" for {seconds(now - info.not_ready_since)}" if info.not_ready_since else ""
        out[name] = f"not Ready{down}"
    return out


def failing_back(
    evicted_from: Iterable[str], snapshot: FleetSnapshot, after_s: float, now: float
) -> list[str]:
    """The clusters of ``evicted_from`` that have been Ready for ``after_s`` or longer."""
    back = []
    for name in evicted_from:
        info = snapshot.clusters.get(name)
        since = info.ready_since if info is not None and info.ready else None
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
            info = snapshot.clusters.get(name)
            if info is not None and info.ready and info.ready_since is not None:
                due.append(info.ready_since + failback_after_s - now)
    return max(0.0, min(due)) if due else None
