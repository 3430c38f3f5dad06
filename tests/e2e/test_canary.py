"""Canary releases on the real hub and three members (kwok pods that really become Ready):
the steps' replica split as the members' EndpointSlices see it, the gates, promotion and
fold-back, and a canary that never becomes healthy rolling back by itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from api.rollout import TRACK_LABEL
from fleet.local import HUB
from fleet.local.kwok import UNREADY_ANNOTATION
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import deployment, service
from tests.e2e.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    kubectl,
    update_spec,
    wait_ap,
)
from tests.e2e.waiting import eventually

CANARY_CLUSTER = MEMBERS[0]
OTHERS = MEMBERS[1:]
NAMESPACES = ("canary-steps", "canary-rollback")


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    members = k8s.CustomObjectsApi(fleet.api(HUB))
    label = {"metadata": {"labels": {"canary": "yes"}}}
    members.patch_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", CANARY_CLUSTER, label
    )
    with running(fleet, tmp_path_factory.mktemp("canary"), ENV) as controller:
        yield controller
        for namespace in NAMESPACES:
            if not ap_gone(fleet, namespace, "web"):
                delete_ap(fleet, namespace, "web")
                eventually(lambda ns=namespace: ap_gone(fleet, ns, "web") or None, "ap gone")  # type: ignore[misc]
    unlabel = {"metadata": {"labels": {"canary": None}}}
    members.patch_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", CANARY_CLUSTER, unlabel
    )


def _app(
    namespace: str, replicas: int, steps: list[dict[str, Any]], **canary: Any
) -> dict[str, Any]:
    web = deployment("web", namespace, "nginx:1.27", replicas)
    return application(
        "web",
        namespace,
        [web, service("web", namespace)],
        canary={"clusterSelector": {"matchLabels": {"canary": "yes"}}, "steps": steps, **canary},
    )


def _canary(app: dict[str, Any]) -> dict[str, Any]:
    return (app.get("status") or {}).get("canary") or {}


def _deployments(fleet: Fleet, cluster: str, namespace: str) -> dict[str, tuple[str, int]]:
    """name -> (image, replicas asked) of the member's Deployments."""
    return {
        d.metadata.name: (d.spec.template.spec.containers[0].image, d.spec.replicas)
        for d in fleet.apps(cluster).list_namespaced_deployment(namespace).items
        if d.metadata.deletion_timestamp is None
    }


def _ready_endpoints(fleet: Fleet, cluster: str, namespace: str, service: str) -> Counter[str]:
    """Ready endpoints of ``service`` on the member, by the track of their pods: the
    traffic split as the member's own networking sees it."""
    pods = {
        p.metadata.name: (p.metadata.labels or {}).get(TRACK_LABEL, "")
        for p in fleet.core(cluster).list_namespaced_pod(namespace).items
    }
    slices = k8s.DiscoveryV1Api(fleet.api(cluster)).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    out: Counter[str] = Counter()
    for s in slices.items:
        for e in s.endpoints or []:
            if e.conditions and e.conditions.ready and e.target_ref is not None:
                out[pods.get(e.target_ref.name, "?")] += 1
    return out


def _split_on_the_canary_cluster(
    fleet: Fleet, namespace: str, stable: int, canary: int, old: str, new: str
) -> None:
    want = {"web": (old, stable), "web-canary": (new, canary)}
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, namespace) == want or None,
        f"{CANARY_CLUSTER}: {want}",
    )
    split = Counter({"stable": stable, "canary": canary}) - Counter()  # drop zeros
    eventually(
        lambda: _ready_endpoints(fleet, CANARY_CLUSTER, namespace, "web") == split or None,
        f"{CANARY_CLUSTER}: Service web's ready endpoints split {dict(split)}",
    )
    # the explicit routes select one track each
    for track, count in split.items():
        eventually(
            lambda t=track, n=count: (  # type: ignore[misc]
                _ready_endpoints(fleet, CANARY_CLUSTER, namespace, f"web-{t}") == Counter({t: n})
                or None
            ),
            f"Service web-{track}: {count} ready endpoints",
        )


def _annotate(fleet: Fleet, namespace: str, value: str) -> None:
    kubectl(
        fleet,
        "annotate",
        "--overwrite",
        "-n",
        namespace,
        "ap/web",
        f"propagator.io/canary-action={value}",
    )


