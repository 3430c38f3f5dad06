"""Status written by the fleet manager: stable unless something changed."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, cast

import anyio

from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from fleet.member import MemberMonitor
from fleet.readiness import Health, HealthPolicy
from kube.connection import KubeConnection
from kube.session import ConnectionOptions
from propagator.conditions import status_changed
from propagator.fleetmanager import memberstatus as fleetstatus

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


def _recorded(status: str, reason: str, since: str, message: str = "") -> dict[str, Any]:
    recorded = member("m")
    recorded["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
            "observedGeneration": 1,
        }
    ]
    return recorded


def _monitor(health: Health) -> MemberMonitor:
    return MemberMonitor("m", "1", POLICY, connection=cast(KubeConnection, object()), health=health)


def test_a_controller_that_takes_over_starts_from_the_recorded_verdict() -> None:
    now = time.monotonic()
    # Ready on the hub: still Ready, untainted, the condition written back unchanged
    ready = _recorded(
        "True", "ProbeSucceeded", "2026-01-01T00:00:00Z", "the API server answers /readyz"
    )
    monitor = _monitor(fleetstatus.recorded_health(ready, now))
    assert (
        fleetstatus.member_status(ready, monitor, "2026-01-02T00:00:00Z")["conditions"]
        == (ready["status"]["conditions"])
    )
    assert fleetstatus.desired_taints(monitor, now) == []
    # NotReady for an hour: both taints stay on (unreachable after 10 s here)
    an_hour_ago = dt.datetime.fromtimestamp(time.time() - 3600, dt.UTC).isoformat()
    down = _recorded("False", "ProbeFailed", an_hour_ago, "probes fail: connection refused")
    monitor = _monitor(fleetstatus.recorded_health(down, now))
    assert [t["key"] for t in fleetstatus.desired_taints(monitor, now)] == [
        NOT_READY_TAINT,
        UNREACHABLE_TAINT,
    ]
    status = fleetstatus.member_status(down, monitor, "2026-01-02T00:00:00Z")
    assert status["conditions"][0]["message"] == "probes fail: connection refused"
    assert status["conditions"][0]["lastTransitionTime"] == an_hour_ago
    # never probed by anyone: Probing, as before
    fresh = fleetstatus.recorded_health(member("m"), now)
    assert fresh.ready is None


def test_a_new_monitor_keeps_the_recorded_kinds_and_capacity_until_it_knows_them() -> None:
    """After a restart the member is Ready from its recorded verdict; the snapshot must
    still see the kinds it serves and its room, or every decision is unschedulable."""
    recorded = _recorded(
        "True", "ProbeSucceeded", "2026-01-01T00:00:00Z", "the API server answers /readyz"
    )
    recorded["status"]["observedGeneration"] = 1
    known = {
        "kubernetesVersion": "v1.33.0",
        "apiEnablements": [{"groupVersion": "apps/v1", "resources": ["deployments"]}],
        "nodes": {"total": 3, "ready": 3},
        "resources": {"allocatable": {"cpu": "12"}, "available": {"cpu": "8"}},
    }
    recorded["status"].update(known)
    monitor = _monitor(fleetstatus.recorded_health(recorded, time.monotonic()))
    status = fleetstatus.member_status(recorded, monitor, "2026-01-02T00:00:00Z")
    assert {k: status[k] for k in known} == known
    assert not status_changed(recorded["status"], status)  # nothing to write
    # once discovered, the monitor's own answers replace them
    monitor.version, monitor.enablements = "v1.34.0", []
    status = fleetstatus.member_status(recorded, monitor, "2026-01-02T00:00:00Z")
    assert (status["kubernetesVersion"], status["apiEnablements"]) == ("v1.34.0", [])


class _SlowDiscovery:
    def __init__(self) -> None:
        self.entered, self.release = anyio.Event(), anyio.Event()

    async def refresh(self) -> None:
        self.entered.set()
        await self.release.wait()

    async def enablements(self) -> list[dict[str, Any]]:
        return [{"groupVersion": "apps/v1", "resources": ["deployments"]}]


class _Member:
    def __init__(self) -> None:
        self.discovery = _SlowDiscovery()

    async def readyz(self, timeout_s: float) -> None:
        return None

    async def version(self) -> dict[str, str]:
        return {"gitVersion": "v1.33.0"}


def test_a_status_pass_during_discovery_never_writes_a_version_without_its_kinds() -> None:
    """The first probe learns the version, then the kinds served (two round trips); a
    status written in between must not say the member serves nothing."""
    recorded = _recorded("True", "ProbeSucceeded", "2026-01-01T00:00:00Z", "ok")
    recorded["status"]["apiEnablements"] = [{"groupVersion": "v1", "resources": ["pods"]}]
    connection = _Member()
    monitor = MemberMonitor("m", "1", POLICY, connection=cast(KubeConnection, connection))
    written: list[dict[str, Any]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(monitor.probe, 5.0)
            await connection.discovery.entered.wait()
            written.append(fleetstatus.member_status(recorded, monitor, "2026-01-02T00:00:00Z"))
            connection.discovery.release.set()
        written.append(fleetstatus.member_status(recorded, monitor, "2026-01-02T00:00:00Z"))

    anyio.run(main)
    during, after = written
    assert during["apiEnablements"] == recorded["status"]["apiEnablements"]
    assert "kubernetesVersion" not in during
    assert after["kubernetesVersion"] == "v1.33.0"
    assert after["apiEnablements"] == [{"groupVersion": "apps/v1", "resources": ["deployments"]}]
