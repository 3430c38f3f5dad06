"""The tenant boundary (propagator/tenancy/policy.py): what a tenant's rendered objects may
be and where they may go, judged without I/O."""

from __future__ import annotations

from typing import Any

import pytest

from propagator.settings import Settings
from propagator.tenancy.policy import Forbidden, TenantPolicy, policy_for, refusals

PLATFORM = Settings().platform()
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "StorageClass"}
CLUSTER_SCOPED |= {"MutatingWebhookConfiguration", "CustomResourceDefinition", "MemberCluster"}


def scope(api_version: str, kind: str) -> bool | None:
    if kind == "Widget":
        return None  # served by the members only
    return kind not in CLUSTER_SCOPED


def obj(
    api_version: str, kind: str, name: str = "x", namespace: str | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **extra}


def quota(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a"}, "spec": {"namespaces": ["shop"], **spec}}


def check(o: dict[str, Any], policy: TenantPolicy | None = None) -> str | None:
    policy = policy or policy_for("shop", quota(), PLATFORM)
    found = refusals([o], policy, PLATFORM, scope, "shop")
    return found[0].rule if found else None


RBAC = "rbac.authorization.k8s.io/v1"


RESERVED = "is reserved for the platform"
OUTSIDE = "is not among the destinations [shop]"
ADMIN_BINDING = {"kind": "ClusterRole", "name": "cluster-admin"}


@pytest.mark.parametrize(
    ("o", "rule"),
    [
        (
            obj(RBAC, "ClusterRoleBinding"),
            f"kind rbac.authorization.k8s.io/ClusterRoleBinding {RESERVED}",
        ),
        (obj(RBAC, "ClusterRole"), f"kind rbac.authorization.k8s.io/ClusterRole {RESERVED}"),
        (
            obj(RBAC, "RoleBinding", "a", "shop", roleRef=ADMIN_BINDING),
            "not the ClusterRole 'cluster-admin'",
        ),
        (
            obj("apps/v1", "DaemonSet", "agent", "kube-system"),
            f"namespace kube-system {RESERVED} (kube-*)",
        ),
        (obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"), RESERVED),
        (obj("apiextensions.k8s.io/v1", "CustomResourceDefinition"), RESERVED),
        (
            obj("propagator.io/v1alpha1", "MemberCluster"),
            f"kind propagator.io/MemberCluster {RESERVED}",
        ),
        (obj("v1", "Namespace", "other-team"), f"namespace other-team {OUTSIDE}"),
        (obj("v1", "Namespace", "kube-public"), f"namespace kube-public {RESERVED}"),
        (obj("v1", "ConfigMap", "c", "other-team"), f"namespace other-team {OUTSIDE}"),
        (
            obj("storage.k8s.io/v1", "StorageClass"),
            "cluster-scoped kind storage.k8s.io/StorageClass",
        ),
        (obj("example.com/v1", "Widget"), "the hub does not serve example.com/v1 Widget"),
    ],
)
def test_escapes_are_refused_with_the_rule(o: dict[str, Any], rule: str) -> None:
    assert rule in (check(o) or "")


@pytest.mark.parametrize(
    "o",
    [
        obj("apps/v1", "Deployment", "web"),  # the application's namespace by default
        obj("v1", "ConfigMap", "c", "shop"),
        obj("v1", "Namespace", "shop"),
        obj(RBAC, "Role", "reader", "shop"),
        obj(RBAC, "RoleBinding", "read", "shop", roleRef={"kind": "Role", "name": "reader"}),
        obj("example.com/v1", "Widget", "w", "shop"),
    ],
)
def test_what_stays_inside_is_allowed(o: dict[str, Any]) -> None:
    assert check(o) is None


def test_a_namespace_without_tenant_gets_the_restrictive_default() -> None:
    policy = policy_for("shop", None, PLATFORM)
    assert policy.who == "no tenant (default policy)"
    assert check(obj("v1", "ConfigMap", "c", "shop"), policy) is None
    assert check(obj("v1", "ConfigMap", "c", "web"), policy) is not None
    assert check(obj("storage.k8s.io/v1", "StorageClass", "fast"), policy) is not None


def test_destinations_and_cluster_scoped_kinds_widen_the_tenant() -> None:
    policy = policy_for(
        "shop",
        quota(
            destinations=["web", "web-canary"],
            clusterScopedKinds=[{"group": "storage.k8s.io", "kind": "StorageClass"}],
        ),
        PLATFORM,
    )
    assert check(obj("v1", "ConfigMap", "c", "web-canary"), policy) is None
    assert check(obj("storage.k8s.io/v1", "StorageClass", "fast"), policy) is None
    # the listed destinations replace the default
    assert "not among the destinations [web, web-canary]" in (
        check(obj("v1", "ConfigMap", "c", "shop"), policy) or ""
    )


def test_the_deny_list_wins_over_the_tenant() -> None:
    policy = policy_for(
        "shop",
        quota(
            destinations=["kube-system"],
            clusterScopedKinds=[{"group": "rbac.authorization.k8s.io", "kind": "ClusterRole"}],
        ),
        PLATFORM,
    )
    assert "reserved" in (check(obj(RBAC, "ClusterRole", "all"), policy) or "")
    assert "reserved" in (check(obj("v1", "ConfigMap", "c", "kube-system"), policy) or "")


def test_platform_namespaces_may_propagate_anything() -> None:
    policy = policy_for("propagator-system", None, PLATFORM)
    assert policy.platform
    assert check(obj(RBAC, "ClusterRoleBinding", "ops"), policy) is None
    assert check(obj("apps/v1", "DaemonSet", "agent", "kube-system"), policy) is None


def test_the_platform_can_lift_or_add_rules_through_settings() -> None:
    platform = Settings(denied_kinds="core/Secret", denied_namespaces="infra-*").platform()
    policy = policy_for("shop", quota(destinations=["shop", "infra-logs"]), platform)
    found = refusals(
        [obj("v1", "Secret", "s", "shop"), obj("v1", "ConfigMap", "c", "infra-logs")],
        policy,
        platform,
        scope,
        "shop",
    )
    assert [r.rule.split(" (")[0] for r in found] == [
        "kind core/Secret is reserved for the platform",
        "namespace infra-logs is reserved for the platform",
    ]


def test_a_refusal_of_many_objects_names_five_and_counts_the_rest() -> None:
    policy = policy_for("shop", quota(), PLATFORM)
    found = refusals(
        [obj("v1", "ConfigMap", f"c{i}", "other-team") for i in range(7)],
        policy,
        PLATFORM,
        scope,
        "shop",
    )
    message = str(Forbidden(policy, found))
    assert message.startswith("7 object(s) outside tenant team-a: v1 ConfigMap other-team/c0: ")
    assert "other-team/c4" in message
    assert "other-team/c5" not in message
    assert message.endswith(f"namespace other-team {OUTSIDE} and 2 more")


# -- what a tenant runs and exposes (tenancy part two) -------------------------------------

ROOT_ON_THE_NODE = {
    "hostPID": True,
    "hostNetwork": True,
    "containers": [{"name": "shell", "image": "x", "securityContext": {"privileged": True}}],
    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
}
RESTRICTED_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "image": "x",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    ],
}


