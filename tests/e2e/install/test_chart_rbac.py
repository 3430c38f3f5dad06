"""The chart's RBAC, proven on the real hub: the chart is installed with helm, and
``propagator run`` runs with a token of the chart's ServiceAccount (as the pod would; kwok
nodes run no containers, so outside a pod) — members, propagation, a canary, a tenant's
quota status, leader election and Events all work; and what it must not do, it cannot."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.install.test_in_a_pod import _hub_server_and_ca
from tests.e2e.manifests import config_map, deployment
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    kubectl,
    member_object,
    update_spec,
    wait_ap,
)
from tests.e2e.tools import ROOT, built
from tests.e2e.waiting import eventually

RELEASE, NAMESPACE = "prop", "propagator-system"
ACCOUNT = "prop-propagator"
APPS = "rbac-proof"
SUBJECT = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"


@pytest.fixture(scope="module")
def installed(fleet: Fleet, joined: list[str]) -> Iterator[None]:
    helm = str(built("helm.sh") / "helm")
    kubeconfig = str(fleet.kubeconfig(HUB))
    result = subprocess.run(
        [
            helm, "install", RELEASE, str(ROOT / "charts" / "propagator"),
            "--namespace", NAMESPACE, "--kubeconfig", kubeconfig, "--set", "replicas=1",
            "--skip-crds",  # the session's hub has them already
            "--set", "admissionPolicy.create=false",  # and the admission policy
        ],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    try:
        yield
    finally:
        subprocess.run(
            [helm, "uninstall", RELEASE, "--namespace", NAMESPACE, "--kubeconfig", kubeconfig],
            capture_output=True, check=False, timeout=300,
        )  # fmt: skip


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    """``propagator run`` with the chart's ServiceAccount token, found as in a pod."""
    core: Any = k8s.CoreV1Api(fleet.api(HUB))
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    token = core.create_namespaced_service_account_token(ACCOUNT, NAMESPACE, request)
    server, ca = _hub_server_and_ca(fleet)
    tmp = tmp_path_factory.mktemp("chart-rbac")
    sa_dir = tmp / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "ca.crt").write_bytes(ca)
    (sa_dir / "token").write_text(str(token.status.token))
    (sa_dir / "namespace").write_text(NAMESPACE)
    url = urlparse(server)
    env = {
        **ENV,
        "KUBERNETES_SERVICE_HOST": str(url.hostname),
        "KUBERNETES_SERVICE_PORT": str(url.port),
        "PROPAGATOR_SERVICE_ACCOUNT_DIR": str(sa_dir),
        "PROPAGATOR_NAMESPACE": NAMESPACE,
        "KUBECONFIG": str(tmp / "none"),  # nothing to fall back to
    }
    running = Controller(fleet, tmp, env, hub_args=[])
    running.start()
    try:
        yield running
    finally:
        if not ap_gone(fleet, APPS, "web"):
            delete_ap(fleet, APPS, "web")
            eventually(lambda: ap_gone(fleet, APPS, "web") or None, "rbac-proof/web gone")
        running.stop()
    log = (tmp / "controller.log").read_text()
    # the API server's refusal reads "... is forbidden: User ... cannot ..."
    assert "is forbidden" not in log, log[-3000:]


def _canary(app: dict[str, Any]) -> dict[str, Any]:
    return (app.get("status") or {}).get("canary") or {}


