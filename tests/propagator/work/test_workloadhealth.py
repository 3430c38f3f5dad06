from __future__ import annotations

from typing import Any

import pytest

from propagator.work.workloadhealth import cluster_health, health_of, worst


def deployment(replicas: int = 3, generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": generation},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": 2, **status},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(want=3, updatedReplicas=3, availableReplicas=3, replicas=3), "Healthy"),
        (deployment(updatedReplicas=3, availableReplicas=2, replicas=3), "Progressing"),
        (deployment(updatedReplicas=2, availableReplicas=3, replicas=4), "Progressing"),
        (
            deployment(generation=3, updatedReplicas=3, availableReplicas=3, replicas=3),
            "Progressing",
        ),  # the controller has not seen the new spec yet
        (
            deployment(
                conditions=[
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]
            ),
            "Degraded",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "spec": {"replicas": 2},
                "status": {"readyReplicas": 2, "updatedReplicas": 2},
            },
            "Healthy",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "status": {"desiredNumberScheduled": 4, "numberReady": 3},
            },
            "Progressing",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "status": {"conditions": [{"type": "Complete", "status": "True"}]},
            },
            "Healthy",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "status": {"conditions": [{"type": "Failed", "status": "True"}]},
            },
            "Degraded",
        ),
        ({"apiVersion": "v1", "kind": "ConfigMap"}, "Healthy"),
        (None, "Progressing"),
        (
            {
                **deployment(updatedReplicas=3, availableReplicas=3, replicas=3),
                "metadata": {"name": "web", "deletionTimestamp": "2026-12-01T05:22:02Z"},
            },
            "Progressing",
        ),  # being deleted (its garbage collection may lag): not what was applied
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"deletionTimestamp": "x"}},
            "Progressing",
        ),
    ],
)
def test_health_of(obj: dict[str, Any] | None, expected: str) -> None:
    assert health_of(obj) == expected


def test_worst_wins() -> None:
    assert worst(["Healthy", "Progressing", "Healthy"]) == "Progressing"
    assert worst(["Healthy", "Degraded", "Progressing"]) == "Degraded"
    assert worst([]) == "Healthy"


def test_a_deployment_whose_pods_the_quota_refuses_is_named() -> None:
    from typing import cast

    from kube.connection import KubeConnection
    from kube.informer import Informer
    from propagator.work.workloadhealth import quota_refusals

    refused = 'pods "web-1" is forbidden: failed quota: propagator-tenant-t: must specify cpu'
    live: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "status": {
            "conditions": [
                {
                    "type": "ReplicaFailure",
                    "status": "True",
                    "reason": "FailedCreate",
                    "message": refused,
                }
            ]
        },
    }
    informer = Informer(cast(KubeConnection, None), "apps/v1", "Deployment", lambda *_: None)
    informer.cache["shop/web"] = live
    informer.mark_synced()
    wanted = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}]
    assert quota_refusals(lambda av, k: informer, wanted, "shop") == [
        f"Deployment shop/web: {refused}"
    ]
    live["status"]["conditions"][0]["message"] = "some other failure"
    assert quota_refusals(lambda av, k: informer, wanted, "shop") == []


class _Cache:
    """A member's Deployment cache, listed."""

    synced = True

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)


def test_a_cached_copy_older_than_the_last_write_is_not_taken_for_its_health() -> None:
    # the cache still holds generation 1 (0 replicas wanted, all of them Available); the
    # controller has just written generation 2 (2 replicas)
    live = {
        **deployment(replicas=0, generation=1, updatedReplicas=0, availableReplicas=0),
        "metadata": {"name": "web", "namespace": "shop", "generation": 1},
    }
    live["status"]["observedGeneration"] = 1
    cache = _Cache({"shop/web": live})
    desired = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}]
    assert cluster_health(lambda *_: cache, desired, "shop") == "Healthy"  # type: ignore[arg-type]
    written = {("apps/v1", "Deployment", "shop", "web"): 2}
    health = cluster_health(lambda *_: cache, desired, "shop", written.get)  # type: ignore[arg-type]
    assert health == "Progressing"
    written[("apps/v1", "Deployment", "shop", "web")] = 1  # the cache has seen the write
    assert cluster_health(lambda *_: cache, desired, "shop", written.get) == "Healthy"  # type: ignore[arg-type]
