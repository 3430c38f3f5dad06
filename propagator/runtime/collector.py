"""Python's cyclic garbage collector, tuned for a heap that is mostly long-lived.

Refcounting frees most garbage at once; the cyclic collector is for cycles, and each
collection walks every object it tracks in the generations it collects. The controller's
objects are mostly its members' caches, connections and tasks, which live as long as the
member, and each was walked three times before it settled in the oldest generation, then
again at every full collection. So:

- What survives a collection of the middle generation (or a full one) is frozen
  (:func:`gc.freeze`: left out of later collections). A frozen object that is dropped is
  still freed by refcounting at once; only a cycle among frozen objects waits, for the
  next :func:`thaw`, which :func:`thaw_periodically` runs every ``THAW_EVERY_S``.
- The young generation is collected every :data:`YOUNG_THRESHOLD` allocations rather than
  700, so fewer short-lived objects (a request's, an event's) are walked at all.

Measured with the collector's thread CPU timed through ``gc.callbacks`` in a rollout to
1,000 far members: 7.7 s of the controller's CPU with full-collection freezing alone, 3.0 s
freezing at the middle generation, 2.1 s with the larger young generation as well
(``docs/benchmarks.md``). Measured and tested on CPython 3.11, what CI runs.
"""

from __future__ import annotations

import gc
from typing import Any

import anyio

YOUNG_THRESHOLD = 7000
"""Allocations (less deallocations) of tracked objects between young collections."""
THAW_EVERY_S = 120.0
"""How long frozen cycles of garbage may wait: every this long everything is walked once
(at 1,000 far members ~1 s of CPU: under 1 % of a core)."""

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


async def thaw_periodically(every_s: float = THAW_EVERY_S) -> None:
    """:func:`thaw` every ``every_s`` until cancelled."""
    while True:
        await anyio.sleep(every_s)
        thaw()