def workload(kind: str, pod: dict[str, Any]) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": pod}
    if kind == "Pod":
        return obj("v1", "Pod", "p", "shop", spec=pod)
    if kind == "CronJob":
        job = {"template": template}
        return obj("batch/v1", "CronJob", "c", "shop", spec={"jobTemplate": {"spec": job}})
    group = "batch/v1" if kind == "Job" else "v1" if kind == "ReplicationController" else "apps/v1"
    return obj(group, kind, "w", "shop", spec={"template": template})


WORKLOADS = [
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
]


@pytest.mark.parametrize("kind", WORKLOADS)
def test_every_workload_kind_is_held_to_the_tenants_pod_security_level(kind: str) -> None:
    rule = check(workload(kind, ROOT_ON_THE_NODE))
    assert rule is not None
    # The level, where it comes from, the template's field, each check and container.
    assert "breaks Pod Security level baseline" in rule
    assert "(the platform default)" in rule
    where = {"Pod": "", "CronJob": "spec.jobTemplate.spec.template "}.get(kind, "spec.template ")
    assert rule.startswith(f"{where}breaks")
    assert 'container "shell" must not set securityContext.privileged=true' in rule
    assert "hostNetwork=true, hostPID=true" in rule
    assert 'hostPath volumes (volume "root")' in rule
    assert check(workload(kind, RESTRICTED_POD)) is None


def test_a_restricted_tenant_is_refused_what_baseline_allows() -> None:
    restricted = policy_for("shop", quota(podSecurity={"level": "restricted"}), PLATFORM)
    plain = {"containers": [{"name": "app", "image": "x"}]}
    assert check(workload("Deployment", plain)) is None
    rule = check(workload("Deployment", plain), restricted)
    assert rule is not None
    assert "level restricted" in rule
    assert "the TenantQuota's spec.podSecurity.level" in rule
    assert 'container "app" must set securityContext.allowPrivilegeEscalation=false' in rule
    assert check(workload("Deployment", RESTRICTED_POD), restricted) is None


def test_privileged_only_where_the_platform_allows_it() -> None:
    asks = quota(podSecurity={"level": "privileged"})
    held = policy_for("shop", asks, PLATFORM)
    assert held.pod_security == "baseline"
    rule = check(workload("Deployment", ROOT_ON_THE_NODE), held)
    assert rule is not None
    assert "PROPAGATOR_POD_SECURITY_PRIVILEGED does not allow" in rule
    lifted = Settings(pod_security_privileged=True).platform()
    assert (
        refusals(
            [workload("Pod", ROOT_ON_THE_NODE)],
            policy_for("shop", asks, lifted),
            lifted,
            scope,
            "shop",
        )
        == []
    )
    stricter = Settings(pod_security_default="restricted").platform()
    assert policy_for("shop", None, stricter).pod_security == "restricted"


