"""Replica division (scheduler/replicas.py): Webster seats, house monotonicity, steady
rescaling, and bulk division equal to one seat at a time."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from propagator.scheduler.replicas import _by_divisor, apportion, rescale

names = st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, int | None]]:
    """Weights (0 to 6) and caps (None or 0 to 12) for a few clusters."""
    clusters = draw(names)
    weights = {n: draw(st.integers(0, 6)) for n in clusters}
    caps = {n: draw(st.none() | st.integers(0, 12)) for n in clusters}
    return weights, caps


def one_at_a_time(
    total: int,
    weights: dict[str, int],
    caps: dict[str, int | None],
    tie: Callable[[str], int] = lambda _: 0,
) -> dict[str, int] | None:
    """The definition: each seat to the highest weight / (2 seats + 1), ties by the lower
    tie rank, then by name."""
    seats = dict.fromkeys(weights, 0)
    limit = {n: total + 1 if cap is None else cap for n, cap in caps.items()}
    for _ in range(total):
        open_ = [n for n in seats if weights[n] and seats[n] < limit[n]]
        if not open_:
            return None
        best = min(open_, key=lambda n: (-Fraction(weights[n], 2 * seats[n] + 1), tie(n), n))
        seats[best] += 1
    return seats


def test_webster_shares_by_weight() -> None:
    assert apportion(10, {"a": 2, "b": 1}, {"a": None, "b": None}) == {"a": 7, "b": 3}
    assert apportion(6, {"a": 1, "b": 2, "c": 3}, dict.fromkeys("abc")) == {"a": 1, "b": 2, "c": 3}
    assert apportion(10, {"a": 1, "b": 1}, {"a": 2, "b": None}) == {"a": 2, "b": 8}
    assert apportion(10, {"a": 1, "b": 1}, {"a": 2, "b": 3}) is None


def test_a_scale_up_never_takes_a_replica_away() -> None:
    # largest remainders gave 1:1:1 at 3 and 0:2:2 at 4
    three = apportion(3, {"a": 1, "b": 3, "c": 3}, dict.fromkeys("abc"))
    four = apportion(4, {"a": 1, "b": 3, "c": 3}, dict.fromkeys("abc"))
    assert three is not None
    assert four is not None
    assert all(four[n] >= three[n] for n in "abc")
    # the sweep: weights 1-6 on 2 and 3 clusters, 1 to 20 replicas, every +1 step
    for size in (2, 3):
        clusters = "abc"[:size]
        for ws in itertools.product(range(1, 7), repeat=size):
            weights = dict(zip(clusters, ws, strict=True))
            before = apportion(1, weights, dict.fromkeys(clusters))
            for total in range(2, 21):
                after = apportion(total, weights, dict.fromkeys(clusters))
                assert before is not None
                assert after is not None
                assert all(after[n] >= before[n] for n in clusters), (weights, total)
                before = after


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(0, 40))
def test_apportion_is_house_monotone_and_within_caps(
    fleet: tuple[dict[str, int], dict[str, int | None]], total: int
) -> None:
    weights, caps = fleet
    now, more = apportion(total, weights, caps), apportion(total + 1, weights, caps)
    if now is None:
        assert more is None  # what does not fit at n does not fit at n + 1
        return
    assert sum(now.values()) == total
    assert all(caps[n] is None or now[n] <= caps[n] for n in now)  # type: ignore[operator]
    assert all(now[n] == 0 for n in now if weights[n] == 0)
    if more is not None:
        assert all(more[n] >= now[n] for n in now)
    assert now == one_at_a_time(total, weights, caps)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcd"), st.integers(1, 50), min_size=1),
    st.integers(200, 5000),
    st.data(),
)
def test_bulk_division_is_the_one_at_a_time_division(
    weights: dict[str, int], total: int, data: st.DataObject
) -> None:
    caps = {n: data.draw(st.none() | st.integers(0, 3000)) for n in weights}
    assert apportion(total, weights, caps) == one_at_a_time(total, weights, caps)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 1000), min_size=1),
    st.integers(0, 120),
    st.data(),
)
def test_room_sized_weights_are_divided_as_one_at_a_time(
    weights: dict[str, int], total: int, data: st.DataObject
) -> None:
    """Weights the size of clusters' room (AvailableCapacity), with caps and a tie rank per
    cluster: the seats given at once before the one-at-a-time ones change nothing."""
    caps = {n: data.draw(st.none() | st.integers(0, 60)) for n in weights}
    ranks = {n: data.draw(st.integers(0, 3)) for n in weights}
    assert apportion(total, weights, caps, ranks.__getitem__) == one_at_a_time(
        total, weights, caps, ranks.__getitem__
    )


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcd"),
        # near 2**53 the float priorities of different seats round to one value: the
        # exact comparison must decide
        st.integers(2**53 - 8, 2**53 + 8) | st.integers(1, 2**31 - 1),
        min_size=1,
    ),
    st.integers(0, 30),
)
def test_huge_weights_are_ranked_exactly(weights: dict[str, int], total: int) -> None:
    caps: dict[str, int | None] = dict.fromkeys(weights)
    assert apportion(total, weights, caps) == one_at_a_time(total, weights, caps)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 400), min_size=1),
    st.integers(0, 200),
    st.data(),
)
def test_the_natural_divisor_answers_only_with_the_one_at_a_time_division(
    weights: dict[str, int], total: int, data: st.DataObject
) -> None:
    """Whenever the natural divisor settles a division, with caps and a tie rank per
    cluster, it is the one-at-a-time result."""
    caps = {n: data.draw(st.none() | st.integers(0, 150)) for n in weights}
    ranks = {n: data.draw(st.integers(0, 3)) for n in weights}
    exact = _by_divisor(total, weights, caps)
    if exact is not None:
        assert exact == one_at_a_time(total, weights, caps, ranks.__getitem__)


def test_the_natural_divisor_leaves_halves_misses_and_caps_to_one_at_a_time() -> None:
    # the scheduler's room-sized weights: 12 replicas, every cluster its share rounded
    room = {"a": 16, "b": 21, "c": 44, "d": 336, "e": 72, "f": 38}
    assert _by_divisor(12, room, dict.fromkeys(room)) == one_at_a_time(
        12, room, dict.fromkeys(room)
    )
    # 1 replica over two equal weights: both shares are a half, rounded up they make 2;
    # one at a time, the tie rank decides
    assert _by_divisor(1, {"a": 1, "b": 1}, {"a": None, "b": None}) is None
    assert apportion(1, {"a": 1, "b": 1}, {"a": None, "b": None}, {"a": 1, "b": 0}.__getitem__) == {
        "a": 0,
        "b": 1,
    }
    # shares that round to more (or fewer) than the total
    assert _by_divisor(2, {"a": 1, "b": 1, "c": 1}, dict.fromkeys("abc")) is None
    # a share above its cap
    assert _by_divisor(4, {"a": 3, "b": 1}, {"a": 2, "b": None}) is None
    assert apportion(4, {"a": 3, "b": 1}, {"a": 2, "b": None}) == {"a": 2, "b": 2}


def test_an_int32_replica_count_is_divided_at_once() -> None:
    weights = {"a": 3, "b": 7, "c": 11, "d": 1}
    division = apportion(2**31 - 1, weights, {"a": 5, "b": None, "c": None, "d": None})
    assert division is not None
    assert sum(division.values()) == 2**31 - 1
    assert division["a"] == 5
    # the others in proportion to 7:11:1, each within one seat of its exact share
    rest = 2**31 - 1 - 5
    for n in "bcd":
        assert abs(division[n] - rest * weights[n] / 19) <= 1


@st.composite
def rescalings(
    draw: st.DrawFn,
) -> tuple[dict[str, int], dict[str, int | None], dict[str, int]]:
    weights, caps = draw(fleets())
    current = {n: draw(st.integers(0, 10)) for n in weights if draw(st.booleans())}
    return weights, caps, current


@settings(max_examples=300, deadline=None)
@given(rescalings(), st.integers(0, 40))
def test_rescaling_moves_nothing_it_does_not_have_to(
    case: tuple[dict[str, int], dict[str, int | None], dict[str, int]], total: int
) -> None:
    weights, caps, current = case
    kept: dict[str, int] = {}
    for n in weights:
        cap = caps[n]
        kept[n] = current.get(n, 0) if cap is None else min(current.get(n, 0), cap)
    result = rescale(total, weights, caps, current)
    if result is None:
        assert sum(kept.values()) < total  # only a scale-up can lack room
        return
    assert sum(result.values()) == total
    assert all(caps[n] is None or result[n] <= caps[n] for n in result)  # type: ignore[operator]
    if total >= sum(kept.values()):
        assert all(result[n] >= kept[n] for n in kept)  # scale-up only adds
    else:
        assert all(result[n] <= kept[n] for n in kept)  # scale-down only removes
    if total == sum(kept.values()):
        assert result == kept  # nothing to do: nothing moves
    # monotone in the total from the same current replicas
    more = rescale(total + 1, weights, caps, current)
    if more is not None:
        assert all(more[n] >= result[n] for n in result)


def test_a_scale_down_takes_in_proportion_to_what_runs() -> None:
    # 12 -> 6 with 2:4:6 running (Karmada: 1:2:3), whatever the weights
    assert rescale(
        6, dict.fromkeys("abc", 1), {"a": 3, "b": 5, "c": 7}, {"a": 2, "b": 4, "c": 6}
    ) == {
        "a": 1,
        "b": 2,
        "c": 3,
    }


def test_a_scale_up_shares_only_the_new_replicas() -> None:
    # 12 -> 24, 2:4:6 running, room for 10 more on each: 6:8:10, not 8:8:8
    room = {"a": 10, "b": 10, "c": 10}
    caps: dict[str, int | None] = {"a": 12, "b": 14, "c": 16}
    assert rescale(24, room, caps, {"a": 2, "b": 4, "c": 6}) == {"a": 6, "b": 8, "c": 10}
