"""Interpreter rules on the real hub and members: a custom workload kind (a CRD installed on
the members, its status written through the status subresource as its operator would)
goes Progressing → Healthy → Degraded by a ResourceInterpreter's rules, and the
application's Available, a canary's step gate and application failover follow it; without
a rule it is Healthy once applied and the status says so; its replicas are Divided and
counted against a tenant's quota; core kinds the old health never judged (a claim that
stays Pending, a LoadBalancer Service without an address) read Progressing."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import GROUP, VERSION
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    cluster_entry,
    condition,
    create,
    custom,
    delete_ap,
    get_ap,
    update_spec,
    wait_ap,
)
from tests.e2e.waiting import eventually
from tests.root import ROOT

POOL_GROUP, POOL_VERSION, POOLS = "apps.example.com", "v1", "workerpools"
RULES_FILE = ROOT / "docs" / "examples" / "resource-interpreter.yaml"
RULES_NAME = "workerpool.apps.example.com"
CANARY_CLUSTER = "member-1"
CLAIMED = "member-1"
NAMESPACES = ("ri-pool", "ri-divided", "ri-failover", "ri-canary", "ri-core")

_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{POOLS}.{POOL_GROUP}"},
    "spec": {
        "group": POOL_GROUP,
        "names": {"kind": "WorkerPool", "plural": POOLS, "singular": "workerpool"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": POOL_VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": _OPEN, "status": _OPEN},
                    }
                },
            }
        ],
    },
}


def pool(
    namespace: str, workers: int, image: str = "worker:1", cpu: str = "250m"
) -> dict[str, Any]:
    return {
        "apiVersion": f"{POOL_GROUP}/{POOL_VERSION}",
        "kind": "WorkerPool",
        # The hub does not serve the kind: the namespace is stated (its scope is unknown).
        "metadata": {"name": "pool", "namespace": namespace},
        "spec": {
            "workers": workers,
            "template": {
                "metadata": {"labels": {"app": "pool"}},
                "spec": {
                    "containers": [
                        {"name": "worker", "image": image, "resources": {"requests": {"cpu": cpu}}}
                    ]
                },
            },
        },
    }


def _members_api(fleet: Fleet, cluster: str) -> Any:
    return k8s.CustomObjectsApi(fleet.api(cluster))


def member_pool(fleet: Fleet, cluster: str, namespace: str, name: str = "pool") -> Any:
    try:
        return _members_api(fleet, cluster).get_namespaced_custom_object(
            POOL_GROUP, POOL_VERSION, namespace, POOLS, name
        )
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ready(workers: int) -> dict[str, Any]:
    return {
        "phase": "Running",
        "readyWorkers": workers,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Running"}],
    }


FAILED = {
    "phase": "Failed",
    "readyWorkers": 0,
    "conditions": [
        {"type": "Ready", "status": "False", "reason": "Failed", "message": "worker crashed"}
    ],
}


def write_status(
    fleet: Fleet, cluster: str, namespace: str, status: dict[str, Any], name: str = "pool"
) -> None:
    """What the kind's operator would do: its status, through the status subresource,
    once the object is there."""

    def attempt() -> bool:
        obj = member_pool(fleet, cluster, namespace, name)
        if obj is None:
            return False
        obj["status"] = status
        _members_api(fleet, cluster).replace_namespaced_custom_object_status(
            POOL_GROUP, POOL_VERSION, namespace, POOLS, name, obj
        )
        return True

    eventually(attempt, f"status of {name} written on {cluster}")


def rules() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULES_FILE.read_text())
    return loaded


def rules_status(fleet: Fleet, name: str) -> dict[str, Any]:
    found: dict[str, Any] = custom(fleet).get_cluster_custom_object(
        GROUP, VERSION, "resourceinterpreters", name
    )
    return found.get("status") or {}


def compiled(fleet: Fleet, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        for c in rules_status(fleet, name).get("conditions") or []:
            if c["type"] == "Compiled":
                return dict(c)
        return None

    return eventually(probe, f"{name}: Compiled written")


def delete_rules(fleet: Fleet, name: str) -> None:
    try:
        custom(fleet).delete_cluster_custom_object(GROUP, VERSION, "resourceinterpreters", name)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    for cluster in MEMBERS:
        k8s.ApiextensionsV1Api(fleet.api(cluster)).create_custom_resource_definition(
            CRD  # type: ignore[arg-type]
        )
    for cluster in MEMBERS:
        eventually(
            lambda c=cluster: (
                _members_api(fleet, c).list_cluster_custom_object(  # type: ignore[misc]
                    POOL_GROUP, POOL_VERSION, POOLS
                )
                is not None
            ),
            f"WorkerPools served on {cluster}",
        )
    members = custom(fleet)
    label = {"metadata": {"labels": {"canary": "yes"}}}
    members.patch_cluster_custom_object(GROUP, VERSION, "memberclusters", CANARY_CLUSTER, label)
    try:
        with running(fleet, tmp_path_factory.mktemp("interpreter"), ENV) as controller:
            yield controller
            for namespace in NAMESPACES:
                for name in ("pool", "web"):
                    if not ap_gone(fleet, namespace, name):
                        delete_ap(fleet, namespace, name)
            for namespace in NAMESPACES:
                for name in ("pool", "web"):
                    eventually(
                        lambda ns=namespace, n=name: ap_gone(fleet, ns, n) or None,  # type: ignore[misc]
                        f"{namespace}/{name} gone",
                    )
    finally:
        delete_rules(fleet, RULES_NAME)
        unlabel = {"metadata": {"labels": {"canary": None}}}
        members.patch_cluster_custom_object(
            GROUP, VERSION, "memberclusters", CANARY_CLUSTER, unlabel
        )
        for cluster in MEMBERS:
            k8s.ApiextensionsV1Api(fleet.api(cluster)).delete_custom_resource_definition(
                CRD["metadata"]["name"]
            )


def _available(app: dict[str, Any]) -> str:
    return str(condition(app, "Available").get("status"))


def _with_rules(fleet: Fleet) -> None:
    """The platform's rules for WorkerPools on the hub, compiled."""
    try:
        custom(fleet).create_cluster_custom_object(GROUP, VERSION, "resourceinterpreters", rules())
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    assert compiled(fleet, RULES_NAME)["status"] == "True"


