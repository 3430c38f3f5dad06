"""What the application reconcile needs of the member registry, as interfaces: reads of
the members' watch caches, and the queue of each member's syncs. The controller's registry
implements them; tests implement them without members."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from propagator.interpreter.health import WorkloadHealth
from propagator.work.workloadhealth import ClusterHealth


class MemberView(Protocol):
    """The members as their caches show them (no call to a member)."""

    def known(self, cluster: str) -> bool:
        """Whether a MemberCluster of that name exists."""
        ...

    def health(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> WorkloadHealth:
        """The health of ``objects`` on ``cluster`` (``namespace``: of those that name
        none)."""
        ...

    def judge(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> ClusterHealth:
        """:meth:`health` with why, and what the rules report of each object."""
        ...

    def quota_refusals(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> list[str]:
        """The workloads of ``objects`` whose pods the member's ResourceQuota refuses."""
        ...

    def live(
        self, cluster: str, obj: Mapping[str, Any], namespace: str
    ) -> Mapping[str, Any] | None:
        """The member's cached copy of ``obj`` (None: not there, or not known yet)."""
        ...


class SyncQueues(Protocol):
    """The member syncs' queues, one per member, keyed by application."""

    def enqueue(self, cluster: str, app: str) -> str | None:
        """Queue a sync of ``app`` on ``cluster``; returns why it cannot be (no connection
        to it), or None."""
        ...
