"""A leader, or a shard holding buckets, whose hub stops answering stops at its renew
deadline: an attempt left unanswered is given up then, not waited for."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from propagator.runtime.leader import LeaderElector, LeadershipLost, LeaseConfig
from propagator.runtime.ownership import Ownership
from propagator.runtime.shards import ShardRuntime, ShardsLost, replica_lease

HANG_GUARD_S = 30.0
"""Only against a hang: without the deadline these waits would never end."""


class _Unanswered(LeaderElector):
    """Its hub stores nothing and answers nothing after the first renewal."""

    def __init__(self) -> None:
        super().__init__(
            None,  # type: ignore[arg-type]
            LeaseConfig(
                "ns", "lease", "me", lease_duration_s=1, renew_deadline_s=0.3, retry_period_s=0.05
            ),
        )
        self.attempts = 0

    async def _attempt(self) -> bool:
        self.attempts += 1
        if self.attempts == 1:
            return True
        await anyio.sleep(3600)
        return True


def test_a_leader_whose_hub_stops_answering_stops_at_its_renew_deadline() -> None:
    elector = _Unanswered()

    async def scenario() -> None:
        with anyio.fail_after(HANG_GUARD_S):
            await elector.keep()

    with pytest.raises(LeadershipLost, match=r"could not renew lease lease for 0\.3s"):
        anyio.run(scenario)
    assert elector.attempts == 2  # the unanswered attempt was given up, not waited for


class _HangingRounds(ShardRuntime):
    def __init__(self, ownership: Ownership) -> None:
        holder = LeaseConfig("", "", "r-a_1", 1.0, 0.3, 0.05)
        config = replica_lease("ns", "r-a", holder)
        super().__init__(None, "r-a", config, ownership, lambda: True)  # type: ignore[arg-type]
        self.rounds = 0

    async def round(self) -> Any:
        self.rounds += 1
        await anyio.sleep(3600)


def test_a_shard_whose_rounds_hang_closes_its_gate_and_stops_at_the_deadline() -> None:
    ownership = Ownership(everything=False, deadline_s=0.3)
    ownership.confirm({1, 2}, time.monotonic())
    shards = _HangingRounds(ownership)

    async def scenario() -> None:
        with anyio.fail_after(HANG_GUARD_S):
            await shards.run()

    with pytest.raises(ShardsLost, match="could not renew its Lease or read the shard table"):
        anyio.run(scenario)
    assert not ownership.confirmed()  # no new work was taken by then
    assert shards.rounds == 1  # the hanging round was given up, not waited for


def test_a_shard_holding_nothing_waits_for_the_hub_without_stopping() -> None:
    ownership = Ownership(everything=False, deadline_s=0.3)
    shards = _HangingRounds(ownership)

    async def scenario() -> None:
        with anyio.move_on_after(1.5):
            await shards.run()

    anyio.run(scenario)  # no ShardsLost: there was nothing to lose
    assert shards.rounds >= 2