def test_steps_split_replicas_and_traffic_then_promote_everywhere(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "canary-steps"
    steps = [{"weight": 10, "manual": True}, {"weight": 50, "manual": True}, {"weight": 100}]
    create(fleet, _app(ns, 10, steps))
    first = wait_ap(
        fleet,
        ns,
        "web",
        "first release Succeeded",
        lambda a: _canary(a).get("phase") == "Succeeded",
    )
    assert "first release" in _canary(first)["message"]
    for cluster in MEMBERS:
        eventually(
            lambda c=cluster: (  # type: ignore[misc]
                _ready_endpoints(fleet, c, ns, "web") == Counter({"stable": 10}) or None
            ),
            f"{cluster}: 10 ready stable endpoints",
        )
    generations = {
        c: fleet.apps(c).read_namespaced_deployment("web", ns).metadata.generation for c in OTHERS
    }

    update_spec(
        fleet,
        ns,
        "web",
        lambda s: s["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
            0
        ].update(image="nginx:1.28"),
    )
    gate = wait_ap(
        fleet,
        ns,
        "web",
        "step 1 at its gate",
        lambda a: (_canary(a).get("phase"), _canary(a).get("step")) == ("Paused", 0),
    )
    assert gate["status"]["canary"]["weight"] == 10
    assert gate["status"]["canary"]["clusters"][0]["name"] == CANARY_CLUSTER
    _split_on_the_canary_cluster(fleet, ns, 9, 1, "nginx:1.27", "nginx:1.28")
    for cluster in OTHERS:  # nothing of the new template there yet
        assert _deployments(fleet, cluster, ns) == {"web": ("nginx:1.27", 10)}
    assert " 10 " in kubectl(fleet, "get", "ap", "-n", ns, "web")  # the CANARY column

    _annotate(fleet, ns, "promote")  # the gate opens: step 2
    wait_ap(
        fleet,
        ns,
        "web",
        "step 2 at its gate",
        lambda a: (_canary(a).get("phase"), _canary(a).get("step")) == ("Paused", 1),
    )
    _split_on_the_canary_cluster(fleet, ns, 5, 5, "nginx:1.27", "nginx:1.28")
    status = kubectl_propagator(fleet, "-n", ns, "canary", "status", "web")
    assert status.returncode == 0, status.stderr
    assert "Paused: step 2 of 3, weight 50" in status.stdout
    assert f"{CANARY_CLUSTER}   50" in status.stdout

    done = kubectl_propagator(fleet, "-n", ns, "canary", "promote", "web", "--wait")
    assert done.returncode == 0, done.stderr
    final = wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    assert final["status"]["canary"]["stableRevision"] == gate["status"]["canary"]["canaryRevision"]
    for cluster in MEMBERS:
        eventually(
            lambda c=cluster: (  # type: ignore[misc]
                _deployments(fleet, c, ns) == {"web": ("nginx:1.28", 10)} or None
            ),
            f"{cluster}: the new template, one Deployment",
        )
        eventually(
            lambda c=cluster: (  # type: ignore[misc]
                _ready_endpoints(fleet, c, ns, "web") == Counter({"stable": 10}) or None
            ),
            f"{cluster}: 10 ready endpoints of the new template",
        )
    for cluster in OTHERS:  # one rollout each, after the canary passed
        generation = fleet.apps(cluster).read_namespaced_deployment("web", ns).metadata.generation
        assert generation == generations[cluster] + 1
    reasons = [e.reason for e in fleet.core(HUB).list_namespaced_event(ns).items]
    for reason in ("CanaryStep", "CanaryPaused", "CanaryPromoting", "CanarySucceeded"):
        assert reason in reasons
    metrics = controller.scrape()
    assert (
        metrics[f'propagator_canary_phase{{application="web",namespace="{ns}",phase="Succeeded"}}']
        == 1.0
    )


def test_a_canary_never_ready_rolls_back_by_itself(fleet: Fleet, controller: Controller) -> None:
    ns = "canary-rollback"
    create(fleet, _app(ns, 4, [{"weight": 50}], analysis={"progressDeadlineSeconds": 15}))
    wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    eventually(
        lambda: (
            _ready_endpoints(fleet, CANARY_CLUSTER, ns, "web") == Counter({"stable": 4}) or None
        ),
        "4 ready stable endpoints",
    )
    generations = {
        c: fleet.apps(c).read_namespaced_deployment("web", ns).metadata.generation for c in OTHERS
    }

    def broken(spec: dict[str, Any]) -> None:
        template = spec["resources"]["manifests"][0]["spec"]["template"]
        template["metadata"]["annotations"] = {UNREADY_ANNOTATION: "true"}
        template["spec"]["containers"][0]["image"] = "nginx:broken"

    update_spec(fleet, ns, "web", broken)
    wait_ap(fleet, ns, "web", "canary running", lambda a: _canary(a).get("phase") == "Progressing")
    eventually(
        lambda: (
            _deployments(fleet, CANARY_CLUSTER, ns).get("web-canary") == ("nginx:broken", 2) or None
        ),
        "the canary copy runs",
    )
    rolled = wait_ap(
        fleet, ns, "web", "RolledBack", lambda a: _canary(a).get("phase") == "RolledBack"
    )
    assert "not healthy 15s after the step began on" in rolled["status"]["canary"]["message"]
    # the stable copy is whole again, the canary copy gone
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, ns) == {"web": ("nginx:1.27", 4)} or None,
        "the stable copy whole, no canary copy",
    )
    eventually(
        lambda: (
            _ready_endpoints(fleet, CANARY_CLUSTER, ns, "web") == Counter({"stable": 4}) or None
        ),
        "4 ready stable endpoints again",
    )
    for cluster in OTHERS:  # nothing of the new template reached them
        assert _deployments(fleet, cluster, ns) == {"web": ("nginx:1.27", 4)}
        generation = fleet.apps(cluster).read_namespaced_deployment("web", ns).metadata.generation
        assert generation == generations[cluster]
    assert controller.scrape()['propagator_canary_rollbacks_total{reason="ProgressDeadline"}'] >= 1
    assert "CanaryRolledBack" in [e.reason for e in fleet.core(HUB).list_namespaced_event(ns).items]

    # the failed revision is not tried again by itself; retry runs it again, abort ends it
    retried = kubectl_propagator(fleet, "-n", ns, "canary", "retry", "web", "--wait")
    assert retried.returncode == 0, retried.stderr
    assert "Progressing" in retried.stdout
    eventually(
        lambda: "web-canary" in _deployments(fleet, CANARY_CLUSTER, ns) or None,
        "the canary copy back",
    )
    _annotate(fleet, ns, "abort")
    wait_ap(fleet, ns, "web", "Aborted", lambda a: _canary(a).get("phase") == "Aborted")
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, ns) == {"web": ("nginx:1.27", 4)} or None,
        "aborted: the stable copy whole",
    )
