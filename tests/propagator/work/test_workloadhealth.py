from __future__ import annotations

from typing import Any

from propagator.interpreter.registry import builtin_rules
from propagator.work.workloadhealth import cluster_health
from tests.propagator.interpreter.test_builtins import deployment

RULES = builtin_rules()


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
    assert cluster_health(RULES, lambda *_: cache, desired, "shop") == "Healthy"
    written = {("apps/v1", "Deployment", "shop", "web"): 2}
    health = cluster_health(RULES, lambda *_: cache, desired, "shop", written.get)
    assert health == "Progressing"
    written[("apps/v1", "Deployment", "shop", "web")] = 1  # the cache has seen the write
    assert cluster_health(RULES, lambda *_: cache, desired, "shop", written.get) == "Healthy"
