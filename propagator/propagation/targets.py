"""Where an application goes: the scheduler's placement, plus the clusters it already runs
on that only a NoSchedule taint (or lost readiness) now turns away.

NoSchedule means "nothing new lands here": what is already placed stays, so a member that
stops answering keeps its place (and its entry in the status) until it is back or a
NoExecute taint removes what runs there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from api.taints import Toleration, untolerated
from fleet.snapshot import FleetSnapshot
from propagator.scheduler import Decision

TAINT_FILTER = "TaintToleration"


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


def targets_of(
    decision: Decision,
    previous: Iterable[Mapping[str, Any]],
    snapshot: FleetSnapshot,
    tolerations: Iterable[Toleration],
) -> list[Target]:
    """The decision's clusters and the previously placed ones kept under NoSchedule, by
    name. ``previous`` is the application's ``status.placement``."""
    tolerations = list(tolerations)
    targets = {p.cluster: Target(p.cluster, p.layer, p.replicas, p.score) for p in decision.placed}
    for entry in previous:
        name = str(entry.get("cluster"))
        verdict = decision.evaluated.get(name)
        cluster = snapshot.clusters.get(name)
        if name in targets or verdict is None or cluster is None:
            continue
        if verdict.filtered_by != TAINT_FILTER:
            continue  # deselected, out of room, ...: it really goes
        if any(t.effect == "NoExecute" for t in untolerated(cluster.taints, tolerations)):
            continue
        targets[name] = Target(
            name, entry.get("layer"), entry.get("replicas"), entry.get("score"), verdict.reason
        )
    return [targets[name] for name in sorted(targets)]
