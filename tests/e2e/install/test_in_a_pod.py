"""The controller the way Kubernetes runs it, on the real hub: replicas that are Ready as
standbys and take over on SIGTERM, an in-cluster token rotated under a running controller,
and a $KUBECONFIG of several files."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    application,
    create,
    member_object,
    wait_ap,
)
from tests.e2e.waiting import eventually

QUICK_LEASE = {
    **ENV,
    "PROPAGATOR_LEADER_LEASE_DURATION_S": "4",
    "PROPAGATOR_LEADER_RENEW_DEADLINE_S": "3",
    "PROPAGATOR_LEADER_RETRY_PERIOD_S": "0.5",
}
LEADER = "propagator_leader"


def _ready(controller: Controller) -> bool | None:
    try:
        status, _ = controller.ready()
    except OSError:
        return None  # not listening yet
    return status == 200 or None


def _leading(controller: Controller) -> float | None:
    try:
        return controller.scrape().get(LEADER)
    except OSError:
        return None


def _propagated(fleet: Fleet, namespace: str, name: str) -> None:
    create(fleet, application(name, namespace, [config_map(name, namespace, v="1")]))
    wait_ap(
        fleet,
        namespace,
        name,
        "applied",
        lambda a: any(
            c["type"] == "Applied" and c["status"] == "True"
            for c in (a.get("status") or {}).get("conditions") or []
        ),
    )
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "ConfigMap", namespace, name) is not None


def test_standbys_are_ready_and_take_over_on_sigterm(
    fleet: Fleet, joined: list[str], tmp_path: Path
) -> None:
    replicas = [Controller(fleet, tmp_path / f"r{i}", QUICK_LEASE) for i in range(3)]
    for r in replicas:
        r.log.parent.mkdir()
    first, second, third = replicas
    try:
        first.start()
        eventually(lambda: _ready(first), "the first replica Ready")
        eventually(lambda: _leading(first) == 1.0 or None, "the first replica leading")
        second.start()
        eventually(lambda: _ready(second), "the second replica Ready as a standby")
        assert _leading(second) == 0.0
        _propagated(fleet, "standby", "before")
        third.start()  # started while both run: Ready, standing by
        eventually(lambda: _ready(third), "the third replica Ready as a standby")
        assert _leading(third) == 0.0
        took = first.stop()  # releases the Lease on its way out
        print(f"SIGTERM to exit of the leader: {took:.2f}s")
        new = eventually(
            lambda: next((r for r in (second, third) if _leading(r) == 1.0), None),
            "a standby leading",
        )
        other = third if new is second else second
        assert _leading(other) == 0.0
        _propagated(fleet, "standby", "after")
        assert "held by" in new.log_tail()
    finally:
        for r in replicas:
            if r.proc is not None:
                r.stop()


def _hub_server_and_ca(fleet: Fleet) -> tuple[str, bytes]:
    config = yaml.safe_load(fleet.kubeconfig(HUB).read_text())
    cluster = config["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"])


def _token(core: Any, namespace: str, secret: Any) -> str:
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(
            audiences=[],
            expiration_seconds=3600,
            bound_object_ref=k8s.V1BoundObjectReference(
                kind="Secret", api_version="v1", name=secret.metadata.name, uid=secret.metadata.uid
            ),
        )
    )
    answer = core.create_namespaced_service_account_token("propagator", namespace, request)
    return str(answer.status.token)


def test_a_rotated_in_cluster_token_is_used_once_the_old_one_is_refused(
    fleet: Fleet, joined: list[str], tmp_path: Path
) -> None:
    namespace = "pod-identity"
    fleet.ensure_namespace(namespace)
    core: Any = k8s.CoreV1Api(fleet.api(HUB))
    rbac: Any = k8s.RbacAuthorizationV1Api(fleet.api(HUB))
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "propagator"}})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "propagator-pod-identity"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "propagator", "namespace": namespace}],
        }
    )
    first_secret, second_secret = (
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}})
        for name in ("token-one", "token-two")
    )
    server, ca = _hub_server_and_ca(fleet)
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "ca.crt").write_bytes(ca)
    first = _token(core, namespace, first_secret)
    (sa_dir / "token").write_text(first)
    url = urlparse(server)
    env = {
        **ENV,
        "KUBERNETES_SERVICE_HOST": str(url.hostname),
        "KUBERNETES_SERVICE_PORT": str(url.port),
        "PROPAGATOR_SERVICE_ACCOUNT_DIR": str(sa_dir),
        "KUBECONFIG": str(tmp_path / "none"),  # nothing to fall back to
    }
    (tmp_path / "run").mkdir()
    controller = Controller(fleet, tmp_path / "run", env, hub_args=[])
    controller.start()
    try:
        eventually(lambda: _ready(controller), "the in-cluster controller Ready")
        _propagated(fleet, namespace, "with-first-token")
        # The kubelet swaps in a token bound to another Secret; the first one's Secret is
        # deleted, so the hub refuses the first token from then on.
        second = _token(core, namespace, second_secret)
        (sa_dir / "token.new").write_text(second)
        (sa_dir / "token.new").replace(sa_dir / "token")
        core.delete_namespaced_secret("token-one", namespace)

        def refused() -> bool | None:
            answer = httpx.get(
                f"{server}/api",
                headers={"Authorization": f"Bearer {first}"},
                verify=ssl.create_default_context(cadata=ca.decode()),
            )
            return answer.status_code == 401 or None

        eventually(refused, "the first token refused")
        _propagated(fleet, namespace, "with-second-token")
    finally:
        controller.stop()


def test_a_kubeconfig_of_two_files_finds_the_context_in_the_second(
    fleet: Fleet, joined: list[str], tmp_path: Path
) -> None:
    hub = yaml.safe_load(fleet.kubeconfig(HUB).read_text())
    context = hub.pop("current-context")
    first = tmp_path / "first"
    first.write_text(yaml.safe_dump({"current-context": context, "contexts": []}))
    second = tmp_path / "second"
    second.write_text(yaml.safe_dump(hub))
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(application("web", "default", [config_map("web", "default")])))
    result = subprocess.run(
        [sys.executable, "-m", "propagator.cli.main", "schedule", "-f", str(app)],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": f"{first}{os.pathsep}{second}"},
        check=False,
    )
    # read the hub's MemberClusters and Fleets: placed (0) or not (1), never bad input (2)
    assert result.returncode in (0, 1), result.stderr
    assert "Scheduled:" in result.stdout or "Unschedulable:" in result.stdout
