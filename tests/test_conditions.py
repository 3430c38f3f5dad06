"""Conditions keep their transition time; the probe time alone is not a status change."""

from __future__ import annotations

from propagator.conditions import condition, status_changed


def test_probe_time_alone_is_not_a_change() -> None:
    a = {"conditions": [{"type": "Ready"}], "lastProbeTime": "2026-01-01T00:00:00Z"}
    b = {**a, "lastProbeTime": "2026-01-01T00:00:10Z"}
    assert not status_changed(a, b)
    assert status_changed(a, {**b, "kubernetesVersion": "v1.37.2"})


def test_transition_time_kept_while_the_status_holds() -> None:
    first = condition("Ready", True, "Ok", "fine", 1, None, "T1")
    again = condition("Ready", True, "Ok", "fine", 1, [first], "T2")
    flipped = condition("Ready", False, "Bad", "down", 1, [again], "T3")
    assert (first["lastTransitionTime"], again["lastTransitionTime"]) == ("T1", "T1")
    assert flipped["lastTransitionTime"] == "T3"
