"""Bounded calls over many items: the bound, and what a failure stops."""

from __future__ import annotations

import anyio
import pytest

from propagator.runtime.bounded import each

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Refused(Exception):
    pass


async def test_every_item_is_called_at_most_in_flight_at_once() -> None:
    running, most, done = 0, 0, []

    async def call(item: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.01)
        running -= 1
        done.append(item)

    await each(list(range(20)), call, 4, (_Refused,))
    assert sorted(done) == list(range(20))
    assert most == 4


async def test_after_a_failure_nothing_new_starts_and_the_calls_in_flight_end() -> None:
    started, ended = [], []

    async def call(item: int) -> None:
        started.append(item)
        if item == 1:
            await anyio.sleep(0.01)
            raise _Refused("item 1")
        await anyio.sleep(0.05)
        ended.append(item)

    with pytest.raises(_Refused, match="item 1"):
        await each(list(range(10)), call, 3, (_Refused,))
    assert sorted(started) == [0, 1, 2]  # nothing began after item 1 failed
    assert sorted(ended) == [0, 2]  # those in flight were not cut short


async def test_an_unexpected_error_is_not_taken_for_a_failure() -> None:
    async def call(item: int) -> None:
        if item == 2:
            raise KeyError(item)
        await anyio.sleep(10)

    with pytest.raises(BaseExceptionGroup) as caught, anyio.fail_after(5):
        await each(list(range(4)), call, 4, (_Refused,))
    assert caught.group_contains(KeyError)
