"""The hub's side of Pull members: an agent's report taken into the work table when it is
about the work the hub wants, refused when it does not fit, and read as caches for
health."""

from __future__ import annotations

import json
from typing import Any

import anyio

from kube.connection import KubeConnection
from kube.kubeconfig import Credentials
from kube.session import ConnectionOptions
from propagator.observability.metrics import Metrics
from propagator.propagation.pullsync import PullWorks
from propagator.work.table import ClusterWork, SyncPolicy, SyncState, WorkTable
from propagator.work.workobject import work_object, work_status

APP, CLUSTER = "shop/web", "edge"
DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}


class Harness:
    def __init__(self) -> None:
        self.table = WorkTable()
        self.results: list[tuple[str, bool]] = []
        hub = KubeConnection("hub", Credentials(server="https://127.0.0.1:1"), ConnectionOptions())
        self.pull = PullWorks(
            hub, self.table, Metrics(), lambda app, settled: self.results.append((app, settled))
        )

    def want(self, revision: str) -> ClusterWork:
        work = ClusterWork(APP, CLUSTER, (DEPLOY,), revision, frozenset(), SyncPolicy())
        self.table.set_work(APP, {CLUSTER: work}, now=0, recheck_after_s=60)
        return work

    def reported(
        self, work: ClusterWork, state: SyncState, generation: int = 1, **extra: Any
    ) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(json.dumps(work_object(work)))
        obj["metadata"].update(generation=generation, resourceVersion="1")
        live = [
            {**DEPLOY, "metadata": {"name": "web", "namespace": "shop"}, "status": {"ready": 1}}
        ]
        obj["status"] = work_status(state, generation, live, "2026-12-07T00:00:00Z") | extra
        self.pull._on_work("MODIFIED", None, obj)
        return obj


def test_a_report_on_the_wanted_revision_settles_the_cluster() -> None:
    h = Harness()
    work = h.want("r1")
    h.reported(work, SyncState("r1", applied=True, attempts=1))
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert state.applied
    assert h.results == [(APP, True)]
    assert not h.table.pending(APP)


def test_a_report_on_another_revision_or_generation_settles_nothing() -> None:
    h = Harness()
    old = h.want("r1")
    h.want("r2")
    h.reported(old, SyncState("r1", applied=True))  # the agent has not seen r2 yet
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert not state.applied
    new = h.want("r2")
    h.reported(new, SyncState("r2", applied=True), generation=2, observedGeneration=1)
    assert not state.applied
    assert h.table.pending(APP)


def test_a_failure_counts_as_failed_once_the_agents_retries_are_used() -> None:
    h = Harness()
    work = h.want("r1")
    h.reported(work, SyncState("r1", error="timeout", attempts=1))
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert (state.failed, state.error) == (False, "timeout")
    h.reported(work, SyncState("r1", error="refused: 403", failed=True, attempts=2))
    assert (state.failed, state.error, state.attempts) == (True, "refused: 403", 2)


def test_a_hostile_report_fails_the_cluster_naming_the_field() -> None:
    h = Harness()
    work = h.want("r1")
    h.reported(work, SyncState("r1", applied=True), attempts=-3)
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert not state.applied
    assert state.failed
    assert state.error is not None
    assert state.error.startswith("the agent's report is refused: status.attempts")


def test_a_work_in_another_clusters_namespace_or_label_is_nobodys() -> None:
    h = Harness()
    work = h.want("r1")
    obj = json.loads(json.dumps(work_object(work)))
    obj["metadata"].update(generation=1, labels={"propagator.io/work-cluster": "other"})
    obj["status"] = work_status(SyncState("r1", applied=True), 1, [], "t")
    h.pull._on_work("ADDED", None, obj)
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert not state.applied
    assert h.results == []


def test_health_is_judged_from_what_the_agent_reported() -> None:
    h = Harness()
    cache = h.pull.cached(CLUSTER)("apps/v1", "Deployment")
    assert cache is not None
    assert not cache.synced  # no report yet: Unknown, not missing
    work = h.want("r1")
    obj = h.reported(work, SyncState("r1", applied=True))
    cache = h.pull.cached(CLUSTER)("apps/v1", "Deployment")
    assert cache is not None
    assert cache.synced
    live = cache.get("shop/web")
    assert live is not None
    assert live["status"] == {"ready": 1}
    h.pull._on_work("DELETED", obj, None)
    assert cache.get("shop/web") is None


def test_a_work_too_large_for_the_hub_fails_its_cluster_and_sends_nothing() -> None:
    h = Harness()
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}}
    objects = tuple(
        {**big, "metadata": {"name": f"big-{i}"}, "data": {"x": "y" * 300_000}} for i in range(4)
    )
    work = ClusterWork(APP, CLUSTER, objects, "r1", frozenset(), SyncPolicy())
    h.table.set_work(APP, {CLUSTER: work}, now=0, recheck_after_s=60)
    anyio.run(h.pull._publish, f"{CLUSTER}/{APP}")  # no hub call: it would fail here
    state = h.table.state(APP, CLUSTER)
    assert state is not None
    assert state.failed
    assert state.error == (
        "its objects for Pull member edge are 1.1 MiB; a Work holds at most 1 MiB "
        "(one object on the hub): nothing was sent"
    )
    assert h.results == [(APP, True)]
