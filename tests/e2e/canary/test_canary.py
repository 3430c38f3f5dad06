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
from tests.e2e.prometheus import Exporter, Prometheus, scraped
from tests.e2e.prometheus import running as prometheus_running
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    condition,
    create,
    delete_ap,
    get_ap,
    kubectl,
    update_spec,
    wait_ap,
)
from tests.e2e.tools import built
from tests.e2e.waiting import eventually

CANARY_CLUSTER = MEMBERS[0]
OTHERS = MEMBERS[1:]
NAMESPACES = (
    "canary-steps",
    "canary-rollback",
    "canary-restart",
    "canary-routes",
    "canary-analysis",
)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, Exporter]]:
    with prometheus_running(tmp_path_factory.mktemp("prometheus")) as running_:
        yield running_


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet,
    joined: list[str],
    tmp_path_factory: pytest.TempPathFactory,
    prometheus: tuple[Prometheus, Exporter],
) -> Iterator[Controller]:
    members = k8s.CustomObjectsApi(fleet.api(HUB))
    label = {"metadata": {"labels": {"canary": "yes"}}}
    members.patch_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", CANARY_CLUSTER, label
    )
    env = {**ENV, "PROPAGATOR_ANALYSIS_ADDRESSES": prometheus[0].address}
    with running(fleet, tmp_path_factory.mktemp("canary"), env) as controller:
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
    shown = kubectl_propagator(fleet, "status", "web", "-n", ns)
    assert shown.returncode == 0, shown.stderr
    for cluster in MEMBERS:
        assert any(line.split()[:2] == [cluster, "yes"] for line in shown.stdout.splitlines())
    assert "canary: Succeeded: first release" in shown.stdout
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


def _image(spec: dict[str, Any], image: str) -> None:
    spec["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = image


def _pods(fleet: Fleet, cluster: str, namespace: str) -> set[str]:
    return {
        p.metadata.name
        for p in fleet.core(cluster).list_namespaced_pod(namespace).items
        if p.metadata.deletion_timestamp is None
    }


def test_a_restarted_controller_resumes_at_the_step_and_a_second_change_replaces_the_canary(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "canary-restart"
    create(fleet, _app(ns, 4, [{"weight": 50, "manual": True}, {"weight": 100}]))
    wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    update_spec(fleet, ns, "web", lambda s: _image(s, "nginx:1.28"))
    gate = wait_ap(fleet, ns, "web", "at the gate", lambda a: _canary(a).get("phase") == "Paused")
    _split_on_the_canary_cluster(fleet, ns, 2, 2, "nginx:1.27", "nginx:1.28")
    pods = _pods(fleet, CANARY_CLUSTER, ns)
    stable_generation = (
        fleet.apps(CANARY_CLUSTER).read_namespaced_deployment("web", ns).metadata.generation
    )

    controller.kill()
    controller.start()
    # a change that is not a workload's: the restarted controller must plan, at the same step
    update_spec(
        fleet,
        ns,
        "web",
        lambda s: s["resources"]["manifests"].append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra"}}
        ),
    )
    generation = get_ap(fleet, ns, "web")["metadata"]["generation"]
    resumed = wait_ap(
        fleet,
        ns,
        "web",
        "planned after the restart",
        lambda a: (
            a["status"].get("observedGeneration") == generation
            and condition(a, "Applied").get("status") == "True"
        ),
    )
    assert _canary(resumed)["phase"] == "Paused"
    assert _canary(resumed)["canaryRevision"] == _canary(gate)["canaryRevision"]
    assert fleet.core(CANARY_CLUSTER).read_namespaced_config_map("extra", ns) is not None
    assert _pods(fleet, CANARY_CLUSTER, ns) == pods  # no extra or missing pods
    assert _deployments(fleet, CANARY_CLUSTER, ns) == {
        "web": ("nginx:1.27", 2),
        "web-canary": ("nginx:1.28", 2),
    }

    # a second change while the canary runs: a new canary; the stable copy is untouched
    update_spec(fleet, ns, "web", lambda s: _image(s, "nginx:1.29"))
    wait_ap(
        fleet,
        ns,
        "web",
        "a new canary at the gate",
        lambda a: (
            _canary(a).get("phase") == "Paused"
            and _canary(a).get("canaryRevision") not in (None, _canary(gate)["canaryRevision"])
        ),
    )
    _split_on_the_canary_cluster(fleet, ns, 2, 2, "nginx:1.27", "nginx:1.29")
    stable = fleet.apps(CANARY_CLUSTER).read_namespaced_deployment("web", ns)
    assert stable.metadata.generation == stable_generation

    aborted = kubectl_propagator(fleet, "-n", ns, "canary", "abort", "web", "--wait")
    assert aborted.returncode == 0, aborted.stderr
    assert "Aborted" in aborted.stdout
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, ns) == {"web": ("nginx:1.27", 4)} or None,
        "aborted: the stable copy whole",
    )


