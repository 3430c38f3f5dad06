"""The member registry: one unit per member, its watches and workers started and stopped
together, its connection closed with it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio

from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.connection import KubeConnection
from kube.informer import Informer
from propagator.runtime.memberregistry import Member, MemberRegistry


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


def _registry(
    added: list[Member], sync: Callable[[Member, str], Awaitable[None]] | None = None
) -> MemberRegistry:
    async def nothing(member: Member, key: str) -> None:
        pass

    return MemberRegistry(
        selector=lambda name: f"member={name}",
        index=lambda obj: None,
        sync=sync or nothing,
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
            seen["units"] = sorted(registry.units)
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


class _Listing(_Connection):
    """A member whose caches' first listings never end: only their start is seen."""

    def __init__(self) -> None:
        super().__init__()
        self.listing: list[str] = []

    async def streams_initial_events(self) -> bool:
        return True

    async def resource(self, api_version: str, kind: str) -> Any:
        self.listing.append(f"{api_version}/{kind}")
        await anyio.sleep_forever()


def test_a_queued_sync_has_its_caches_listing_before_its_turn_comes() -> None:
    # They list while the sync waits: its first listing sees fewer of the writes queued
    # before it, and the sync may find it done.
    connection = _Listing()
    monitor = MemberMonitor("m1", "1", HealthPolicy(), connection=cast(KubeConnection, connection))
    at_turn: list[tuple[str, list[str], bool]] = []
    turn = anyio.Event()

    async def sync(member: Member, key: str) -> None:
        await turn.wait()  # the member's workers are busy until then
        cached = member.cached("apps/v1", "Deployment") is not None
        at_turn.append((key, list(connection.listing), cached))

    registry = _registry([], sync)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(registry.run)
            registry.sync({"m1": monitor})
            member = registry.get("m1")
            assert member is not None
            kinds = [("apps/v1", "Deployment"), ("v1", "ConfigMap")]
            registry.queue(member, "shop/web", kinds)
            await anyio.wait_all_tasks_blocked()
            assert sorted(connection.listing) == ["apps/v1/Deployment", "v1/ConfigMap"]
            # Filled from whatever state the member has at hand: nothing written yet.
            assert all(i.first_from_any_state for i in member.caches.values())
            assert not registry.cache(member, "v1", "Secret").first_from_any_state
            registry.queue(member, "shop/api", kinds[:1])  # started once per kind
            turn.set()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()

    anyio.run(main)
    listing = ["apps/v1/Deployment", "v1/ConfigMap", "v1/Secret"]  # (the last not queued)
    assert sorted(at_turn) == [("shop/api", listing, True), ("shop/web", listing, True)]
