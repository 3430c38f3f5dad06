"""What a cluster runs of an application with a canary."""

from __future__ import annotations

from typing import Any

import pytest

from api.rollout import TRACK_LABEL
from propagator.canary.copies import DEPLOYMENT, DEPLOYMENTS, CanaryError, compose, template_of
from propagator.interpreter.rules import CanaryFields


def deployment(image: str, replicas: int = 10, name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "type": "NodePort",
        "selector": {"app": "web"},
        "ports": [{"port": 80, "nodePort": 30080}],
    },
}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {}}


def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def image(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def track(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["template"]["metadata"]["labels"][TRACK_LABEL])


NEW = [deployment("v2"), SERVICE, CONFIG]
STABLE = {"web": deployment("v1", replicas=4)}


def test_split_runs_both_copies_at_the_weight() -> None:
    out = by_name(compose(NEW, STABLE, "split", 30))
    stable, canary = out["Deployment/web"], out["Deployment/web-canary"]
    assert (image(stable), stable["spec"]["replicas"], track(stable)) == ("v1", 7, "stable")
    assert (image(canary), canary["spec"]["replicas"], track(canary)) == ("v2", 3, "canary")
    # the stable copy keeps its (immutable) selector; the canary copy selects its own pods
    assert stable["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert canary["spec"]["selector"] == {"matchLabels": {"app": "web", TRACK_LABEL: "canary"}}
    # both copies' pods match the application's Service
    assert out["Service/web"]["spec"]["selector"] == {"app": "web"}
    assert out["ConfigMap/cfg"] == CONFIG


def test_track_services_select_one_track_each() -> None:
    out = by_name(compose(NEW, STABLE, "latest", 0))
    for suffix in ("stable", "canary"):
        svc = out[f"Service/web-{suffix}"]
        assert svc["spec"] == {
            "type": "ClusterIP",
            "selector": {"app": "web", TRACK_LABEL: suffix},
            "ports": [{"port": 80}],
        }
        assert svc["metadata"]["namespace"] == "shop"


def test_latest_stable_and_folding() -> None:
    latest = by_name(compose(NEW, STABLE, "latest", 0))
    assert "Deployment/web-canary" not in latest
    assert (image(latest["Deployment/web"]), track(latest["Deployment/web"])) == ("v2", "stable")
    stable = by_name(compose(NEW, STABLE, "stable", 0))["Deployment/web"]
    assert (image(stable), stable["spec"]["replicas"]) == ("v1", 10)  # replicas of the latest
    folding = by_name(compose(NEW, STABLE, "folding", 50))
    assert (image(folding["Deployment/web"]), folding["Deployment/web"]["spec"]["replicas"]) == (
        "v2",
        10,
    )
    assert folding["Deployment/web-canary"]["spec"]["replicas"] == 5


def test_a_deployment_new_in_this_release_goes_out_as_it_is() -> None:
    out = by_name(compose([deployment("v1", name="api")], STABLE, "split", 50))
    assert list(out) == ["Deployment/api"]
    assert out["Deployment/api"]["spec"]["replicas"] == 10


def test_the_inputs_are_not_changed() -> None:
    before = [deployment("v2"), dict(SERVICE)]
    compose(before, STABLE, "split", 50)
    assert before == [deployment("v2"), SERVICE]


def test_templates_compare_without_the_track() -> None:
    tracked = by_name(compose([deployment("v1")], {}, "latest", 0))["Deployment/web"]
    fields = DEPLOYMENTS[DEPLOYMENT]
    assert template_of(tracked, fields) == template_of(deployment("v1"), fields)
    assert template_of(deployment("v1"), fields) != template_of(deployment("v2"), fields)


def test_a_service_selecting_on_the_track_is_refused() -> None:
    bad = {**SERVICE, "spec": {"selector": {"app": "web", TRACK_LABEL: "stable"}}}
    with pytest.raises(CanaryError, match=r"Service web: its selector names propagator\.io/track"):
        compose([bad], {}, "latest", 0)


def test_a_service_name_too_long_for_its_track_copies_is_refused() -> None:
    long = {**SERVICE, "metadata": {"name": "s" * 60}}
    with pytest.raises(CanaryError, match="longer than 63 characters"):
        compose([long], {}, "latest", 0)


NGINX_CANARY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {
        "name": "web-canary",
        "annotations": {"nginx.ingress.kubernetes.io/canary": "true"},
    },
    "spec": {"rules": []},
}
PLAIN_INGRESS = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}}
ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "web"},
    "spec": {
        "rules": [
            {"backendRefs": [{"name": "web", "port": 80}, {"name": "elsewhere", "port": 80}]},
            {"filters": []},
        ]
    },
}


def weights(objects: list[dict[str, Any]]) -> Any:
    out = by_name(objects)
    return (
        out["Ingress/web-canary"]["metadata"]["annotations"].get(
            "nginx.ingress.kubernetes.io/canary-weight"
        ),
        out["HTTPRoute/web"]["spec"]["rules"][0]["backendRefs"],
    )


def test_routers_follow_the_step_exactly() -> None:
    objects = [*NEW, NGINX_CANARY, PLAIN_INGRESS, ROUTE]
    assert weights(compose(objects, STABLE, "split", 30)) == (
        "30",
        [
            {"name": "web-stable", "port": 80, "weight": 70},
            {"name": "web-canary", "port": 80, "weight": 30},
            {"name": "elsewhere", "port": 80},  # not a Service of the application
        ],
    )
    assert weights(compose(objects, STABLE, "folding", 100))[1][1]["weight"] == 100
    # no canary running there: the canary Ingress gets nothing, the route is as written
    for mode in ("latest", "stable"):
        got = weights(compose(objects, STABLE, mode, 30))
        assert got == ("0", ROUTE["spec"]["rules"][0]["backendRefs"])  # type: ignore[index]
    assert by_name(compose(objects, STABLE, "split", 30))["Ingress/i"] == PLAIN_INGRESS


POOLS = {
    ("apps.example.com/v1", "WorkerPool"): CanaryFields("/spec/workers", "/spec/pod", None),
}


def pool(image: str, workers: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "WorkerPool",
        "metadata": {"name": "pool"},
        "spec": {
            "workers": workers,
            "pod": {"metadata": {"labels": {"app": "pool"}}, "spec": {"image": image}},
        },
    }


def test_any_kind_whose_rules_say_so_runs_as_two_copies() -> None:
    out = compose([pool("v2")], {"pool": pool("v1")}, "split", 25, POOLS)
    stable, canary = out
    assert (stable["metadata"]["name"], canary["metadata"]["name"]) == ("pool", "pool-canary")
    assert (stable["spec"]["workers"], canary["spec"]["workers"]) == (3, 1)
    assert stable["spec"]["pod"]["spec"]["image"] == "v1"
    assert canary["spec"]["pod"]["spec"]["image"] == "v2"
    assert stable["spec"]["pod"]["metadata"]["labels"][TRACK_LABEL] == "stable"
    assert canary["spec"]["pod"]["metadata"]["labels"][TRACK_LABEL] == "canary"
    # without the rule's canaryCopies, the kind goes out as it is
    assert compose([pool("v2")], {"pool": pool("v1")}, "split", 25) == [pool("v2")]
