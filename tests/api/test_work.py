"""A Pull member's hub names: its namespace, its Works."""

from __future__ import annotations

import pytest

from api.work import (
    MAX_PULL_NAME,
    cluster_of_namespace,
    pull_name_problem,
    pull_namespace,
    work_name,
)


def test_a_pull_members_namespace_is_its_name_behind_the_prefix_both_ways() -> None:
    assert pull_namespace("edge-7") == "propagator-cluster-edge-7"
    assert cluster_of_namespace("propagator-cluster-edge-7") == "edge-7"
    assert cluster_of_namespace("propagator-cluster-") is None
    assert cluster_of_namespace("shop") is None


@pytest.mark.parametrize("name", ["a" * (MAX_PULL_NAME + 1), "edge.7", "Edge", "-x", ""])
def test_a_pull_member_needs_a_name_its_namespace_can_carry(name: str) -> None:
    problem = pull_name_problem(name)
    assert problem is not None
    assert f"at most {MAX_PULL_NAME} characters" in problem
    assert pull_name_problem("a" * MAX_PULL_NAME) is None


def test_work_names_are_unique_per_application_and_short_enough() -> None:
    assert work_name("shop/web") == "shop.web"
    assert work_name("shop/web.v2") == "shop.web.v2"
    assert work_name("a/b-c") != work_name("a-b/c")  # (the dot: where the namespace ends)
    long_a, long_b = "ns/" + "a" * 250, "ns/" + "a" * 249 + "b"
    assert len(work_name(long_a)) <= 253
    assert work_name(long_a) != work_name(long_b)
