"""The replica split of a canary step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from propagator.canary.split import split

REPLICAS = st.integers(min_value=0, max_value=10_000)
WEIGHTS = st.integers(min_value=0, max_value=100)


@given(REPLICAS, WEIGHTS)
def test_the_copies_hold_every_replica(replicas: int, weight: int) -> None:
    stable, canary = split(replicas, weight)
    assert stable + canary == replicas
    assert stable >= 0
    assert canary >= 0


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=1, max_value=100))
def test_a_weight_above_zero_gets_a_canary_replica(replicas: int, weight: int) -> None:
    assert split(replicas, weight)[1] >= 1


@given(REPLICAS, WEIGHTS, WEIGHTS)
def test_more_weight_never_means_fewer_canary_replicas(replicas: int, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert split(replicas, low)[1] <= split(replicas, high)[1]


@given(REPLICAS, WEIGHTS)
def test_the_canary_share_is_the_weight_rounded_up(replicas: int, weight: int) -> None:
    canary = split(replicas, weight)[1]
    assert canary * 100 >= replicas * weight  # at least the weight
    assert (canary - 1) * 100 < replicas * weight or canary == 0  # by less than a replica


def test_examples() -> None:
    assert split(10, 10) == (9, 1)
    assert split(10, 50) == (5, 5)
    assert split(10, 100) == (0, 10)
    assert split(3, 10) == (2, 1)
    assert split(10, 0) == (10, 0)
    assert split(0, 50) == (0, 0)


@pytest.mark.parametrize(("replicas", "weight"), [(1, 101), (1, -1), (-1, 10)])
def test_out_of_range(replicas: int, weight: int) -> None:
    with pytest.raises(ValueError, match=r"outside|below"):
        split(replicas, weight)