def _install_http_routes(fleet: Fleet, cluster: str) -> None:
    """HTTPRoute on the member, from the Gateway API release pinned in hack/."""
    crds = built("gateway-api.sh")
    kubectl(
        fleet,
        "apply",
        "--server-side",
        "-f",
        f"{crds}/gateway.networking.k8s.io_httproutes.yaml",
        cluster=cluster,
    )

    def established() -> bool | None:
        # Not `kubectl wait`: on a CRD created a moment ago, whose status has no conditions
        # yet, it fails at once (".status.conditions accessor error") instead of waiting.
        status = kubectl(
            fleet,
            "get",
            "crd/httproutes.gateway.networking.k8s.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Established')].status}",
            cluster=cluster,
        )
        return status.strip() == "True" or None

    eventually(established, "the HTTPRoute CRD established")


def test_ingress_and_httproute_weights_follow_every_step(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "canary-routes"
    _install_http_routes(fleet, CANARY_CLUSTER)
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "web-canary",
            "namespace": ns,
            "annotations": {"nginx.ingress.kubernetes.io/canary": "true"},
        },
        "spec": {
            "ingressClassName": "nginx",
            "defaultBackend": {"service": {"name": "web-canary", "port": {"number": 80}}},
        },
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "gateway"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    }
    app = _app(ns, 4, [{"weight": 25, "manual": True}, {"weight": 100}])
    app["spec"]["resources"]["manifests"] += [ingress, route]
    create(fleet, app)  # only the canary cluster serves HTTPRoute: placed there alone
    wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    routes = k8s.CustomObjectsApi(fleet.api(CANARY_CLUSTER))
    net = k8s.NetworkingV1Api(fleet.api(CANARY_CLUSTER))

    def routing() -> tuple[str | None, list[dict[str, Any]]]:
        live: Any = net.read_namespaced_ingress("web-canary", ns)
        weight = (live.metadata.annotations or {}).get("nginx.ingress.kubernetes.io/canary-weight")
        got: Any = routes.get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", ns, "httproutes", "web"
        )
        return weight, [
            {k: r[k] for k in ("name", "weight") if k in r}
            for r in got["spec"]["rules"][0]["backendRefs"]
        ]

    as_written = ("0", [{"name": "web", "weight": 1}])  # the API server defaults weight 1
    eventually(lambda: routing() == as_written or None, "routes as written, no canary")
    update_spec(fleet, ns, "web", lambda s: _image(s, "nginx:1.28"))
    wait_ap(fleet, ns, "web", "at the gate", lambda a: _canary(a).get("phase") == "Paused")
    split = ("25", [{"name": "web-stable", "weight": 75}, {"name": "web-canary", "weight": 25}])
    eventually(lambda: routing() == split or None, "routes at 25")
    _annotate(fleet, ns, "promote")
    wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    eventually(lambda: routing() == as_written or None, "routes as written again")


def test_metric_analysis_on_a_real_prometheus_advances_or_rolls_back(
    fleet: Fleet, controller: Controller, prometheus: tuple[Prometheus, Exporter]
) -> None:
    server, exporter = prometheus
    ns = "canary-analysis"
    series = f'canary_error_ratio{{cluster="{CANARY_CLUSTER}"}}'
    exporter.samples[series] = 0.01
    check = {
        "name": "error-ratio",
        "address": server.address,
        "query": 'max(canary_error_ratio{cluster="{{ cluster.name }}"})',
        "max": 0.05,
        "interval": "5s",
        "failureLimit": 1,
    }
    create(fleet, _app(ns, 4, [{"weight": 50}, {"weight": 100}], analysis={"metrics": [check]}))
    wait_ap(fleet, ns, "web", "Succeeded", lambda a: _canary(a).get("phase") == "Succeeded")
    eventually(lambda: scraped(server, series, 0.01) or None, "the good ratio scraped")

    # a good ratio: the analysis holds at every step, the release goes out
    update_spec(fleet, ns, "web", lambda s: _image(s, "nginx:1.28"))
    released = wait_ap(
        fleet,
        ns,
        "web",
        "released",
        lambda a: (
            _canary(a).get("phase") == "Succeeded"
            and _canary(a).get("stableRevision") == _canary(a).get("canaryRevision")
        ),
    )
    assert _canary(released)["stableRevision"] is not None
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, ns) == {"web": ("nginx:1.28", 4)} or None,
        "the new template everywhere",
    )

    # a bad ratio: the next release rolls back, naming the check and the cluster
    exporter.samples[series] = 0.5
    eventually(lambda: scraped(server, series, 0.5) or None, "the bad ratio scraped")
    update_spec(fleet, ns, "web", lambda s: _image(s, "nginx:1.29"))
    rolled = wait_ap(
        fleet, ns, "web", "RolledBack", lambda a: _canary(a).get("phase") == "RolledBack"
    )
    message = _canary(rolled)["message"]
    assert f"check error-ratio on {CANARY_CLUSTER}: 0.5 is above max 0.05" in message
    eventually(
        lambda: _deployments(fleet, CANARY_CLUSTER, ns) == {"web": ("nginx:1.28", 4)} or None,
        "back to the stable copy",
    )
    for cluster in OTHERS:
        assert _deployments(fleet, cluster, ns) == {"web": ("nginx:1.28", 4)}
    assert controller.scrape()['propagator_canary_rollbacks_total{reason="Analysis"}'] == 1.0
