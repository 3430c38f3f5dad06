"""Graceful moves: what leaves a cluster stays until it runs elsewhere, or the grace period
passes."""

from __future__ import annotations

from propagator.failover.decisions import Eviction
from propagator.failover.moves import (
    Cause,
    Move,
    grace_left,
    graceful_moves,
    release,
    with_kept_replicas,
)
from propagator.work.targets import Target

LOST = Eviction("c", "ClusterUnreachable", 10.0, "not Ready for 5m0s")
REBALANCE = Cause("Rebalance", "rebalance '1'")


def test_an_evicted_cluster_keeps_its_replicas_and_one_that_shrinks_keeps_its_count() -> None:
    moves = graceful_moves(
        {"a": 4, "b": 1, "c": 1}, {"a": 2, "b": 4}, {}, REBALANCE, {"c": LOST}, (), 600, 100.0
    )
    assert set(moves) == {"a", "c"}  # b grows: nothing of it moves
    assert (moves["a"].reason, moves["a"].replicas, moves["a"].lost) == ("Rebalance", 4, None)
    assert moves["a"].message == (
        "rebalance '1': keeps 4 replicas (placed 2) until replaced (Available), "
        "at most gracePeriod 10m0s"
    )
    assert (moves["c"].reason, moves["c"].replicas, moves["c"].lost) == (
        "ClusterUnreachable",
        1,
        10.0,
    )
    assert moves["c"].since == 100.0


def test_a_placement_change_without_a_cause_is_not_a_move() -> None:
    assert graceful_moves({"a": 4, "b": 2}, {"a": 2}, {}, None, {}, (), 600, 100.0) == {}


def test_a_carried_move_lasts_until_the_cluster_is_placed_with_as_much_again() -> None:
    carried = {"c": Move("c", "Failback", 50.0, "failback", 3)}
    assert graceful_moves({"a": 3}, {"a": 3, "c": 1}, carried, None, {}, (), 600, 100.0) == carried
    assert graceful_moves({"a": 3}, {"a": 3, "c": 3}, carried, None, {}, (), 600, 100.0) == {}
    duplicated = {"c": Move("c", "Rebalance", 50.0, "rebalance", None)}
    assert graceful_moves({}, {"c": None}, duplicated, None, {}, (), 600, 100.0) == {}


def test_purge_immediately_makes_no_move() -> None:
    unhealthy = Eviction("c", "ApplicationUnhealthy", 0.0, "Degraded for 5m0s")
    moves = graceful_moves({"a": 2, "c": 2}, {"a": 4}, {}, None, {"c": unhealthy}, {"c"}, 600, 1)
    assert moves == {}


def test_moves_are_released_together_once_replaced_or_each_after_its_grace_period() -> None:
    moves = {
        "old": Move("old", "Rebalance", 0.0, "", 2),
        "new": Move("new", "Rebalance", 90.0, "", 2),
    }
    assert release(moves, True, 60, 100.0) == ({}, moves)
    kept, released = release(moves, False, 60, 100.0)
    assert (list(kept), list(released)) == (["new"], ["old"])
    assert grace_left(moves, 60, 100.0) == 0.0
    assert grace_left(kept, 60, 100.0) == 50.0
    assert grace_left({}, 60, 100.0) is None


def test_targets_render_with_the_replicas_their_moves_keep() -> None:
    targets = [
        Target("a", None, 2, None),
        Target("b", None, 4, None),
        Target("c", None, None, None),
    ]
    moves = {
        "a": Move("a", "Rebalance", 0.0, "", 4),
        "b": Move("b", "Rebalance", 0.0, "", 3),
        "c": Move("c", "Rebalance", 0.0, "", None),
    }
    kept = with_kept_replicas(targets, moves)
    assert [t.replicas for t in kept] == [4, 4, None]
