"""Python's cyclic garbage collector, tuned for a heap that is mostly long-lived.

Refcounting frees most garbage at once; the cyclic collector is for cycles, and each
collection walks every object it tracks in the generations it collects. The controller's
objects are mostly its members' caches, connections and tasks, which live as long as the
member, and each was walked three times before it settled in the oldest generation, then
again at every full collection. So:

- What survives a collection of the middle generation (or a full one) is frozen
  (:func:`gc.freeze`: left out of later collections). A frozen object that is dropped is
  still freed by refcounting at once; only a cycle among frozen objects waits, for the
  next :func:`thaw`, which :func:`thaw_periodically` runs every ``THAW_EVERY_S``, once
  the controller has no work at hand (at most ``THAW_WAIT_S`` later): the thaw walks the
  whole heap and holds the event loop meanwhile (1-2 s at 1,000 far members on a busy
  machine), which in a rollout held every member sync in flight.
- The young generation is collected every :data:`YOUNG_THRESHOLD` allocations rather than
  700, so fewer short-lived objects (a request's, an event's) are walked at all.

Measured with the collector's thread CPU timed through ``gc.callbacks`` in a rollout to
1,000 far members: 7.7 s of the controller's CPU with full-collection freezing alone, 3.0 s
freezing at the middle generation, 2.1 s with the larger young generation as well
(``docs/benchmarks.md``). Measured and tested on CPython 3.11, what CI runs.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import anyio

YOUNG_THRESHOLD = 7000
"""Allocations (less deallocations) of tracked objects between young collections."""
THAW_EVERY_S = 120.0
"""How long frozen cycles of garbage may wait: every this long everything is walked once
(a small share of a core even with a thousand members: docs/benchmarks.md)."""

THAW_WAIT_S = 120.0
"""How long a due thaw waits for the controller to have no work at hand."""
IDLE_CHECK_S = 0.5
"""How often a waiting thaw asks whether the controller has work at hand."""

_MIDDLE = 1


def freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` entry: freezes what survives a collection of the middle or the
    oldest generation."""
    if phase == "stop" and info.get("generation", 0) >= _MIDDLE:
        gc.freeze()


def install(young_threshold: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """From now on (in this process), freeze what survives a collection of the middle or
    oldest generation, and collect the young generation every ``young_threshold``
    allocations; returns the thresholds before, for :func:`uninstall`."""
    before = gc.get_threshold()
    gc.set_threshold(young_threshold, before[1], before[2])
    gc.callbacks.append(freeze_survivors)
    return before


def uninstall(thresholds: tuple[int, int, int]) -> None:
    """Undo :func:`install`: stop freezing, thaw everything, restore ``thresholds``."""
    if freeze_survivors in gc.callbacks:
        gc.callbacks.remove(freeze_survivors)
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def thaw() -> int:
    """Walk everything once: thaw all that is frozen and collect every generation (what
    survives is frozen again where :func:`install` ran); returns how many unreachable
    objects were found."""
    gc.unfreeze()
    return gc.collect()


def _never() -> bool:
    return False


async def thaw_periodically(
    every_s: float = THAW_EVERY_S,
    busy: Callable[[], bool] = _never,
    wait_s: float = THAW_WAIT_S,
) -> None:
    """:func:`thaw` every ``every_s`` until cancelled, each time once ``busy()`` says
    there is no work at hand (asked every :data:`IDLE_CHECK_S`), or ``wait_s`` later
    all the same, so frozen cycles are freed under a steady load too."""
    while True:
        await anyio.sleep(every_s)
        with anyio.move_on_after(wait_s):
            # Asked, not told: no queue signals that all of them are idle, and this polls
            # only while a thaw is due.
            while busy():  # noqa: ASYNC110
                await anyio.sleep(min(IDLE_CHECK_S, wait_s))
        thaw()
