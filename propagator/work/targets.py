"""Where an application goes: the scheduler's placement, plus the clusters it already runs
on that only a NoSchedule taint (or lost readiness) now turns away.

NoSchedule means "nothing new lands here": what is already placed stays — with its
replicas, which the scheduler does not give away elsewhere — so a member that stops
answering keeps its place (and its entry in the status) until it is back, an untolerated
NoExecute taint removes it, or it has been NotReady longer than the application tolerates
(failover: it is then evicted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from api.placement import Placement
from api.taints import untolerated
from fleet.snapshot import FleetSnapshot
from propagator.scheduler import Decision, Demand
from propagator.scheduler.plugins import ClusterAffinity, taint_name
from propagator.scheduler.types import SchedulingContext

_AFFINITY = ClusterAffinity()


@dataclass(frozen=True)
class Target:
    """One cluster the application is applied to."""

    cluster: str
    layer: str | None
    replicas: int | None
    score: int | None
    kept: str | None = None
    """Why the cluster stays though the scheduler did not place it anew (e.g. "tainted
    not-ready")."""


def from_status(placement: Iterable[Mapping[str, Any]]) -> list[Target]:
    """The targets a ``status.placement`` lists."""
    targets = []
    for entry in placement:
        replicas = entry.get("replicas")
        targets.append(
            Target(
                str(entry.get("cluster")),
                entry.get("layer"),
                replicas if isinstance(replicas, int) else None,
                entry.get("score"),
            )
        )
    return targets


def running_targets(last: Sequence[Target], status: Mapping[str, Any]) -> list[Target]:
    """Where the application runs now: the targets of its last plan (``last``), or its
    ``status.placement`` after a restart or a plan that placed nothing. The last plan
    comes first because the status it wrote reaches the informer's cache later: a plan
    made meanwhile from that status would undo the moves of a rebalance or a failback
    (divided replicas are rescaled from where they run, and only those plans place
    afresh)."""
    return list(last) if last else from_status(status.get("placement") or [])


def held_targets(
    running: Iterable[Target],
    snapshot: FleetSnapshot,
    placement: Placement,
    evicted: Collection[str] = (),
) -> list[Target]:
    """The clusters of ``running`` (see :func:`running_targets`) that keep their place and
    replicas although nothing new may land there: not Ready or tainted NoSchedule, still
    selected by the placement, not tainted NoExecute, not ``evicted``."""
    ctx = SchedulingContext(placement, Demand())
    held = []
    for target in running:
        name = target.cluster
        info = snapshot.clusters.get(name)
        if info is None or name in evicted:
            continue
        against = untolerated(info.taints, placement.tolerations)
        if any(t.effect == "NoExecute" for t in against):
            continue  # it really goes
        blocking = [t for t in against if t.effect == "NoSchedule"]
        if (info.ready and not blocking) or _AFFINITY.filter(info, ctx) is not None:
            continue  # schedulable (the scheduler decides), or deselected
        why = f"tainted {taint_name(blocking[0].key)}" if blocking else "not ready"
        held.append(dataclasses.replace(target, kept=why))
    return held


def targets_of(decision: Decision | None, held: Iterable[Target]) -> list[Target]:
    """The decision's clusters (none without a decision) and the held ones, by name."""
    targets = {}
    if decision is not None:
        targets = {
            p.cluster: Target(p.cluster, p.layer, p.replicas, p.score) for p in decision.placed
        }
    for target in held:
        targets.setdefault(target.cluster, target)
    return [targets[name] for name in sorted(targets)]


class Planned(Protocol):
    """What a plan put where, as the capabilities a reconcile calls (the canary, failover)
    read the last plan without importing the propagation package that makes it."""

    @property
    def targets(self) -> Sequence[Target]: ...
    @property
    def rendered(self) -> Mapping[str, Sequence[Mapping[str, Any]]]: ...
    @property
    def revisions(self) -> Mapping[str, str]: ...
