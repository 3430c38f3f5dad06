"""The member registry as the reconcile sees it (:class:`MemberView`, :class:`SyncQueues`):
reads of the members' watch caches, and their sync queues."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleet.member import MemberMonitor
from kube.keys import ObjectKey
from propagator.interpreter.health import WorkloadHealth
from propagator.interpreter.registry import Interpreters
from propagator.propagation.pullsync import PullWorks
from propagator.runtime.memberregistry import Member, MemberRegistry
from propagator.work.table import WorkTable
from propagator.work.workloadhealth import ClusterHealth, judge_cluster, quota_refusals


class RegistryView:
    """Implements :class:`propagator.work.members.MemberView` and
    :class:`propagator.work.members.SyncQueues` over the controller's member registry."""

    def __init__(
        self,
        registry: MemberRegistry,
        monitors: Mapping[str, MemberMonitor],
        table: WorkTable,
        interpreters: Interpreters,
        pull: PullWorks,
    ) -> None:
        """``monitors``: the fleet manager's, by MemberCluster name (kept current by it);
        ``pull``: the Pull members' Works."""
        self.registry = registry
        self.monitors = monitors
        self.table = table
        self.interpreters = interpreters
        self.pull = pull

    def known(self, cluster: str) -> bool:
        return cluster in self.monitors

    def _pulled(self, cluster: str) -> bool:
        monitor = self.monitors.get(cluster)
        return monitor is not None and monitor.mode == "Pull"

    def enqueue(self, cluster: str, app: str) -> str | None:
        if self._pulled(cluster):
            problem = self.monitors[cluster].config_error
            if problem is None:
                self.pull.enqueue(cluster, app)
            return problem
        member = self.registry.get(cluster)
        if member is None:
            monitor = self.monitors.get(cluster)
            return (monitor.config_error if monitor else None) or "no such MemberCluster"
        self.queue(member, app)
        return None

    def queue(self, member: Member, app: str) -> None:
        """Queue a sync of ``app`` on ``member``, watching the kinds its work writes."""
        work = self.table.get(app, member.name)
        self.registry.queue(member, app, work.kinds if work is not None else ())

    def health(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> WorkloadHealth:
        return self.judge(cluster, objects, namespace).health

    def judge(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> ClusterHealth:
        if self._pulled(cluster):
            return judge_cluster(self.interpreters, self.pull.cached(cluster), objects, namespace)
        member = self.registry.get(cluster)
        if member is None:
            return judge_cluster(self.interpreters, None, objects, namespace)

        def applied(key: ObjectKey) -> int | None:
            write = member.applied.get(key)
            return write.generation if write is not None else None

        return judge_cluster(self.interpreters, member.cached, objects, namespace, applied)

    def quota_refusals(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> list[str]:
        if self._pulled(cluster):
            return quota_refusals(self.pull.cached(cluster), objects, namespace)
        member = self.registry.get(cluster)
        return quota_refusals(member.cached if member else None, objects, namespace)

    def live(
        self, cluster: str, obj: Mapping[str, Any], namespace: str
    ) -> Mapping[str, Any] | None:
        kind = (str(obj.get("apiVersion")), str(obj.get("kind")))
        member = self.registry.get(cluster)
        informer: Any = None
        if self._pulled(cluster):
            informer = self.pull.cached(cluster)(*kind)
        elif member is not None:
            informer = member.cached(*kind)
        meta = obj.get("metadata") or {}
        where = meta.get("namespace") or namespace
        return informer.get(f"{where}/{meta.get('name')}") if informer is not None else None
