"""A divided application's autoscalers get a share of their bounds per cluster
(work.autoscalers)."""

from __future__ import annotations

from typing import Any

from propagator.work.autoscalers import divide_autoscalers, divided_bounds

SCALE = (("apps/v1", "Deployment", "/spec/replicas"),)


def _objects(low: int | None, high: int) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": high,
    }
    if low is not None:
        spec["minReplicas"] = low
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": spec,
        },
    ]


def test_bounds_follow_the_replicas_weights() -> None:
    assert divided_bounds(4, 20, {"a": 1, "b": 3}) == {"a": (1, 5), "b": (3, 15)}


def test_every_cluster_gets_at_least_one() -> None:
    bounds = divided_bounds(2, 3, {"a": 1, "b": 1, "c": 1, "d": 1})
    assert all(low >= 1 and high >= low for low, high in bounds.values())


def test_clusters_without_replicas_share_equally() -> None:
    assert divided_bounds(4, 8, {"a": 0, "b": 0}) == {"a": (2, 4), "b": (2, 4)}


def test_each_clusters_autoscaler_gets_its_share() -> None:
    rendered = {"a": _objects(None, 10), "b": _objects(None, 10)}
    out = divide_autoscalers(rendered, {"a": 2, "b": 8}, SCALE)
    assert out["a"][1]["spec"]["minReplicas"] == 1
    assert out["a"][1]["spec"]["maxReplicas"] == 2
    assert out["b"][1]["spec"]["maxReplicas"] == 8
    assert rendered["a"][1]["spec"]["maxReplicas"] == 10  # the render is not changed


def test_an_autoscaler_of_something_else_or_with_odd_bounds_is_left_as_it_is() -> None:
    odd = _objects(None, 10)
    odd[1]["spec"]["maxReplicas"] = "ten"
    other = _objects(2, 10)
    other[1]["spec"]["scaleTargetRef"]["name"] = "api"
    out = divide_autoscalers({"a": odd, "b": other}, {"a": 1, "b": 1}, SCALE)
    assert out["a"][1]["spec"]["maxReplicas"] == "ten"
    assert out["b"][1]["spec"] == other[1]["spec"]
