"""The canary step machine: every transition, without a cluster."""

from __future__ import annotations

from collections.abc import Mapping

from api.rollout import Canary
from propagator.canary.machine import (
    CanaryState,
    Rollback,
    Seen,
    action_of,
    advance,
    due_in,
    recorded_action,
)

CANARY = Canary.model_validate(
    {
        "steps": [{"weight": 10}, {"weight": 50, "pause": "60s"}, {"weight": 100}],
        "analysis": {"progressDeadlineSeconds": 120},
    }
)
CANARY_CLUSTERS = ["c1"]
T0 = 1_000_000.0


def healthy(*clusters: str, canary: str | None = "Healthy") -> dict[str, Seen]:
    return {c: Seen(True, "Healthy", canary) for c in clusters}


def step(
    state: CanaryState | None,
    seen: Mapping[str, Seen] | None = None,
    action: str | None = None,
    now: float = T0,
    release: str = "new",
    changed: bool = True,
    clusters: list[str] | None = None,
) -> tuple[CanaryState, Rollback | None]:
    return advance(
        state,
        CANARY,
        release,
        lambda: changed,
        CANARY_CLUSTERS if clusters is None else clusters,
        seen,
        action,
        now,
    )


STABLE = CanaryState("Succeeded", "old")


def test_a_first_release_goes_out_at_once() -> None:
    state, rollback = step(None)
    assert (state.phase, state.stable, rollback) == ("Succeeded", "new", None)
    assert state.mode("c1", True) == "latest"


def test_a_new_template_starts_at_the_first_step() -> None:
    state, _ = step(STABLE)
    assert (state.phase, state.step, state.weight) == ("Progressing", 0, 10)
    assert (state.stable, state.canary, state.step_started_at) == ("old", "new", T0)
    assert state.mode("c1", True) == "split"
    assert state.mode("other", False) == "stable"


def test_a_release_that_changes_no_template_goes_out_at_once() -> None:
    state, _ = step(STABLE, changed=False)
    assert (state.phase, state.stable) == ("Succeeded", "new")


def test_a_step_waits_for_the_canary_copy_then_moves_on() -> None:
    s, _ = step(STABLE)
    waiting, _ = step(s, {"c1": Seen(True, "Healthy", "Progressing")}, now=T0 + 5)
    assert (waiting.phase, waiting.step) == ("Progressing", 0)
    assert "waiting for the canary copy to be healthy on c1" in waiting.message
    unapplied, _ = step(s, {"c1": Seen(False, "Healthy", "Healthy")}, now=T0 + 5)
    assert unapplied.step == 0
    moved, _ = step(s, healthy("c1"), now=T0 + 10)
    assert (moved.step, moved.weight, moved.step_started_at) == (1, 50, T0 + 10)


def test_a_pause_counts_from_when_the_copy_is_healthy() -> None:
    s = CanaryState("Progressing", "old", "new", 1, 50, T0, T0)
    held, _ = step(s, healthy("c1"), now=T0 + 30)
    assert (held.step, held.step_healthy_at) == (1, T0 + 30)
    assert "paused until" in held.message
    assert due_in(held, CANARY, T0 + 40) == 50
    still, _ = step(held, healthy("c1"), now=T0 + 89)
    assert still.step == 1
    moved, _ = step(still, healthy("c1"), now=T0 + 90)
    assert (moved.step, moved.weight) == (2, 100)


def test_the_last_step_promotes_then_the_canary_copies_fold_back() -> None:
    s = CanaryState("Progressing", "old", "new", 2, 100, T0, T0)
    promoting, _ = step(s, healthy("c1", "c2"), now=T0 + 1)
    assert promoting.phase == "Promoting"
    assert promoting.mode("c1", True) == "folding"
    assert promoting.mode("c2", False) == "latest"
    # the canary cluster's stable copy (new template, full size) is Available: its canary
    # copy goes; the other cluster is still rolling
    seen = {"c1": Seen(True, "Healthy", "Healthy"), "c2": Seen(True, "Progressing")}
    folded, _ = step(promoting, seen, now=T0 + 2)
    assert (folded.phase, folded.promoted) == ("Promoting", frozenset({"c1"}))
    assert folded.mode("c1", True) == "latest"
    assert "c2" in folded.message
    done, _ = step(folded, healthy("c1", "c2", canary=None), now=T0 + 3)
    assert (done.phase, done.stable, done.promoted) == ("Succeeded", "new", frozenset())


def test_promoting_does_not_fold_on_what_it_has_not_seen() -> None:
    promoting = CanaryState("Promoting", "old", "new", 2, 100, T0, T0)
    assert step(promoting, None)[0] == promoting


