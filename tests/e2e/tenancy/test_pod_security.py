"""What a tenant runs and exposes, end to end on the real hub and members (tenancy part
two): a pod template that asks for the node is refused before anything is written; a
restricted tenant's namespaces carry the labels that make each member's own Pod Security
Admission refuse what bypasses the hub; Service types and external IPs only where the
TenantQuota gives them; the platform's kinds refused to tenants; the default NetworkPolicy
written and kept."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, running
from tests.e2e.manifests import config_map, deployment, service
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    application,
    condition,
    create,
    member_object,
    ready_everywhere,
    wait_ap,
)
from tests.e2e.tenancy.test_tenancy import _tenant_quota
from tests.e2e.waiting import eventually

BASELINE_NS, RESTRICTED_NS, EXPOSED_NS = "psa-baseline", "psa-restricted", "psa-exposed"
PSA = "pod-security.kubernetes.io/"


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    _tenant_quota(fleet, "psa-base", namespaces=[BASELINE_NS])
    _tenant_quota(
        fleet,
        "psa-strict",
        namespaces=[RESTRICTED_NS],
        podSecurity={"level": "restricted"},
        namespaceDefaults={
            "networkPolicy": {"ingressFrom": "SameTenant"},
            "limits": [{"type": "Container", "defaultRequest": {"cpu": "50m"}}],
        },
    )
    _tenant_quota(
        fleet,
        "psa-exposed",
        namespaces=[EXPOSED_NS],
        services={"types": ["ClusterIP", "NodePort"], "externalIPs": True},
    )
    with running(fleet, tmp_path_factory.mktemp("podsecurity"), ENV) as controller:
        yield controller


def _refused(fleet: Fleet, namespace: str, name: str) -> str:
    app = wait_ap(
        fleet,
        namespace,
        name,
        "refused",
        lambda a: condition(a, "Applied").get("reason") == "Forbidden",
    )
    message: str = condition(app, "Applied")["message"]
    assert message.endswith("nothing was applied"), message
    return message


def _root_on_the_node(name: str, namespace: str) -> dict[str, Any]:
    workload = deployment(name, namespace, "busybox:1.36", 1)
    spec = workload["spec"]["template"]["spec"]
    spec.update(hostPID=True, hostNetwork=True)
    spec["containers"][0]["securityContext"] = {"privileged": True}
    spec["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    return workload


def _restricted(workload: dict[str, Any]) -> dict[str, Any]:
    compliant = copy.deepcopy(workload)
    spec = compliant["spec"]["template"]["spec"]
    spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    spec["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsUser": 1000,
    }
    return compliant


def test_a_pod_template_that_asks_for_the_node_is_forbidden_before_any_write(
    fleet: Fleet, controller: Controller
) -> None:
    innocent = config_map("innocent", BASELINE_NS, a="1")
    create(
        fleet, application("root", BASELINE_NS, [innocent, _root_on_the_node("root", BASELINE_NS)])
    )
    message = _refused(fleet, BASELINE_NS, "root")
    # The object, the field, each check with its container, the level and whence it comes.
    assert f"apps/v1 Deployment {BASELINE_NS}/root on " in message
    assert "spec.template breaks Pod Security level baseline" in message
    assert 'privileged (container "main" must not set securityContext.privileged=true)' in message
    assert "host namespaces (hostNetwork=true, hostPID=true)" in message
    assert 'hostPath volumes (volume "root")' in message
    assert "(the platform default)" in message
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "ConfigMap", BASELINE_NS, "innocent") is None
        assert member_object(fleet, cluster, "Deployment", BASELINE_NS, "root") is None


def test_a_restricted_tenant_is_refused_at_the_hub_and_by_each_members_admission(
    fleet: Fleet, controller: Controller
) -> None:
    plain = deployment("plain", RESTRICTED_NS, "nginx:1.27", 1)
    create(fleet, application("plain", RESTRICTED_NS, [plain]))
    message = _refused(fleet, RESTRICTED_NS, "plain")
    assert "breaks Pod Security level restricted" in message
    assert "the TenantQuota's spec.podSecurity.level" in message
    assert 'container "main" must set securityContext.allowPrivilegeEscalation=false' in message

    # A compliant application runs, and its namespaces carry the level on every member.
    web = _restricted(deployment("web", RESTRICTED_NS, "nginx:1.27", 1))
    create(fleet, application("web", RESTRICTED_NS, [web]))
    wait_ap(fleet, RESTRICTED_NS, "web", "ready everywhere", ready_everywhere)
    for cluster in MEMBERS:
        labels = fleet.core(cluster).read_namespace(RESTRICTED_NS).metadata.labels
        for mode in ("enforce", "audit", "warn"):
            assert labels[PSA + mode] == "restricted", (cluster, labels)
        assert labels["propagator.io/tenant"] == "psa-strict"

    # Someone with access to a member bypasses the hub: the member itself refuses the pod.
    pod = {
        "metadata": {"name": "bypass"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], "hostPID": True},
    }
    with pytest.raises(k8s.ApiException) as refused:
        fleet.core(MEMBERS[0]).create_namespaced_pod(RESTRICTED_NS, pod)
    assert refused.value.status == 403
    message = json.loads(refused.value.body or "{}")["message"]
    assert 'violates PodSecurity "restricted:latest": host namespaces (hostPID=true)' in message


def test_the_platforms_labels_and_defaults_are_written_and_kept(
    fleet: Fleet, controller: Controller
) -> None:
    web = _restricted(deployment("kept", RESTRICTED_NS, "nginx:1.27", 1))
    create(fleet, application("kept", RESTRICTED_NS, [web]))
    wait_ap(fleet, RESTRICTED_NS, "kept", "ready everywhere", ready_everywhere)
    networking = k8s.NetworkingV1Api(fleet.api(MEMBERS[1]))
    name = "propagator-tenant-psa-strict"
    for cluster in MEMBERS:
        policy: Any = k8s.NetworkingV1Api(fleet.api(cluster)).read_namespaced_network_policy(
            name, RESTRICTED_NS
        )
        assert policy.spec.pod_selector.match_labels is None  # every pod of the namespace
        peers = policy.spec.ingress[0]._from
        assert peers[0].namespace_selector.match_labels == {"propagator.io/tenant": "psa-strict"}
        limits = fleet.core(cluster).read_namespaced_limit_range(name, RESTRICTED_NS)
        assert limits.spec.limits[0].default_request == {"cpu": "50m"}

    # Undone on a member (policy deleted, namespace relabelled): written again.
    networking.delete_namespaced_network_policy(name, RESTRICTED_NS)
    fleet.core(MEMBERS[1]).patch_namespace(
        RESTRICTED_NS, {"metadata": {"labels": {PSA + "enforce": "privileged"}}}
    )

    def restored() -> bool | None:
        labels = fleet.core(MEMBERS[1]).read_namespace(RESTRICTED_NS).metadata.labels
        try:
            networking.read_namespaced_network_policy(name, RESTRICTED_NS)
        except k8s.ApiException:
            return None
        return labels[PSA + "enforce"] == "restricted" or None

    eventually(restored, "the network policy and the level restored on the member")


def _exposed(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    svc = service(name, namespace)
    svc["spec"].update(spec)
    return svc


def test_services_expose_only_what_the_tenant_quota_gives(
    fleet: Fleet, controller: Controller
) -> None:
    for name, spec, says in (
        ("np", {"type": "NodePort"}, "spec.type 'NodePort' is not among the Service types"),
        ("eip", {"externalIPs": ["203.0.113.9"]}, "spec.externalIPs ['203.0.113.9']"),
    ):
        create(fleet, application(name, BASELINE_NS, [_exposed(name, BASELINE_NS, **spec)]))
        assert says in _refused(fleet, BASELINE_NS, name)
        for cluster in MEMBERS:
            assert member_object(fleet, cluster, "Service", BASELINE_NS, name) is None

    allowed = [
        _exposed("np", EXPOSED_NS, type="NodePort"),
        _exposed("eip", EXPOSED_NS, externalIPs=["203.0.113.9"]),
    ]
    create(fleet, application("exposed", EXPOSED_NS, allowed))
    wait_ap(
        fleet,
        EXPOSED_NS,
        "exposed",
        "applied",
        lambda a: condition(a, "Applied").get("status") == "True",
    )
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "Service", EXPOSED_NS, "np").spec.type == "NodePort"
        eip = member_object(fleet, cluster, "Service", EXPOSED_NS, "eip")
        assert eip.spec.external_ips == ["203.0.113.9"]
    # LoadBalancer is not among this tenant's types.
    create(fleet, application("lb", EXPOSED_NS, [_exposed("lb", EXPOSED_NS, type="LoadBalancer")]))
    assert "spec.type 'LoadBalancer'" in _refused(fleet, EXPOSED_NS, "lb")


def test_a_tenants_own_limit_range_is_refused(fleet: Fleet, controller: Controller) -> None:
    zero = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "free", "namespace": BASELINE_NS},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "0"}}]},
    }
    create(fleet, application("free", BASELINE_NS, [zero]))
    message = _refused(fleet, BASELINE_NS, "free")
    assert "kind core/LimitRange inside tenant namespaces is the platform's" in message
    for cluster in MEMBERS:
        assert not fleet.core(cluster).list_namespaced_limit_range(BASELINE_NS).items
