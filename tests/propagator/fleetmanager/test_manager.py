"""The fleet manager: its fresh view of the members (for decisions on a stale snapshot) and
its status passes."""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import pytest

from fleet.member import MemberMonitor, ProbeResult
from fleet.readiness import Health
from fleet.snapshotstore import SnapshotStore
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.fleetmanager import FleetManager
from propagator.fleetmanager import prober as prober_module
from propagator.fleetmanager import statuswriter as statuswriter_module
from propagator.fleetmanager.statuswriter import FRESH_SCAN_REUSE_S
from propagator.settings import Settings
from tests.fakes import KUBECONFIG


def _member(name: str, ready: str, taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "resourceVersion": "7", "labels": {"env": "prod"}},
        "spec": {"layer": "edge", "taints": taints},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "ProbeSucceeded",
                    "message": "",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ]
        },
    }


def test_fresh_clusters_show_what_the_probes_see_not_what_the_hub_last_stored() -> None:
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    user_taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    # the hub still says Ready (the status writes have been failing), the probes do not
    manager.member_clusters.cache["down"] = _member("down", "True", [user_taint])
    manager.member_clusters.cache["up"] = _member(
        "up", "False", [{"key": "propagator.io/not-ready", "effect": "NoSchedule"}]
    )
    for name, ready in (("down", False), ("up", True)):
        manager.monitors[name] = MemberMonitor(
            name,
            "1",
            manager.policy,
            connection=cast(KubeConnection, object()),
            health=Health(ready=ready, not_ready_since=None if ready else time.time() - 5),
        )
    fresh = {c.name: c for c in manager.fresh_clusters()}
    assert (fresh["down"].ready, fresh["up"].ready) == (False, True)
    assert [(t.key, t.effect) for t in fresh["down"].taints] == [
        ("dedicated", "NoSchedule"),
        ("propagator.io/not-ready", "NoSchedule"),
    ]
    assert fresh["up"].taints == ()  # the stale not-ready taint is gone
    assert (fresh["down"].layer, dict(fresh["down"].labels)) == ("edge", {"env": "prod"})


def test_a_fresh_scan_serves_the_decisions_of_the_next_second(monkeypatch: Any) -> None:
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    manager.member_clusters.cache["m1"] = _member("m1", "True", [])
    monitor = MemberMonitor(
        "m1",
        "1",
        manager.policy,
        connection=cast(KubeConnection, object()),
        health=Health(ready=True),
    )
    manager.monitors["m1"] = monitor
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    assert manager.fresh_clusters()[0].ready
    monitor.health = Health(ready=False, not_ready_since=time.time())
    clock[0] += FRESH_SCAN_REUSE_S / 2
    assert manager.fresh_clusters()[0].ready  # the same scan, half a second later
    clock[0] += FRESH_SCAN_REUSE_S
    assert not manager.fresh_clusters()[0].ready  # a new scan


