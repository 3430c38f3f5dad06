"""A Pull member's join: what it writes on the hub, and the identity it gives the agent."""

from __future__ import annotations

import base64

import pytest
import yaml

from fleet.pulljoin import (
    agent_cluster_rules,
    agent_kubeconfig,
    agent_role_rules,
    plan_pull_join,
    pull_identity_objects,
)
from fleet.registration import JoinError


def test_the_plan_writes_the_namespace_identity_lease_and_member() -> None:
    plan = plan_pull_join("edge-7", fleet="prod", layer="edge", labels={"env": "prod"})
    kinds = [(o["kind"], o["metadata"].get("namespace")) for o in plan.objects]
    ns = "propagator-cluster-edge-7"
    assert kinds == [
        ("Namespace", None),
        ("ServiceAccount", ns),
        ("Role", ns),
        ("RoleBinding", ns),
        ("ClusterRole", None),
        ("ClusterRoleBinding", None),
        ("Lease", ns),
    ]
    assert plan.member["spec"] == {"mode": "Pull", "layer": "edge"}
    assert "secretRef" not in plan.member["spec"]
    assert plan.describe()[-1] == "Fleet prod: add edge-7 (created if missing)"


def test_the_agents_rules_name_no_wildcard_and_its_own_objects_only() -> None:
    for rule in (*agent_role_rules(), *agent_cluster_rules("edge-7")):
        assert "*" not in str(rule)
        assert all(v in ("get", "list", "watch", "patch", "create") for v in rule["verbs"])
        if rule["verbs"] != ["get", "list", "watch"]:  # every write names what it writes
            assert rule.get("resourceNames") or rule["resources"] == ["works/status"]
    assert agent_cluster_rules("edge-7")[0]["resourceNames"] == ["edge-7"]


@pytest.mark.parametrize(
    ("name", "kw", "message"),
    [
        ("Edge", {}, "NAME: a Pull member's name must be a DNS label"),
        ("x" * 60, {}, "NAME: a Pull member's name must be a DNS label"),
        ("edge", {"bootstrap_ttl_s": 60}, "--bootstrap-ttl=60: must be 600 to 86400 seconds"),
        ("edge", {"layer": "Not A Label"}, "--layer="),
        ("edge", {"labels": {"bad key!": "v"}}, "--label bad key!=v: "),
    ],
)
def test_bad_flags_are_refused_naming_them(name: str, kw: dict[str, object], message: str) -> None:
    with pytest.raises(JoinError, match=message.replace("(", r"\(")):
        plan_pull_join(name, **kw)  # type: ignore[arg-type]


def test_the_agents_kubeconfig_holds_the_hub_its_ca_and_the_token() -> None:
    text = agent_kubeconfig("edge-7", "https://hub.example:6443", b"CA", "tok")
    doc = yaml.safe_load(text)
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://hub.example:6443",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
    }
    assert doc["users"][0]["user"] == {"token": "tok"}
    context = doc["contexts"][0]["context"]
    assert context["namespace"] == "propagator-cluster-edge-7"


def test_unjoin_removes_the_identity_and_namespace_last() -> None:
    gone = pull_identity_objects("edge-7")
    assert [g[1] for g in gone] == ["ClusterRoleBinding", "ClusterRole", "Namespace"]
    assert gone[-1][2] == "propagator-cluster-edge-7"