def test_a_copy_never_healthy_rolls_back_at_the_deadline() -> None:
    s, _ = step(STABLE)
    seen = {"c1": Seen(True, "Healthy", "Progressing")}
    assert step(s, seen, now=T0 + 119)[0].phase == "Progressing"
    assert due_in(s, CANARY, T0 + 100) == 20
    rolled, rollback = step(s, seen, now=T0 + 120)
    assert rolled.phase == "RolledBack"
    assert rollback is not None
    assert rollback.reason == "ProgressDeadline"
    assert "not healthy 120s after the step began on c1" in rolled.message
    assert rolled.mode("c1", True) == "stable"
    # the failed revision is not tried again
    assert step(rolled, seen, now=T0 + 500)[0] == rolled


def test_a_degraded_copy_rolls_back_at_once() -> None:
    s, _ = step(STABLE)
    rolled, rollback = step(s, {"c1": Seen(True, "Healthy", "Degraded")}, now=T0 + 1)
    assert rolled.phase == "RolledBack"
    assert rollback is not None
    assert rollback.reason == "Degraded"


def test_no_canary_cluster_holds_the_release_until_the_deadline() -> None:
    s, _ = step(STABLE, clusters=[])
    held, _ = step(s, {}, clusters=[], now=T0 + 10)
    assert held.phase == "Progressing"
    assert "no placed cluster matches" in held.message
    assert step(s, {}, clusters=[], now=T0 + 120)[0].phase == "RolledBack"


def test_retry_and_a_new_spec_after_a_rollback() -> None:
    rolled = CanaryState("RolledBack", "old", "new", 0, 0, T0, T0)
    again, _ = step(rolled, action="retry", now=T0 + 5)
    assert (again.phase, again.step, again.started_at) == ("Progressing", 0, T0 + 5)
    fixed, _ = step(rolled, release="fixed", now=T0 + 5)
    assert (fixed.phase, fixed.canary) == ("Progressing", "fixed")


def test_a_second_change_replaces_the_canary() -> None:
    s = CanaryState("Progressing", "old", "new", 1, 50, T0, T0)
    replaced, _ = step(s, healthy("c1"), release="newer", now=T0 + 5)
    assert (replaced.stable, replaced.canary, replaced.step) == ("old", "newer", 0)


def test_back_to_the_stable_spec_ends_the_canary() -> None:
    s = CanaryState("Progressing", "old", "new", 1, 50, T0, T0)
    back, _ = step(s, release="old")
    assert (back.phase, back.stable) == ("Succeeded", "old")
    assert back.mode("c1", True) == "latest"


def test_manual_step_waits_for_promote_and_abort_rolls_back() -> None:
    gated = Canary.model_validate({"steps": [{"weight": 20, "manual": True}, {"weight": 60}]})
    s, _ = advance(STABLE, gated, "new", lambda: True, ["c1"], None, None, T0)
    paused, _ = advance(s, gated, "new", lambda: True, ["c1"], healthy("c1"), None, T0 + 1)
    assert paused.phase == "Paused"
    assert "waiting for promote" in paused.message
    assert (
        advance(paused, gated, "new", lambda: True, ["c1"], healthy("c1"), None, T0 + 999)[0]
        == paused
    )
    # promote at a gate opens it: the next step starts
    opened, _ = advance(paused, gated, "new", lambda: True, ["c1"], None, "promote", T0 + 2)
    assert (opened.phase, opened.step, opened.weight, opened.step_started_at) == (
        "Progressing",
        1,
        60,
        T0 + 2,
    )
    # promote while a step runs skips the remaining steps
    promoted, _ = advance(opened, gated, "new", lambda: True, ["c1"], None, "promote", T0 + 3)
    assert promoted.phase == "Promoting"
    aborted, _ = advance(paused, gated, "new", lambda: True, ["c1"], None, "abort", T0 + 2)
    assert (aborted.phase, aborted.weight) == ("Aborted", 0)
    assert aborted.mode("c1", True) == "stable"


def test_actions_are_taken_once_per_value() -> None:
    assert action_of("promote", None) == ("promote", None)
    assert action_of("promote/2026-12-01T10:00:00Z", "promote") == ("promote", None)
    assert action_of("promote", "promote") == (None, None)
    action, problem = action_of("ship-it", None)
    assert action is None
    assert problem is not None
    assert "promote, abort, retry" in problem


def test_the_state_survives_the_status() -> None:
    s = CanaryState(
        "Promoting", "old", "new", 2, 100, T0, T0 + 1, T0 + 2, "msg", "promote", frozenset({"c1"})
    )
    lines = [{"name": "c1", "weight": 100, "promoted": True}]
    assert CanaryState.from_status(s.status(lines)) == s
    assert CanaryState.from_status({"phase": "Bogus"}) is None
    assert CanaryState.from_status(None) is None


def test_an_annotation_value_too_long_for_the_status_is_recorded_by_its_hash() -> None:
    value = "promote/" + "x" * 5000
    recorded = recorded_action(value)
    assert recorded.startswith("sha256:")
    assert len(recorded) <= 253
    assert action_of(value, None) == ("promote", None)
    assert action_of(value, recorded) == (None, None)  # acted on once
    assert recorded_action("promote/1") == "promote/1"
    _, problem = action_of("x" * 5000, None)
    assert problem is not None
    assert len(problem) < 300  # the value is not repeated whole
