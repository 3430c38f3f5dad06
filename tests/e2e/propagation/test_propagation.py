"""The propagation controller end to end: ``propagator run`` against the hub and three real
members, driven only through ApplicationPropagations on the hub."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from api.finalizerpolicy import FINALIZER, PLURALS, cleanup_finalizer_policy
from fleet.local import HUB
from fleet.local import cluster as local_cluster
from propagator.work.objects import APP_LABEL, MEMBER_LABEL, app_label_value
from tests.e2e import manifests as manifests_module
from tests.e2e.conftest import FLEET_NAME, Fleet
from tests.e2e.controller import Controller, propagator, running
from tests.e2e.manifests import GROUP, PLURAL, VERSION, config_map, deployment, service
from tests.e2e.tools import remote_ports
from tests.e2e.waiting import HANG_GUARD_S, eventually

MEMBERS = ["member-1", "member-2", "member-3"]
# Short backoffs and a quick circuit so failures and recoveries show within seconds.
ENV = {
    "PROPAGATOR_RETRY_ATTEMPTS": "1",
    "PROPAGATOR_RETRY_BACKOFF_S": "0.2",
    "PROPAGATOR_RETRY_MAX_BACKOFF_S": "1",
    "PROPAGATOR_CLUSTER_TIMEOUT_S": "10",
    "PROPAGATOR_MEMBER_CONNECT_TIMEOUT_S": "2",
    "PROPAGATOR_CIRCUIT_FAILURE_THRESHOLD": "2",
    "PROPAGATOR_CIRCUIT_COOL_DOWN_S": "2",
    "PROPAGATOR_REQUEUE_MAX_DELAY_S": "2",
}


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("propagation"), ENV) as controller:
        yield controller


# -- helpers ------------------------------------------------------------------------------


def custom(fleet: Fleet) -> Any:
    return k8s.CustomObjectsApi(fleet.api(HUB))


def application(
    name: str, namespace: str, manifests: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    return manifests_module.application(name, namespace, manifests, FLEET_NAME, **spec)


def create(fleet: Fleet, app: dict[str, Any]) -> dict[str, Any]:
    """Create ``app``; returns it as the hub stored it."""
    fleet.ensure_namespace(app["metadata"]["namespace"])
    created: dict[str, Any] = custom(fleet).create_namespaced_custom_object(
        GROUP, VERSION, app["metadata"]["namespace"], PLURAL, app
    )
    return created


def get_ap(fleet: Fleet, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom(fleet).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return result


def ap_gone(fleet: Fleet, namespace: str, name: str) -> bool:
    try:
        get_ap(fleet, namespace, name)
    except k8s.ApiException as exc:
        return bool(exc.status == 404)
    return False


def update_spec(fleet: Fleet, namespace: str, name: str, change: Any) -> None:
    """Read, change the spec with ``change(spec)``, replace (retried on conflicts)."""

    def attempt() -> bool:
        app = get_ap(fleet, namespace, name)
        change(app["spec"])
        custom(fleet).replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, app)
        return True

    eventually(attempt, f"update of {namespace}/{name}")


def delete_ap(fleet: Fleet, namespace: str, name: str) -> None:
    custom(fleet).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def condition(app: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (app.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


def cluster_entry(app: dict[str, Any], cluster: str) -> dict[str, Any]:
    for c in (app.get("status") or {}).get("clusters") or []:
        if c["name"] == cluster:
            return dict(c)
    return {}


def wait_ap(fleet: Fleet, namespace: str, name: str, what: str, predicate: Any) -> dict[str, Any]:
    last: list[dict[str, Any]] = []

    def probe() -> dict[str, Any] | None:
        app = get_ap(fleet, namespace, name)
        last[:] = [app]
        current = app.get("metadata", {}).get("generation")
        observed = (app.get("status") or {}).get("observedGeneration")
        return app if observed == current and predicate(app) else None

    try:
        return eventually(probe, f"{namespace}/{name}: {what}")
    except AssertionError as exc:  # what it was instead, to tell why
        seen = last[0] if last else {}
        state = {
            "generation": seen.get("metadata", {}).get("generation"),
            **(seen.get("status") or {}),
        }
        raise AssertionError(f"{exc}; last seen: {json.dumps(state, indent=1)}") from None


def ready_everywhere(app: dict[str, Any], total: int = 3) -> bool:
    status = app.get("status") or {}
    return (
        status.get("ready") == f"{total}/{total}"
        and condition(app, "Applied").get("status") == "True"
        and condition(app, "Available").get("status") == "True"
    )


def member_object(fleet: Fleet, cluster: str, kind: str, namespace: str, name: str) -> Any:
    """The object on the member, or None when it is not there."""
    readers = {
        "Deployment": fleet.apps(cluster).read_namespaced_deployment,
        "Service": fleet.core(cluster).read_namespaced_service,
        "ConfigMap": fleet.core(cluster).read_namespaced_config_map,
    }
    try:
        return readers[kind](name, namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def owned_config_maps(fleet: Fleet, cluster: str, namespace: str, app: str) -> list[Any]:
    selector = f"{APP_LABEL}={app_label_value(namespace, app)}"
    return list(
        fleet.core(cluster).list_config_map_for_all_namespaces(label_selector=selector).items
    )


def kubectl(fleet: Fleet, *args: str, cluster: str = HUB, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(fleet.binaries / "kubectl"), "--kubeconfig", str(fleet.kubeconfig(cluster)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- tests --------------------------------------------------------------------------------


def test_propagates_updates_prunes_and_deselects(fleet: Fleet, controller: Controller) -> None:
    ns, name = "shop", "web"
    manifests = [
        deployment(name, ns, "nginx:1.27"),
        service(name, ns),
        config_map("web-config", ns, mode="a"),
    ]
    create(fleet, application(name, ns, manifests))

    app = wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    assert app["metadata"]["finalizers"] == [FINALIZER]
    assert condition(app, "Applied")["message"] == "3/3 clusters applied"
    assert condition(app, "Scheduled")["status"] == "True"
    assert sorted(p["cluster"] for p in app["status"]["placement"]) == MEMBERS
    for cluster in MEMBERS:
        entry = cluster_entry(app, cluster)
        assert entry["applied"] is True
        assert entry["health"] == "Healthy"
        assert entry["revision"]
        live = member_object(fleet, cluster, "Deployment", ns, name)
        assert live.status.ready_replicas == 2  # kwok pods really run
        assert member_object(fleet, cluster, "Service", ns, name) is not None
        assert member_object(fleet, cluster, "ConfigMap", ns, "web-config").data == {"mode": "a"}
    # The hub keeps no per-cluster line of the status in managedFields (the list is
    # written whole): what it stores and checks per status write does not grow with it.
    status_fields = [
        m["fieldsV1"]["f:status"]
        for m in app["metadata"]["managedFields"]
        if m.get("subresource") == "status"
    ]
    assert [f["f:clusters"] for f in status_fields if "f:clusters" in f] == [{}]
    header, row = kubectl(fleet, "get", "ap", "-n", ns, name).splitlines()
    assert header.split()[:4] == ["NAME", "FLEET", "CLUSTERS", "READY"]
    assert row.split()[:4] == [name, FLEET_NAME, "3", "3/3"]

    # A new image on the hub reaches every member.
    update_spec(
        fleet,
        ns,
        name,
        lambda spec: spec["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
            0
        ].update(image="nginx:1.28"),
    )
    wait_ap(fleet, ns, name, "3/3 ready with the new image", ready_everywhere)
    for cluster in MEMBERS:
        live = member_object(fleet, cluster, "Deployment", ns, name)
        assert live.spec.template.spec.containers[0].image == "nginx:1.28"

    # Someone deletes the Deployment on a member: the watch sees it, it comes back.
    deleted = member_object(fleet, "member-1", "Deployment", ns, name).metadata.uid
    fleet.apps("member-1").delete_namespaced_deployment(name, ns)

    def recreated() -> bool:
        live = member_object(fleet, "member-1", "Deployment", ns, name)
        return live is not None and live.metadata.uid != deleted

    eventually(recreated, "Deployment re-created on member-1")

    # The ConfigMap leaves the application: it leaves every member.
    update_spec(fleet, ns, name, lambda spec: spec["resources"]["manifests"].pop(2))
    wait_ap(fleet, ns, name, "3/3 without the ConfigMap", ready_everywhere)
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "ConfigMap", ns, "web-config") is None
        assert member_object(fleet, cluster, "Deployment", ns, name) is not None

    # member-3 is excluded: its objects go, the others stay.
    update_spec(
        fleet, ns, name, lambda spec: spec.update(placement={"excludeClusters": ["member-3"]})
    )
    app = wait_ap(fleet, ns, name, "2/2 after excluding member-3", lambda a: ready_everywhere(a, 2))
    assert sorted(c["name"] for c in app["status"]["clusters"]) == ["member-1", "member-2"]
    eventually(
        lambda: member_object(fleet, "member-3", "Deployment", ns, name) is None,
        "Deployment gone from member-3",
    )
    assert member_object(fleet, "member-3", "Service", ns, name) is None
    for cluster in ("member-1", "member-2"):
        assert member_object(fleet, cluster, "Deployment", ns, name) is not None

    # Deleting the application removes everything from every member.
    delete_ap(fleet, ns, name)

    eventually(lambda: ap_gone(fleet, ns, name), "application deleted once cleaned up")
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "Deployment", ns, name) is None
        assert member_object(fleet, cluster, "Service", ns, name) is None


def _finalizer_owners(app: dict[str, Any]) -> set[str]:
    """The field managers that set ``metadata.finalizers``."""
    return {
        entry["manager"]
        for entry in app["metadata"].get("managedFields") or []
        if "f:finalizers" in (entry.get("fieldsV1") or {}).get("f:metadata", {})
    }


def _added_at_creation(fleet: Fleet) -> bool:
    """Whether the hub adds the cleanup finalizer to an application created now (a dry run)."""
    fleet.ensure_namespace("shop")
    probe = application("probe", "shop", [config_map("probe", "shop", a="1")])
    tried = custom(fleet).create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, probe, dry_run="All"
    )
    return FINALIZER in (tried["metadata"].get("finalizers") or [])


@pytest.fixture
def admission_policy(fleet: Fleet) -> Iterator[None]:
    """The cleanup finalizer's admission policy, as the chart installs it, in effect; gone
    after (other tests create applications with no controller running, which the finalizer
    would keep from being deleted)."""
    api = custom(fleet)
    policy = cleanup_finalizer_policy()
    for obj in policy:
        group, version = obj["apiVersion"].split("/")
        api.create_cluster_custom_object(group, version, PLURALS[obj["kind"]], obj)
    try:
        eventually(lambda: _added_at_creation(fleet), "the admission policy in effect")
        yield
    finally:
        for obj in reversed(policy):
            group, version = obj["apiVersion"].split("/")
            api.delete_cluster_custom_object(
                group, version, PLURALS[obj["kind"]], obj["metadata"]["name"]
            )
        eventually(lambda: not _added_at_creation(fleet), "the admission policy gone")


def test_the_hub_adds_the_cleanup_finalizer_as_an_application_is_created(
    fleet: Fleet, controller: Controller, admission_policy: None
) -> None:
    """With the admission policy the finalizer is there from the create on, after any the
    request carries, and the controller writes none before it reaches the members."""
    ns, name = "shop", "finalized"
    app = application(name, ns, [config_map(name, ns, a="1")])
    app["metadata"]["finalizers"] = ["example.com/keep"]
    created = create(fleet, app)
    assert created["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    creator = _finalizer_owners(created)
    applied = wait_ap(
        fleet, ns, name, "Applied", lambda a: condition(a, "Applied").get("status") == "True"
    )
    assert _finalizer_owners(applied) == creator
    custom(fleet).patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name, {"metadata": {"finalizers": [FINALIZER]}}
    )
    delete_ap(fleet, ns, name)
    eventually(lambda: ap_gone(fleet, ns, name), f"{ns}/{name} gone")
    assert all(not owned_config_maps(fleet, c, ns, name) for c in MEMBERS)


def test_a_stopped_member_fails_alone_then_converges(fleet: Fleet, controller: Controller) -> None:
    ns, name = "outage", "api"
    create(fleet, application(name, ns, [deployment(name, ns, "api:1"), service(name, ns)]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)

    victim = fleet.state.cluster("member-2")
    local_cluster.stop_component(victim, "kube-apiserver")
    try:
        update_spec(
            fleet,
            ns,
            name,
            lambda spec: spec["resources"]["manifests"][0]["spec"]["template"]["spec"][
                "containers"
            ][0].update(image="api:2"),
        )

        def failed_on_member_2(app: dict[str, Any]) -> bool:
            entry = cluster_entry(app, "member-2")
            return (
                condition(app, "Applied").get("reason") == "ApplyFailed"  # retries used up
                and entry.get("applied") is False
                and bool(entry.get("lastError"))
            )

        app = wait_ap(fleet, ns, name, "failed on member-2 only", failed_on_member_2)
        message = condition(app, "Applied")["message"]
        assert message.startswith("2/3 clusters applied; 1 failed: member-2: ")
        for cluster in ("member-1", "member-3"):
            assert cluster_entry(app, cluster)["applied"] is True
            live = member_object(fleet, cluster, "Deployment", ns, name)
            assert live.spec.template.spec.containers[0].image == "api:2"
        circuit = 'propagator_circuit_state{cluster="member-2"}'
        eventually(lambda: controller.scrape().get(circuit) == 2.0, "member-2 circuit open")
        assert controller.scrape()['propagator_apply_retries_total{cluster="member-2"}'] >= 1
        # NotReady (tainted NoSchedule) keeps its place: nothing is lost while it is away.
        assert "member-2" in [p["cluster"] for p in get_ap(fleet, ns, name)["status"]["placement"]]
    finally:
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + HANG_GUARD_S)

    wait_ap(fleet, ns, name, "3/3 again with no manual step", ready_everywhere)
    live = member_object(fleet, "member-2", "Deployment", ns, name)
    assert live.spec.template.spec.containers[0].image == "api:2"
    assert controller.scrape()['propagator_circuit_state{cluster="member-2"}'] == 0.0
    delete_ap(fleet, ns, name)


def test_a_template_error_applies_nothing_and_says_where(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "templates", "broken"
    good = config_map("settings", ns, region="{{ cluster.region }}")
    create(fleet, application(name, ns, [good]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    for cluster in MEMBERS:
        data = member_object(fleet, cluster, "ConfigMap", ns, "settings").data
        assert data["region"] == fleet.state.cluster(cluster).nodes.region

    broken = config_map("other", ns, zone="{{ cluster.zon }}")
    update_spec(fleet, ns, name, lambda spec: spec["resources"]["manifests"].append(broken))
    app = wait_ap(
        fleet,
        ns,
        name,
        "RenderFailed",
        lambda a: condition(a, "Applied").get("reason") == "RenderFailed",
    )
    message = condition(app, "Applied")["message"]
    assert "manifest 2 (ConfigMap other)" in message
    assert "line " in message
    assert "cluster member-" in message
    assert "'dict object' has no attribute 'zon'" in message
    assert message.endswith("nothing was applied")
    for cluster in MEMBERS:  # nothing new, nothing lost
        assert member_object(fleet, cluster, "ConfigMap", ns, "other") is None
        assert member_object(fleet, cluster, "ConfigMap", ns, "settings") is not None
    delete_ap(fleet, ns, name)


def test_an_object_a_member_rejects_fails_that_cluster_alone(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "rejects", "svc"
    manifests = [deployment(name, ns, "svc:1"), config_map("svc-config", ns, a="1")]
    # member-1 gets a negative replica count, which its API server refuses.
    overrides = [
        {
            "clusterNames": ["member-1"],
            "patches": [{"op": "replace", "path": "/spec/replicas", "value": -1}],
            "target": {"kind": "Deployment"},
        }
    ]
    create(fleet, application(name, ns, manifests, overrides=overrides))
    app = wait_ap(
        fleet,
        ns,
        name,
        "member-1 failed, others applied",
        lambda a: (
            cluster_entry(a, "member-1").get("applied") is False
            and all(cluster_entry(a, c).get("applied") for c in ("member-2", "member-3"))
        ),
    )
    entry = cluster_entry(app, "member-1")
    assert entry["attempts"] == 1  # a 422 is not retried
    assert "422" in entry["lastError"]
    assert "spec.replicas" in entry["lastError"]
    assert "must be greater than or equal to 0" in entry["lastError"]
    message = condition(app, "Applied")["message"]
    assert message.startswith("2/3 clusters applied; 1 failed: member-1: ")
    for cluster in ("member-2", "member-3"):
        assert member_object(fleet, cluster, "Deployment", ns, name) is not None
    delete_ap(fleet, ns, name)


def test_a_controller_killed_mid_fan_out_converges_without_duplicates(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "restarts", "many"
    count = 40
    manifests = [config_map(f"cm-{i:02d}", ns, index=str(i)) for i in range(count)]

    def all_ready() -> dict[str, dict[str, Any]] | None:
        readiness = {c: _ready_condition(fleet, c) for c in MEMBERS}
        return readiness if all(r["status"] == "True" for r in readiness.values()) else None

    readiness = eventually(all_ready, "members Ready")
    # Killed as soon as a first object reaches a member, seen through watches: the whole
    # fan-out (one cluster at a time) takes well under a second, which a poll can miss.
    with _first_object_seen(fleet, ns, name) as (seen, errors):
        create(fleet, application(name, ns, manifests, rollout={"maxConcurrency": 1}))
        assert seen.wait(HANG_GUARD_S), f"no object reached a member (watch errors: {errors})"
        controller.kill()
    applied = sum(len(owned_config_maps(fleet, c, ns, name)) for c in MEMBERS)
    assert 0 < applied < count * len(MEMBERS), applied
    controller.start()

    wait_ap(fleet, ns, name, "3/3 after the restart", ready_everywhere)
    # The restarted controller started from the members' recorded health: Ready never
    # turned Unknown ("not probed yet") meanwhile.
    assert {c: _ready_condition(fleet, c) for c in MEMBERS} == readiness
    for cluster in MEMBERS:
        owned = owned_config_maps(fleet, cluster, ns, name)
        assert sorted(cm.metadata.name for cm in owned) == [f"cm-{i:02d}" for i in range(count)]
        for cm in owned:
            managers = [f.manager for f in cm.metadata.managed_fields or []]
            assert managers == ["propagator"], managers
    delete_ap(fleet, ns, name)


def test_a_restarted_controller_leaves_applied_applications_status_as_it_was(
    fleet: Fleet, controller: Controller
) -> None:
    """A restart syncs every cluster again; an application that was applied stays so
    meanwhile, even while one member is slow to answer: its status is not written at all
    (before, each flipped to "2/3 clusters applied; 1 in progress" and back, two writes
    and new transition times)."""
    ns, count, slow = "restart-kept", 30, "member-3"
    names = [f"kept-{i:02d}" for i in range(count)]
    for name in names:
        create(fleet, application(name, ns, [config_map(name, ns, a="1")]))
    for name in names:
        wait_ap(fleet, ns, name, "3/3", ready_everywhere)
    controller.stop()
    before = {name: get_ap(fleet, ns, name) for name in names}  # as nothing writes now
    apiserver = fleet.state.cluster(slow).components["kube-apiserver"].pid
    assert apiserver is not None

    def metrics_show(want: Callable[[dict[str, float]], bool]) -> bool:
        return want(controller.scrape())  # refused until it serves: tried again

    def idle(metrics: dict[str, float]) -> bool:
        return all(
            metrics.get(name) == 0
            for name in (
                "propagator_workqueue_depth",
                "propagator_member_sync_queue_depth",
                "propagator_propagation_operations_in_flight",
            )
        )

    def synced(metrics: dict[str, float], cluster: str) -> float:
        return metrics.get(f'propagator_applies_total{{cluster="{cluster}",result="applied"}}', 0)

    os.kill(apiserver, signal.SIGSTOP)  # answers nothing, refuses nothing
    try:
        controller.start()
        # The other members' syncs report, and every status refresh they queue is done.
        eventually(
            lambda: metrics_show(
                lambda m: (
                    all(synced(m, c) >= count for c in MEMBERS if c != slow)
                    and m.get("propagator_workqueue_depth") == 0
                )
            ),
            f"every application synced again on the members but {slow}",
        )
    finally:
        os.kill(apiserver, signal.SIGCONT)
    eventually(
        lambda: metrics_show(lambda m: synced(m, slow) >= count and idle(m)),
        f"every application synced again on {slow}, nothing left to do",
    )
    for name in names:
        after = get_ap(fleet, ns, name)
        assert after["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"]
        assert after["status"] == before[name]["status"]
    for name in names:
        delete_ap(fleet, ns, name)


@contextlib.contextmanager
def _first_object_seen(
    fleet: Fleet, namespace: str, app: str
) -> Iterator[tuple[threading.Event, list[Exception]]]:
    """An event set once a ConfigMap of the application appears on any member, and the
    errors of the watches (one cut once the test moved on is no failure)."""
    seen = threading.Event()
    errors: list[Exception] = []
    selector = f"{APP_LABEL}={app_label_value(namespace, app)}"
    streams = {c: k8s_watch.Watch() for c in MEMBERS}  # type: ignore[no-untyped-call]

    def watch(cluster: str) -> None:
        core = fleet.core(cluster)
        try:
            for _ in streams[cluster].stream(  # type: ignore[no-untyped-call]
                core.list_config_map_for_all_namespaces,
                label_selector=selector,
                timeout_seconds=int(HANG_GUARD_S),
            ):
                seen.set()
                return
        except Exception as exc:  # reported by the caller's assertion
            errors.append(exc)

    threads = [threading.Thread(target=watch, args=(c,), daemon=True) for c in MEMBERS]
    for thread in threads:
        thread.start()
    try:
        yield seen, errors
    finally:
        for stream in streams.values():
            stream.stop()  # type: ignore[no-untyped-call]


def _ready_condition(fleet: Fleet, cluster: str) -> dict[str, Any]:
    member: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", cluster
    )
    conditions = (member.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c["type"] == "Ready"), {})
    return {k: ready.get(k) for k in ("status", "reason", "lastTransitionTime")}


def test_propagation_metrics_move(fleet: Fleet, controller: Controller) -> None:
    before = controller.scrape()
    ns, name = "metrics", "counted"
    create(fleet, application(name, ns, [config_map("counted", ns, a="1")]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)

    after = controller.scrape()

    def grew(series: str) -> bool:
        return after.get(series, 0.0) > before.get(series, 0.0)

    for cluster in MEMBERS:
        assert grew(f'propagator_applies_total{{cluster="{cluster}",result="applied"}}')
        assert grew(f'propagator_member_writes_total{{cluster="{cluster}",operation="apply"}}')
    assert grew(
        'propagator_propagation_duration_seconds_count{operation="reconcile",status="success"}'
    )
    assert grew('propagator_propagation_duration_seconds_count{operation="apply",status="success"}')
    assert grew('propagator_reconciles_total{result="success"}')
    assert grew("propagator_scheduling_duration_seconds_count")
    assert "propagator_workqueue_depth" in after
    assert "propagator_propagation_operations_in_flight" in after

    # Nothing changed: a resync-like re-trigger writes nothing to the members.
    writes = {
        c: after[f'propagator_member_writes_total{{cluster="{c}",operation="apply"}}']
        for c in MEMBERS
    }
    update_spec(fleet, ns, name, lambda spec: spec.update(rollout={"maxConcurrency": 2}))
    wait_ap(fleet, ns, name, "reconciled again", ready_everywhere)
    final = controller.scrape()
    for cluster in MEMBERS:
        assert (
            final[f'propagator_member_writes_total{{cluster="{cluster}",operation="apply"}}']
            == writes[cluster]
        )
    delete_ap(fleet, ns, name)


def test_a_selected_hub_object_is_followed(fleet: Fleet, controller: Controller) -> None:
    ns, name = "selected", "settings"
    fleet.ensure_namespace(ns)
    fleet.core(HUB).create_namespaced_config_map(
        ns,
        {"metadata": {"name": "shared", "labels": {"team": "a"}}, "data": {"level": "1"}},
    )
    app = application(name, ns, [])
    app["spec"]["resources"] = {
        "selectors": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "labelSelector": {"matchLabels": {"team": "a"}},
            }
        ]
    }
    create(fleet, app)
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    for cluster in MEMBERS:
        live = member_object(fleet, cluster, "ConfigMap", ns, "shared")
        assert live.data == {"level": "1"}
        assert (
            live.metadata.uid
            != fleet.core(HUB).read_namespaced_config_map("shared", ns).metadata.uid
        )

    # Editing the hub object (not the application) reaches every member.
    fleet.core(HUB).patch_namespaced_config_map("shared", ns, {"data": {"level": "2"}})

    def level_2_everywhere() -> bool:
        return all(
            member_object(fleet, c, "ConfigMap", ns, "shared").data == {"level": "2"}
            for c in MEMBERS
        )

    eventually(level_2_everywhere, "level 2 on every member")
    delete_ap(fleet, ns, name)


def test_an_unreachable_cluster_holds_deletion_until_told_to_orphan(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "orphans", "kept"
    create(fleet, application(name, ns, [config_map("kept", ns, a="1")]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)

    victim = fleet.state.cluster("member-3")
    local_cluster.stop_component(victim, "kube-apiserver")
    try:
        delete_ap(fleet, ns, name)

        def cleanup_failed() -> dict[str, Any] | None:
            app = get_ap(fleet, ns, name)  # still there: the finalizer holds it
            return app if condition(app, "Applied").get("reason") == "CleanupFailed" else None

        app = eventually(cleanup_failed, "CleanupFailed naming member-3")
        message = condition(app, "Applied")["message"]
        assert "member-3" in message
        assert "member-1" not in message
        assert "propagator.io/orphan-unreachable=true" in message
        for cluster in ("member-1", "member-2"):  # the reachable ones are cleaned
            assert member_object(fleet, cluster, "ConfigMap", ns, "kept") is None

        custom(fleet).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            PLURAL,
            name,
            {"metadata": {"annotations": {"propagator.io/orphan-unreachable": "true"}}},
        )

        eventually(lambda: ap_gone(fleet, ns, name), "application gone once told to orphan")
    finally:
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + HANG_GUARD_S)
    # Orphaned: what was on member-3 is left as it was.
    assert member_object(fleet, "member-3", "ConfigMap", ns, "kept").data == {"a": "1"}


def test_objects_without_a_namespace_go_into_the_applications(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "implicit", "plain"
    workload = deployment(name, ns, "plain:1", replicas=1)
    del workload["metadata"]["namespace"]
    settings = config_map("plain-settings", ns, a="1")
    del settings["metadata"]["namespace"]
    create(fleet, application(name, ns, [workload, settings]))
    app = wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    assert {c["health"] for c in app["status"]["clusters"]} == {"Healthy"}
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "Deployment", ns, name).status.ready_replicas == 1
        assert member_object(fleet, cluster, "ConfigMap", ns, "plain-settings") is not None

    # Pruning finds them where they went.
    update_spec(fleet, ns, name, lambda spec: spec["resources"]["manifests"].pop(1))
    wait_ap(fleet, ns, name, "3/3 without the ConfigMap", ready_everywhere)
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "ConfigMap", ns, "plain-settings") is None
        assert member_object(fleet, cluster, "Deployment", ns, name) is not None
    delete_ap(fleet, ns, name)


def test_a_cluster_scoped_object_that_names_a_namespace_is_kept_and_pruned(
    fleet: Fleet, controller: Controller
) -> None:
    # A platform application (only those may write cluster-scoped kinds), with a slip that
    # kubectl forgives: a namespace on a ClusterRole. The API server drops it.
    ns, name, role_name = "propagator-system", "scoped", "e2e-scoped-reader"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": role_name, "namespace": ns},
        "rules": [rule],
    }
    create(fleet, application(name, ns, [role]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)

    def live_role(cluster: str) -> Any:
        try:
            return k8s.RbacAuthorizationV1Api(fleet.api(cluster)).read_cluster_role(role_name)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    uids = {c: live_role(c).metadata.uid for c in MEMBERS}
    # Another sync of every member: the role is found as the member keeps it, neither
    # written again nor pruned as something the application no longer wants.
    update_spec(
        fleet, ns, name, lambda spec: spec["resources"]["manifests"].append(config_map(name, ns))
    )
    wait_ap(fleet, ns, name, "3/3 ready with the ConfigMap", ready_everywhere)
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "ConfigMap", ns, name) is not None
        assert live_role(cluster).metadata.uid == uids[cluster], cluster
    delete_ap(fleet, ns, name)
    eventually(
        lambda: all(live_role(c) is None for c in MEMBERS), "the role removed from every member"
    )


def test_a_tenant_found_by_namespace_labels_is_kept_in_its_quota(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "capped", "small"
    fleet.core(HUB).create_namespace({"metadata": {"name": ns, "labels": {"team": "capped"}}})
    quota = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantQuota",
        "metadata": {"name": "capped-team"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"team": "capped"}},
            "hard": {"pods": 10},
            "clusters": [{"clusterNames": ["member-3"], "hard": {"pods": 0}}],
        },
    }
    custom(fleet).create_cluster_custom_object(GROUP, VERSION, "tenantquotas", quota)
    try:
        create(fleet, application(name, ns, [deployment(name, ns, "small:1", replicas=1)]))
        app = wait_ap(fleet, ns, name, "2/2 ready", lambda a: ready_everywhere(a, 2))
        assert sorted(p["cluster"] for p in app["status"]["placement"]) == ["member-1", "member-2"]
        assert "1 quota pods" in condition(app, "Scheduled")["message"]
        assert member_object(fleet, "member-3", "Deployment", ns, name) is None

        # The namespace leaves the tenant: the quota no longer applies, member-3 gets it.
        fleet.core(HUB).patch_namespace(ns, {"metadata": {"labels": {"team": None}}})
        wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
        assert member_object(fleet, "member-3", "Deployment", ns, name) is not None
        delete_ap(fleet, ns, name)
    finally:
        custom(fleet).delete_cluster_custom_object(GROUP, VERSION, "tenantquotas", "capped-team")


def heals(controller: Controller) -> float:
    return sum(
        value
        for series, value in controller.scrape().items()
        if series.startswith("propagator_drift_heals_total{")
    )


def test_drift_on_a_member_is_healed(fleet: Fleet, controller: Controller) -> None:
    ns, name = "drift", "web"
    settings = config_map("settings", ns, mode="a")
    settings["metadata"]["labels"] = {"team": "a"}
    create(fleet, application(name, ns, [deployment(name, ns, "nginx:1.27"), settings]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    healed_before = heals(controller)

    # What a new user tries first: kubectl set image on a member.
    kubectl(
        fleet, "-n", ns, "set", "image", f"deployment/{name}", "main=evil:1", cluster="member-1"
    )
    # A label we set removed, data we set edited, and our own label removed.
    kubectl(fleet, "-n", ns, "label", "configmap", "settings", "team-", cluster="member-2")
    patch = '{"data":{"mode":"b"}}'
    kubectl(fleet, "-n", ns, "patch", "configmap", "settings", "-p", patch, cluster="member-3")
    kubectl(fleet, "-n", ns, "label", "deployment", name, f"{APP_LABEL}-", cluster="member-3")

    def image(cluster: str) -> str:
        live = member_object(fleet, cluster, "Deployment", ns, name)
        return str(live.spec.template.spec.containers[0].image)

    def healed() -> bool:
        member_2 = member_object(fleet, "member-2", "ConfigMap", ns, "settings")
        member_3 = member_object(fleet, "member-3", "ConfigMap", ns, "settings")
        deployment_3 = member_object(fleet, "member-3", "Deployment", ns, name)
        return (
            image("member-1") == "nginx:1.27"
            and (member_2.metadata.labels or {}).get("team") == "a"
            and member_3.data == {"mode": "a"}
            and (deployment_3.metadata.labels or {}).get(APP_LABEL) == app_label_value(ns, name)
        )

    eventually(healed, "every drifted object back as the application says")
    eventually(lambda: heals(controller) >= healed_before + 4, "4 heals counted")
    # The objects were edited in place, not re-created.
    assert all(image(c) == "nginx:1.27" for c in MEMBERS)
    wait_ap(fleet, ns, name, "3/3 ready after healing", ready_everywhere)
    delete_ap(fleet, ns, name)


def test_each_member_is_one_connection_for_its_calls_and_watches(
    fleet: Fleet, controller: Controller
) -> None:
    ns, name = "one-connection", "web"
    create(fleet, application(name, ns, [deployment(name, ns, "nginx:1.27"), config_map(name, ns)]))
    wait_ap(fleet, ns, name, "3/3 ready", ready_everywhere)
    assert controller.proc is not None
    # Its probes, syncs, and the watches of nodes, pods, limit ranges, namespaces,
    # Deployments and ConfigMaps: all on one HTTP/2 connection per member.
    ports = Counter(remote_ports(controller.proc.pid))
    assert {c: ports[fleet.state.cluster(c).api_port] for c in MEMBERS} == dict.fromkeys(MEMBERS, 1)
    delete_ap(fleet, ns, name)


def test_applications_keep_reconciling_while_a_member_is_down(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "busy"
    victim = fleet.state.cluster("member-3")
    local_cluster.stop_component(victim, "kube-apiserver")
    names = [f"app-{i}" for i in range(8)]
    try:
        for name in names:
            create(fleet, application(name, ns, [config_map(name, ns, a="1")]))

        def applied_on_the_others(app: dict[str, Any]) -> bool:
            # member-3 is placed (and failing) or, once NotReady, not placed at all.
            return all(
                cluster_entry(app, c).get("applied") is True for c in ("member-1", "member-2")
            ) and not cluster_entry(app, "member-3").get("applied")

        for name in names:
            wait_ap(fleet, ns, name, "applied on member-1 and member-2", applied_on_the_others)
            for cluster in ("member-1", "member-2"):
                assert member_object(fleet, cluster, "ConfigMap", ns, name) is not None
    finally:
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + HANG_GUARD_S)
    for name in names:
        wait_ap(fleet, ns, name, "3/3 once member-3 is back", ready_everywhere)
        assert member_object(fleet, "member-3", "ConfigMap", ns, name) is not None
        delete_ap(fleet, ns, name)


def _applies(controller: Controller, cluster: str, result: str) -> float:
    series = f'propagator_applies_total{{cluster="{cluster}",result="{result}"}}'
    return controller.scrape().get(series, 0.0)


def test_a_member_joined_twice_gets_each_object_once_without_a_fight(
    fleet: Fleet, controller: Controller
) -> None:
    """member-1's API server joined again under a second name: the objects stay written
    through member-1; the second MemberCluster reports the conflict and never writes
    (each would otherwise take the objects from the other, again and again)."""
    twice, ns, name = "member-1-again", "twice", "web"
    hub = str(fleet.kubeconfig(HUB))
    joined = propagator(
        "fleet", "join", twice, "--kubeconfig", str(fleet.kubeconfig("member-1")),
        "--fleet", "twice", "--hub-kubeconfig", hub,
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    try:
        both = '{"spec":{"clusters":["member-1","member-1-again"]}}'
        kubectl(fleet, "patch", "fleet", "twice", "--type=merge", "-p", both)
        app = manifests_module.application(name, ns, [config_map("s", ns, a="1")], "twice")
        app["spec"]["placement"] = {"clusterNames": ["member-1"]}
        create(fleet, app)
        wait_ap(fleet, ns, name, "applied through member-1", lambda a: ready_everywhere(a, 1))

        def placed_on_both(spec: dict[str, Any]) -> None:
            spec["placement"]["clusterNames"] = ["member-1", twice]

        def one_writer(app: dict[str, Any], data: str) -> bool:
            live = member_object(fleet, "member-1", "ConfigMap", ns, "s")
            return (
                "as well" in (cluster_entry(app, twice).get("lastError") or "")
                and not cluster_entry(app, "member-1").get("lastError")
                and live is not None
                and live.data == {"a": data}
            )

        update_spec(fleet, ns, name, placed_on_both)
        app = wait_ap(fleet, ns, name, "the second name in conflict", lambda a: one_writer(a, "1"))
        assert condition(app, "Applied").get("reason") == "Conflict"
        assert (
            f"v1 ConfigMap {ns}/s is propagated there through MemberCluster member-1 as well "
            "(two MemberClusters reach the same API server)"
        ) in cluster_entry(app, twice)["lastError"]
        conflicts = _applies(controller, twice, "conflict")

        # A new revision: written by member-1; the second name looks and holds off again.
        update_spec(
            fleet,
            ns,
            name,
            lambda spec: spec["resources"].update(manifests=[config_map("s", ns, a="2")]),
        )
        wait_ap(fleet, ns, name, "the new revision, one writer", lambda a: one_writer(a, "2"))
        eventually(lambda: _applies(controller, twice, "conflict") > conflicts, "looked again")
        live = member_object(fleet, "member-1", "ConfigMap", ns, "s")
        assert live.metadata.labels[MEMBER_LABEL] == "member-1"
        writes = f'propagator_member_writes_total{{cluster="{twice}",operation="apply"}}'
        assert controller.scrape().get(writes, 0.0) == 0  # never wrote

        delete_ap(fleet, ns, name)
        eventually(lambda: ap_gone(fleet, ns, name), "application deleted")
        assert member_object(fleet, "member-1", "ConfigMap", ns, "s") is None
    finally:
        propagator("fleet", "unjoin", twice, "--hub-kubeconfig", hub)
        kubectl(fleet, "delete", "fleet", "twice", "--ignore-not-found")
