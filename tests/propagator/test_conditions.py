"""Conditions keep their transition time; the probe time alone is not a status change; a
status just written counts until the cache shows it."""

from __future__ import annotations

from propagator.conditions import (
    WrittenStatuses,
    by_message,
    condition,
    some_of,
    status_changed,
)


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


def test_a_written_status_counts_while_the_cached_copy_is_the_one_it_went_over() -> None:
    statuses = WrittenStatuses()
    cached = {"metadata": {"resourceVersion": "1"}, "status": {"ready": "1/2"}}
    assert not statuses.changed("t", cached, {"ready": "1/2"})
    statuses.written("t", cached, {"ready": "2/2"})
    # the cache still shows version 1: the hub holds 2/2, so 1/2 again is a change
    assert statuses.changed("t", cached, {"ready": "1/2"})
    assert not statuses.changed("t", cached, {"ready": "2/2"})
    # the write came back (version 2): the copy is what the hub holds again
    caught_up = {"metadata": {"resourceVersion": "2"}, "status": {"ready": "2/2"}}
    assert not statuses.changed("t", caught_up, {"ready": "2/2"})
    assert statuses.changed("t", caught_up, {"ready": "1/2"})
    statuses.forget("t")
    assert not statuses.changed("t", cached, {"ready": "1/2"})


def test_some_of_names_up_to_the_limit_and_counts_the_rest() -> None:
    assert some_of(["a", "b", "c"], ", ", 3) == "a, b, c"
    assert some_of(["a", "b", "c", "d"], ", ", 3) == "a, b, c and 1 more"
    assert some_of([], "; ", 3) == ""


def test_by_message_names_the_clusters_sharing_a_message_before_it() -> None:
    pairs = [("a", "full"), ("b", "gone"), ("c", "full"), ("d", "late")]
    assert by_message(pairs, "refusals") == "a, c: full; b: gone; d: late"
    assert (
        by_message(pairs, "refusals", 2)
        == "a, c: full; b: gone; 1 more cluster with 1 other refusals"
    )
    assert by_message([("a", "x"), ("b", "x"), ("c", "x")], "errors", 2) == "a, b and 1 more: x"
    assert by_message([], "errors") == ""
