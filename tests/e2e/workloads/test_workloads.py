"""Real workloads on the real members: a real HorizontalPodAutoscaler (the member's own
kube-controller-manager, reading an external metrics API) owns a propagated Deployment's
replicas across resyncs, drift heals, a controller restart and an image change; fields
released by rule or by field manager stay the member's; report-only drift waits for
``kubectl propagator sync``; a selected workload's dependencies come along and go; an
object kept on delete outlives its application."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from fleet.local import HUB
from propagator.work.objects import APP_LABEL
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import autoscaler, config_map, deployment
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    cluster_entry,
    condition,
    create,
    delete_ap,
    kubectl,
    ready_everywhere,
    update_spec,
    wait_ap,
)
from tests.e2e.waiting import eventually
from tests.e2e.workloads import metricsapi

RESYNC_S = 10.0
WORKLOAD_ENV = {**ENV, "PROPAGATOR_RESYNC_PERIOD_S": str(RESYNC_S)}
APPS = {
    "hpa-web": "web",
    "hpa-none": "web",
    "hpa-member": "web",
    "hpa-divided": "web",
    "owned": "settings",
    "report": "settings",
    "deps": "web",
    "keep": "data",
}


@pytest.fixture(scope="module")
def metrics(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[metricsapi.ExternalMetrics]:
    with metricsapi.serving(tmp_path_factory.mktemp("metrics")) as (served, address, port):
        for cluster in MEMBERS:
            metricsapi.register(fleet, cluster, address, port)
        try:
            yield served
        finally:
            for cluster in MEMBERS:
                metricsapi.unregister(fleet, cluster)


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, metrics: metricsapi.ExternalMetrics, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("workloads"), WORKLOAD_ENV) as controller:
        yield controller
        for namespace, name in APPS.items():
            if not ap_gone(fleet, namespace, name):
                delete_ap(fleet, namespace, name)
        for namespace, name in APPS.items():
            eventually(
                lambda ns=namespace, n=name: ap_gone(fleet, ns, n) or None,  # type: ignore[misc]
                f"{namespace}/{name} gone",
            )


# -- helpers ------------------------------------------------------------------------------


def replicas(fleet: Fleet, cluster: str, namespace: str, name: str = "web") -> int:
    return int(fleet.apps(cluster).read_namespaced_deployment(name, namespace).spec.replicas)


def generation(fleet: Fleet, cluster: str, namespace: str, name: str = "web") -> int:
    live = fleet.apps(cluster).read_namespaced_deployment(name, namespace)
    return int(live.metadata.generation)


def owners(fleet: Fleet, cluster: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """The object's managedFields on ``cluster``: fieldsV1 by manager (and subresource)."""
    if kind == "Deployment":
        live = fleet.apps(cluster).read_namespaced_deployment(name, namespace)
    else:
        live = fleet.core(cluster).read_namespaced_config_map(name, namespace)
    out: dict[str, Any] = {}
    for entry in live.metadata.managed_fields or []:
        key = entry.manager + (f"/{entry.subresource}" if entry.subresource else "")
        out[key] = entry.fields_v1
    return out


