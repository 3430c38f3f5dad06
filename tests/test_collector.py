"""The garbage collector's tuning: what survives a full collection is left out of the next
ones, and garbage cycles are still found."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

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
def installed() -> Iterator[collector.FreezeSurvivors]:
    gc.collect()
    callback = collector.install(thaw_every_s=3600)
    try:
        yield callback
    finally:
        collector.uninstall(callback)
        gc.collect()


def test_what_survives_a_full_collection_is_frozen(
    installed: collector.FreezeSurvivors,
) -> None:
    kept = [Node() for _ in range(1000)]
    before = gc.get_freeze_count()
    gc.collect()
    assert gc.get_freeze_count() >= before + len(kept)
    assert not gc.get_objects(generation=2)  # the next full collection starts empty


def test_a_cycle_made_since_is_still_collected(installed: collector.FreezeSurvivors) -> None:
    gc.collect()  # everything alive now is frozen
    a, gone = _cycle()
    del a
    gc.collect()
    assert gone() is None


def test_a_frozen_cycle_waits_for_the_thaw_then_is_collected(
    installed: collector.FreezeSurvivors,
) -> None:
    a, gone = _cycle()
    gc.collect()  # alive: frozen
    del a
    gc.collect()
    assert gone() is not None  # frozen garbage: not walked
    installed.thaw_every_s = 0  # the period has passed
    gc.collect()
    assert gone() is None
    assert installed.thaws == 1


def test_uninstall_thaws_and_stops_freezing(installed: collector.FreezeSurvivors) -> None:
    gc.collect()
    assert gc.get_freeze_count() > 0
    collector.uninstall(installed)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gc.get_freeze_count() == 0
