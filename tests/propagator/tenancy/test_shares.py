"""How a tenant's limit is split over its namespaces on one member (pure)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from propagator.tenancy.shares import capped_raise, split, split_all

D = Decimal


def test_use_plus_an_equal_share_of_the_room() -> None:
    assert split(D(10), {"a": D(2), "b": D(4)}, "pods", {"a", "b"}) == {"a": D(4), "b": D(6)}
    # cpu in milli-units, the rest in whole units; what is left over goes a unit each to
    # the first by name, so the whole limit is handed out
    empty = {"c": D(0), "b": D(0), "a": D(0)}
    assert split(D(1), empty, "cpu", set(empty)) == {
        "a": D("0.334"),
        "b": D("0.333"),
        "c": D("0.333"),
    }
    assert split(D(11), empty, "pods", set(empty)) == {"a": D(4), "b": D(4), "c": D(3)}
    # only to those that grow
    assert split(D(11), empty, "pods", {"b", "c"}) == {"a": D(0), "b": D(6), "c": D(5)}


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
    assert hard == {"a": {"pods": D(3), "cpu": D(1)}, "b": {"pods": D(1), "cpu": D(1)}}


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
        if active & set(used):  # and the whole limit is handed out, to the last unit
            unit = D("0.001") if resource == "cpu" else D(1)
            assert limit - sum(hard.values()) < unit
    else:
        assert all(hard[ns] <= used[ns] for ns in used)  # nobody grows


def test_a_raise_is_capped_by_what_the_others_hold() -> None:
    limits = {"pods": D(6)}
    # b was lowered to 2 but still runs 3 pods: a may not go from 3 to 4
    in_force = {"a": {"pods": D(3)}, "b": {"pods": D(2)}}
    used = {"a": {"pods": D(3)}, "b": {"pods": D(3)}}
    assert capped_raise(limits, "a", {"pods": D(4)}, in_force, used) == {"pods": D(3)}
    # with b really at 1, a gets its 4; a resource with no limit is left as asked
    used["b"] = {"pods": D(1)}
    asked = {"pods": D(4), "configmaps": D(9)}
    assert capped_raise(limits, "a", asked, in_force, used) == asked
    # a new namespace (no quota yet) gets what is left, never below zero
    assert capped_raise(limits, "c", {"pods": D(3)}, in_force, used) == {"pods": D(1)}
    in_force["b"] = {"pods": D(3)}
    assert capped_raise(limits, "c", {"pods": D(3)}, in_force, used) == {"pods": D(0)}


@given(
    amounts,
    st.dictionaries(st.sampled_from("abcdef"), amounts, min_size=1),
    st.dictionaries(st.sampled_from("abcdef"), amounts),
    st.sampled_from("abcdef"),
    amounts,
)
def test_a_capped_raise_keeps_what_the_namespaces_may_hold_within_the_limit(
    limit: Decimal,
    hard: dict[str, Decimal],
    used: dict[str, Decimal],
    namespace: str,
    asked: Decimal,
) -> None:
    def holdable(h: dict[str, Decimal]) -> Decimal:
        return sum((max(h.get(ns, D(0)), used.get(ns, D(0))) for ns in set(h) | set(used)), D(0))

    in_force = {ns: {"pods": v} for ns, v in hard.items()}
    per_ns_used = {ns: {"pods": v} for ns, v in used.items()}
    got = capped_raise({"pods": limit}, namespace, {"pods": asked}, in_force, per_ns_used)["pods"]
    after = {**hard, namespace: got}
    current = hard.get(namespace)
    if current is not None and asked <= current:
        assert got == asked  # not a raise: untouched
    else:
        assert got <= asked
        assert current is None or got >= current
        if holdable(hard) <= limit:
            assert holdable(after) <= limit
