"""One plan's canary: its state, the clusters it runs on, and the revisions rendered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from api.rollout import Canary
from propagator.canary.copies import DEPLOYMENTS, ClusterMode, SplitKinds
from propagator.canary.machine import CanaryState, Rollback

if TYPE_CHECKING:  # the type only: the plan reads no revision from the hub
    from propagator.canary.revisions import Source


@dataclass(frozen=True)
class CanaryPlan:
    spec: Canary
    state: CanaryState
    canary_clusters: frozenset[str]
    """The placed clusters the canary runs on (they go first)."""
    release: str
    """The latest revision of the workloads."""
    stable: Source | None
    """The stable revision's source, when some cluster renders it (else None)."""
    unsupported: tuple[str, ...] = ()
    """Workloads a canary does not run as two copies (StatefulSets, DaemonSets: they roll
    out at once), as ``Kind name``."""
    before: CanaryState | None = None
    """The state this plan moved on from."""
    rollback: Rollback | None = None
    """The rollback this plan decided, if any."""
    latest: Source | None = None
    """The latest revision's source (kept on the hub once it is the stable one)."""
    kinds: SplitKinds = field(default_factory=lambda: DEPLOYMENTS)
    """The kinds among the application's objects that the canary runs as two copies."""

    def mode(self, cluster: str) -> ClusterMode:
        return self.state.mode(cluster, cluster in self.canary_clusters)
