"""A member's monitor: its capacity summed from its watched nodes and pods, again only
after one of them changed."""

from __future__ import annotations

from typing import Any

from fleet.capacity import slim_node, slim_pod
from fleet.connection import ConnectionOptions
from fleet.health import HealthPolicy
from fleet.member import MemberMonitor

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _node(name: str, cpu: str) -> dict[str, Any]:
    return slim_node(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "status": {
                "allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def _pod(name: str, cpu: str) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return slim_pod(
        {
            "metadata": {"name": name, "namespace": "a", "resourceVersion": "1"},
            "spec": {"nodeName": "n1", "containers": [container]},
            "status": {"phase": "Running"},
        }
    )


def test_capacity_is_summed_again_only_after_a_node_or_pod_changed() -> None:
    pokes: list[bool] = []
    monitor = MemberMonitor.from_kubeconfig(
        "m",
        KUBECONFIG,
        "1",
        options=ConnectionOptions(),
        policy=HealthPolicy(),
        allow_exec=False,
        on_change=lambda: pokes.append(True),
    )
    nodes, pods = monitor.informers
    assert monitor.capacity() is None  # nothing listed yet
    nodes.cache["n1"] = _node("n1", "4")
    nodes.mark_synced()
    pods.mark_synced()
    first = monitor.capacity()
    assert first is not None
    assert first["resources"]["available"]["cpu"] == "4"
    assert monitor.capacity() is first  # nothing changed: not summed again

    pods.cache["a/p"] = _pod("p", "1500m")
    pods.handler("ADDED", None, pods.cache["a/p"])  # as the watch does
    after = monitor.capacity()
    assert after is not None
    assert after["resources"]["available"]["cpu"] == "2500m"
    nodes.cache["n2"] = _node("n2", "2")
    nodes.handler("ADDED", None, nodes.cache["n2"])
    assert monitor.capacity()["resources"]["available"]["cpu"] == "4500m"  # type: ignore[index]
    assert pokes == [True, True]  # each change woke the status pass too
