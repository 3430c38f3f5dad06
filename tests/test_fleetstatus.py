"""Status written by the fleet manager: stable unless something changed."""

from __future__ import annotations

from typing import Any

from api.taints import NOT_READY_TAINT
from fleet.connection import ConnectionOptions
from fleet.health import HealthPolicy
from fleet.member import MemberMonitor
from propagator.fleetmanager import status as fleetstatus

POLICY = HealthPolicy(failure_threshold=1, success_threshold=1, unreachable_after_s=10)


def member(
    name: str, layer: str = "edge", labels: dict[str, str] | None = None, ready: bool | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name, "generation": 1, "labels": labels or {}},
        "spec": {"layer": layer},
        "status": status,
    }


def test_unusable_kubeconfig_is_reported_and_tainted() -> None:
    monitor = MemberMonitor.from_kubeconfig(
        "m",
        "users: [",
        "1",
        options=ConnectionOptions(),
        policy=POLICY,
        allow_exec=False,
        on_change=lambda: None,
    )
    status = fleetstatus.member_status(member("m"), monitor, "2026-01-01T00:00:00Z")
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidKubeconfig")
    assert "not valid YAML" in ready["message"]
    assert fleetstatus.desired_taints(monitor, 0) == [
        {"key": NOT_READY_TAINT, "effect": "NoSchedule"}
    ]


def test_fleet_members_by_name_and_selector() -> None:
    members = {
        "a": member("a", labels={"env": "prod"}),
        "b": member("b"),
        "c": member("c", labels={"env": "prod"}),
    }
    fleet = {
        "metadata": {"name": "f"},
        "spec": {"clusters": ["b", "ghost"], "clusterSelector": {"matchLabels": {"env": "prod"}}},
    }
    assert fleetstatus.fleet_members(fleet, members) == ["a", "b", "c"]
    assert fleetstatus.fleet_members({"spec": {}}, members) == []


def test_fleet_status_counts_ready_and_layers() -> None:
    members = {
        "a": member("a", "edge", ready=True),
        "b": member("b", "core", ready=False),
        "c": member("c", "core", ready=True),
    }
    fleet = {"metadata": {"name": "f", "generation": 2}, "spec": {"clusters": ["a", "b", "c"]}}
    status = fleetstatus.fleet_status(fleet, members, "T")
    assert (status["clusters"], status["readyClusters"]) == (3, 2)
    assert status["layers"] == {"core": 2, "edge": 1}
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("True", "SomeReady")
    assert ready["message"] == "2/3 clusters ready; not ready: b"
    empty = fleetstatus.fleet_status({"metadata": {"name": "e"}, "spec": {}}, members, "T")
    assert empty["conditions"][0]["reason"] == "Empty"
