"""The probe schedule: each member on its own clock."""

from __future__ import annotations

from propagator.fleetmanager.probeschedule import ProbeSchedule


def test_a_new_member_is_due_at_once_then_an_interval_after_its_probe_started() -> None:
    schedule = ProbeSchedule(10.0)
    schedule.sync(["m1", "m2"], now=100.0)
    assert schedule.take(100.0) == ["m1", "m2"]
    assert schedule.take(100.0) == []  # being probed: not handed out twice
    assert schedule.done("m1", started=100.0) == 110.0
    assert schedule.done("m2", started=100.0) == 110.0
    assert schedule.take(109.7) == []
    assert schedule.next_due() == 110.0
    # Up to a quarter second early (a tenth of the interval at most): taken together
    # with whatever is due by then, the loop wakes once for them all.
    assert sorted(schedule.take(109.75)) == ["m1", "m2"]


def test_members_due_within_the_early_margin_are_taken_together() -> None:
    schedule = ProbeSchedule(1.0)  # a tenth of the interval: 0.1 s early at most
    schedule.sync(["a"], now=0.0)
    schedule.sync(["a", "b"], now=0.05)
    schedule.sync(["a", "b", "c"], now=0.2)
    assert schedule.take(0.0) == ["a", "b"]
    assert schedule.take(0.09) == []
    assert schedule.take(0.1) == ["c"]


def test_a_member_whose_probe_hangs_holds_back_no_other() -> None:
    schedule = ProbeSchedule(10.0)
    schedule.sync(["dead", "ok"], now=0.0)
    schedule.take(0.0)
    schedule.done("ok", started=0.0)
    # "dead" waits for its 5 s timeout; "ok" keeps its 10 s clock meanwhile and after.
    assert schedule.take(10.0) == ["ok"]
    schedule.done("ok", started=10.0)
    assert schedule.done("dead", started=0.0) == 10.0  # finished at 15 s: due already
    assert schedule.take(15.0) == ["dead"]
    assert schedule.next_due() == 20.0


def test_a_probe_longer_than_the_interval_is_followed_at_once() -> None:
    schedule = ProbeSchedule(1.0)
    schedule.sync(["slow"], now=0.0)
    schedule.take(0.0)
    schedule.done("slow", started=0.0)
    assert schedule.take(3.0) == ["slow"]  # due at 1 s, taken when asked at 3 s


def test_a_member_gone_is_forgotten_and_one_rebuilt_is_due_at_once() -> None:
    schedule = ProbeSchedule(10.0)
    schedule.sync(["a", "b", "c"], now=0.0)
    schedule.take(0.0)
    for name in ("a", "b", "c"):
        schedule.done(name, started=0.0)
    schedule.sync(["b", "c"], now=5.0, fresh=["c"])  # a removed; c's Secret changed
    assert schedule.size == 2
    assert schedule.take(5.0) == ["c"]
    assert schedule.take(10.0) == ["b"]
    assert schedule.next_due() is None  # b and c busy, a gone


def test_a_member_dropped_while_probed_is_not_rescheduled() -> None:
    schedule = ProbeSchedule(10.0)
    schedule.sync(["a"], now=0.0)
    schedule.take(0.0)
    schedule.sync([], now=1.0)
    assert schedule.done("a", started=0.0) is None
    assert (schedule.size, schedule.next_due()) == (0, None)
    schedule.sync(["a"], now=2.0)  # added again: a new member, due at once
    assert schedule.take(2.0) == ["a"]
