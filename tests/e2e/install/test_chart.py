"""The Helm chart with a real helm (built from its pinned module): it lints, renders what
its values say, refuses a wrong value naming it; and its alerts pass promtool's checks and
unit tests."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.finalizerpolicy import PLURALS, cleanup_finalizer_policy
from propagator.observability.dashboards import DASHBOARDS
from tests.e2e.tools import ROOT, built

CHART = ROOT / "charts" / "propagator"


@pytest.fixture(scope="module")
def helm() -> Path:
    return built("helm.sh") / "helm"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=300)


def template(helm: Path, *values: str) -> list[dict[str, Any]]:
    sets = [a for v in values for a in ("--set", v)]
    result = run(str(helm), "template", "prop", str(CHART), "-n", "propagator-system", *sets)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_the_chart_lints(helm: Path) -> None:
    result = run(str(helm), "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_render_a_hardened_deployment_with_its_settings(helm: Path) -> None:
    objects = template(helm, "settings.max_concurrency=50", "settings.leader_lease_duration_s=20")
    (deployment,) = of_kind(objects, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PROPAGATOR_MAX_CONCURRENCY"] == "50"
    assert env["PROPAGATOR_LEADER_LEASE_DURATION_S"] == "20"
    assert env["PROPAGATOR_LEADER_ELECT"] == "true"
    assert env["PROPAGATOR_LOG_FORMAT"] == "json"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {o["kind"] for o in objects} >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "PodDisruptionBudget",
    }
    # the Operator's kinds only when asked for
    assert not of_kind(objects, "ServiceMonitor")
    assert not of_kind(objects, "PrometheusRule")
    asked = template(helm, "serviceMonitor.enabled=true", "prometheusRule.enabled=true")
    (rule,) = of_kind(asked, "PrometheusRule")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "PropagatorMemberNotReady" in alerts
    assert of_kind(asked, "ServiceMonitor")


def test_tracing_headers_come_from_a_secret_and_otel_variables_pass_through(helm: Path) -> None:
    objects = template(
        helm,
        "settings.trace_exporter=otlp",
        "settings.otlp_endpoint=https://otel.monitoring:4318",
        "tracing.headersSecret.name=otlp-auth",
        "tracing.otelEnv.OTEL_SERVICE_NAME=propagator-eu",
    )
    (deployment,) = of_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["PROPAGATOR_OTLP_HEADERS"]["valueFrom"] == {
        "secretKeyRef": {"name": "otlp-auth", "key": "headers"}
    }
    assert env["OTEL_SERVICE_NAME"]["value"] == "propagator-eu"
    assert env["PROPAGATOR_TRACE_EXPORTER"]["value"] == "otlp"
    plain = template(helm)
    (deployment,) = of_kind(plain, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "PROPAGATOR_OTLP_HEADERS" not in {e["name"] for e in container["env"]}


def test_secrets_are_readable_only_in_the_release_namespace(helm: Path) -> None:
    objects = template(helm)
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert not any("secrets" in r["resources"] for r in cluster_role["rules"])
    (role,) = of_kind(objects, "Role")
    assert role["metadata"]["namespace"] == "propagator-system"
    assert any(r["resources"] == ["secrets"] for r in role["rules"])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("replicas=0", "replicas"),
        ("settings.max_concurrency=1000", "max_concurrency"),
        ("settings.log_format=xml", "log_format"),
        ("settings.namespace=elsewhere", "namespace"),
        ("settings.bogus=1", "bogus"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("settings.otlp_headers=a=b", "otlp_headers"),  # headers come from a Secret only
        ("tracing.otelEnv.PATH=/tmp", "otelEnv"),  # only OTEL_* variables
        (  # Secrets are readable only in the release namespace
            "rbac.selectableResources[0].apiGroups[0]=,rbac.selectableResources[0].resources[0]=secrets",
            "/rbac/selectableResources/0/resources/0",
        ),
    ],
)
def test_a_wrong_value_fails_naming_it(helm: Path, value: str, says: str) -> None:
    result = run(str(helm), "template", "prop", str(CHART), "--set", value)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert says in result.stderr


@pytest.mark.parametrize(
    ("api_versions", "values", "installed"),
    [
        (["admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"], [], True),
        ([], [], False),  # a hub older than 1.36
        (
            ["admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"],
            ["--set", "admissionPolicy.create=false"],
            False,
        ),
    ],
    ids=["1.36+", "older hub", "turned off"],
)
def test_the_admission_policy_is_installed_where_the_hub_serves_it(
    helm: Path, api_versions: list[str], values: list[str], installed: bool
) -> None:
    flags = [a for v in api_versions for a in ("--api-versions", v)]
    result = run(
        str(helm), "template", "prop", str(CHART), "-n", "propagator-system", *flags, *values
    )
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] in PLURALS]
    for obj in rendered:
        assert obj["metadata"].pop("labels")["app.kubernetes.io/name"] == "propagator"
    assert rendered == (cleanup_finalizer_policy() if installed else [])


def test_the_alerts_pass_promtool() -> None:
    promtool = built("prometheus.sh") / "promtool"
    alerts = CHART / "alerts"
    checked = run(str(promtool), "check", "rules", str(alerts / "rules.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [str(promtool), "test", "rules", "tests.yaml"],
        cwd=alerts,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_dashboards_ship_as_configmaps_with_valid_promql(helm: Path, tmp_path: Path) -> None:
    maps = of_kind(template(helm), "ConfigMap")
    labelled = [m for m in maps if m["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert len(labelled) == len(DASHBOARDS)
    assert not of_kind(template(helm, "dashboards.enabled=false"), "ConfigMap")
    # every query parses: promtool checks them as recording rules ($variables as .*)
    every = [expr for d in DASHBOARDS for p in d.panels for expr, _ in p.targets]
    for name in ("cluster", "namespace", "application", "tenant"):
        every = [expr.replace(f'"${name}"', '".*"') for expr in every]
    rules = [{"record": f"check:{i}", "expr": expr} for i, expr in enumerate(every)]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    checked = run(str(built("prometheus.sh") / "promtool"), "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
