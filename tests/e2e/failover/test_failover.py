"""Failover on the real hub and members: replicas leave a member whose API server stops,
gracefully, and what ran there goes once it answers again; a short outage moves nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from fleet.local import HUB
from fleet.local.kwok import UNREADY_ANNOTATION
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import deployment
from tests.e2e.outage import all_back, back, stopped, tainted
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    condition,
    create,
    delete_ap,
    get_ap,
    wait_ap,
)
from tests.e2e.waiting import eventually

NAMESPACES = ("evict", "replace", "flap", "failback", "sick-off", "sick-on", "rebalance")
"""One per test, each with one application ``web``."""


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("failover"), ENV) as controller:
        yield controller
        _clean_up(fleet)


def _clean_up(fleet: Fleet) -> None:
    """Delete the applications, and what the members' garbage collectors leave behind: a
    member's collector lags for minutes after its API server restarts (pods of a removed
    Deployment linger), and the tests that follow count the members' pods."""
    all_back(fleet)
    made = [ns for ns in NAMESPACES if not ap_gone(fleet, ns, "web")]
    for namespace in made:
        delete_ap(fleet, namespace, "web")
    for namespace in made:
        eventually(lambda ns=namespace: ap_gone(fleet, ns, "web") or None, f"{namespace}/web gone")  # type: ignore[misc]
    for cluster in MEMBERS:
        for namespace in made:
            fleet.apps(cluster).delete_collection_namespaced_replica_set(namespace)
            fleet.core(cluster).delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            eventually(
                lambda c=cluster, ns=namespace: (
                    not fleet.core(c).list_namespaced_pod(ns).items  # type: ignore[misc]
                    or None
                ),
                f"no pods left in {namespace} on {cluster}",
            )


def _placed(app: dict[str, Any]) -> dict[str, int]:
    return {
        p["cluster"]: p.get("replicas") for p in (app.get("status") or {}).get("placement") or []
    }


def _available(app: dict[str, Any]) -> bool:
    return condition(app, "Available").get("status") == "True"


def _ready_pods(fleet: Fleet, cluster: str, namespace: str) -> set[str]:
    pods = fleet.core(cluster).list_namespaced_pod(namespace, label_selector="app=web").items
    return {
        p.metadata.name
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    }


def _app(namespace: str, replicas: int, placement: dict[str, Any], tolerate: str) -> dict[str, Any]:
    web = deployment("web", namespace, "nginx:1.27", replicas)
    for c in web["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": "10m"}}
    return application(
        "web", namespace, [web], placement=placement, failover={"clusterUnreachableAfter": tolerate}
    )