def test_a_custom_kind_is_healthy_once_applied_without_rules_and_judged_by_them_with(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "ri-pool"
    delete_rules(fleet, RULES_NAME)
    create(fleet, application("pool", ns, [pool(ns, 2)]))
    app = wait_ap(fleet, ns, "pool", "Available without rules", lambda a: _available(a) == "True")
    for cluster in MEMBERS:
        assert cluster_entry(app, cluster)["healthMessage"] == (
            "no health rule for WorkerPool: healthy once applied"
        )

    _with_rules(fleet)
    waiting = wait_ap(
        fleet,
        ns,
        "pool",
        "Progressing by the rules",
        lambda a: (
            _available(a) == "False"
            and all(cluster_entry(a, c).get("health") == "Progressing" for c in MEMBERS)
        ),
    )
    assert cluster_entry(waiting, "member-1")["healthMessage"] == (
        f"WorkerPool {ns}/pool: 0/2 workers ready"
    )

    for cluster in MEMBERS:
        write_status(fleet, cluster, ns, ready(2))
    healthy = wait_ap(fleet, ns, "pool", "Available", lambda a: _available(a) == "True")
    [summed] = healthy["status"]["objects"]
    assert (summed["kind"], summed["name"], summed["fields"], summed["clusters"]) == (
        "WorkerPool",
        "pool",
        {"readyWorkers": 6},
        3,
    )
    [shown] = cluster_entry(healthy, "member-2")["objects"]
    assert shown["fields"] == {"readyWorkers": 2, "phase": "Running"}

    write_status(fleet, "member-2", ns, FAILED)
    degraded = wait_ap(
        fleet,
        ns,
        "pool",
        "Degraded on member-2",
        lambda a: condition(a, "Available").get("reason") == "Degraded",
    )
    entry = cluster_entry(degraded, "member-2")
    assert entry["health"] == "Degraded"
    assert entry["healthMessage"] == f"WorkerPool {ns}/pool: worker crashed"
    assert degraded["status"]["objects"][0]["fields"] == {"readyWorkers": 4}
    shown = kubectl_propagator(fleet, "-n", ns, "status", "pool")
    assert "worker crashed" in shown.stdout, shown.stdout + shown.stderr


def test_rules_that_do_not_compile_are_refused_with_the_expression_where_and_why(
    fleet: Fleet, controller: Controller
) -> None:
    broken = copy.deepcopy(rules())
    broken["metadata"]["name"] = "gadget.apps.example.com"
    broken["spec"]["target"]["kind"] = "Gadget"
    broken["spec"]["health"]["checks"][0]["when"] = "self.status.ready =="
    custom(fleet).create_cluster_custom_object(GROUP, VERSION, "resourceinterpreters", broken)
    try:
        refused = compiled(fleet, "gadget.apps.example.com")
        assert refused["status"] == "False"
        assert refused["reason"] == "Invalid"
        assert "spec.health.checks[0].when: 'self.status.ready =='" in refused["message"]
        assert "line 1 column 21: Syntax error" in refused["message"]
    finally:
        delete_rules(fleet, "gadget.apps.example.com")
    # The hub's API server refuses a second ResourceInterpreter for one kind.
    twice = copy.deepcopy(rules())
    twice["metadata"]["name"] = "my-workerpool-rules"
    with pytest.raises(k8s.ApiException) as caught:
        custom(fleet).create_cluster_custom_object(GROUP, VERSION, "resourceinterpreters", twice)
    assert "metadata.name must be the target's kind in lower case" in str(caught.value.body)


def test_a_custom_workload_is_divided_and_counted_against_its_tenants_quota(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "ri-divided"
    _with_rules(fleet)
    quota = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantQuota",
        "metadata": {"name": "ri-tenant"},
        "spec": {"namespaces": [ns], "hard": {"cpu": "2"}},
    }
    custom(fleet).create_cluster_custom_object(GROUP, VERSION, "tenantquotas", quota)
    try:
        placement = {"clusterNames": MEMBERS[:2], "replicas": {"mode": "Divided"}}
        create(fleet, application("pool", ns, [pool(ns, 4)], placement=placement))
        wait_ap(
            fleet, ns, "pool", "Applied", lambda a: condition(a, "Applied").get("status") == "True"
        )
        for cluster in MEMBERS[:2]:
            assert member_pool(fleet, cluster, ns)["spec"]["workers"] == 2

        def used() -> dict[str, str] | None:
            found = custom(fleet).get_cluster_custom_object(
                GROUP, VERSION, "tenantquotas", "ri-tenant"
            )
            lines = (found.get("status") or {}).get("clusters") or []
            cpu = {c["name"]: c.get("used", {}).get("cpu") for c in lines}
            return cpu if cpu.get("member-1") and cpu.get("member-2") else None

        assert eventually(used, "the tenant's use written") == {
            "member-1": "500m",
            "member-2": "500m",
        }

        # 20 workers: 10 a cluster at 250m is more than the tenant's 2 cpu there; its
        # room is 8 workers a cluster, and nothing is applied.
        update_spec(
            fleet,
            ns,
            "pool",
            lambda s: s["resources"]["manifests"][0]["spec"].update(workers=20),
        )
        over = wait_ap(
            fleet,
            ns,
            "pool",
            "refused for the tenant's room",
            lambda a: condition(a, "Applied").get("reason") == "Unschedulable",
        )
        assert "20 replicas do not fit: room for 16" in condition(over, "Applied")["message"]
        for cluster in MEMBERS[:2]:
            assert member_pool(fleet, cluster, ns)["spec"]["workers"] == 2
    finally:
        delete_ap(fleet, ns, "pool")
        eventually(lambda: ap_gone(fleet, ns, "pool") or None, f"{ns}/pool gone")
        custom(fleet).delete_cluster_custom_object(GROUP, VERSION, "tenantquotas", "ri-tenant")


def _placed(app: dict[str, Any]) -> dict[str, int]:
    return {p["cluster"]: p.get("replicas") for p in app["status"].get("placement") or []}


def test_application_failover_follows_a_custom_kinds_health(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "ri-failover"
    _with_rules(fleet)
    create(
        fleet,
        application(
            "pool",
            ns,
            [pool(ns, 6, cpu="10m")],
            placement={"replicas": {"mode": "Divided"}},
            failover={"clusterUnreachableAfter": "300s", "application": {"unhealthyAfter": "5s"}},
        ),
    )
    for cluster in MEMBERS:
        write_status(fleet, cluster, ns, ready(2))
    wait_ap(fleet, ns, "pool", "Available", lambda a: _available(a) == "True")

    victim, others = MEMBERS[2], MEMBERS[:2]
    write_status(fleet, victim, ns, FAILED)
    moved = wait_ap(
        fleet,
        ns,
        "pool",
        f"moved off {victim}",
        lambda a: _placed(a) == dict.fromkeys(others, 3) and _available(a) == "True",
    )
    [evicted] = moved["status"]["evicted"]
    assert (evicted["cluster"], evicted["reason"]) == (victim, "ApplicationUnhealthy")
    for cluster in others:
        assert member_pool(fleet, cluster, ns)["spec"]["workers"] == 3
    eventually(
        lambda: member_pool(fleet, victim, ns) is None or None,
        f"the WorkerPool removed from {victim} once the replacement is Available",
    )


def test_a_canary_step_waits_for_a_custom_kinds_copy_to_be_healthy(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "ri-canary"
    _with_rules(fleet)
    canary_rules = rules()
    canary_rules["spec"]["replicas"]["canaryCopies"] = True

    def replace_rules() -> bool:
        current = custom(fleet).get_cluster_custom_object(
            GROUP, VERSION, "resourceinterpreters", RULES_NAME
        )
        current["spec"] = canary_rules["spec"]
        custom(fleet).replace_cluster_custom_object(
            GROUP, VERSION, "resourceinterpreters", RULES_NAME, current
        )
        return True

    eventually(replace_rules, "the WorkerPool rules say canaryCopies")
    create(
        fleet,
        application(
            "pool",
            ns,
            [pool(ns, 4, "worker:1")],
            placement={"clusterNames": [CANARY_CLUSTER, "member-2"]},
            canary={
                "clusterSelector": {"matchLabels": {"canary": "yes"}},
                "steps": [{"weight": 50}],
            },
        ),
    )
    for cluster in (CANARY_CLUSTER, "member-2"):
        write_status(fleet, cluster, ns, ready(4))
    wait_ap(fleet, ns, "pool", "Available", lambda a: _available(a) == "True")

    update_spec(
        fleet,
        ns,
        "pool",
        lambda s: s["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
            0
        ].update(image="worker:2"),
    )
    waiting = wait_ap(
        fleet,
        ns,
        "pool",
        "the canary copy made",
        lambda a: (a["status"].get("canary") or {}).get("phase") == "Progressing",
    )
    copy_there = eventually(
        lambda: member_pool(fleet, CANARY_CLUSTER, ns, "pool-canary"), "pool-canary on member-1"
    )
    stable_there = member_pool(fleet, CANARY_CLUSTER, ns)
    assert copy_there["spec"]["workers"] == 2
    assert copy_there["spec"]["template"]["spec"]["containers"][0]["image"] == "worker:2"
    assert stable_there["spec"]["workers"] == 2
    assert stable_there["spec"]["template"]["spec"]["containers"][0]["image"] == "worker:1"
    assert member_pool(fleet, "member-2", ns)["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] == ("worker:1")
    assert waiting["status"]["canary"]["step"] == 0

    # The step waits while the copy is not healthy by the rules (it has no status yet) ...
    still = get_ap(fleet, ns, "pool")
    assert still["status"]["canary"]["phase"] == "Progressing"
    # ... and goes on once it is.
    write_status(fleet, CANARY_CLUSTER, ns, ready(2), name="pool-canary")
    done = wait_ap(
        fleet,
        ns,
        "pool",
        "promoted everywhere",
        lambda a: (a["status"].get("canary") or {}).get("phase") == "Succeeded",
    )
    assert (
        done["status"]["canary"]["stableRevision"] == waiting["status"]["canary"]["canaryRevision"]
    )
    eventually(
        lambda: (
            member_pool(fleet, "member-2", ns)["spec"]["template"]["spec"]["containers"][0]["image"]
            == "worker:2"
            or None
        ),
        "the new revision on member-2",
    )
    eventually(
        lambda: member_pool(fleet, CANARY_CLUSTER, ns, "pool-canary") is None or None,
        "the canary copy gone",
    )


def test_a_pending_claim_and_a_load_balancer_without_an_address_read_progressing(
    fleet: Fleet, controller: Controller
) -> None:
    ns = "ri-core"
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "none-such",  # no provisioner: it stays Pending
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    balancer = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]},
    }
    quota = {  # a tenant that may ask for load balancers
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantQuota",
        "metadata": {"name": "ri-core"},
        "spec": {"namespaces": [ns], "services": {"types": ["ClusterIP", "LoadBalancer"]}},
    }
    custom(fleet).create_cluster_custom_object(GROUP, VERSION, "tenantquotas", quota)
    try:
        _pending_and_unaddressed(fleet, ns, claim, balancer)
    finally:
        delete_ap(fleet, ns, "web")
        eventually(lambda: ap_gone(fleet, ns, "web") or None, f"{ns}/web gone")
        custom(fleet).delete_cluster_custom_object(GROUP, VERSION, "tenantquotas", "ri-core")


def _pending_and_unaddressed(
    fleet: Fleet, ns: str, claim: dict[str, Any], balancer: dict[str, Any]
) -> None:
    create(fleet, application("web", ns, [claim, balancer], placement={"clusterNames": [CLAIMED]}))
    app = wait_ap(
        fleet,
        ns,
        "web",
        "Applied and Progressing",
        lambda a: (
            condition(a, "Applied").get("status") == "True"
            and cluster_entry(a, CLAIMED).get("health") == "Progressing"
        ),
    )
    assert condition(app, "Available")["reason"] == "Progressing"
    messages = {o["kind"]: o.get("message") for o in cluster_entry(app, CLAIMED)["objects"]}
    assert messages == {
        "PersistentVolumeClaim": "Pending, not bound yet",
        "Service": "waiting for a load balancer address",
    }
