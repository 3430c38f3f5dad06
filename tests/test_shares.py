"""How a tenant's limit is split over its namespaces on one member (pure)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from propagator.tenancy.shares import split, split_all

D = Decimal


def test_use_plus_an_equal_share_of_the_room() -> None:
    assert split(D(10), {"a": D(2), "b": D(4)}, "pods", {"a", "b"}) == {"a": D(4), "b": D(6)}
    # cpu in milli-units, the rest in whole units, rounded down
    empty = {"a": D(0), "b": D(0), "c": D(0)}
    assert split(D(1), empty, "cpu", set(empty)) == dict.fromkeys(empty, D("0.333"))
    assert split(D(10), empty, "pods", set(empty)) == dict.fromkeys(empty, D(3))


def test_a_namespace_no_longer_written_keeps_its_use_and_no_room() -> None:
    assert split(D(10), {"a": D(2), "old": D(3)}, "pods", {"a"}) == {"a": D(7), "old": D(3)}


def test_over_the_limit_nobody_grows() -> None:
    hard = split(D(6), {"a": D(6), "b": D(3)}, "pods", {"a", "b"})
    assert hard == {"a": D(4), "b": D(2)}


def test_every_limited_resource_is_split() -> None:
    hard = split_all(
        {"pods": D(4), "cpu": D(2)},
        {"a": {"pods": D(1)}, "b": {}},
        {"a", "b"},
    )
    assert hard == {"a": {"pods": D(2), "cpu": D(1)}, "b": {"pods": D(1), "cpu": D(1)}}


amounts = st.decimals(min_value=0, max_value=10**6, places=3)


@given(
    st.sampled_from(["pods", "cpu", "memory"]),
    amounts,
    st.dictionaries(st.sampled_from("abcdefgh"), amounts, min_size=1),
    st.sets(st.sampled_from("abcdefgh")),
)
def test_the_sum_never_exceeds_the_limit(
    resource: str, limit: Decimal, used: dict[str, Decimal], active: set[str]
) -> None:
    hard = split(limit, used, resource, active)
    assert set(hard) == set(used)
    assert sum(hard.values()) <= limit
    if sum(used.values()) <= limit:
        assert all(hard[ns] >= used[ns] for ns in used)  # nobody is cut below its use
    else:
        assert all(hard[ns] <= used[ns] for ns in used)  # nobody grows
