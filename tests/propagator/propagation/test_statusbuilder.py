"""The ApplicationPropagation status: counts, conditions, no change when nothing changed."""

from __future__ import annotations

import pytest

from propagator.conditions import NAMED_CLUSTERS, status_changed
from propagator.propagation.statusbuilder import (
    ClusterLine,
    StatusBuilder,
    availability,
    checked,
)
from propagator.work.workloadhealth import ObjectReport


def _state(name: str, applied: bool = True, health: str = "Healthy") -> ClusterLine:
    return ClusterLine(name, applied, health, 1, None if applied else "boom", "r1")  # type: ignore[arg-type]


def test_ready_counts_only_applied_and_healthy_clusters() -> None:
    b = StatusBuilder({"metadata": {"generation": 4}}, "2026-11-30T00:00:00Z")
    states = [_state("a"), _state("b", health="Progressing"), _state("c", applied=False)]
    b.clusters(states, 3)
    status = b.build()
    assert (status["readyClusters"], status["totalClusters"], status["ready"]) == (1, 3, "1/3")
    assert status["observedGeneration"] == 4
    assert status["clusters"][2] == {
        "name": "c",
        "applied": False,
        "health": "Healthy",
        "attempts": 1,
        "lastError": "boom",
        "revision": "r1",
    }


def test_available_names_what_is_not_ready() -> None:
    states = [_state("a"), _state("b", health="Degraded"), _state("c", applied=False)]
    ok, reason, message = availability(states, ["a", "b", "c"])
    assert (ok, reason) == (False, "Degraded")
    assert message == "1/3 clusters healthy; b: Degraded; c: not applied"
    assert availability([_state("a")], ["a"]) == (True, "Healthy", "1/1 clusters healthy")
    assert availability([], [])[0] is False


def test_available_names_the_degraded_first_and_counts_past_a_limit() -> None:
    names = [f"far-{n:04}" for n in range(1000)]
    states = [_state(n, applied=False) for n in names[:990]]
    states += [_state(n, health="Degraded") for n in names[990:995]]
    states += [_state(n) for n in names[995:]]
    ok, reason, message = availability(states, names)
    assert (ok, reason) == (False, "Degraded")
    degraded = "; ".join(f"{n}: Degraded" for n in names[990:995])
    waiting = "; ".join(f"{n}: not applied" for n in names[: NAMED_CLUSTERS - 5])
    assert message == f"5/1000 clusters healthy; {degraded}; {waiting} and 985 more"
    # A cluster not applied whose workload is Degraded makes the application Degraded.
    degraded_there = [_state("a"), _state("b", applied=False, health="Degraded")]
    assert availability(degraded_there, ["a", "b"]) == (
        False,
        "Degraded",
        "1/2 clusters healthy; b: not applied",
    )


def test_an_unchanged_status_is_not_rewritten() -> None:
    first = StatusBuilder({"metadata": {"generation": 1}}, "2026-11-30T00:00:00Z")
    first.condition("Applied", True, "Applied", "3/3 clusters applied")
    first.clusters([_state("a")], 1)
    written = first.build()
    again = StatusBuilder(
        {"metadata": {"generation": 1}, "status": written}, "2026-11-30T01:00:00Z"
    )
    again.condition("Applied", True, "Applied", "3/3 clusters applied")
    again.clusters([_state("a")], 1)
    assert not status_changed(written, again.build())  # lastTransitionTime kept
    changed = StatusBuilder(
        {"metadata": {"generation": 1}, "status": written}, "2026-11-30T01:00:00Z"
    )
    changed.condition("Applied", False, "ApplyFailed", "0/1 clusters applied")
    result = changed.build()
    assert status_changed(written, result)
    assert result["conditions"][0]["lastTransitionTime"] == "2026-11-30T01:00:00Z"


def test_a_status_the_api_would_not_keep_is_refused() -> None:
    builder = StatusBuilder({"metadata": {"generation": 1}}, "2026-11-30T00:00:00Z")
    builder.condition("Applied", True, "Applied", "1/1 clusters applied")
    status = builder.build()
    assert status["conditions"][0]["type"] == "Applied"
    checked(status)
    builder.status["appliedEverywhere"] = True  # not a field of the CRD
    with pytest.raises(ValueError, match="appliedEverywhere"):
        checked(builder.build())


def test_what_the_rules_reflect_takes_a_bounded_share_of_the_status() -> None:
    big = ObjectReport("v1", "W", "shop", "w", "Progressing", "waiting", {"blob": "x" * 2000})
    lines = [
        ClusterLine(f"c{i:04d}", True, "Progressing", 1, None, "r1", None, None, "why", (big,))
        for i in range(200)
    ]
    b = StatusBuilder({"metadata": {"generation": 1}}, "2026-11-30T00:00:00Z")
    b.clusters(lines, 200)
    status = b.build()
    shown = [c for c in status["clusters"] if "objects" in c]
    assert 100 <= len(shown) < 200  # the first ones, up to the budget
    assert shown[0]["objects"][0]["fields"]["blob"] == "x" * 2000
    assert all(c["healthMessage"] == "why" for c in status["clusters"])
