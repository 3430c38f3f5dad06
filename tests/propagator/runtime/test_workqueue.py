"""The work queue: deduplication, one worker per key, per-key backoff."""

from __future__ import annotations

import anyio
import pytest

from propagator.runtime.workqueue import WorkQueue

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_key_added_many_times_is_queued_once() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("shop/web")
    q.add("shop/api")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["shop/web", "shop/api"]
    assert len(q) == 0


async def test_a_key_being_processed_is_not_handed_out_twice() -> None:
    q = WorkQueue()
    q.add("k")
    assert await q.get() == "k"
    q.add("k")  # changed while a worker reconciles it
    assert len(q) == 0
    with anyio.move_on_after(0.05):
        await q.get()
        pytest.fail("handed out while still processing")
    q.done("k")
    assert await q.get() == "k"  # comes back once, after the first worker is done


async def test_busy_means_work_now_not_work_due_later() -> None:
    q = WorkQueue()
    assert not q.busy()
    q.add_after("resync", 60)
    assert not q.busy()  # only later
    q.add("k")
    assert q.busy()
    assert await q.get() == "k"
    assert q.busy()  # being processed
    q.done("k")
    assert not q.busy()
    q.add_after("retry", 0)
    assert q.busy()  # due, though no worker took it yet


async def test_failures_back_off_per_key_and_success_resets() -> None:
    q = WorkQueue(base_delay_s=1, max_delay_s=5)
    assert [q.retry("k") for _ in range(5)] == [1, 2, 4, 5, 5]
    assert q.failures("k") == 5
    q.forget("k")
    assert q.retry("k") == 1
    assert q.retry("other") == 1


async def test_delayed_keys_come_back_when_due() -> None:
    q = WorkQueue()
    q.add_after("later", 0.05)
    q.add("now")
    assert await q.get() == "now"
    assert await q.get() == "later"


async def test_add_soon_makes_one_entry_per_delay_for_a_stream_of_adds() -> None:
    q = WorkQueue()
    for i in range(100):  # results arriving every 10 ms for a second
        q.add_soon("app", 0.25, now=10 + i * 0.01)
    # one entry at 10.25 takes the results up to then, the next result starts another
    assert sorted(q._delayed) == [(10.25, "app"), (10.51, "app"), (10.77, "app"), (11.03, "app")]
    q.add_soon("other", 0.25, now=11)
    assert (11.25, "other") in q._delayed  # per key


async def test_add_soon_adds_nothing_for_a_key_already_queued_and_fires_when_due() -> None:
    q = WorkQueue()
    q.add("app")
    q.add_soon("app", 0.01)
    assert not q._delayed  # the queued one reads what this one would
    assert await q.get() == "app"
    q.done("app")
    q.add_soon("app", 0.02)  # handed out: a new entry
    q.add_soon("app", 0.02)
    assert len(q._delayed) == 1
    with anyio.fail_after(1):
        assert await q.get() == "app"
    q.done("app")
    q.add_soon("app", 0.02)  # the fired entry is forgotten: a new one is added
    assert len(q._delayed) == 1
    assert q._soon == {"app": q._delayed[0][0]}


async def test_add_soon_does_not_wait_for_a_later_entry() -> None:
    q = WorkQueue()
    q.add_after("app", 5.0, now=0)  # e.g. a retry's backoff
    q.add_soon("app", 0.25, now=0)
    assert sorted(q._delayed) == [(0.25, "app"), (5.0, "app")]


async def test_shut_down_releases_waiting_workers() -> None:
    q = WorkQueue()
    results: list[str | None] = []

    async def worker() -> None:
        results.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(worker)
        await anyio.sleep(0.01)
        q.shut_down()
    assert results == [None, None]


def test_can_be_made_outside_the_event_loop() -> None:
    q = WorkQueue()
    q.add("k")
    assert len(q) == 1


async def test_serve_retries_what_failed_as_told_and_stops_at_shut_down() -> None:
    q = WorkQueue(base_delay_s=0.01)
    handled: list[str] = []
    told: list[str] = []
    retried = anyio.Event()

    async def handle(key: str) -> None:
        handled.append(key)
        if handled.count("again") == 2:
            retried.set()
        if key != "ok" and handled.count(key) == 1:
            raise LookupError(key)

    def failed(key: str, exc: Exception) -> bool:
        told.append(key)
        return key == "again"  # "gone" is not retried

    for key in ("ok", "again", "gone"):
        q.add(key)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.serve, handle, (LookupError,), failed)
        with anyio.fail_after(5):
            await retried.wait()
        q.shut_down()
    assert sorted(handled) == ["again", "again", "gone", "ok"]
    assert sorted(told) == ["again", "gone"]
    assert q.failures("again") == 0  # reset once it went through
