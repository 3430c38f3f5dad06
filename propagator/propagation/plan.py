"""What one application reconcile decided, kept until the next, and what it needs of the
member registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from propagator.canary.plan import CanaryPlan
from propagator.failover.state import FailoverState
from propagator.work.targets import Target
from propagator.work.workloadhealth import WorkloadHealth

Condition = tuple[str, bool | None, str, str]


@dataclass(frozen=True)
class Outcome:
    """What the worker does next with the key: retry with backoff, or not; refresh the
    status after ``refresh_after_s``."""

    retry: bool
    error: BaseException | None = None
    refresh_after_s: float | None = None
    replan_after_s: float | None = None
    """Plan again after this long (a toleration or a grace period runs out)."""


@dataclass
class Plan:
    """One reconcile's decision, kept for status refreshes until the next one."""

    generation: int | None
    conditions: list[Condition] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    rendered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    revisions: dict[str, str] = field(default_factory=dict)
    desired_kinds: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)
    """Clusters the application is being removed from."""
    unanswered: dict[str, str] = field(default_factory=dict)
    """Those of ``removed`` that do not answer, with why: their removal waits for them and
    does not hold ``Applied`` back."""
    failover: FailoverState = field(default_factory=FailoverState)
    """Rebalance acted on, clusters kept off, replicas moving gracefully."""
    unhealthy_after_s: float | None = None
    """Application failover's toleration (None: off, no clock kept)."""
    canary: CanaryPlan | None = None
    """The canary's state and clusters (None: the application has no canary)."""
    capacity_bound: bool = True
    """Whether a change of the clusters' capacity alone is to plan it again: not when the
    clusters it holds carry it all, nor when it is configuration alone (nothing creates
    pods) going to every cluster that passes the filters — a cluster it could not go to
    for want of a pod's room takes it at the next plan for another reason (the resync at
    the latest); where it runs, its own room is counted back, so none ever removes it."""

    def leaving(self) -> list[str]:
        """Clusters the application left that keep what runs there until it is replaced."""
        placed = {t.cluster for t in self.targets}
        return sorted(c for c in self.failover.moves if c not in placed)


@dataclass(frozen=True)
class MemberAccess:
    """What the reconcile needs of the member registry."""

    enqueue: Callable[[str, str], str | None]
    """enqueue(cluster, application): queue a sync; returns why it cannot (no connection)."""
    health: Callable[[str, Sequence[Mapping[str, Any]], str], WorkloadHealth]
    """health(cluster, objects, namespace) from the member's caches."""
    known: Callable[[str], bool]
    """Whether a MemberCluster of that name exists."""
    quota_refusals: Callable[[str, Sequence[Mapping[str, Any]], str], list[str]] = lambda *_: []
    """quota_refusals(cluster, objects, namespace): workloads whose pods the member's quota
    refuses, from its caches."""
    live: Callable[[str, Mapping[str, Any], str], Mapping[str, Any] | None] = lambda *_: None
    """live(cluster, object, namespace): the member's cached copy of ``object`` (None: not
    there, or not known yet)."""
