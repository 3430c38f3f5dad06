"""Calls over many items with a bound on how many are in flight at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio

T = TypeVar("T")


async def each(
    items: Sequence[T],
    fn: Callable[[T], Awaitable[None]],
    in_flight: int,
    failures: tuple[type[Exception], ...],
) -> None:
    """Await ``fn`` on every item, at most ``in_flight`` at once. Once a call raises one of
    ``failures``, no new call starts; the first such error is raised when the calls in
    flight have ended. Any other exception ends everything at once (a bug, not a failure
    of one item)."""
    if not items:  # an empty task group still yields to the loop: a round of other work
        return
    if len(items) == 1:  # no task group: leaving one yields to the loop
        await fn(items[0])
        return
    pending = iter(items)  # shared by the workers: each item is taken once
    errors: list[Exception] = []

    async def worker() -> None:
        # A worker per slot rather than a task per item behind a limiter: the limiter's
        # checkpoint per item was a measurable part of a fresh cluster's CPU.
        for item in pending:
            if errors:
                return  # one failure fails them all: start nothing new
            try:
                await fn(item)
            except failures as exc:
                errors.append(exc)
                return

    async with anyio.create_task_group() as tg:
        for _ in range(min(in_flight, len(items)) - 1):
            tg.start_soon(worker)
        # One worker is this task: its first call starts now, not a round of the event
        # loop later, and one task fewer is started.
        await worker()
    if errors:
        raise errors[0]
