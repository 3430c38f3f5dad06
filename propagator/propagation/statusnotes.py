"""What the ``Scheduled`` and ``Applied`` conditions add when a plan places the
application without some clusters, or stops before any work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from propagator.conditions import by_message
from propagator.propagation.plan import Plan


def note_over_room(plan: Plan, over_room: Mapping[str, str]) -> None:
    """Say on ``Scheduled`` which clusters the application was placed without because,
    as rendered, it asks more there than the tenant's quota leaves."""
    for i, (kind, status, reason, message) in enumerate(plan.conditions):
        if kind == "Scheduled":
            shortfalls = by_message(sorted(over_room.items()), "shortfalls")
            note = f"; placed without {shortfalls} (as rendered, over the tenant's quota)"
            plan.conditions[i] = (kind, status, reason, message + note)
            return


def not_applied(plan: Plan, previous: Mapping[str, Any], reason: str, why: str) -> None:
    """A generation that stops before any work is not applied: ``Applied`` says so (with
    ``reason``), unless this generation was applied already (a replan that now finds no
    room leaves what runs, and the condition, as they are). Without it, ``Applied`` would
    stay True from the previous generation while ``observedGeneration`` says the new one."""
    applied = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == "Applied"), None
    )
    if (
        applied is not None
        and applied.get("status") == "True"
        and applied.get("observedGeneration") == plan.generation
    ):
        return
    runs = "; what runs stays as it is" if applied is not None else ""
    plan.conditions.append(
        ("Applied", False, reason, f"generation {plan.generation} is not applied: {why}{runs}")
    )
