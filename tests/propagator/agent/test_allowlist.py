"""What a member lets its agent write: everything else refused before any write."""

from __future__ import annotations

import pytest

from propagator.agent.allowlist import Allowlist, AllowlistError, group_kind

BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "grab"},
}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "namespace": "x"},
}


def test_kinds_are_named_as_kubectl_names_them() -> None:
    assert group_kind(CM) == "ConfigMap"
    assert group_kind(DEPLOY) == "Deployment.apps"
    assert group_kind(BINDING) == "ClusterRoleBinding.rbac.authorization.k8s.io"


def test_an_empty_allowlist_allows_anything() -> None:
    assert Allowlist().refusals([BINDING, CM, DEPLOY], "shop") == []


def test_kinds_and_namespaces_outside_are_named() -> None:
    allow = Allowlist.of(["shop"], ["ConfigMap", "Deployment.apps", "Namespace"])
    found = allow.refusals([BINDING, CM, DEPLOY], "shop")
    assert found == [
        "rbac.authorization.k8s.io/v1 ClusterRoleBinding grab: kind "
        "ClusterRoleBinding.rbac.authorization.k8s.io is not allowed",
        "apps/v1 Deployment x/d: namespace x is not allowed",
    ]
    message = allow.explain(found)
    assert message.startswith("refused by the member's agent: 2 object(s) outside what it")
    assert "namespaces shop; kinds ConfigMap, Deployment.apps, Namespace" in message


def test_a_namespace_object_is_judged_by_its_own_name() -> None:
    allow = Allowlist.of(["shop"], [])
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}
    assert allow.refusals([ns], "shop") == [
        "v1 Namespace kube-system: namespace kube-system is not allowed"
    ]
    assert allow.refusals([{**ns, "metadata": {"name": "shop"}}], "other") == []


@pytest.mark.parametrize(
    ("namespaces", "kinds", "flag"),
    [
        (["Shop"], [], "PROPAGATOR_AGENT_ALLOW_NAMESPACES"),
        (["a/b"], [], "PROPAGATOR_AGENT_ALLOW_NAMESPACES"),
        ([], ["configmap"], "PROPAGATOR_AGENT_ALLOW_KINDS"),
        ([], ["apps/Deployment"], "PROPAGATOR_AGENT_ALLOW_KINDS"),
        ([], [".apps"], "PROPAGATOR_AGENT_ALLOW_KINDS"),
    ],
)
def test_a_malformed_entry_is_refused_naming_its_setting(
    namespaces: list[str], kinds: list[str], flag: str
) -> None:
    with pytest.raises(AllowlistError, match=flag):
        Allowlist.of(namespaces, kinds)
