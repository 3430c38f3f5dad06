"""The informer's backoff: after the server was unreachable, it tries again as soon as the
server answers anything, not after its whole backoff."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import cast

import anyio

from fleet.connection import KubeConnection
from fleet.informer import Informer


def _informer() -> tuple[Informer, SimpleNamespace]:
    connection = SimpleNamespace(name="m1", answered_at=None)
    informer = Informer(cast(KubeConnection, connection), "v1", "Pod", lambda *_: None)
    return informer, connection


def test_after_an_outage_the_backoff_ends_when_the_server_answers_again() -> None:
    informer, connection = _informer()

    async def main() -> None:
        async def answer_soon() -> None:
            await anyio.sleep(0.2)
            connection.answered_at = time.monotonic()  # a probe, or another cache, got through

        with anyio.fail_after(60):  # hang guard: the backoff below is an hour
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_soon)
                await informer._back_off(3600, unreachable=True)

    anyio.run(main)


def test_a_refusal_waits_its_whole_backoff_whatever_else_answers() -> None:
    informer, connection = _informer()
    connection.answered_at = time.monotonic() + 3600  # answers keep coming

    async def main() -> float:
        started = time.monotonic()
        await informer._back_off(0.3, unreachable=False)
        return time.monotonic() - started

    assert anyio.run(main) >= 0.3
