from __future__ import annotations

from decimal import Decimal
from typing import Any

from api.pods import pod_requests
from fleet.capacity import quota_usage, slim_node, slim_pod, summarize


def node(
    name: str, ready: bool = True, cpu: str = "8", memory: str = "32Gi", unschedulable: bool = False
) -> dict[str, Any]:
    return slim_node(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def pod(
    cpu: str,
    memory: str = "0",
    phase: str = "Running",
    node_name: str | None = "n1",
    init_cpu: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if init_cpu:
        spec["initContainers"] = [{"resources": {"requests": {"cpu": init_cpu}}}]
    return slim_pod(
        {"metadata": {"name": "p", "namespace": "n"}, "spec": spec, "status": {"phase": phase}}
    )


def test_quota_usage_counts_what_a_namespaces_quota_counts() -> None:
    # as the member's quota: waiting for a node or not, an init container's peak; but
    # neither a terminated pod nor one being deleted (the count must not exceed the quota's)
    deleting = pod("8")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-05T10:00:00Z"
    pods = [pod("500m", "256Mi"), pod("250m", node_name=None, init_cpu="1"), deleting]
    pods.append(pod("4", phase="Failed"))
    usage = quota_usage(pods)
    assert usage == {"pods": Decimal(2), "cpu": Decimal("1.5"), "memory": Decimal(256 << 20)}
    assert quota_usage([]) == {}


def test_allocatable_counts_ready_schedulable_nodes_only() -> None:
    summary = summarize([node("a"), node("b", ready=False), node("c", unschedulable=True)], [])
    assert summary["nodes"] == {"total": 3, "ready": 2}
    assert summary["resources"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}


def test_allocated_counts_bound_active_pods() -> None:
    pods = [
        pod("500m", "256Mi"),
        pod("250m", "256Mi"),
        pod("4", phase="Succeeded"),
        pod("4", node_name=None),
    ]
    summary = summarize([node("a")], pods)
    assert summary["resources"]["allocated"] == {"cpu": "750m", "memory": "512Mi", "pods": "2"}
    assert summary["resources"]["available"] == {"cpu": "7250m", "memory": "32256Mi", "pods": "108"}


def test_init_containers_count_when_larger() -> None:
    assert pod_requests(pod("100m", init_cpu="2")["spec"])["cpu"] == Decimal(2)
    assert pod_requests(pod("3", init_cpu="2")["spec"])["cpu"] == Decimal(3)


def test_available_never_negative() -> None:
    summary = summarize([node("a", cpu="1")], [pod("2")])
    assert summary["resources"]["available"]["cpu"] == "0"
