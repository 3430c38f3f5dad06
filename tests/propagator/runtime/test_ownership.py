"""The gate every write passes: owned keys only, within the deadline of the last
confirmation, and the work in flight a handoff waits for."""

from __future__ import annotations

import time

import anyio

from propagator.runtime.ownership import Ownership, always
from propagator.runtime.shardplan import BUCKETS, bucket_of


def test_one_replica_owns_everything() -> None:
    ownership = Ownership()
    assert ownership.owns("application/any/thing")
    assert ownership.share() == BUCKETS
    with always("x") as mine:
        assert mine


def test_a_shard_owns_the_keys_of_its_buckets_while_confirmed() -> None:
    ownership = Ownership(everything=False, deadline_s=10)
    key = "application/shop/web"
    assert not ownership.owns(key)  # nothing until the table says so
    ownership.confirm({bucket_of(key)}, time.monotonic())
    assert ownership.owns(key)
    assert not ownership.owns(
        next(k for k in (f"k{i}" for i in range(999)) if bucket_of(k) != bucket_of(key))
    )
    # A confirmation older than the deadline: nothing is owned any more.
    ownership.confirm({bucket_of(key)}, time.monotonic() - 11)
    assert not ownership.owns(key)
    with ownership.hold(key) as mine:
        assert not mine


def test_gains_and_losses_are_told() -> None:
    ownership = Ownership(everything=False, deadline_s=10)
    told: list[tuple[str, frozenset[int]]] = []
    ownership.on_gained.append(lambda b: told.append(("gained", b)))
    ownership.on_released.append(lambda b: told.append(("released", b)))
    ownership.confirm({1, 2}, time.monotonic())
    ownership.stop({2, 3})
    ownership.confirm({1, 4}, time.monotonic())
    assert told == [
        ("gained", frozenset({1, 2})),
        ("released", frozenset({2})),
        ("gained", frozenset({4})),
    ]


def test_a_handoff_waits_for_the_work_in_flight() -> None:
    ownership = Ownership(everything=False, deadline_s=10)
    key = "tenant/blue"
    bucket = bucket_of(key)
    ownership.confirm({bucket}, time.monotonic())

    async def scenario() -> tuple[frozenset[int], frozenset[int], bool]:
        release = anyio.Event()

        async def working() -> None:
            with ownership.hold(key) as mine:
                assert mine
                await release.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(working)
            await anyio.sleep(0.01)
            ownership.stop({bucket})
            with ownership.hold(key) as again:
                refused = not again  # stopped: no new work
            early = await ownership.drained({bucket}, 0.05)
            release.set()
            late = await ownership.drained({bucket}, 5)
        return early, late, refused

    early, late, refused = anyio.run(scenario)
    assert refused
    assert early == frozenset()
    assert late == {bucket}
