"""A member used only in some namespaces (MemberCluster spec.namespaces), joined with
credentials that reach only those, on a real member: its objects propagated and healed
through watches of those namespaces, and an object elsewhere refused before anything is
written there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, propagator, running
from tests.e2e.manifests import application, config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    ap_gone,
    cluster_entry,
    condition,
    create,
    delete_ap,
    kubectl,
    member_object,
    wait_ap,
)
from tests.e2e.waiting import eventually

MEMBER, LIMITED, FLEET = "member-1", "limited", "limited"
ALLOWED, OTHER = "limited-a", "limited-other"
ACCOUNT = "propagator-limited"
APPS = "limited-apps"


def _limited_kubeconfig(fleet: Fleet, path: Path) -> Path:
    """A kubeconfig of MEMBER whose ServiceAccount may do anything in ALLOWED, and only
    read nodes and pods elsewhere (what capacity is summed from)."""
    core = fleet.core(MEMBER)
    rbac: Any = k8s.RbacAuthorizationV1Api(fleet.api(MEMBER))  # (takes plain dicts too)
    for namespace in (ALLOWED, OTHER):
        core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_service_account(ALLOWED, {"metadata": {"name": ACCOUNT}})
    subject = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ALLOWED}]
    everything = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    rbac.create_namespaced_role(ALLOWED, {"metadata": {"name": ACCOUNT}, "rules": everything})
    rbac.create_namespaced_role_binding(
        ALLOWED,
        {
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": subject,
        },
    )
    read = [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}]
    rbac.create_cluster_role({"metadata": {"name": ACCOUNT}, "rules": read})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": ACCOUNT,
            },
            "subjects": subject,
        }
    )
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    token = core.create_namespaced_service_account_token(ACCOUNT, ALLOWED, request)
    config: dict[str, Any] = yaml.safe_load(fleet.kubeconfig(MEMBER).read_text())
    config["users"][0]["user"] = {"token": str(token.status.token)}
    path.write_text(yaml.safe_dump(config))
    return path


def _remove_limited_account(fleet: Fleet) -> None:
    rbac = k8s.RbacAuthorizationV1Api(fleet.api(MEMBER))
    rbac.delete_cluster_role_binding(ACCOUNT)
    rbac.delete_cluster_role(ACCOUNT)
    for namespace in (ALLOWED, OTHER):
        fleet.core(MEMBER).delete_namespace(namespace)


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    tmp = tmp_path_factory.mktemp("member-namespaces")
    kubeconfig = _limited_kubeconfig(fleet, tmp / "limited.yaml")
    hub = ["--hub-kubeconfig", str(fleet.kubeconfig(HUB))]
    try:
        join = propagator(
            "fleet",
            "join",
            LIMITED,
            "--kubeconfig",
            str(kubeconfig),
            "--fleet",
            FLEET,
            "--member-namespace",
            ALLOWED,
            *hub,
        )
        assert join.returncode == 0, join.stderr
        assert f"MemberCluster {LIMITED}: only namespaces {ALLOWED}" in join.stdout
        # A platform team's applications, which tenancy lets write anywhere: the member's
        # namespaces are the only bound.
        env = {**ENV, "PROPAGATOR_PLATFORM_NAMESPACES": APPS}
        with running(fleet, tmp, env) as controller:
            yield controller
            log = (tmp / "controller.log").read_text()
        # No refusal of these credentials was logged ("... is forbidden: User ..."); a
        # cache's own failures are logged at debug only: the tests above are the proof.
        assert "forbidden" not in log, log[-3000:]
    finally:
        propagator("fleet", "unjoin", LIMITED, *hub)
        _remove_limited_account(fleet)


def _applied_there(app: dict[str, Any]) -> bool:
    return cluster_entry(app, LIMITED).get("applied") is True


def test_a_limited_member_gets_its_objects_and_they_are_healed_there(
    fleet: Fleet, controller: Controller
) -> None:
    settings = config_map("settings", ALLOWED, mode="a")
    create(fleet, application("web", APPS, [settings], FLEET))
    wait_ap(fleet, APPS, "web", f"applied on {LIMITED}", _applied_there)
    live = member_object(fleet, MEMBER, "ConfigMap", ALLOWED, "settings")
    assert live.data == {"mode": "a"}

    # Its cache is a watch of that namespace, with the limited credentials: an edit
    # there is seen and undone.
    patch = '{"data":{"mode":"b"}}'
    kubectl(fleet, "-n", ALLOWED, "patch", "configmap", "settings", "-p", patch, cluster=MEMBER)
    eventually(
        lambda: (
            member_object(fleet, MEMBER, "ConfigMap", ALLOWED, "settings").data == {"mode": "a"}
        ),
        "the edited ConfigMap healed",
    )
    delete_ap(fleet, APPS, "web")
    eventually(lambda: ap_gone(fleet, APPS, "web"), "the application gone")
    assert member_object(fleet, MEMBER, "ConfigMap", ALLOWED, "settings") is None


def test_an_object_outside_a_limited_members_namespaces_is_refused_before_writing(
    fleet: Fleet, controller: Controller
) -> None:
    allowed, stray = config_map("fine", ALLOWED, a="1"), config_map("stray", OTHER, a="1")
    create(fleet, application("stray", APPS, [allowed, stray], FLEET))

    def refused(app: dict[str, Any]) -> bool:
        return "outside the namespaces" in cluster_entry(app, LIMITED).get("lastError", "")

    app = wait_ap(fleet, APPS, "stray", "refused on the limited member", refused)
    error = cluster_entry(app, LIMITED)["lastError"]
    assert f"MemberCluster {LIMITED} allows (spec.namespaces: {ALLOWED})" in error
    assert f"v1 ConfigMap {OTHER}/stray: metadata.namespace '{OTHER}' is not allowed" in error
    assert condition(app, "Applied").get("status") == "False"
    # Nothing of it was written, not even the object that was allowed.
    assert member_object(fleet, MEMBER, "ConfigMap", OTHER, "stray") is None
    assert member_object(fleet, MEMBER, "ConfigMap", ALLOWED, "fine") is None
    delete_ap(fleet, APPS, "stray")
    eventually(lambda: ap_gone(fleet, APPS, "stray"), "the application gone")
