"""The rollout's wave machine: every transition, without a cluster."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from api.rollout import Waves
from propagator.rollout.machine import (
    Asked,
    CanaryGate,
    Gates,
    RolloutState,
    Seen,
    advance,
    assign,
    due_in,
)
from propagator.rollout.waves import Grouping, waves_of

SPEC = Waves.model_validate(
    {
        "groups": [
            {"name": "first", "clusters": ["a"]},
            {"name": "second", "clusters": ["b", "c"]},
            {"name": "gated", "clusters": ["d"], "manual": True},
        ],
        "minHealthyTime": "30s",
        "progressDeadline": "5m",
    }
)
GATES = Gates.of(SPEC)
GROUPING = waves_of(SPEC, ["a", "b", "c", "d"], {})
T0 = 1_000_000.0
DONE = RolloutState("Complete", 1)
NOTHING = Asked()


def ok(*clusters: str, health: str = "Healthy", applied: bool = True) -> dict[str, Seen]:
    return {c: Seen(applied, health) for c in clusters}


def step(
    state: RolloutState | None,
    revision: int = 2,
    seen: Mapping[str, Seen] | None = None,
    now: float = T0,
    asked: Asked = NOTHING,
    grouping: Grouping = GROUPING,
    gates: Gates = GATES,
    suspended: bool = False,
    skipped: Collection[str] = (),
    canary: CanaryGate = "none",
) -> RolloutState:
    return advance(
        state,
        revision,
        grouping,
        gates,
        seen,
        asked,
        now,
        suspended=suspended,
        skipped=skipped,
        canary=canary,
    )


def runs(state: RolloutState, running: Mapping[str, int] | None = None) -> dict[str, int]:
    return assign(state, GROUPING, running or dict.fromkeys("abcd", 1))


def test_the_first_revision_goes_everywhere_at_once() -> None:
    s = step(None, revision=1)
    assert s.phase == "Complete"
    assert runs(s, {}) == dict.fromkeys("abcd", 1)


def test_a_new_revision_goes_to_the_first_wave_only() -> None:
    s = step(DONE)
    assert (s.phase, s.revision, s.previous, s.wave, s.wave_started_at) == (
        "Progressing",
        2,
        1,
        0,
        T0,
    )
    assert runs(s) == {"a": 2, "b": 1, "c": 1, "d": 1}


def test_a_wave_passes_once_healthy_for_the_minimum_time_and_not_before() -> None:
    s = step(DONE)
    s = step(s, seen=ok("a"), now=T0 + 10)
    assert (s.wave, s.wave_healthy_at) == (0, T0 + 10)
    assert due_in(s, GATES, T0 + 20) == 20
    s = step(s, seen=ok("a"), now=T0 + 39)
    assert s.wave == 0  # 29 s healthy: not yet
    s = step(s, seen=ok("a"), now=T0 + 40)
    assert (s.phase, s.wave, s.wave_started_at) == ("Progressing", 1, T0 + 40)
    assert runs(s) == {"a": 2, "b": 2, "c": 2, "d": 1}


def test_a_wave_unhealthy_again_starts_its_minimum_time_over() -> None:
    s = step(step(DONE), seen=ok("a"), now=T0 + 10)
    s = step(s, seen=ok("a", health="Progressing"), now=T0 + 20)
    assert s.wave_healthy_at is None
    s = step(s, seen=ok("a"), now=T0 + 45)
    assert (s.wave, s.wave_healthy_at) == (0, T0 + 45)


def test_a_manual_wave_waits_for_promote_then_the_rollout_completes() -> None:
    s = step(DONE)
    s = step(s, seen=ok("a"), now=T0 + 1)
    s = step(s, seen=ok("a"), now=T0 + 31)
    s = step(s, seen=ok("b", "c"), now=T0 + 32)
    s = step(s, seen=ok("b", "c"), now=T0 + 62)
    assert (s.phase, s.wave) == ("Waiting", 2)
    assert "waits for promote" in s.message
    assert runs(s)["d"] == 1
    s = step(s, seen=None, now=T0 + 100)
    assert s.phase == "Waiting"  # no promote, no start
    s = step(s, asked=Asked("promote"), now=T0 + 101)
    assert (s.phase, s.wave, s.wave_started_at) == ("Progressing", 2, T0 + 101)
    assert runs(s)["d"] == 2
    s = step(s, seen=ok("d"), now=T0 + 102)
    s = step(s, seen=ok("d"), now=T0 + 132)
    assert s.phase == "Complete"
    assert runs(s, {}) == dict.fromkeys("abcd", 2)


def test_a_bad_revision_halts_at_the_deadline_and_later_waves_keep_theirs() -> None:
    s = step(DONE)
    s = step(s, seen=ok("a", health="Progressing"), now=T0 + 299)
    assert s.phase == "Progressing"
    s = step(s, seen=ok("a", health="Progressing"), now=T0 + 300)
    assert s.phase == "Halted"
    assert s.halt is not None
    assert (s.halt.wave, s.halt.name, s.halt.reason, s.halt.clusters) == (
        0,
        "first",
        "ProgressDeadline",
        ("a",),
    )
    assert "halted at wave 1 (first)" in s.message
    assert runs(s) == {"a": 2, "b": 1, "c": 1, "d": 1}
    assert step(s, seen=ok("a"), now=T0 + 400).phase == "Halted"  # until someone acts


def test_degraded_or_failed_clusters_halt_at_once_beyond_the_tolerance() -> None:
    s = step(DONE)
    halted = step(s, seen=ok("a", health="Degraded"), now=T0 + 1)
    assert halted.halt is not None
    assert halted.halt.reason == "Degraded"
    failed = step(s, seen={"a": Seen(False, "Unknown", failed=True)}, now=T0 + 1)
    assert failed.halt is not None
    assert failed.halt.reason == "Failed"
    # Not applied yet: the health is the old revision's, which does not count against it.
    assert step(s, seen=ok("a", health="Degraded", applied=False), now=T0 + 1).phase == (
        "Progressing"
    )


def test_a_tolerance_lets_a_wave_pass_with_that_many_unhealthy() -> None:
    spec = Waves.model_validate({"size": 4, "maxUnhealthy": "25%", "minHealthyTime": "0s"})
    grouping = waves_of(spec, ["a", "b", "c", "d", "e"], {})
    gates = Gates.of(spec)
    s = step(DONE, grouping=grouping, gates=gates)
    seen = {**ok("a", "b", "c"), "d": Seen(True, "Degraded")}
    s = step(s, seen=seen, grouping=grouping, gates=gates)
    assert (s.phase, s.wave) == ("Progressing", 1)
    seen2 = {**ok("a", "b"), **ok("c", "d", health="Degraded")}
    halted = step(
        step(DONE, grouping=grouping, gates=gates), seen=seen2, grouping=grouping, gates=gates
    )
    assert halted.phase == "Halted"


def test_undo_rolls_the_earlier_revision_out_wave_by_wave_and_holds_the_spec() -> None:
    s = step(DONE)
    s = step(s, seen=ok("a", health="Progressing"), now=T0 + 300)
    assert s.phase == "Halted"
    s = step(s, asked=Asked("undo", 1), now=T0 + 301)
    assert (s.phase, s.revision, s.previous, s.spec_held, s.wave) == (
        "Progressing",
        1,
        2,
        2,
        0,
    )
    assert runs(s, {"a": 2, "b": 1, "c": 1, "d": 1}) == dict.fromkeys("abcd", 1)
    # The spec still says 2: it is held, not rolled out again.
    s = step(s, revision=2, seen=ok("a"), now=T0 + 302)
    assert (s.revision, s.spec_held) == (1, 2)
    # A new spec revision is rolled out; so is the held one on resume.
    assert step(s, revision=3, now=T0 + 303).revision == 3
    resumed = step(s, revision=2, asked=Asked("resume"), now=T0 + 303)
    assert (resumed.revision, resumed.spec_held, resumed.wave) == (2, None, 0)


def test_resume_gives_a_halted_wave_another_deadline_and_promote_accepts_it() -> None:
    s = step(step(DONE), seen=ok("a", health="Progressing"), now=T0 + 300)
    retried = step(s, asked=Asked("resume"), now=T0 + 310)
    assert (retried.phase, retried.wave, retried.wave_started_at) == ("Progressing", 0, T0 + 310)
    promoted = step(s, asked=Asked("promote"), now=T0 + 310)
    assert (promoted.phase, promoted.wave) == ("Progressing", 1)


def test_pause_holds_the_next_wave_and_resume_starts_it() -> None:
    s = step(step(DONE), asked=Asked("pause"), now=T0 + 1)
    assert s.paused
    s = step(s, seen=ok("a"), now=T0 + 2)
    s = step(s, seen=ok("a"), now=T0 + 40)
    assert (s.phase, s.wave) == ("Waiting", 1)
    assert "paused" in s.message
    s = step(s, asked=Asked("resume"), now=T0 + 50)
    assert (s.phase, s.wave, s.paused) == ("Progressing", 1, False)


def test_promote_all_sends_every_wave_at_once() -> None:
    s = step(step(DONE), asked=Asked("promote-all"), now=T0 + 1)
    assert runs(s) == dict.fromkeys("abcd", 2)


def test_suspension_holds_everything_and_resume_restarts_the_wave_clock() -> None:
    s = step(DONE)
    s = step(s, revision=3, suspended=True, now=T0 + 1)
    assert (s.phase, s.revision, s.wave) == ("Suspended", 3, 0)
    assert "revision 3 waits" in s.message
    s = step(s, revision=3, suspended=True, seen=ok("a"), now=T0 + 1000)
    assert s.phase == "Suspended"  # no deadline runs out while suspended
    s = step(s, revision=3, now=T0 + 2000)
    assert (s.phase, s.wave, s.wave_started_at) == ("Progressing", 0, T0 + 2000)


def test_a_suspended_cluster_is_skipped_by_its_wave() -> None:
    s = step(DONE)
    s = step(s, seen=ok("a"), now=T0 + 1)
    s = step(s, seen=ok("a"), now=T0 + 31)
    s = step(s, seen=ok("b"), now=T0 + 32, skipped={"c"})
    s = step(s, seen=ok("b"), now=T0 + 62, skipped={"c"})
    assert (s.phase, s.wave) == ("Waiting", 2)


def test_waves_wait_for_the_canary_and_halt_when_it_rolled_back() -> None:
    s = step(DONE, canary="running")
    assert (s.phase, s.wave_started_at) == ("Waiting", None)
    assert runs(s)["a"] == 1
    s = step(s, canary="done", now=T0 + 5)
    assert (s.phase, s.wave_started_at) == ("Progressing", T0 + 5)
    halted = step(step(DONE, canary="running"), canary="failed")
    assert halted.halt is not None
    assert halted.halt.reason == "CanaryRolledBack"


def test_without_waves_a_revision_goes_everywhere_and_never_halts() -> None:
    grouping, gates = waves_of(None, ["a", "b"], {}), Gates.of(None)
    s = step(DONE, grouping=grouping, gates=gates)
    assert assign(s, grouping, {"a": 1, "b": 1}) == {"a": 2, "b": 2}
    s = step(s, seen=ok("a"), now=T0 + 86_400 * 365, grouping=grouping, gates=gates)
    assert s.phase == "Progressing"
    s = step(s, seen=ok("a", "b"), now=T0 + 86_400 * 365, grouping=grouping, gates=gates)
    assert s.phase == "Complete"


def test_the_status_round_trips_and_a_garbled_one_is_none() -> None:
    s = step(step(DONE), seen=ok("a", health="Progressing"), now=T0 + 300)
    status = s.status(GROUPING, 1, [1, 2], (2, "abc"))
    back = RolloutState.from_status(status)
    assert back is not None
    assert (back.phase, back.revision, back.previous, back.wave, back.halt) == (
        s.phase,
        s.revision,
        s.previous,
        s.wave,
        s.halt,
    )
    assert status["specRevision"] == 2
    for garbled in (None, {}, {"phase": "Exploded", "revision": 1}, {"phase": "Complete"}):
        assert RolloutState.from_status(garbled) is None