def steady(probe: Callable[[], Any], expected: Any, seconds: float, what: str) -> None:
    """``probe`` gives ``expected`` at every look for ``seconds`` (a fight between two
    writers shows as a value that flips and is put back)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen = probe()
        assert seen == expected, f"{what}: {seen}, expected {expected} throughout"
        time.sleep(0.2)


def server_side_apply(fleet: Fleet, cluster: str, obj: dict[str, Any], manager: str) -> None:
    """What another tool on the member does: its own server-side apply."""
    apply = ["apply", "--server-side", "--force-conflicts", f"--field-manager={manager}"]
    kubectl(fleet, *apply, "-f", "-", cluster=cluster, stdin=json.dumps(obj))


def config_data(fleet: Fleet, cluster: str, namespace: str, name: str) -> dict[str, str]:
    return dict(fleet.core(cluster).read_namespaced_config_map(name, namespace).data or {})


def applied(app: dict[str, Any]) -> bool:
    return condition(app, "Applied").get("status") == "True"


# -- autoscalers --------------------------------------------------------------------------


def test_an_autoscaler_in_the_manifests_owns_the_replicas_through_resyncs_heals_restarts(
    fleet: Fleet, controller: Controller, metrics: metricsapi.ExternalMetrics
) -> None:
    ns = "hpa-web"
    metrics.set(ns, "queue_depth", "50")  # five replicas' worth
    manifests = [deployment("web", ns, "nginx:1"), autoscaler("web", ns, 1, 10, "queue_depth")]
    create(fleet, application("web", ns, manifests))
    wait_ap(fleet, ns, "web", "3/3 ready", ready_everywhere)

    def scaled() -> dict[str, int]:
        return {c: replicas(fleet, c, ns) for c in MEMBERS}

    every = dict.fromkeys(MEMBERS, 5)
    eventually(lambda: scaled() == every, "the autoscalers scaled web to 5 on every member")
    for cluster in MEMBERS:  # the autoscaler holds the field; Propagator does not
        fields = owners(fleet, cluster, "Deployment", ns, "web")
        assert "f:replicas" not in fields["propagator"]["f:spec"]
        assert "f:replicas" in fields["kube-controller-manager/scale"]["f:spec"]
    generations = {c: generation(fleet, c, ns) for c in MEMBERS}

    # Resyncs: nothing is written, the replicas stay.
    steady(scaled, every, RESYNC_S + 3, "replicas across a resync")
    assert {c: generation(fleet, c, ns) for c in MEMBERS} == generations

    # A drift heal writes the image back and leaves the replicas.
    kubectl(fleet, "-n", ns, "set", "image", "deployment/web", "main=evil:1", cluster="member-1")

    def image(cluster: str) -> str:
        live = fleet.apps(cluster).read_namespaced_deployment("web", ns)
        return str(live.spec.template.spec.containers[0].image)

    eventually(lambda: image("member-1") == "nginx:1", "the image healed on member-1")
    steady(scaled, every, 3, "replicas after the heal")
    assert generation(fleet, "member-1", ns) == generations["member-1"] + 2  # set, healed

    # A restart: everything is judged again, nothing written.
    controller.stop()
    controller.start()
    eventually(lambda: controller.ready()[0] == 200, "the controller ready again")
    steady(scaled, every, 8, "replicas across a restart")
    generations = {c: generation(fleet, c, ns) for c in MEMBERS}

    # A new image still rolls out, under the autoscaler's replicas.
    def new_image(spec: dict[str, Any]) -> None:
        spec["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = (
            "nginx:2"
        )

    update_spec(fleet, ns, "web", new_image)
    eventually(lambda: all(image(c) == "nginx:2" for c in MEMBERS), "nginx:2 everywhere")
    assert scaled() == every
    # and the autoscaler keeps scaling it
    metrics.set(ns, "queue_depth", "80")
    eventually(lambda: scaled() == dict.fromkeys(MEMBERS, 8), "scaled to 8 by the autoscalers")
    steady(scaled, dict.fromkeys(MEMBERS, 8), 3, "replicas at 8")
    wait_ap(fleet, ns, "web", "3/3 ready at 8 replicas", ready_everywhere)


def test_without_an_autoscaler_a_scaled_workload_is_healed(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "hpa-none"
    create(fleet, application("web", ns, [deployment("web", ns, "nginx:1")]))
    wait_ap(fleet, ns, "web", "3/3 ready", ready_everywhere)
    kubectl(fleet, "-n", ns, "scale", "deployment/web", "--replicas=4", cluster="member-1")
    eventually(lambda: replicas(fleet, "member-1", ns) == 2, "member-1 back to 2 replicas")


def test_an_autoscaler_already_on_a_member_keeps_its_replicas_there(
    fleet: Fleet, controller: Controller, metrics: metricsapi.ExternalMetrics
) -> None:
    ns = "hpa-member"
    metrics.set(ns, "jobs", "30")
    create(fleet, application("web", ns, [deployment("web", ns, "nginx:1")]))
    wait_ap(fleet, ns, "web", "3/3 ready", ready_everywhere)
    k8s.AutoscalingV2Api(fleet.api("member-2")).create_namespaced_horizontal_pod_autoscaler(
        ns,
        autoscaler("web", ns, 1, 10, "jobs"),  # type: ignore[arg-type]
    )

    def scaled() -> dict[str, int]:
        return {c: replicas(fleet, c, ns) for c in MEMBERS}

    expected = {"member-1": 2, "member-2": 3, "member-3": 2}
    eventually(lambda: scaled() == expected, "member-2's own autoscaler scaled web to 3")
    steady(scaled, expected, RESYNC_S + 3, "replicas across a resync")

    def new_image(spec: dict[str, Any]) -> None:
        spec["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = (
            "nginx:2"
        )

    update_spec(fleet, ns, "web", new_image)
    wait_ap(fleet, ns, "web", "nginx:2 applied", lambda a: ready_everywhere(a))
    assert scaled() == expected
    live = fleet.apps("member-2").read_namespaced_deployment("web", ns)
    assert live.spec.template.spec.containers[0].image == "nginx:2"


def test_a_divided_application_divides_its_autoscalers_bounds(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "hpa-divided"
    manifests = [
        deployment("web", ns, "nginx:1", replicas=6),
        autoscaler("web", ns, 3, 9, "none-such"),
    ]
    placement = {"replicas": {"mode": "Divided"}}
    create(fleet, application("web", ns, manifests, placement=placement))
    wait_ap(fleet, ns, "web", "Applied", applied)
    scaling = k8s.AutoscalingV2Api
    for cluster in MEMBERS:
        hpa = scaling(fleet.api(cluster)).read_namespaced_horizontal_pod_autoscaler("web", ns)
        assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (1, 3), cluster
        assert replicas(fleet, cluster, ns) == 2


# -- fields the member owns -----------------------------------------------------------------


def test_fields_released_by_pointer_and_by_manager_stay_the_members(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "owned"
    settings = config_map("settings", ns, mode="a", extra="x", size="s")
    rules = [
        {"target": {"kind": "ConfigMap", "name": "settings"}, "jsonPointers": ["/data/mode"]},
        {"target": {"kind": "ConfigMap"}, "managers": ["ops-tool"]},
    ]
    create(fleet, application("settings", ns, [settings], memberOwned=rules))
    wait_ap(fleet, ns, "settings", "applied", applied)

    kubectl(fleet, "-n", ns, "patch", "configmap", "settings", "-p", '{"data":{"mode":"b"}}',
            cluster="member-1")  # fmt: skip
    theirs = config_map("settings", ns, extra="y")
    server_side_apply(fleet, "member-1", theirs, "ops-tool")
    member_1 = {"mode": "b", "extra": "y", "size": "s"}
    steady(
        lambda: config_data(fleet, "member-1", ns, "settings"),
        member_1,
        RESYNC_S + 3,
        "released fields left as the member set them",
    )

    def bigger(spec: dict[str, Any]) -> None:
        spec["resources"]["manifests"][0]["data"]["size"] = "m"

    update_spec(fleet, ns, "settings", bigger)
    eventually(
        lambda: all(config_data(fleet, c, ns, "settings")["size"] == "m" for c in MEMBERS),
        "size m everywhere",
    )
    assert config_data(fleet, "member-1", ns, "settings") == {**member_1, "size": "m"}
    # Where nobody changed it, the released field kept its value: handed over, not deleted.
    assert config_data(fleet, "member-2", ns, "settings") == {
        "mode": "a",
        "extra": "x",
        "size": "m",
    }
    ours = owners(fleet, "member-2", "ConfigMap", ns, "settings")
    assert "f:mode" not in ours["propagator"]["f:data"]
    assert "f:mode" in ours["propagator-released"]["f:data"]
    ours = owners(fleet, "member-1", "ConfigMap", ns, "settings")
    assert set(ours["propagator"]["f:data"]) == {"f:size"}


def test_a_field_propagator_keeps_cannot_be_released(fleet: Fleet, controller: Controller) -> None:
    ns = "owned-refused"
    for rule, message in [
        (
            {"jsonPointers": ["/metadata/namespace"]},
            "jsonPointers: /metadata/namespace may not be released",
        ),
        (
            {"jsonPointers": ["/spec/template/metadata/labels/propagator.io~1track"]},
            "jsonPointers: /spec/template/metadata/labels/propagator.io~1track may not be",
        ),
        ({"managers": ["propagator"]}, "Propagator's own managers"),
    ]:
        app = application("web", ns, [deployment("web", ns, "nginx:1")], memberOwned=[rule])
        with pytest.raises(k8s.ApiException) as refused:
            create(fleet, app)
        assert refused.value.status == 422
        assert message in str(refused.value.body)


# -- drift only reported ------------------------------------------------------------------


def test_reported_drift_waits_for_kubectl_propagator_sync(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "report"
    create(
        fleet,
        application("settings", ns, [config_map("settings", ns, mode="a")], driftPolicy="Report"),
    )
    wait_ap(fleet, ns, "settings", "applied", applied)
    kubectl(fleet, "-n", ns, "patch", "configmap", "settings", "-p", '{"data":{"mode":"b"}}',
            cluster="member-1")  # fmt: skip

    def reported(app: dict[str, Any]) -> bool:
        drift = cluster_entry(app, "member-1").get("drift") or {}
        return drift.get("objects") == 1 and drift.get("since") is not None

    app = wait_ap(fleet, ns, "settings", "drift on member-1 reported", reported)
    assert cluster_entry(app, "member-1")["drift"]["names"] == ["v1 ConfigMap report/settings"]
    assert not cluster_entry(app, "member-2").get("drift")
    events = fleet.core(HUB).list_namespaced_event(ns).items
    assert any(e.reason == "DriftDetected" and "member-1" in e.message for e in events)
    series = 'propagator_drift_detected_total{cluster="member-1"}'
    assert controller.scrape().get(series, 0) >= 1
    steady(
        lambda: config_data(fleet, "member-1", ns, "settings"),
        {"mode": "b"},
        RESYNC_S + 3,
        "reported drift left as it is",
    )

    done = kubectl_propagator(fleet, "sync", "settings", "-n", ns, "--wait", "--timeout", "60s")
    assert done.returncode == 0, done.stderr
    assert config_data(fleet, "member-1", ns, "settings") == {"mode": "a"}
    wait_ap(
        fleet,
        ns,
        "settings",
        "drift cleared",
        lambda a: not cluster_entry(a, "member-1").get("drift"),
    )

    # Reporting never holds a change of the application back.
    kubectl(fleet, "-n", ns, "patch", "configmap", "settings", "-p", '{"data":{"mode":"c"}}',
            cluster="member-2")  # fmt: skip

    def more(spec: dict[str, Any]) -> None:
        spec["resources"]["manifests"][0]["data"]["size"] = "m"

    update_spec(fleet, ns, "settings", more)
    eventually(
        lambda: all(
            config_data(fleet, c, ns, "settings") == {"mode": "a", "size": "m"} for c in MEMBERS
        ),
        "the new revision applied everywhere",
    )


# -- dependencies -------------------------------------------------------------------------


def test_a_selected_workloads_dependencies_come_along_and_go(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "deps"
    fleet.ensure_namespace(ns)
    core = fleet.core(HUB)
    core.create_namespaced_config_map(ns, config_map("web-config", ns, mode="a"))
    core.create_namespaced_secret(
        ns, {"metadata": {"name": "web-token"}, "stringData": {"token": "t0ps3cret"}}
    )
    core.create_namespaced_service_account(ns, {"metadata": {"name": "web-runner"}})
    web = deployment("web", ns, "nginx:1")
    pod = web["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": "web-config"}}]
    pod["containers"][0]["envFrom"] = [{"secretRef": {"name": "web-token"}}]
    pod["serviceAccountName"] = "web-runner"
    fleet.apps(HUB).create_namespaced_deployment(ns, web)
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]
    app = application("web", ns, [], dependencies={"propagate": True, "rollOnChange": True})
    app["spec"]["resources"] = {"selectors": selectors}
    create(fleet, app)
    app = wait_ap(fleet, ns, "web", "3/3 ready", ready_everywhere)
    assert condition(app, "Dependencies")["status"] == "True"

    def arrived(cluster: str) -> bool:
        member = fleet.core(cluster)
        cm = member.read_namespaced_config_map("web-config", ns)
        secret = member.read_namespaced_secret("web-token", ns)
        account = member.read_namespaced_service_account("web-runner", ns)
        return all(APP_LABEL in (o.metadata.labels or {}) for o in (cm, secret, account))

    for cluster in MEMBERS:
        assert arrived(cluster)

    def checksum(cluster: str) -> str:
        live = fleet.apps(cluster).read_namespaced_deployment("web", ns)
        return str(live.spec.template.metadata.annotations["propagator.io/dependencies-checksum"])

    before = checksum("member-1")
    core.patch_namespaced_config_map("web-config", ns, {"data": {"mode": "b"}})
    eventually(
        lambda: all(config_data(fleet, c, ns, "web-config") == {"mode": "b"} for c in MEMBERS),
        "the ConfigMap's change on every member",
    )
    eventually(lambda: checksum("member-1") != before, "the workload rolled by the change")

    # No longer referenced: pruned.
    fleet.apps(HUB).patch_namespaced_deployment(
        "web",
        ns,
        [{"op": "remove", "path": "/spec/template/spec/volumes"}],
    )

    def config_gone() -> bool:
        for cluster in MEMBERS:
            try:
                fleet.core(cluster).read_namespaced_config_map("web-config", ns)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            return False
        return True

    eventually(config_gone, "web-config pruned from every member")
    assert all(fleet.core(c).read_namespaced_secret("web-token", ns) for c in MEMBERS)

    # Off: what came along goes, and so does the condition about it.
    update_spec(fleet, ns, "web", lambda spec: spec.pop("dependencies"))
    wait_ap(
        fleet, ns, "web", "no Dependencies condition", lambda a: not condition(a, "Dependencies")
    )

    def secret_gone() -> bool:
        try:
            fleet.core("member-1").read_namespaced_secret("web-token", ns)
        except k8s.ApiException as exc:
            return bool(exc.status == 404)
        return False

    eventually(secret_gone, "web-token pruned once dependencies are off")


# -- kept on delete -----------------------------------------------------------------------


def test_an_object_kept_on_delete_outlives_its_application(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "keep"
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": ns,
            "annotations": {"propagator.io/on-delete": "Orphan"},
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    create(fleet, application("data", ns, [claim, config_map("data-settings", ns, a="1")]))
    app = wait_ap(fleet, ns, "data", "applied", applied)
    assert app["status"]["keptOnDelete"] == ["v1 PersistentVolumeClaim keep/data"]
    delete_ap(fleet, ns, "data")
    eventually(lambda: ap_gone(fleet, ns, "data") or None, "the application gone")
    for cluster in MEMBERS:
        left = fleet.core(cluster).read_namespaced_persistent_volume_claim("data", ns)
        assert APP_LABEL not in (left.metadata.labels or {})
        assert left.metadata.annotations["propagator.io/orphaned-from"] == "keep/data"
        with pytest.raises(k8s.ApiException) as gone:
            fleet.core(cluster).read_namespaced_config_map("data-settings", ns)
        assert gone.value.status == 404
    for cluster in MEMBERS:
        fleet.core(cluster).delete_namespaced_persistent_volume_claim("data", ns)