def test_the_controller_works_with_only_the_charts_rbac(
    fleet: Fleet, controller: Controller
) -> None:
    # members: their kubeconfig Secrets (in the release namespace) read, their status written
    custom: Any = k8s.CustomObjectsApi(fleet.api(HUB))
    eventually(lambda: controller.scrape().get("propagator_leader") == 1.0 or None, "leading")
    for member in MEMBERS:
        eventually(
            lambda m=member: (  # type: ignore[misc]
                controller.scrape().get(f'propagator_cluster_ready{{cluster="{m}"}}') == 1.0 or None
            ),
            f"{member} Ready through the controller",
        )
    # a tenant's quota: its status written
    tenant = {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "TenantQuota",
        "metadata": {"name": "rbac-proof"},
        "spec": {"namespaces": [APPS], "hard": {"cpu": "4", "memory": "4Gi", "pods": "20"}},
    }
    custom.create_cluster_custom_object("propagator.io", "v1alpha1", "tenantquotas", tenant)
    try:
        # propagation with a canary: finalizer, status, Events, the stable revision kept
        web = deployment("web", APPS, "nginx:1.27", 2)
        for c in web["spec"]["template"]["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": "10m", "memory": "16Mi"}}
        create(
            fleet,
            application(
                "web",
                APPS,
                [web, config_map("settings", APPS, mode="rbac")],
                canary={"steps": [{"weight": 50}]},
            ),
        )
        wait_ap(
            fleet, APPS, "web", "first release", lambda a: _canary(a).get("phase") == "Succeeded"
        )
        update_spec(
            fleet,
            APPS,
            "web",
            lambda s: s["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
                0
            ].update(image="nginx:1.28"),
        )
        wait_ap(
            fleet,
            APPS,
            "web",
            "a canary released",
            lambda a: (
                _canary(a).get("phase") == "Succeeded"
                and _canary(a).get("stableRevision") == _canary(a).get("canaryRevision")
            ),
        )
        for cluster in MEMBERS:
            assert member_object(fleet, cluster, "ConfigMap", APPS, "settings") is not None
        revisions = k8s.AppsV1Api(fleet.api(HUB)).list_namespaced_controller_revision
        # The canary's stable revisions, and the rollout's: both releases kept.
        assert len(revisions(APPS, label_selector="propagator.io/release").items) == 2
        assert len(revisions(APPS, label_selector="propagator.io/rollout-revision").items) == 2
        reasons = {e.reason for e in fleet.core(HUB).list_namespaced_event(APPS).items}
        assert {"CanaryStep", "CanarySucceeded"} <= reasons

        def quota_status() -> Any:
            found: Any = custom.get_cluster_custom_object(
                "propagator.io", "v1alpha1", "tenantquotas", "rbac-proof"
            )
            return (found.get("status") or {}).get("clusters")

        eventually(quota_status, "the TenantQuota status written")
    finally:
        custom.delete_cluster_custom_object(
            "propagator.io", "v1alpha1", "tenantquotas", "rbac-proof"
        )


@pytest.mark.parametrize(
    ("verb", "resource", "namespace", "allowed"),
    [
        ("get", "secrets", NAMESPACE, True),
        ("get", "secrets", "default", False),
        ("list", "secrets", None, False),
        ("create", "secrets", NAMESPACE, False),
        ("create", "pods", "default", False),
        ("create", "deployments.apps", "default", False),
        ("delete", "deployments.apps", "default", False),
        ("create", "clusterroles.rbac.authorization.k8s.io", None, False),
        ("create", "rolebindings.rbac.authorization.k8s.io", NAMESPACE, False),
        ("escalate", "clusterroles.rbac.authorization.k8s.io", None, False),
        ("delete", "memberclusters.propagator.io", None, False),
        # the controller reads the platform's rules and writes their status, no more
        ("watch", "resourceinterpreters.propagator.io", None, True),
        ("create", "resourceinterpreters.propagator.io", None, False),
        ("patch", "resourceinterpreters.propagator.io", None, False),
        ("patch", "tenantquotas.propagator.io/status", None, True),
        ("patch", "tenantquotas.propagator.io", None, False),
        ("patch", "resourceinterpreters.propagator.io/status", None, True),
        ("patch", "applicationpropagations.propagator.io/status", "default", True),
        ("update", "leases.coordination.k8s.io", NAMESPACE, True),
        ("update", "leases.coordination.k8s.io", "default", False),
    ],
)
def test_what_the_charts_account_may_and_may_not_do(
    fleet: Fleet, installed: None, verb: str, resource: str, namespace: str | None, allowed: bool
) -> None:
    where = ["-n", namespace] if namespace else ["--all-namespaces"]
    # kubectl reads TYPE/NAME: a subresource is asked for with --subresource
    resource, _, subresource = resource.partition("/")
    sub = [f"--subresource={subresource}"] if subresource else []
    result = subprocess.run(
        [
            str(fleet.binaries / "kubectl"), "--kubeconfig", str(fleet.kubeconfig(HUB)),
            "auth", "can-i", verb, resource, *sub, *where, "--as", SUBJECT,
        ],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.stdout.strip() == ("yes" if allowed else "no"), (verb, resource, namespace)


def test_helm_refuses_a_wrong_value_before_anything_is_installed(
    fleet: Fleet, joined: list[str]
) -> None:
    result = subprocess.run(
        [
            str(built("helm.sh") / "helm"), "install", "wrong", str(ROOT / "charts" / "propagator"),
            "--namespace", NAMESPACE, "--kubeconfig", str(fleet.kubeconfig(HUB)),
            "--set", "settings.max_concurrency=0", "--skip-crds",
        ],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode != 0
    assert "max_concurrency" in result.stderr
    assert "wrong-propagator" not in kubectl(fleet, "get", "clusterroles")
