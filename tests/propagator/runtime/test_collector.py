"""The garbage collector's tuning: what survives a collection of the middle or oldest
generation is left out of the next ones, and garbage cycles are still found."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import anyio
import pytest

from propagator.runtime import collector


class Node:
    """A container that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def _cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


@pytest.fixture
def installed() -> Iterator[None]:
    gc.collect()
    before = collector.install()
    try:
        yield
    finally:
        collector.uninstall(before)
        gc.collect()


@pytest.mark.parametrize("generation", [1, 2])
def test_what_survives_a_middle_or_full_collection_is_frozen(
    installed: None, generation: int
) -> None:
    kept = [Node() for _ in range(1000)]
    before = gc.get_freeze_count()
    gc.collect(generation)
    assert gc.get_freeze_count() >= before + len(kept)
    assert not gc.get_objects(generation=1)
    assert not gc.get_objects(generation=2)


def test_a_young_collection_freezes_nothing(installed: None) -> None:
    gc.collect(1)
    before = gc.get_freeze_count()
    kept = [Node() for _ in range(100)]
    gc.collect(0)
    assert gc.get_freeze_count() == before
    assert any(o is kept[0] for o in gc.get_objects(generation=1))


def test_the_young_generation_is_collected_less_often(installed: None) -> None:
    assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD


def test_a_cycle_made_since_is_still_collected(installed: None) -> None:
    gc.collect()  # everything alive now is frozen
    a, gone = _cycle()
    del a
    gc.collect(0)
    assert gone() is None


def test_a_frozen_cycle_waits_for_the_thaw_then_is_collected(
    installed: None,
) -> None:
    a, gone = _cycle()
    gc.collect(1)  # alive: frozen
    del a
    gc.collect()
    assert gone() is not None  # frozen garbage: not walked
    assert collector.thaw() >= 2
    assert gone() is None
    assert gc.get_freeze_count() > 0  # what survived the thaw is frozen again


def _frozen_garbage_cycle() -> anyio.Event:
    """A reference cycle frozen, then dropped: garbage only a thaw finds. The event is set
    once it is collected (call inside the event loop)."""
    freed = anyio.Event()
    a, _ = _cycle()
    weakref.finalize(a, freed.set)
    gc.collect(1)  # alive: frozen
    return freed


@pytest.mark.parametrize(
    ("busy", "wait_s"), [(False, 30.0), (True, 0.05)], ids=["idle", "busy-past-its-wait"]
)
def test_the_thaw_comes_periodically(installed: None, busy: bool, wait_s: float) -> None:
    """Idle, or under a steady load once the thaw has waited ``wait_s`` for it to pass."""

    async def main() -> None:
        freed = _frozen_garbage_cycle()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collector.thaw_periodically, 0.01, lambda: busy, wait_s)
            with anyio.fail_after(30):  # (a hang fails the test, not the run)
                await freed.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_a_due_thaw_waits_while_the_controller_has_work_at_hand(installed: None) -> None:
    """A thaw holds the event loop: in a rollout it would hold every sync in flight."""

    async def main() -> None:
        busy = True
        freed = _frozen_garbage_cycle()
        async with anyio.create_task_group() as tg:
            tg.start_soon(collector.thaw_periodically, 0.01, lambda: busy, 30)
            await anyio.sleep(0.3)  # due 30 times over, still busy
            assert not freed.is_set()
            busy = False
            with anyio.fail_after(30):
                await freed.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_uninstall_thaws_stops_freezing_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    thresholds = collector.install(young_threshold=5000)
    gc.collect()
    assert gc.get_freeze_count() > 0
    collector.uninstall(thresholds)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    gc.collect()
    assert gc.get_freeze_count() == 0
