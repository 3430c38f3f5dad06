"""What an application's status says of its rollout (pure): ``status.rollout`` and the
``RolloutProgressing`` condition."""

from __future__ import annotations

from typing import Any

from propagator.rollout.driver import RolloutPlan


def rollout_status(plan: RolloutPlan) -> dict[str, Any]:
    """``status.rollout`` of ``plan``."""
    return plan.state.status(
        plan.grouping, plan.updated(), list(plan.history), (plan.spec_revision, plan.spec_digest)
    )


def rollout_condition(plan: RolloutPlan, note: str = "") -> tuple[str, bool, str, str]:
    """RolloutProgressing: True while a revision goes out (or waits to), False once it is
    Complete, Halted or Suspended; its message says what it waits for, with the notes
    of this plan (groups that pick no cluster, revisions not kept)."""
    state = plan.state
    parts = [state.message, *plan.notes, note]
    message = "; ".join(p for p in parts if p)
    return (
        "RolloutProgressing",
        state.phase in ("Progressing", "Waiting"),
        state.phase,
        message[:1024],
    )