def test_divided_replicas_leave_a_member_that_stopped_and_come_off_it_when_it_returns(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    create(fleet, _app("evict", 12, {"replicas": {"mode": "Divided"}}, "2s"))
    wait_ap(
        fleet,
        "evict",
        "web",
        "4:4:4 available",
        lambda a: _placed(a) == dict.fromkeys(MEMBERS, 4) and _available(a),
    )
    survivors, victim = MEMBERS[:2], MEMBERS[2]
    before = {c: _ready_pods(fleet, c, "evict") for c in survivors}
    lost = time.monotonic()
    with stopped(fleet, victim):
        wait_ap(
            fleet,
            "evict",
            "web",
            "6:6 available without the stopped member",
            lambda a: _placed(a) == dict.fromkeys(survivors, 6) and _available(a),
        )
        print(
            f"member stopped -> 12 replicas Available on the others: {time.monotonic() - lost:.1f}s"
        )

        def removing(app: dict[str, Any]) -> bool:
            line = next(c for c in app["status"]["clusters"] if c["name"] == victim)
            return "evicting" not in line and line.get("lastError", "").startswith(
                "removing once it answers: not Ready for"
            )

        # the replacement is Available: what ran on the victim goes, once it answers
        wait_ap(fleet, "evict", "web", f"{victim} being removed", removing)
        for cluster in survivors:

            def six(c: str = cluster) -> set[str] | None:
                pods = _ready_pods(fleet, c, "evict")
                return pods if len(pods) == 6 else None

            now = eventually(six, f"6 ready pods on {cluster}")
            assert before[cluster] <= now, f"{cluster}: a running pod was replaced"
        assert (
            controller.scrape()[
                f'propagator_evictions_total{{cluster="{victim}",reason="unreachable"}}'
            ]
            == 1.0
        )

    # back: what ran there is removed (it is not given replicas back by itself: a Divided
    # application may place it again, with 0 replicas). Its pods then go as the member's
    # own garbage collector gets to them.
    def removed() -> bool | None:
        left = fleet.apps(victim).list_namespaced_deployment("evict").items
        return all(d.spec.replicas == 0 for d in left) or None

    eventually(removed, f"no replicas asked of {victim}")
    assert sum(v or 0 for v in _placed(get_ap(fleet, "evict", "web")).values()) == 12


def test_a_duplicated_application_gets_a_replacement_cluster(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    create(fleet, _app("replace", 2, {"maxClusters": 2}, "2s"))
    first = wait_ap(
        fleet, "replace", "web", "on two members", lambda a: len(_placed(a)) == 2 and _available(a)
    )
    victim = sorted(_placed(first))[0]
    spare = next(c for c in MEMBERS if c not in _placed(first))
    with stopped(fleet, victim):
        wait_ap(
            fleet,
            "replace",
            "web",
            f"{spare} takes over",
            lambda a: spare in _placed(a) and victim not in _placed(a) and _available(a),
        )
    eventually(
        lambda: not fleet.apps(victim).list_namespaced_deployment("replace").items or None,
        f"the Deployment removed from {victim} once it answers",
    )


def test_an_outage_shorter_than_the_toleration_moves_nothing(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    create(fleet, _app("flap", 6, {"replicas": {"mode": "Divided"}}, "120s"))
    wait_ap(
        fleet,
        "flap",
        "web",
        "2:2:2",
        lambda a: _placed(a) == dict.fromkeys(MEMBERS, 2) and _available(a),
    )
    victim = MEMBERS[1]
    with stopped(fleet, victim):
        eventually(lambda: tainted(fleet, victim) or None, f"{victim} tainted not-ready")
    wait_ap(fleet, "flap", "web", "available again", _available)
    assert _placed(get_ap(fleet, "flap", "web")) == dict.fromkeys(MEMBERS, 2)


def test_failback_when_ready_returns_the_replicas_to_a_member_that_isback(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    app = _app("failback", 6, {"replicas": {"mode": "Divided"}}, "2s")
    app["spec"]["failover"].update(failback="WhenReady", failbackAfter="3s")
    create(fleet, app)
    even = dict.fromkeys(MEMBERS, 2)
    wait_ap(fleet, "failback", "web", "2:2:2", lambda a: _placed(a) == even and _available(a))
    victim = MEMBERS[0]
    with stopped(fleet, victim):
        gone = wait_ap(
            fleet,
            "failback",
            "web",
            "evicted",
            lambda a: victim not in _placed(a) and _available(a),
        )
        assert [e["cluster"] for e in gone["status"]["evicted"]] == [victim]
    back = wait_ap(
        fleet, "failback", "web", "2:2:2 again", lambda a: _placed(a) == even and _available(a)
    )
    assert back["status"].get("evicted") == []


def _unready_on(cluster: str) -> list[dict[str, Any]]:
    """An override: the pods on ``cluster`` run and never become Ready (kwok's stage)."""
    patch = {
        "op": "add",
        "path": "/spec/template/metadata/annotations",
        "value": {UNREADY_ANNOTATION: "true"},
    }
    return [{"clusterNames": [cluster], "patches": [patch]}]


def test_an_application_unhealthy_on_one_member_is_moved_off_it_only_with_application_failover(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    victim, others = MEMBERS[2], MEMBERS[:2]
    for namespace, application_failover in (
        ("sick-off", None),
        # Long enough for the healthy members' pods to become Available on a loaded CI
        # machine (with 3s, one run evicted a healthy member whose pods took longer).
        ("sick-on", {"unhealthyAfter": "10s"}),
    ):
        app = _app(namespace, 6, {"replicas": {"mode": "Divided"}}, "300s")
        app["spec"]["overrides"] = _unready_on(victim)
        if application_failover is not None:
            app["spec"]["failover"]["application"] = application_failover
        create(fleet, app)
    moved = wait_ap(
        fleet,
        "sick-on",
        "web",
        f"moved off {victim}",
        lambda a: _placed(a) == dict.fromkeys(others, 3) and _available(a),
    )
    [evicted] = moved["status"]["evicted"]
    assert (evicted["cluster"], evicted["reason"]) == (victim, "ApplicationUnhealthy")
    for cluster in others:
        eventually(
            lambda c=cluster: len(_ready_pods(fleet, c, "sick-on")) == 3 or None,  # type: ignore[misc]
            f"3 ready pods on {cluster}",
        )
    eventually(
        lambda: not fleet.apps(victim).list_namespaced_deployment("sick-on").items or None,
        f"the Deployment removed from {victim} once the replacement is Available",
    )
    # Without application failover, the same application, as long unhealthy, stays.
    stayed = get_ap(fleet, "sick-off", "web")
    assert _placed(stayed) == dict.fromkeys(MEMBERS, 2)
    assert condition(stayed, "Available")["status"] == "False"
    assert fleet.apps(victim).list_namespaced_deployment("sick-off").items
    assert (
        controller.scrape()[f'propagator_evictions_total{{cluster="{victim}",reason="unhealthy"}}']
        == 1.0
    )


def test_failback_never_stays_and_a_rebalance_moves_back_gracefully(
    fleet: Fleet, controller: Controller
) -> None:
    all_back(fleet, controller)
    namespace, victim, survivors = "rebalance", MEMBERS[0], MEMBERS[1:]
    create(fleet, _app(namespace, 6, {"replicas": {"mode": "Divided"}}, "2s"))
    even = dict.fromkeys(MEMBERS, 2)
    wait_ap(fleet, namespace, "web", "2:2:2", lambda a: _placed(a) == even and _available(a))
    with stopped(fleet, victim):
        wait_ap(
            fleet,
            namespace,
            "web",
            "3:3 without the stopped member",
            lambda a: victim not in _placed(a) and _available(a),
        )
    # failback Never: the member is back and Ready, and gets nothing back by itself
    eventually(lambda: back(fleet, victim) or None, f"{victim} back")
    returned = wait_ap(fleet, namespace, "web", "available", _available)
    assert {c: n for c, n in _placed(returned).items() if n} == dict.fromkeys(survivors, 3)
    # The victim's pods will never be Ready, so the rebalance's moves wait for the grace
    # period: meanwhile the survivors keep their 3 replicas.
    custom: Any = k8s.CustomObjectsApi(fleet.api(HUB))
    custom.patch_namespaced_custom_object(
        "propagator.io",
        "v1alpha1",
        namespace,
        "applicationpropagations",
        "web",
        {"spec": {"overrides": _unready_on(victim), "failover": {"gracePeriod": "30s"}}},
    )
    # ...and the controller has seen the member back (its snapshot may trail the
    # MemberCluster by a moment: a member it still holds as NotReady keeps its 0)
    wait_ap(
        fleet,
        namespace,
        "web",
        f"planned with {victim} schedulable",
        lambda a: "kept where already placed" not in condition(a, "Scheduled")["message"],
    )
    done = kubectl_propagator(fleet, "-n", namespace, "rebalance", "web", "--wait")
    assert done.returncode == 0, done.stderr
    assert "placed again: " in done.stdout
    placed_now = get_ap(fleet, namespace, "web")
    victim_mc: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", victim
    )
    assert _placed(placed_now) == even, (
        condition(placed_now, "Scheduled"),
        victim_mc.get("spec"),
        victim_mc.get("status"),
    )

    def asked(cluster: str) -> int | None:
        [web] = fleet.apps(cluster).list_namespaced_deployment(namespace).items or [None]
        return web.spec.replicas if web is not None else None

    eventually(lambda: asked(victim) == 2 or None, f"2 replicas asked of {victim}")
    lines = {c["name"]: c for c in get_ap(fleet, namespace, "web")["status"]["clusters"]}
    assert [asked(c) for c in survivors] == [3, 3], lines  # kept: the victim runs none Ready
    assert lines[survivors[0]]["evicting"]["reason"] == "Rebalance"
    # the grace period passes: the survivors scale down to their placement
    for cluster in survivors:
        eventually(lambda c=cluster: asked(c) == 2 or None, f"{cluster} down to 2")  # type: ignore[misc]
    assert [e.reason for e in _events(fleet, namespace)].count("Rebalanced") == 1


def _events(fleet: Fleet, namespace: str) -> list[Any]:
    return list(fleet.core(HUB).list_namespaced_event(namespace).items)