class _Hub:
    """Takes status patches as the hub would: the MemberCluster in the manager's cache is
    replaced by a new object holding the status (as its watch would deliver it)."""

    def __init__(self, manager: FleetManager) -> None:
        self.manager = manager
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        self.patches.append((name, body["status"]))
        cache = self.manager.member_clusters.cache
        cache[name] = {**cache[name], "status": body["status"]}
        return cache[name]

    async def apply(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        return obj


def _one_ready_member() -> tuple[FleetManager, _Hub, MemberMonitor]:
    """A manager whose hub takes status patches, with one Ready member, m1, discovered."""
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    hub = _Hub(manager)
    manager.hub = manager.status.hub = cast(KubeConnection, hub)
    manager.member_clusters.cache["m1"] = _member("m1", "True", [])
    monitor = MemberMonitor(
        "m1", "1", manager.policy, connection=cast(KubeConnection, object()), health=Health(True)
    )
    monitor.version, monitor.enablements = "v1.37.2", [{"groupVersion": "v1", "kinds": ["Pod"]}]
    manager.monitors["m1"] = monitor
    return manager, hub, monitor


def test_a_status_pass_writes_each_change_and_nothing_while_the_member_is_in_line() -> None:
    manager, hub, monitor = _one_ready_member()

    async def passes() -> list[int]:
        writes = []
        for change in (None, None, "discovery", None, "not ready", None):
            if change == "discovery":
                monitor.enablements = [{"groupVersion": "v1", "kinds": ["ConfigMap", "Pod"]}]
            elif change == "not ready":
                monitor.health = Health(ready=False, last_error="timeout", not_ready_since=1.0)
            await manager.status.write()
            writes.append(len(hub.patches))
        return writes

    # Written first (the hub's status lacked the version), then only after each change.
    assert anyio.run(passes) == [1, 1, 2, 2, 3, 3]
    last = hub.patches[-1][1]
    assert last["conditions"][0]["reason"] == "ProbeFailed"
    assert last["apiEnablements"] == [{"groupVersion": "v1", "kinds": ["ConfigMap", "Pod"]}]


def test_a_change_of_capacity_alone_waits_for_the_interval_readiness_does_not(
    monkeypatch: Any,
) -> None:
    manager, hub, monitor = _one_ready_member()
    pods = ["3"]
    monkeypatch.setattr(
        monitor,
        "capacity",
        lambda: {"nodes": {"total": 1, "ready": 1}, "resources": {"allocated": {"pods": pods[0]}}},
    )
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    interval = manager.settings.capacity_status_interval_s

    def written() -> list[str]:
        return [p["resources"]["allocated"]["pods"] for _, p in hub.patches]

    anyio.run(manager.status.write)
    assert written() == ["3"]  # the first write of this manager: at once
    pods[0] = "4"  # a pod started
    clock[0] += 1
    anyio.run(manager.status.write)
    assert written() == ["3"]
    assert manager.status.capacity_due == 100.0 + interval  # the status loop wakes then
    pods[0] = "5"
    monitor.health = Health(ready=False, last_error="timeout", not_ready_since=1.0)
    anyio.run(manager.status.write)  # not ready: at once, with the capacity of the moment
    assert written() == ["3", "5"]
    assert hub.patches[-1][1]["conditions"][0]["status"] == "False"
    pods[0] = "6"
    clock[0] += interval - 0.5
    anyio.run(manager.status.write)
    assert written() == ["3", "5"]  # the interval counts from the last write
    clock[0] += 0.5
    anyio.run(manager.status.write)
    assert written() == ["3", "5", "6"]
    assert manager.status.capacity_due is None


def test_a_members_first_capacity_is_written_at_once(monkeypatch: Any) -> None:
    manager, hub, monitor = _one_ready_member()
    capacity: list[dict[str, Any] | None] = [None]  # its nodes and pods not listed yet
    monkeypatch.setattr(monitor, "capacity", lambda: capacity[0])
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    anyio.run(manager.status.write)
    assert [("resources" in p) for _, p in hub.patches] == [False]  # Ready, at once
    capacity[0] = {"nodes": {"total": 1, "ready": 1}, "resources": {"allocated": {"pods": "3"}}}
    clock[0] += 1
    anyio.run(manager.status.write)
    assert [p.get("resources") for _, p in hub.patches] == [None, {"allocated": {"pods": "3"}}]
    assert manager.status.capacity_due is None


class _SlowHub(_Hub):
    """A hub whose writes take a moment, counting how many are in flight at once; the
    write of ``refuse`` fails."""

    def __init__(self, manager: FleetManager, refuse: str | None = None) -> None:
        super().__init__(manager)
        self.refuse = refuse
        self.in_flight = self.most_in_flight = 0
        self.fleet_patches: list[dict[str, Any]] = []
        self.taints: list[str] = []
        self.echo = True
        """Whether a write shows in the manager's cache at once (as its watch brings it)."""

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await anyio.sleep(0.01)
            if name == self.refuse:
                raise ApiError("hub", "the hub is overloaded", status=429, retryable=True)
            if kind == "Fleet":
                self.fleet_patches.append(body["status"])
                return body
            if not self.echo:
                self.patches.append((name, body["status"]))
                return body
            return await super().merge_patch(api_version, kind, name, body)
        finally:
            self.in_flight -= 1

    async def apply(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.taints.append(obj["metadata"]["name"])
        return obj


def _region(count: int, refuse: str | None = None) -> tuple[FleetManager, _SlowHub]:
    """A manager of ``count`` members in fleet "all", Ready on the hub, whose probes now
    all fail (a region gone at once)."""
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    hub = _SlowHub(manager, refuse)
    manager.hub = manager.status.hub = cast(KubeConnection, hub)
    manager.fleets.cache["all"] = {
        "metadata": {"name": "all", "generation": 1},
        "spec": {"clusterSelector": {}},
    }
    for i in range(count):
        name = f"m{i:02d}"
        manager.member_clusters.cache[name] = _member(name, "True", [])
        manager.monitors[name] = MemberMonitor(
            name,
            "1",
            manager.policy,
            connection=cast(KubeConnection, object()),
            health=Health(ready=False, last_error="timeout", not_ready_since=time.time()),
        )
    return manager, hub


def test_a_region_gone_at_once_is_written_many_at_a_time_and_the_fleet_counts_it() -> None:
    manager, hub = _region(40)
    anyio.run(manager.status.write)
    written = [name for name, _ in hub.patches]
    assert sorted(written) == [f"m{i:02d}" for i in range(40)]
    assert all(status["conditions"][0]["status"] == "False" for _, status in hub.patches)
    assert sorted(hub.taints) == sorted(written)  # each one tainted not-ready too
    assert hub.most_in_flight == statuswriter_module.WRITES_IN_FLIGHT
    # the fleet's status, written after them, counts what they were written as
    assert [(f["clusters"], f["readyClusters"]) for f in hub.fleet_patches] == [(40, 0)]


def test_a_write_that_fails_fails_the_pass_and_the_next_pass_writes_what_is_left() -> None:
    manager, hub = _region(40, refuse="m03")
    with pytest.raises(ApiError, match="overloaded"):
        anyio.run(manager.status.write)
    first = {name for name, _ in hub.patches}
    assert "m03" not in first
    assert len(first) < 39  # nothing new started after the failure
    assert hub.fleet_patches == []  # nor the fleet's status: it would count stale members
    hub.refuse = None
    anyio.run(manager.status.write)
    assert {name for name, _ in hub.patches} == {f"m{i:02d}" for i in range(40)}
    assert len(hub.patches) == 40  # those written before were not written again
    assert [(f["clusters"], f["readyClusters"]) for f in hub.fleet_patches] == [(40, 0)]


def test_a_pass_before_the_watch_brings_a_written_status_does_not_write_it_again(
    monkeypatch: Any,
) -> None:
    manager, hub = _region(3)
    hub.echo = False  # the hub took each write; its watch has not brought them back yet
    seconds = iter(range(10, 60))  # each stamp a second later than the one before
    monkeypatch.setattr(
        statuswriter_module, "now_iso", lambda: f"2026-12-06T12:00:{next(seconds)}Z"
    )

    async def two_passes() -> None:
        await manager.status.write()
        await manager.status.write()

    anyio.run(two_passes)
    assert sorted(name for name, _ in hub.patches) == ["m00", "m01", "m02"]  # once each


def test_what_a_member_learns_while_the_pass_writes_others_goes_in_its_one_write() -> None:
    manager, hub = _region(40)
    late = manager.monitors["m39"]  # written in the pass's last round
    discovered = [{"groupVersion": "v1", "kinds": ["ConfigMap"]}]
    merge_patch = hub.merge_patch

    async def discovery_meanwhile(*args: Any, **kwargs: Any) -> dict[str, Any]:
        late.version, late.enablements = "v1.37.2", discovered
        return await merge_patch(*args, **kwargs)

    hub.merge_patch = discovery_meanwhile  # type: ignore[method-assign]

    async def two_passes() -> None:
        await manager.status.write()
        await manager.status.write()

    anyio.run(two_passes)
    writes_of_late = [status for name, status in hub.patches if name == "m39"]
    assert len(writes_of_late) == 1  # not again in the second pass
    assert writes_of_late[0]["apiEnablements"] == discovered
    assert writes_of_late[0]["kubernetesVersion"] == "v1.37.2"
    assert len(hub.patches) == 40


async def _probe_until(manager: FleetManager, done: anyio.Event) -> None:
    """Run the manager's probe loop over its monitors until ``done`` is set."""
    manager.prober._probes_wake = anyio.Event()
    with anyio.fail_after(60):  # a safety net, not a measure
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.prober.run)
            await done.wait()
            tg.cancel_scope.cancel()


def test_a_member_whose_probe_hangs_does_not_hold_back_the_others_probes(
    monkeypatch: Any,
) -> None:
    manager = FleetManager(
        cast(KubeConnection, object()), Settings(probe_interval_s=0.5), SnapshotStore()
    )
    probes = {"hung": 0, "ok": 0}
    pokes: list[str] = []

    def monitor(name: str, answers: Callable[[], Awaitable[None]]) -> MemberMonitor:
        m = MemberMonitor(name, "1", manager.policy, connection=cast(KubeConnection, object()))

        async def probe(timeout_s: float, now: float | None = None) -> ProbeResult:
            probes[name] += 1
            await answers()
            m.health = m.health.observe(True, time.monotonic(), m.policy)
            return ProbeResult(True)

        monkeypatch.setattr(m, "probe", probe)
        return m

    async def main() -> None:
        never, fourth = anyio.Event(), anyio.Event()  # "hung" stopped answering: no timeout

        async def answers() -> None:
            if probes["ok"] == 4:
                fourth.set()

        manager.monitors.update({"hung": monitor("hung", never.wait), "ok": monitor("ok", answers)})
        monkeypatch.setattr(manager.prober, "on_change", lambda: pokes.append("pass"))
        await _probe_until(manager, fourth)

    anyio.run(main)
    # "ok" probed every 0.5 s while "hung" never answered: its probe was abandoned by its
    # prober after 1 s, then made again in a task of its own, which never ended either
    assert probes["ok"] == 4
    assert 1 <= probes["hung"] <= 2
    assert pokes  # "ok" turned Ready at its first probe: a status pass was asked for


def test_members_that_stopped_answering_do_not_hold_back_the_probes_of_those_that_answer(
    monkeypatch: Any,
) -> None:
    settings = Settings(probe_interval_s=0.5, probe_timeout_s=2.0, max_concurrency=1)
    manager = FleetManager(cast(KubeConnection, object()), settings, SnapshotStore())
    dead = ["dead-1", "dead-2", "dead-3"]
    probes = dict.fromkeys(["ok", *dead], 0)
    third: anyio.Event

    def monitor(name: str) -> MemberMonitor:
        ok = name == "ok"
        # the dead ones failed their last probe already
        health = Health(True) if ok else Health(True, failures=1, last_error="timeout")
        m = MemberMonitor(
            name, "1", manager.policy, connection=cast(KubeConnection, object()), health=health
        )

        async def probe(timeout_s: float, now: float | None = None) -> ProbeResult:
            probes[name] += 1
            if not ok:
                # an error after 0.6 s: within the 1 s a prober waits, so it waits
                await anyio.sleep(0.6)
            m.health = m.health.observe(ok, time.monotonic(), m.policy, None if ok else "503")
            if min(probes[d] for d in dead) >= 3:
                third.set()
            return ProbeResult(ok)

        monkeypatch.setattr(m, "probe", probe)
        return m

    async def main() -> None:
        nonlocal third
        third = anyio.Event()  # every dead member probed three times
        manager.monitors.update({name: monitor(name) for name in probes})
        monkeypatch.setattr(manager.prober, "on_change", lambda: None)
        await _probe_until(manager, third)

    anyio.run(main)
    # One prober per lane. Sharing one queue, "ok" would wait behind the dead members'
    # 0.6 s answers: one probe of it per 1.8 s round of theirs (3 or so by now); apart, it
    # keeps its 0.5 s clock (11 or so).
    assert probes["ok"] >= 2 * min(probes[d] for d in dead)


def test_members_that_stop_answering_at_once_hold_the_probers_a_handoff_each(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(prober_module, "HANDOFF_S", 0.2)
    settings = Settings(probe_interval_s=0.5, probe_timeout_s=2.0, max_concurrency=1)
    manager = FleetManager(cast(KubeConnection, object()), settings, SnapshotStore())
    dead = ["dead-1", "dead-2", "dead-3"]  # probed before "ok" in a round (by name)
    probes = dict.fromkeys(["ok", *dead], 0)
    timeouts: dict[str, list[float]] = {d: [] for d in dead}  # each probe's timeout
    abandoned = dict.fromkeys(dead, 0)
    hanging: set[str] = set()  # dead members whose probe is under way
    most_hanging = 0
    timed_out: list[str] = []  # dead members whose probe waited for its whole timeout
    ok_first: list[str] = []  # those that had when "ok" was first probed
    done: anyio.Event

    def monitor(name: str) -> MemberMonitor:
        ok = name == "ok"
        # every one answered its last probe: the dead ones stopped answering since
        m = MemberMonitor(
            name,
            "1",
            manager.policy,
            connection=cast(KubeConnection, object()),
            health=Health(True),
        )

        async def probe(timeout_s: float, now: float | None = None) -> ProbeResult:
            nonlocal most_hanging
            probes[name] += 1
            if ok and probes[name] == 1:
                ok_first.extend(timed_out)
            if not ok:
                timeouts[name].append(timeout_s)
                hanging.add(name)
                most_hanging = max(most_hanging, len(hanging))
                try:
                    await anyio.sleep(timeout_s)  # no answer: the timeout
                except anyio.get_cancelled_exc_class():
                    if not done.is_set():  # not the test's end
                        abandoned[name] += 1
                    raise
                finally:
                    hanging.discard(name)
                timed_out.append(name)
            m.health = m.health.observe(ok, time.monotonic(), m.policy, None if ok else "timeout")
            if all(manager.monitors[d].health.failures >= 2 for d in dead):
                done.set()
            return ProbeResult(ok)

        monkeypatch.setattr(m, "probe", probe)
        return m

    async def main() -> None:
        nonlocal done
        done = anyio.Event()  # every dead member failed twice
        manager.monitors.update({name: monitor(name) for name in probes})
        monkeypatch.setattr(manager.prober, "on_change", lambda: None)
        await _probe_until(manager, done)

    anyio.run(main)
    # Each dead member held the answering members' prober 0.2 s, then went on in a task of
    # its own: "ok" was first probed after 0.6 s, before any dead member's timeout, and
    # kept its 0.5 s clock (8 or so by the second failures, at 4.4 s). Waiting for each
    # timeout in turn, its first probe would have come at 6 s, after three of them.
    assert ok_first == []
    assert probes["ok"] >= 5
    # Abandoned once (by the prober), then probed for the rest of the timeout, so the
    # first failure came when it would have; the next probes were their own tasks from
    # the start: all three hung at once, though each lane has one prober.
    assert abandoned == dict.fromkeys(dead, 1)
    for name in dead:
        first, rest, again = timeouts[name][:3]
        assert (first, again) == (2.0, 2.0)
        assert rest < 1.9
    assert most_hanging == 3


def test_a_change_of_spec_namespaces_makes_a_new_monitor_and_keeps_its_health() -> None:
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    told: list[dict[str, MemberMonitor]] = []
    manager.on_monitors = lambda monitors: told.append(dict(monitors))
    namespace = manager.settings.namespace
    manager.secrets.cache[f"{namespace}/m1"] = {
        "metadata": {"name": "m1", "namespace": namespace, "resourceVersion": "3"},
        "data": {"kubeconfig": base64.b64encode(KUBECONFIG.encode()).decode()},
    }
    member = _member("m1", "True", [])
    member["spec"]["secretRef"] = {"name": "m1", "namespace": namespace, "key": "kubeconfig"}
    manager.member_clusters.cache["m1"] = member
    manager._sync_monitors()
    first = manager.monitors["m1"]
    assert first.namespaces == ()
    first.health = Health(True)
    manager._sync_monitors()  # nothing changed: the same monitor, nobody told
    assert manager.monitors["m1"] is first
    assert len(told) == 1
    member["spec"]["namespaces"] = ["tools", "shop", "tools"]
    manager._sync_monitors()
    limited = manager.monitors["m1"]
    assert limited is not first
    assert len(told) == 2
    assert limited.namespaces == ("shop", "tools")
    assert limited.health.ready  # a narrower reach does not reset readiness
    # A new connection: the registry makes a new unit (caches of these namespaces only).
    assert first.connection is not None
    assert limited.connection is not first.connection
