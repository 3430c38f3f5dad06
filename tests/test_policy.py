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
