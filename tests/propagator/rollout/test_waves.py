"""Which wave each placed cluster is in, and the spec's bounds on waves."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.rollout import Waves, count_of
from propagator.rollout.waves import REST, tolerated, waves_of

LABELS = {
    "eu-1": {"region": "eu"},
    "eu-2": {"region": "eu"},
    "us-1": {"region": "us"},
    "us-2": {"region": "us"},
    "ap-1": {"region": "ap"},
}


def groups(*groups: dict[str, object], **kw: object) -> Waves:
    return Waves.model_validate({"groups": list(groups), **kw})


def test_groups_go_in_order_and_clusters_no_group_picks_form_a_last_wave() -> None:
    spec = groups(
        {"name": "canary", "clusters": ["eu-1"]},
        {"name": "us", "clusterSelector": {"matchLabels": {"region": "us"}}, "manual": True},
    )
    grouping = waves_of(spec, list(LABELS), LABELS)
    assert [(w.name, w.clusters, w.manual) for w in grouping.waves] == [
        ("canary", ("eu-1",), False),
        ("us", ("us-1", "us-2"), True),
        (REST, ("ap-1", "eu-2"), False),
    ]
    assert grouping.notes == ()


def test_a_cluster_two_selectors_pick_goes_with_the_first_and_the_status_says_so() -> None:
    spec = groups(
        {"name": "eu", "clusterSelector": {"matchLabels": {"region": "eu"}}},
        {"name": "all", "clusterSelector": {}},
    )
    grouping = waves_of(spec, list(LABELS), LABELS)
    assert grouping.waves[0].clusters == ("eu-1", "eu-2")
    assert grouping.waves[1].clusters == ("ap-1", "us-1", "us-2")
    assert "eu-1 matches groups eu and all" in grouping.notes


def test_a_group_that_picks_no_placed_cluster_is_an_empty_wave_with_a_note() -> None:
    spec = groups({"name": "mars", "clusters": ["mars-1"]})
    grouping = waves_of(spec, ["eu-1"], LABELS)
    assert grouping.waves[0].clusters == ()
    assert grouping.notes == ("group mars picks no placed cluster",)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (2, [("ap-1", "eu-1"), ("eu-2", "us-1"), ("us-2",)]),
        ("40%", [("ap-1", "eu-1"), ("eu-2", "us-1"), ("us-2",)]),
        ("1%", [("ap-1",), ("eu-1",), ("eu-2",), ("us-1",), ("us-2",)]),
        ("100%", [("ap-1", "eu-1", "eu-2", "us-1", "us-2")]),
    ],
)
def test_a_size_cuts_the_clusters_in_name_order(
    size: int | str, expected: list[tuple[str, ...]]
) -> None:
    grouping = waves_of(Waves.model_validate({"size": size}), list(LABELS), LABELS)
    assert [w.clusters for w in grouping.waves] == expected
    assert [w.name for w in grouping.waves] == [f"wave-{i + 1}" for i in range(len(expected))]


def test_without_waves_every_cluster_is_one_wave_and_canary_clusters_are_in_none() -> None:
    assert waves_of(None, ["b", "a"], {}).waves[0].clusters == ("a", "b")
    spec = Waves.model_validate({"size": 1})
    grouping = waves_of(spec, ["a", "b", "c"], {}, first=["a"])
    assert [w.clusters for w in grouping.waves] == [("b",), ("c",)]


def test_tolerance_rounds_a_percentage_down() -> None:
    spec = Waves.model_validate({"size": 10, "maxUnhealthy": "25%"})
    assert tolerated(spec, ["a", "b", "c"]) == 0
    assert tolerated(spec, ["a", "b", "c", "d"]) == 1
    assert count_of("25%", 7, at_least_one=True) == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"groups": [{"name": "empty"}]}, "names clusters, a clusterSelector or both"),
        ({}, "give either groups or size"),
        ({"size": 2, "groups": [{"name": "a", "clusters": ["x"]}]}, "give either groups or size"),
        (
            {"groups": [{"name": "a", "clusters": ["x"]}, {"name": "b", "clusters": ["y", "x"]}]},
            "a cluster is named in two wave groups",
        ),
        ({"size": 1, "progressDeadline": "0s"}, "progressDeadline must be between 10s and 24h"),
        ({"size": 1, "progressDeadline": "87600h"}, "progressDeadline must be between 10s and 24h"),
        ({"size": 1, "minHealthyTime": "25h"}, "minHealthyTime must be at most 24h"),
        ({"groups": [{"name": f"w{i}", "clusters": [f"c{i}"]} for i in range(1000)]}, "at most 20"),
        ({"size": 0}, "size must be at least 1 cluster"),
        ({"size": "0%"}, "size must be at least 1 cluster"),
        ({"size": "150%"}, "neither a number of clusters nor a percentage"),
        (
            {"size": 1, "maxUnhealthy": "x" * 10_000},
            "neither a number of clusters nor a percentage",
        ),
        ({"size": True}, "valid"),
    ],
)
def test_hostile_waves_are_refused_naming_the_problem(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Waves.model_validate(spec)
