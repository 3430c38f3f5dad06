"""Smoke tests that prove the local clusters are real Kubernetes."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anyio
import pytest
import urllib3
from kubernetes import client as k8s

from fleet.local import HUB
from fleet.local import cluster as local_cluster
from fleet.local.kwok import NODE_ANNOTATION
from tests.e2e.conftest import Fleet
from tests.e2e.waiting import HANG_GUARD_S, eventually


def _namespace(core: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def test_every_cluster_has_ready_kwok_nodes_with_topology(fleet: Fleet) -> None:
    for c in fleet.state.clusters:
        nodes = fleet.core(c.name).list_node().items
        assert len(nodes) == 2
        for node in nodes:
            assert node.metadata.annotations[NODE_ANNOTATION] == "fake"
            assert node.metadata.labels["topology.kubernetes.io/region"] == c.nodes.region
            assert node.metadata.labels["topology.kubernetes.io/zone"].startswith(c.nodes.region)
            assert node.status.allocatable["cpu"] == "8"
            assert any(x.type == "Ready" and x.status == "True" for x in node.status.conditions)


def test_deployment_pods_run_and_become_ready_on_kwok_nodes(fleet: Fleet) -> None:
    member = fleet.member_names[0]
    core, apps = fleet.core(member), fleet.apps(member)
    ns = _namespace(core, "smoke")
    labels = {"app": "web"}
    apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "nginx:1.27",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ]
                    },
                },
            },
        },
    )

    def ready_replicas() -> int | None:
        status = apps.read_namespaced_deployment_status("web", ns).status
        return status.ready_replicas if status.ready_replicas == 3 else None

    eventually(ready_replicas, "3 ready replicas of deployment web")
    replica_sets = apps.list_namespaced_replica_set(ns).items
    assert len(replica_sets) == 1
    assert replica_sets[0].metadata.owner_references[0].name == "web"
    pods = core.list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 3
    kwok_nodes = {n.metadata.name for n in core.list_node().items}
    for pod in pods:
        assert pod.status.phase == "Running"
        assert pod.spec.node_name in kwok_nodes
        assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
        assert pod.metadata.owner_references[0].name == replica_sets[0].metadata.name


def test_resource_quota_rejects_a_pod_over_it_with_the_api_servers_message(fleet: Fleet) -> None:
    core = fleet.core(fleet.member_names[1])
    ns = _namespace(core, "quota")
    core.create_namespaced_resource_quota(
        ns,
        {
            "metadata": {"name": "team-a"},
            "spec": {"hard": {"requests.cpu": "1", "pods": "5"}},
        },
    )
    # Admission needs the quota controller (kube-controller-manager) to have filled status.
    eventually(
        lambda: core.read_namespaced_resource_quota("team-a", ns).status.hard,
        "quota status computed by kube-controller-manager",
    )
    eventually(lambda: core.read_namespaced_service_account("default", ns), "default SA")
    pod = {
        "metadata": {"name": "big"},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
            ]
        },
    }
    with pytest.raises(k8s.ApiException) as rejected:
        core.create_namespaced_pod(ns, pod)
    assert rejected.value.status == 403
    message = json.loads(rejected.value.body or "{}")["message"]
    assert message.startswith('pods "big" is forbidden: exceeded quota: team-a'), message
    assert "requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1" in message
    assert core.list_namespaced_pod(ns).items == []


def _created_config_maps(metrics: str) -> float:
    """The API server's own count of ConfigMaps created (``apiserver_request_total``)."""
    return local_cluster.counted(
        metrics,
        "apiserver_request_total",
        {"verb": "POST", "resource": "configmaps", "code": "201"},
    )


def test_an_api_servers_own_metrics_count_what_was_asked_of_it(fleet: Fleet) -> None:
    member = fleet.state.cluster(fleet.member_names[0])
    core = fleet.core(member.name)
    ns = _namespace(core, "metrics")
    before = _created_config_maps(local_cluster.metrics(member))
    for n in range(3):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"counted-{n}"}})
    # The namespace's own root CA ConfigMap may be created meanwhile: at least ours.
    eventually(
        lambda: _created_config_maps(local_cluster.metrics(member)) - before >= 3,
        "the three creates counted by the API server",
    )


def test_stopping_one_members_api_server_leaves_the_others_answering(fleet: Fleet) -> None:
    victim = fleet.state.cluster(fleet.member_names[2])
    others = [c for c in fleet.state.clusters if c.name != victim.name]
    local_cluster.stop_component(victim, "kube-apiserver")
    try:
        assert not local_cluster.api_ready(victim)
        victim_core = k8s.CoreV1Api(local_cluster.api_client(victim))
        with pytest.raises(urllib3.exceptions.HTTPError):
            victim_core.list_namespace(_request_timeout=5)
        for c in others:
            assert local_cluster.api_ready(c), c.name
            assert fleet.core(c.name).list_namespace().items
    finally:
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + HANG_GUARD_S)
    assert fleet.core(victim.name).read_namespace("default").metadata.name == "default"
    assert HUB in {c.name for c in others}
