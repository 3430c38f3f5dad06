"""A member's monitor: its capacity summed from its watched nodes and pods, again only
after one of them changed; its probes, a PING between two /readyz while it is Ready."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, cast

import anyio
import pytest

from fleet.capacity import slim_node, slim_pod
from fleet.member import MemberMonitor, ProbeResult
from fleet.readiness import HealthPolicy
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.session import ConnectionOptions
from tests.fakes import KUBECONFIG


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


def _pod(name: str, cpu: str, namespace: str = "a", **meta: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return slim_pod(
        {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1", **meta},
            "spec": {"nodeName": "n1", "containers": [container]},
            "status": {"phase": "Running"},
        }
    )


def _watching(pokes: list[bool]) -> MemberMonitor:
    """A monitor whose node and pod caches the test fills; each change it reports to
    the status pass appends to ``pokes``."""
    return MemberMonitor.from_kubeconfig(
        "m",
        KUBECONFIG,
        "1",
        options=ConnectionOptions(),
        policy=HealthPolicy(),
        allow_exec=False,
        on_change=lambda: pokes.append(True),
    )


def test_the_pod_watch_asks_only_for_pods_not_terminated() -> None:
    # Those bound to a node for capacity; all of them for the quotas' count.
    _, pods = _watching([]).informers
    assert pods.field_selector is not None
    assert set(pods.field_selector.split(",")) == {
        "status.phase!=Succeeded",
        "status.phase!=Failed",
    }


def test_capacity_is_summed_again_only_after_a_node_or_pod_changed() -> None:
    pokes: list[bool] = []
    monitor = _watching(pokes)
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


def test_quota_usage_by_namespace_and_who_is_told_when_pods_change() -> None:
    pokes: list[bool] = []
    monitor = _watching(pokes)
    _, pods = monitor.informers
    assert monitor.quota_usage("a") is None  # not listed yet: no figure, not zero
    told: list[str] = []
    monitor.pods_changed = told.append
    deleting = _pod("old", "1", deletionTimestamp="2026-12-05T10:00:00Z")
    pods._replace({"a/p": _pod("p", "1"), "a/old": deleting, "b/q": _pod("q", "1", "b")})
    # a pod being deleted is not counted: the member's quota stops counting it soon
    assert monitor.quota_usage("a") == {"pods": Decimal(1), "cpu": Decimal(1)}
    assert monitor.quota_usage("b") == {"pods": Decimal(1), "cpu": Decimal(1)}
    assert monitor.quota_usage("c") == {}
    assert sorted(told) == ["a", "a", "b"]
    # one waiting for a node counts, and is told, but holds no node's resources
    pokes.clear()
    told.clear()
    waiting = slim_pod({"metadata": {"name": "w", "namespace": "c"}, "spec": {}, "status": {}})
    pods.cache["c/w"] = waiting
    pods.handler("ADDED", None, waiting)
    assert (told, pokes) == (["c"], [])
    told.clear()
    # its container's status changed: nothing to count again, nobody told
    pods.handler(
        "MODIFIED",
        pods.cache["b/q"],
        {
            **pods.cache["b/q"],
            "metadata": {**pods.cache["b/q"]["metadata"], "resourceVersion": "2"},
        },
    )
    assert told == []


class _Discovery:
    async def refresh(self) -> None:
        pass

    async def enablements(self) -> list[dict[str, Any]]:
        return []


class _Connection:
    """What a probe calls, recorded; ``ping_fails`` / ``readyz_fails`` make them fail."""

    def __init__(self, http2: bool = True) -> None:
        self.http2 = http2
        self.calls: list[str] = []
        self.ping_fails = False
        self.readyz_fails = False
        self.discovery = _Discovery()
        self.answered_at: float | None = None

    async def ping(self, timeout_s: float) -> bool:
        if not self.http2:
            return False
        self.calls.append("ping")
        if self.ping_fails:
            raise ApiError("m", "HTTP/2 PING: timeout: https://m", retryable=True)
        return True

    async def readyz(self, timeout_s: float) -> None:
        self.calls.append("readyz")
        if self.readyz_fails:
            raise ApiError("m", "GET /readyz: 500: [-]etcd failed\nmore", status=500)

    async def version(self) -> dict[str, Any]:
        return {"gitVersion": "v1.37.2"}


def _probed(conn: _Connection, policy: HealthPolicy) -> Callable[[float], Awaitable[str]]:
    monitor = MemberMonitor("m", "1", policy, connection=cast(KubeConnection, conn))

    async def probe(now: float) -> str:
        before = len(conn.calls)
        result = await monitor.probe(5, now=now)
        assert result.ok == (monitor.health.failures == 0)
        sent = "+".join(conn.calls[before:]) or "nothing sent"
        return sent + ("" if result.ok else " failed")

    return probe


def test_a_ready_member_is_pinged_between_readyz_probes_and_readyz_after_any_failure() -> None:
    conn = _Connection()
    probe = _probed(conn, HealthPolicy(failure_threshold=2, readyz_interval_s=30))

    async def run() -> list[str]:
        seen = [await probe(t) for t in (0, 10, 20, 30, 40)]
        conn.ping_fails = True
        seen.append(await probe(50))
        conn.ping_fails = False
        seen += [await probe(t) for t in (60, 70)]
        conn.readyz_fails = True  # /readyz fails (etcd down), pings would pass
        seen += [await probe(t) for t in (100, 110, 120)]
        conn.readyz_fails = False
        seen += [await probe(t) for t in (130, 140, 150)]
        return seen

    assert anyio.run(run) == [
        "readyz",
        "ping",
        "ping",
        "readyz",  # 30 s since the last /readyz
        "ping",
        "ping failed",  # counts as a failed probe...
        "readyz",  # ...so the next one is /readyz
        "ping",
        "readyz failed",  # (40 s since the last /readyz)
        "readyz failed",  # NotReady: never a PING until Ready again
        "readyz failed",
        "readyz",
        "readyz",  # the second good probe: Ready again
        "ping",
    ]


def test_a_probe_ends_at_its_timeout_whatever_its_steps_wait() -> None:
    conn = _Connection()
    steps: list[float] = []

    async def hangs(timeout_s: float) -> None:
        # A connection whose steps each wait their own timeout, one after the other
        # (connecting, then the TLS handshake, then the answer): more than the probe's.
        steps.append(timeout_s)
        await anyio.sleep(3 * timeout_s)

    conn.readyz = hangs  # type: ignore[method-assign]
    monitor = MemberMonitor("m", "1", HealthPolicy(), connection=cast(KubeConnection, conn))

    async def run() -> ProbeResult:
        with anyio.fail_after(30):  # a safety net: the probe takes 0.2 s
            return await monitor.probe(0.2)

    result = anyio.run(run)
    assert result == ProbeResult(False, "no answer within 0.2 s")
    assert monitor.health.failures == 1
    # Each step gets less than the probe: a request times out itself, and its connection
    # is checked for life, before the probe's own bound ends it.
    assert steps == [pytest.approx(0.18)]


def test_a_member_without_http2_or_with_readyz_every_probe_gets_readyz() -> None:
    for conn, policy in (
        (_Connection(http2=False), HealthPolicy()),
        (_Connection(), HealthPolicy(readyz_interval_s=0)),
    ):

        async def run(probe: Callable[[float], Awaitable[str]]) -> list[str]:
            return [await probe(t) for t in (0, 10, 20)]

        assert anyio.run(run, _probed(conn, policy)) == ["readyz"] * 3


def test_a_heartbeat_alone_neither_sums_capacity_again_nor_wakes_the_status_pass() -> None:
    pokes: list[bool] = []
    monitor = _watching(pokes)
    nodes, pods = monitor.informers

    def node(version: str, heartbeat: str, ready: str) -> dict[str, Any]:
        condition = {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat}
        return slim_node(
            {
                "metadata": {"name": "n1", "resourceVersion": version},
                "status": {"allocatable": {"cpu": "4"}, "conditions": [condition]},
            }
        )

    nodes.cache["n1"] = before = node("1", "10:00", "True")
    nodes.mark_synced()
    pods.mark_synced()
    first = monitor.capacity()
    nodes.cache["n1"] = beat = node("2", "10:01", "True")
    nodes.handler("MODIFIED", before, beat)
    assert monitor.capacity() is first
    assert pokes == []
    nodes.cache["n1"] = down = node("3", "10:02", "False")
    nodes.handler("MODIFIED", beat, down)
    assert pokes == [True]
    assert monitor.capacity()["nodes"] == {"total": 1, "ready": 0}  # type: ignore[index]


def test_what_arrived_since_the_last_probe_stands_in_for_a_ping_not_for_a_due_readyz() -> None:
    conn = _Connection()
    probe = _probed(conn, HealthPolicy(readyz_interval_s=30))

    async def run() -> list[str]:
        seen = [await probe(0)]
        conn.answered_at = 5  # a watch event or a bookmark, after the probe at 0
        seen.append(await probe(10))
        seen.append(await probe(20))  # nothing since the probe at 10
        conn.answered_at = 25
        seen.append(await probe(30))
        return seen

    assert anyio.run(run) == ["readyz", "nothing sent", "ping", "readyz"]


_TOKEN = "Zq8pL3xW9vB2nK7mT4cR6yH1dF5gJ0sAe"


def _broken_kubeconfigs() -> list[str]:
    import base64

    import yaml

    good = yaml.safe_load(KUBECONFIG)

    def but(path: tuple[str | int, ...], value: Any) -> str:
        doc = yaml.safe_load(KUBECONFIG)
        at = doc
        for step in path[:-1]:
            at = at[step]
        at[path[-1]] = value
        return yaml.safe_dump(doc)

    junk = base64.b64encode(b"junk, not PEM").decode()
    assert good["users"][0]["user"]
    return [
        "",
        "\x00\x01\x02 not yaml at all {[",
        f"users:\n- user:\n    token: [{_TOKEN}\n",
        "a: " + "x" * (5 << 20),
        but(("users", 0, "user"), {"client-certificate-data": junk, "client-key-data": junk}),
        but(("users", 0, "user"), {"exec": ["a", "list"]}),
        but(("users", 0, "user"), {"exec": {"command": "sh", "args": [_TOKEN]}}),
        but(("users", 0, "user"), {"token": 5}),
        but(("clusters", 0, "cluster", "server"), f"https://u:{_TOKEN}@10.0.0.1"),
        but(("clusters", 0, "cluster", "certificate-authority-data"), junk),
        but(("contexts",), "not a list"),
        but(("contexts", 0, "context"), ["a", "list"]),
    ]


@pytest.mark.parametrize("kubeconfig", _broken_kubeconfigs())
def test_whatever_a_member_secret_holds_its_monitor_says_why_it_cannot_connect(
    kubeconfig: str,
) -> None:
    """A battery of broken Secrets: each gives a monitor without a connection that says
    why (never a credential), never an exception out of the fleet manager."""
    monitor = MemberMonitor.from_kubeconfig(
        "m1",
        kubeconfig,
        "1",
        options=ConnectionOptions(),
        policy=HealthPolicy(),
        allow_exec=False,
        on_change=lambda: None,
    )
    assert monitor.connection is None
    assert monitor.config_error
    assert "MemberCluster m1" in monitor.config_error
    assert _TOKEN[:8] not in monitor.config_error
    result = anyio.run(monitor.probe, 1.0)
    assert result == ProbeResult(False, monitor.config_error)


def test_a_probe_that_meets_an_answer_nobody_foresaw_fails_that_member_only() -> None:
    conn = _Connection()

    async def odd_version() -> Any:
        return ["a", "list"]  # a version that is no object: .get() fails

    conn.version = odd_version  # type: ignore[method-assign]
    monitor = MemberMonitor("m", "1", HealthPolicy(), connection=cast(KubeConnection, conn))
    result = anyio.run(monitor.probe, 1.0)
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("probe failed: AttributeError")


def test_capacity_that_cannot_be_summed_is_unknown_until_a_node_or_pod_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever a member's nodes and pods hold, the status pass (which asks every member
    each pass) gets "unknown", not an exception, and the sum is not tried (nor logged)
    again until one of them changes."""
    import fleet.member

    calls: list[int] = []

    def broken(nodes: Any, pods: Any) -> Any:
        calls.append(1)
        raise TypeError("a node made up")

    monkeypatch.setattr(fleet.member, "summarize", broken)
    monitor = _watching([])
    nodes, pods = monitor.informers
    nodes.mark_synced()
    pods.mark_synced()
    assert monitor.capacity() is None
    assert monitor.capacity() is None
    assert calls == [1]
    nodes.handler("ADDED", None, _node("n1", "4"))
    assert monitor.capacity() is None
    assert calls == [1, 1]
