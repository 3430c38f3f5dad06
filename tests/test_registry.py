"""The member registry: one unit per member, its watches and workers started and stopped
together, its connection closed with it."""

from __future__ import annotations

from typing import Any, cast

import anyio

from fleet.connection import KubeConnection
from fleet.health import HealthPolicy
from fleet.informer import Informer
from fleet.member import MemberMonitor
from propagator.runtime.members import Member, MemberRegistry


class _Watch:
    """Stands in for a monitor's node or pod watch: runs until cancelled or stopped."""

    def __init__(self) -> None:
        self.running = False
        self.stopped = False
        self._stop = anyio.Event()

    async def run(self) -> None:
        self.running = True
        try:
            await self._stop.wait()
        finally:
            self.running = False

    def stop(self) -> None:
        self.stopped = True
        self._stop.set()


class _Connection:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def _monitor(name: str) -> tuple[MemberMonitor, _Connection, list[_Watch]]:
    connection, watches = _Connection(), [_Watch(), _Watch()]
    monitor = MemberMonitor(name, "1", HealthPolicy(), connection=cast(KubeConnection, connection))
    monitor.informers = cast(list[Informer], watches)
    return monitor, connection, watches


def _registry(added: list[Member]) -> MemberRegistry:
    async def sync(member: Member, key: str) -> None:
        pass

    return MemberRegistry(
        selector=lambda name: f"member={name}",
        index=lambda obj: None,
        sync=sync,
        on_object=lambda *_: None,
        on_added=added.append,
        workers_per_member=2,
        circuit_failure_threshold=3,
        circuit_cool_down_s=30,
        requeue_max_delay_s=60,
    )


def test_a_unit_runs_its_members_watches_and_stops_them_and_its_connection_as_one() -> None:
    added: list[Member] = []
    registry = _registry(added)
    first, first_conn, first_watches = _monitor("m1")
    rebuilt, rebuilt_conn, rebuilt_watches = _monitor("m1")  # a new kubeconfig Secret
    unusable = MemberMonitor("m2", "1", HealthPolicy(), config_error="no Secret")
    last, last_conn, last_watches = _monitor("m3")
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            registry.sync({"m1": first, "m2": unusable})  # before run(): taken up at start
            await tg.start(registry.run)
            await anyio.wait_all_tasks_blocked()
            seen["started"] = [w.running for w in first_watches]
            seen["units"] = sorted(registry.members)
            breaker = registry.breaker("m1")

            registry.sync({"m1": rebuilt})
            await anyio.wait_all_tasks_blocked()
            seen["rebuilt"] = (
                [w.running for w in first_watches],
                first_conn.closed,
                [w.running for w in rebuilt_watches],
                registry.breaker("m1") is breaker,  # the breaker outlives the connection
            )

            registry.sync({})
            await anyio.wait_all_tasks_blocked()
            seen["dropped"] = ([w.running for w in rebuilt_watches], rebuilt_conn.closed)
            seen["breaker kept"] = registry.breaker("m1") is breaker
            registry.sync({"m3": last})
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()  # the controller stops: every unit with it

    anyio.run(main)
    assert seen["started"] == [True, True]
    assert seen["units"] == ["m1"]  # no unit without a connection
    assert seen["rebuilt"] == ([False, False], True, [True, True], True)
    assert seen["dropped"] == ([False, False], True)
    assert not seen["breaker kept"]  # the member is gone: so is its breaker
    assert [m.monitor for m in added] == [first, rebuilt, last]
    assert last_conn.closed
    assert [w.running for w in last_watches] == [False, False]