def service(**spec: Any) -> dict[str, Any]:
    return obj("v1", "Service", "s", "shop", spec={"ports": [{"port": 80}], **spec})


def test_services_are_cluster_ip_only_unless_the_tenant_may_use_more() -> None:
    assert check(service()) is None
    assert check(service(type="ClusterIP", clusterIP="None")) is None
    for kind in ("NodePort", "LoadBalancer", "ExternalName"):
        rule = check(service(type=kind))
        assert rule == (
            f"spec.type {kind!r} is not among the Service types the tenant may use "
            "[ClusterIP] (TenantQuota spec.services.types)"
        )
    wider = policy_for("shop", quota(services={"types": ["ClusterIP", "NodePort"]}), PLATFORM)
    assert check(service(type="NodePort"), wider) is None
    assert check(service(type="LoadBalancer"), wider) is not None


def test_external_ips_are_the_platforms_unless_it_gives_them() -> None:
    rule = check(service(externalIPs=["203.0.113.7"]))
    assert rule is not None
    assert "spec.externalIPs ['203.0.113.7']" in rule
    given = policy_for("shop", quota(services={"externalIPs": True}), PLATFORM)
    assert check(service(externalIPs=["203.0.113.7"]), given) is None


def test_ingress_and_gateway_classes_where_the_platform_names_them() -> None:
    ingress = obj(
        "networking.k8s.io/v1", "Ingress", "i", "shop", spec={"ingressClassName": "public"}
    )
    gateway = obj(
        "gateway.networking.k8s.io/v1", "Gateway", "g", "shop", spec={"gatewayClassName": "edge"}
    )
    assert check(ingress) is None  # unset: any class
    assert check(gateway) is None
    named = policy_for(
        "shop",
        quota(services={"ingressClasses": ["internal"], "gatewayClasses": ["internal"]}),
        PLATFORM,
    )
    assert check(ingress, named) == (
        "spec.ingressClassName 'public' is not among the ingress classes [internal]"
    )
    assert check(gateway, named) == (
        "spec.gatewayClassName 'edge' is not among the gateway classes [internal]"
    )
    unnamed = obj("networking.k8s.io/v1", "Ingress", "i", "shop", spec={})
    assert check(unnamed, named) == "an Ingress must set spec.ingressClassName to one of [internal]"
    by_annotation = obj("networking.k8s.io/v1", "Ingress", "i", "shop", spec={})
    by_annotation["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "public"}
    assert check(by_annotation, named) is not None


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("v1", "ResourceQuota"), ("v1", "LimitRange"), ("networking.k8s.io/v1", "NetworkPolicy")],
)
def test_platform_owned_kinds_are_refused_to_tenants(api_version: str, kind: str) -> None:
    rule = check(obj(api_version, kind, "mine", "shop"))
    assert rule is not None
    assert "inside tenant namespaces is the platform's (PROPAGATOR_PLATFORM_OWNED_KINDS" in rule
    assert (
        refusals(
            [obj(api_version, kind, "x", "shop")],
            policy_for("propagator-system", None, PLATFORM),
            PLATFORM,
            scope,
            "shop",
        )
        == []
    )
    relaxed = Settings(platform_owned_kinds="core/ResourceQuota").platform()
    mine = policy_for("shop", quota(), relaxed)
    assert (
        refusals([obj(api_version, kind, "x", "shop")], mine, relaxed, scope, "shop") == []
    ) == (kind != "ResourceQuota")


def test_a_tenant_namespace_may_not_carry_the_platforms_labels() -> None:
    ns = obj("v1", "Namespace", "shop")
    assert check(ns) is None
    ns["metadata"]["labels"] = {"pod-security.kubernetes.io/enforce": "privileged", "team": "a"}
    assert check(ns) == (
        "namespace label pod-security.kubernetes.io/enforce is the platform's (the tenant's "
        "Pod Security level comes from its TenantQuota's spec.podSecurity)"
    )
    ns["metadata"]["labels"] = {"propagator.io/tenant": "team-b"}
    assert check(ns) is not None


def test_a_refusal_stays_short_whatever_the_pod_template_holds() -> None:
    """Thousands of containers with long names, each breaking every check: the rule a
    status shows is bounded, and still names the level and the first checks."""
    name = "c" * 63
    containers = [
        {
            "name": f"{name[:58]}{i:05}",
            "image": "x",
            "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            "ports": [{"containerPort": 1, "hostPort": 1 + i % 60000}],
        }
        for i in range(5000)
    ]
    rule = check(workload("Deployment", {"containers": containers, "hostPID": True}))
    assert rule is not None
    assert len(rule) < 1400
    assert rule.startswith("spec.template breaks Pod Security level baseline: ")
