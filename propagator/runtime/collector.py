"""Python's cyclic garbage collector, tuned for a heap that is mostly long-lived.

Refcounting frees most garbage at once; the cyclic collector is for cycles, and each of its
full collections walks every object it tracks. The controller's are mostly its members'
caches, connections and tasks, which live as long as the member: at 300 far members a full
collection took ~0.3 s of CPU and stalled the event loop for as long, and a rollout to all
of them triggered four (1.3 s of the controller's 8.2 s). So what survives a full
collection is frozen (:func:`gc.freeze`: left out of later collections), and later full
collections walk only what was made since. A frozen object that is dropped is still freed
by refcounting at once; only a cycle among frozen objects waits, for the first full
collection after ``thaw_every_s``, which thaws everything first and so finds it.

Measured and tested on CPython 3.11, what CI runs; CPython 3.14's incremental collector
takes the old generation in increments, and how often it reports a full collection to the
callbacks there was not measured.
"""

from __future__ import annotations

import gc
import time
from typing import Any

THAW_EVERY_S = 120.0
"""How long frozen cycles of garbage may wait: the first full collection after this long
walks every object again (at 1,000 far members ~1 s of CPU: under 1 % of a core), so
garbage held by frozen cycles is what gathers until the first full collection at least
two minutes after the last thaw (full collections come every minute or so under load)."""

_OLDEST = 2


class FreezeSurvivors:
    """A ``gc.callbacks`` entry: freezes what survives a full collection and thaws all
    before the first full collection once ``thaw_every_s`` has passed since the last."""

    def __init__(self, thaw_every_s: float = THAW_EVERY_S) -> None:
        self.thaw_every_s = thaw_every_s
        self.thawed_at = time.monotonic()
        self.thaws = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != _OLDEST:
            return
        if phase == "start":
            if time.monotonic() - self.thawed_at >= self.thaw_every_s:
                gc.unfreeze()  # into the oldest generation, which is about to be collected
                self.thawed_at = time.monotonic()
                self.thaws += 1
        elif phase == "stop":
            gc.freeze()


def install(thaw_every_s: float = THAW_EVERY_S) -> FreezeSurvivors:
    """Freeze what survives each full collection from now on (in this process); returns
    the callback, which :func:`uninstall` removes."""
    callback = FreezeSurvivors(thaw_every_s)
    gc.callbacks.append(callback)
    return callback


def uninstall(callback: FreezeSurvivors) -> None:
    """Remove ``callback`` and thaw everything it froze."""
    if callback in gc.callbacks:
        gc.callbacks.remove(callback)
    gc.unfreeze()
