"""The agent's Helm chart with a real helm: it lints; its RBAC on the member is what the
allow lists name and no wider; its pod is hardened; a wrong value fails naming it. (Its
RBAC is proven sufficient on a real member by tests/e2e/pull/, which runs the agent with
the chart's ServiceAccount token.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.install.test_chart import of_kind, run
from tests.e2e.tools import ROOT, built

CHART = ROOT / "charts" / "propagator-agent"


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm.sh") / "helm"


def template(helm: Path, *values: str) -> list[dict[str, Any]]:
    sets = [a for v in values for a in ("--set", v)]
    result = run(str(helm), "template", "a", str(CHART), "-n", "agent", *sets)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_chart_lints(helm: Path) -> None:
    result = run(str(helm), "lint", "--strict", str(CHART), "--set", "cluster=edge-7")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cluster_is_required(helm: Path) -> None:
    result = run(str(helm), "template", "a", str(CHART))
    assert result.returncode != 0
    assert "cluster is required" in result.stderr


def test_a_hardened_pod_configured_from_its_values(helm: Path) -> None:
    objects = template(helm, "cluster=edge-7", "settings.member_workers=8")
    (deployment,) = of_kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["args"] == ["agent"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PROPAGATOR_AGENT_CLUSTER"] == "edge-7"
    assert env["PROPAGATOR_AGENT_HUB_SECRET"] == "agent/propagator-agent-hub"
    assert env["PROPAGATOR_AGENT_ALLOW_KINDS"] == (
        "Namespace,ConfigMap,Service,ServiceAccount,Deployment.apps,StatefulSet.apps"
    )
    assert env["PROPAGATOR_MEMBER_WORKERS"] == "8"
    assert {
        p["httpGet"]["path"] for p in (container["livenessProbe"], container["readinessProbe"])
    } == {
        "/healthz",
        "/readyz",
    }


def _rules(objects: list[dict[str, Any]], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (o["metadata"].get("namespace", ""), r) for o in of_kind(objects, kind) for r in o["rules"]
    ]


def test_with_namespaces_it_writes_only_there(helm: Path) -> None:
    objects = template(helm, "cluster=edge-7", "allow.namespaces={shop,web}")
    cluster_wide = _rules(objects, "ClusterRole")
    writes = [r for _, r in cluster_wide if "create" in r["verbs"] or "delete" in r["verbs"]]
    assert writes == []  # cluster-wide: nodes and pods read, the two namespaces patched
    assert (
        "",
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["shop", "web"],
            "verbs": ["get", "patch"],
        },
    ) in cluster_wide
    roles = _rules(objects, "Role")
    assert {ns for ns, _ in roles} == {"shop", "web", "agent"}
    granted = {(ns, res) for ns, r in roles for res in r["resources"] if "create" in r["verbs"]}
    assert ("shop", "deployments") in granted
    assert ("shop", "secrets") not in granted
    hub_secret = [r for ns, r in roles if ns == "agent"]
    assert hub_secret == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["propagator-agent-hub"],
            "verbs": ["get", "patch"],
        }
    ]


def test_every_rule_names_what_it_grants(helm: Path) -> None:
    for values in ([], ["allow.namespaces={shop}"]):
        objects = template(helm, "cluster=edge-7", *values)
        for _, rule in _rules(objects, "ClusterRole") + _rules(objects, "Role"):
            assert "*" not in str(rule), rule
            assert "escalate" not in rule["verbs"]
            assert "bind" not in rule["verbs"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("cluster=Edge_7", "cluster"),
        ("allow.namespaces={Shop}", "allow/namespaces/0"),
        ("allow.kinds[0].kind=configmap", "allow/kinds/0/kind"),
        ("settings.agent_lease_duration_s=5", "agent_lease_duration_s"),
        ("settings.agent_cluster=other", "agent_cluster"),  # the chart sets it
        ("hubSecret.name=", "hubSecret/name"),
    ],
)
def test_a_wrong_value_fails_naming_it(helm: Path, value: str, says: str) -> None:
    result = run(str(helm), "template", "a", str(CHART), "--set", "cluster=edge-7", "--set", value)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert says in result.stderr
