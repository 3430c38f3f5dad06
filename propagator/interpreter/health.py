"""Health verdicts and how they combine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

WorkloadHealth = Literal["Healthy", "Progressing", "Degraded", "Unknown"]
_ORDER: dict[WorkloadHealth, int] = {"Healthy": 0, "Unknown": 1, "Progressing": 2, "Degraded": 3}
HEALTHS: tuple[WorkloadHealth, ...] = tuple(_ORDER)


def worst(healths: Iterable[WorkloadHealth]) -> WorkloadHealth:
    """A cluster's health: its least healthy object (Healthy when there is none)."""
    return max(healths, key=_ORDER.__getitem__, default="Healthy")


def rank(health: WorkloadHealth) -> int:
    """Higher is less healthy (the order of :func:`worst`)."""
    return _ORDER[health]
