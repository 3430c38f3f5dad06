"""Pull members on real control planes: a fleet of its own (a hub, member-1 joined Push,
member-2 joined Pull), the controller, and member-2's agent as a process with its own
kubeconfig to member-2 and only the join's bootstrap to the hub, reaching the hub through
a relay the tests can cut.

What the hub holds of member-2 is its namespace, its agent's identity and Lease, and its
Works; never a credential of member-2. Applications behave alike on both members:
placement, health, drift, canary, failover. The agent refuses what member-2 does not
allow, its identity can do nothing beyond its own namespace and MemberCluster, and the
hub being away for ten minutes costs member-2 nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
import pytest
import yaml
from kubernetes import client as k8s

from api.work import AGENT_LEASE, pull_namespace
from fleet import local
from fleet.local import HUB
from propagator.observability.dashboards import DASHBOARDS
from tests.e2e.conftest import Fleet, install_crds
from tests.e2e.controller import Controller, propagator, running
from tests.e2e.manifests import GROUP, PLURAL, VERSION, config_map, deployment, service
from tests.e2e.prometheus import Prometheus, prometheus_dir, substituted, with_values
from tests.e2e.pull.agents import AgentProcess
from tests.e2e.relay import Relay
from tests.e2e.tools import ROOT, built
from tests.e2e.waiting import eventually

PUSH, PULL = "member-1", "member-2"
FLEET_NAME = "mixed"
ENV = {
    "PROPAGATOR_RETRY_ATTEMPTS": "1",
    "PROPAGATOR_RETRY_BACKOFF_S": "0.2",
    "PROPAGATOR_RETRY_MAX_BACKOFF_S": "1",
    "PROPAGATOR_CLUSTER_TIMEOUT_S": "10",
    "PROPAGATOR_MEMBER_CONNECT_TIMEOUT_S": "2",
    "PROPAGATOR_REQUEUE_MAX_DELAY_S": "2",
}
AGENT_CHART = ROOT / "charts" / "propagator-agent"
HUB_AWAY_S = float(os.environ.get("PROPAGATOR_E2E_HUB_AWAY_S", "600"))
"""How long the hub stays out of the agent's reach (the issue's ten minutes)."""
AGENT_USER = f"system:serviceaccount:{pull_namespace(PULL)}:agent"


@dataclass
class Mixed:
    fleet: Fleet
    relay: Relay
    agent_kubeconfig: Path
    work_dir: Path
    join_output: str


@pytest.fixture(scope="module")
def mixed(testbin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    work_dir = tmp_path_factory.mktemp("pull")
    options = local.FleetOptions(members=2, nodes_per_cluster=2)
    state = anyio.run(local.up, work_dir / "fleet", testbin, options)
    fleet = Fleet(state, testbin)
    relay = Relay(("127.0.0.1", state.cluster(HUB).api_port))
    try:
        install_crds(fleet)
        hub = str(fleet.kubeconfig(HUB))
        pushed = propagator(
            "fleet", "join", PUSH, "--kubeconfig", str(fleet.kubeconfig(PUSH)),
            "--fleet", FLEET_NAME, "--hub-kubeconfig", hub,
        )  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr
        agent_kubeconfig = work_dir / "member-2-hub.kubeconfig"
        pulled = propagator(
            "fleet", "join", PULL, "--mode", "Pull", "--fleet", FLEET_NAME,
            "--agent-kubeconfig", str(agent_kubeconfig), "--hub-server", relay.address,
            "--bootstrap-ttl", "600", "--hub-kubeconfig", hub,
        )  # fmt: skip
        assert pulled.returncode == 0, pulled.stderr
        yield Mixed(fleet, relay, agent_kubeconfig, work_dir, pulled.stdout)
    finally:
        relay.close()
        fleet.close()
        local.down(state)


@pytest.fixture(scope="module")
def controller(mixed: Mixed) -> Iterator[Controller]:
    with running(mixed.fleet, mixed.work_dir, ENV) as controller:
        yield controller


AGENT_RELEASE, AGENT_NAMESPACE = "agent", "propagator-agent"
AGENT_ACCOUNT = f"{AGENT_RELEASE}-propagator-agent"
HUB_SECRET = "propagator-agent-hub"
ALLOWED = [
    {"group": "", "kind": "Namespace", "resource": "namespaces"},
    {"group": "", "kind": "ConfigMap", "resource": "configmaps"},
    {"group": "", "kind": "Service", "resource": "services"},
    {"group": "apps", "kind": "Deployment", "resource": "deployments"},
]
"""What member-2 lets its agent write (the agent chart's allow.kinds)."""


def helm(*args: str) -> str:
    result = subprocess.run(
        [str(built("helm.sh") / "helm"), *args],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def agent(mixed: Mixed, controller: Controller) -> Iterator[AgentProcess]:
    """member-2's agent as its chart runs it: the chart installed on member-2 (its
    ServiceAccount, its RBAC, its settings), the join's kubeconfig in the chart's hub
    Secret, and the agent run with that ServiceAccount's token, found as in a pod (kwok
    runs no containers)."""
    fleet = mixed.fleet
    member = str(fleet.kubeconfig(PULL))
    values = [
        "--set", f"cluster={PULL}", "--set-json", f"allow.kinds={json.dumps(ALLOWED)}",
        "-n", AGENT_NAMESPACE, "--kubeconfig", member,
    ]  # fmt: skip
    helm("install", AGENT_RELEASE, str(AGENT_CHART), "--create-namespace", *values)
    fleet.core(PULL).create_namespaced_secret(
        AGENT_NAMESPACE,
        {
            "metadata": {"name": HUB_SECRET},
            "data": {"kubeconfig": base64.b64encode(mixed.agent_kubeconfig.read_bytes()).decode()},
        },
    )
    rendered = helm("template", AGENT_RELEASE, str(AGENT_CHART), *values)
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    token = fleet.core(PULL).create_namespaced_service_account_token(
        AGENT_ACCOUNT,
        AGENT_NAMESPACE,
        k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(expiration_seconds=7200)),
    )
    sa_dir = mixed.work_dir / "serviceaccount"
    sa_dir.mkdir()
    cluster = yaml.safe_load(fleet.kubeconfig(PULL).read_text())["clusters"][0]["cluster"]
    (sa_dir / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (sa_dir / "token").write_text(str(token.status.token))
    server = urlparse(cluster["server"])
    process = AgentProcess(
        mixed.work_dir,
        {
            **env,
            "KUBERNETES_SERVICE_HOST": str(server.hostname),
            "KUBERNETES_SERVICE_PORT": str(server.port),
            "PROPAGATOR_SERVICE_ACCOUNT_DIR": str(sa_dir),
            "KUBECONFIG": str(mixed.work_dir / "none"),  # nothing to fall back to
        },
    )
    process.start()
    eventually(lambda: process.ready()[0] == 200 or None, "the agent ready")
    yield process
    if process.proc is not None:
        process.stop()
    # the member's API server refuses nothing the agent asks (its chart's RBAC suffices)
    assert "forbidden" not in process.log.read_text(), process.log_tail()


# -- helpers ------------------------------------------------------------------------------


def custom(fleet: Fleet, cluster: str = HUB) -> Any:
    return k8s.CustomObjectsApi(fleet.api(cluster))


def member_cluster(fleet: Fleet, name: str) -> dict[str, Any]:
    found: dict[str, Any] = custom(fleet).get_cluster_custom_object(
        GROUP, VERSION, "memberclusters", name
    )
    return found


def ready_condition(fleet: Fleet, name: str) -> dict[str, Any]:
    conditions = (member_cluster(fleet, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def create(fleet: Fleet, app: dict[str, Any]) -> None:
    fleet.ensure_namespace(app["metadata"]["namespace"])
    custom(fleet).create_namespaced_custom_object(
        GROUP, VERSION, app["metadata"]["namespace"], PLURAL, app
    )


def get_ap(fleet: Fleet, namespace: str, name: str = "web") -> dict[str, Any]:
    found: dict[str, Any] = custom(fleet).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return found


def update_spec(fleet: Fleet, namespace: str, change: Any, name: str = "web") -> None:
    def attempt() -> bool:
        app = get_ap(fleet, namespace, name)
        change(app["spec"])
        custom(fleet).replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, app)
        return True

    eventually(attempt, f"update of {namespace}/{name}")


def condition(app: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in (app.get("status") or {}).get("conditions") or [] if c["type"] == type_]
    return dict(found[0]) if found else {}


def line(app: dict[str, Any], cluster: str) -> dict[str, Any]:
    found = [c for c in (app.get("status") or {}).get("clusters") or [] if c["name"] == cluster]
    return dict(found[0]) if found else {}


def placed(app: dict[str, Any]) -> dict[str, int]:
    return {
        p["cluster"]: p.get("replicas") for p in (app.get("status") or {}).get("placement") or []
    }


def available(app: dict[str, Any]) -> bool:
    return condition(app, "Available").get("status") == "True"


def wait_ap(fleet: Fleet, namespace: str, what: str, predicate: Any) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        app = get_ap(fleet, namespace)
        current = app["metadata"].get("generation")
        observed = (app.get("status") or {}).get("observedGeneration")
        return app if observed == current and predicate(app) else None

    return eventually(probe, f"{namespace}/web: {what}")


def application(namespace: str, manifests: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ApplicationPropagation",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"fleet": FLEET_NAME, "resources": {"manifests": manifests}, **spec},
    }


def web(namespace: str, replicas: int, image: str = "nginx:1.27") -> dict[str, Any]:
    made = deployment("web", namespace, image, replicas)
    for container in made["spec"]["template"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "10m"}}
    return made


def deployments(fleet: Fleet, cluster: str, namespace: str) -> dict[str, tuple[str, int]]:
    return {
        d.metadata.name: (d.spec.template.spec.containers[0].image, d.spec.replicas)
        for d in fleet.apps(cluster).list_namespaced_deployment(namespace).items
        if d.metadata.deletion_timestamp is None
    }


def config_data(fleet: Fleet, cluster: str, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return dict(fleet.core(cluster).read_namespaced_config_map(name, namespace).data or {})
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def as_agent(fleet: Fleet, token: str) -> Any:
    """A client of the hub with the agent's token."""
    admin = fleet.api(HUB).configuration
    config = k8s.Configuration()
    config.host = admin.host
    config.ssl_ca_cert = admin.ssl_ca_cert
    config.api_key = {"authorization": f"Bearer {token}"}
    return k8s.ApiClient(config)


def kubectl(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(fleet.binaries / "kubectl"), "--kubeconfig", str(fleet.kubeconfig(HUB)), *args],
        capture_output=True,
        text=True,
        check=False,
    )


# -- tests --------------------------------------------------------------------------------


def test_a_pull_join_leaves_no_member_credential_on_the_hub(
    mixed: Mixed, agent: AgentProcess
) -> None:
    fleet = mixed.fleet
    assert f"MemberCluster {PULL}: mode Pull" in mixed.join_output
    assert str(mixed.agent_kubeconfig) in mixed.join_output
    assert stat.S_IMODE(mixed.agent_kubeconfig.stat().st_mode) == 0o600
    bootstrap = yaml.safe_load(mixed.agent_kubeconfig.read_text())["users"][0]["user"]["token"]
    # the agent's Lease heartbeat makes member-2 Ready, with what its agent reports
    eventually(lambda: ready_condition(fleet, PULL).get("status") == "True" or None, "Ready")
    status = member_cluster(fleet, PULL)["status"]
    assert status["agent"]["kubernetesVersion"].startswith("v1.")
    assert status["nodes"] == {"total": 2, "ready": 2}
    assert status["kubernetesVersion"] == status["agent"]["kubernetesVersion"]
    assert "renews its heartbeat" in ready_condition(fleet, PULL)["message"]
    # the agent exchanged the bootstrap token for one of its own
    eventually(lambda: agent.token != bootstrap or None, "a token of the agent's own")
    kept = fleet.core(PULL).read_namespaced_secret(HUB_SECRET, AGENT_NAMESPACE).data
    assert base64.b64decode(kept["token"]).decode() == agent.token  # for a restarted pod
    # no Secret on the hub holds anything of member-2's kubeconfig
    member = yaml.safe_load(fleet.kubeconfig(PULL).read_text())
    user = member["users"][0]["user"]
    secrets_of_member = [
        base64.b64decode(user["client-key-data"]),
        base64.b64decode(user["client-certificate-data"]),
        member["clusters"][0]["cluster"]["server"].encode(),
    ]
    held = fleet.core(HUB).list_secret_for_all_namespaces().items
    assert held, "the hub holds Secrets (member-1's kubeconfig among them)"
    for secret in held:
        for value in (secret.data or {}).values():
            decoded = base64.b64decode(value)
            for piece in secrets_of_member:
                assert piece not in decoded, f"Secret {secret.metadata.name} holds member-2's"
    assert member_cluster(fleet, PULL)["spec"].get("secretRef") is None


OWN, OTHER = pull_namespace(PULL), pull_namespace(PUSH)
CAN_I = [
    # (verb, resource[/name], subresource, namespace or None, allowed)
    ("list", "works.propagator.io", "", OWN, True),
    ("watch", "works.propagator.io", "", OWN, True),
    ("patch", "works.propagator.io", "status", OWN, True),
    ("patch", "works.propagator.io", "", OWN, False),
    ("create", "works.propagator.io", "", OWN, False),
    ("delete", "works.propagator.io", "", OWN, False),
    ("list", "works.propagator.io", "", OTHER, False),
    ("patch", "works.propagator.io", "status", OTHER, False),
    ("list", "works.propagator.io", "", None, False),
    ("patch", f"leases.coordination.k8s.io/{AGENT_LEASE}", "", OWN, True),
    ("patch", "leases.coordination.k8s.io/other", "", OWN, False),
    ("create", "leases.coordination.k8s.io", "", OWN, False),
    ("patch", f"memberclusters.propagator.io/{PULL}", "status", None, True),
    ("patch", f"memberclusters.propagator.io/{PUSH}", "status", None, False),
    ("patch", f"memberclusters.propagator.io/{PULL}", "", None, False),
    ("get", f"memberclusters.propagator.io/{PULL}", "", None, False),
    ("list", "memberclusters.propagator.io", "", None, False),
    ("create", "serviceaccounts/agent", "token", OWN, True),
    ("create", "serviceaccounts/default", "token", OWN, False),
    ("get", "secrets", "", OWN, False),
    ("list", "secrets", "", "propagator-system", False),
    ("list", "applicationpropagations.propagator.io", "", None, False),
    ("list", "configmaps", "", "default", False),
]


def test_the_agents_hub_identity_can_do_only_its_own_part(
    mixed: Mixed, agent: AgentProcess
) -> None:
    fleet = mixed.fleet
    table = []
    for verb, resource, subresource, namespace, allowed in CAN_I:
        where = ["-n", namespace] if namespace else []
        sub = [f"--subresource={subresource}"] if subresource else []
        answer = kubectl(fleet, "auth", "can-i", verb, resource, *sub, *where, "--as", AGENT_USER)
        table.append((verb, resource, subresource, namespace, answer.stdout.strip(), allowed))
    wrong = [row for row in table if (row[4] == "yes") != row[5]]
    assert not wrong, f"kubectl auth can-i --as {AGENT_USER}: {wrong}"
    # and with its own token, as it really runs: another cluster's report is refused
    client = as_agent(fleet, agent.token)
    try:
        calls: list[Any] = [
            lambda: k8s.CustomObjectsApi(client).patch_cluster_custom_object_status(
                GROUP, VERSION, "memberclusters", PUSH, {"status": {"agent": {}}}
            ),
            lambda: k8s.CoreV1Api(client).list_namespaced_secret("propagator-system"),
            lambda: k8s.CustomObjectsApi(client).list_namespaced_custom_object(
                GROUP, VERSION, pull_namespace(PUSH), "works"
            ),
        ]
        for call in calls:
            with pytest.raises(k8s.ApiException) as refused:
                call()
            assert refused.value.status == 403
    finally:
        client.close()


MEMBER_CAN_I = [
    # (verb, resource[/name], namespace or None, allowed) for the agent's account on member-2
    ("create", "configmaps", "shop", True),
    ("delete", "deployments.apps", "shop", True),
    ("create", "namespaces", None, True),
    ("list", "nodes", None, True),
    ("watch", "pods", None, True),
    ("create", "daemonsets.apps", "shop", False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False),
    ("create", "roles.rbac.authorization.k8s.io", "shop", False),
    ("get", "secrets", "shop", False),
    ("get", f"secrets/{HUB_SECRET}", AGENT_NAMESPACE, True),
    ("patch", f"secrets/{HUB_SECRET}", AGENT_NAMESPACE, True),
    ("get", "secrets/other", AGENT_NAMESPACE, False),
    ("delete", "nodes", None, False),
    ("create", "pods", "shop", False),
    ("list", "horizontalpodautoscalers.autoscaling", "shop", True),
    ("create", "horizontalpodautoscalers.autoscaling", "shop", False),
]


def test_the_agents_rights_on_its_member_are_what_its_chart_allows(
    mixed: Mixed, agent: AgentProcess
) -> None:
    account = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_ACCOUNT}"
    wrong = []
    for verb, resource, namespace, allowed in MEMBER_CAN_I:
        where = ["-n", namespace] if namespace else []
        answer = subprocess.run(
            [
                str(mixed.fleet.binaries / "kubectl"), "--kubeconfig",
                str(mixed.fleet.kubeconfig(PULL)), "auth", "can-i", verb, resource, *where,
                "--as", account,
            ],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if (answer.stdout.strip() == "yes") != allowed:
            wrong.append((verb, resource, namespace, answer.stdout.strip()))
    assert not wrong, f"on {PULL}, kubectl auth can-i --as {account}: {wrong}"


def test_an_application_divided_across_push_and_pull_members(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "divided"
    create(
        fleet,
        application(
            ns,
            [web(ns, 4), config_map("settings", ns, mode="a")],
            placement={"replicas": {"mode": "Divided"}},
        ),
    )
    app = wait_ap(
        fleet,
        ns,
        "2:2 and Available",
        lambda a: placed(a) == {PUSH: 2, PULL: 2} and available(a),
    )
    assert condition(app, "Applied")["status"] == "True"
    assert line(app, PULL).get("applied") is True, line(app, PULL)
    assert deployments(fleet, PULL, ns) == {"web": ("nginx:1.27", 2)}
    assert config_data(fleet, PULL, ns, "settings") == {"mode": "a"}
    work = custom(fleet).get_namespaced_custom_object(
        GROUP, VERSION, pull_namespace(PULL), "works", f"{ns}.web"
    )
    assert work["spec"]["application"] == f"{ns}/web"
    assert work["status"]["applied"] is True
    assert work["status"]["revision"] == work["spec"]["revision"]
    metrics = controller.scrape()
    assert metrics.get(f'propagator_work_writes_total{{cluster="{PULL}",operation="apply"}}', 0) > 0
    assert not any(k.startswith("propagator_member_writes_total") and PULL in k for k in metrics)
    assert "propagator_agent_heartbeats_total" in agent.metrics()


def test_the_fleet_dashboards_pull_panel_has_data(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    targets = [f"127.0.0.1:{controller.metrics_port}", f"127.0.0.1:{agent.metrics_port}"]
    data = mixed.work_dir / "prometheus"
    data.mkdir()
    prometheus = Prometheus(prometheus_dir(), data, targets)
    try:
        (fleet_board,) = [d for d in DASHBOARDS if d.uid == "propagator-fleet"]
        panels = [p for p in fleet_board.panels if p.pull]
        assert panels, "the Fleet dashboard has a panel of Pull members"

        def missing() -> list[str]:
            values, empty = substituted(prometheus, fleet_board)
            return empty + [
                f"{p.title}: {expr}"
                for p in panels
                for expr, _ in p.targets
                if not prometheus.series(with_values(expr, values))
            ]

        eventually(lambda: not missing() or None, f"every query of {panels[0].title!r}")
    finally:
        prometheus.stop()


def test_drift_on_a_pull_member_is_healed_by_its_agent(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "divided"
    fleet.core(PULL).patch_namespaced_config_map("settings", ns, {"data": {"mode": "hacked"}})
    eventually(
        lambda: config_data(fleet, PULL, ns, "settings") == {"mode": "a"} or None,
        "member-2's ConfigMap healed",
    )
    fleet.core(PULL).delete_namespaced_config_map("settings", ns)
    eventually(
        lambda: config_data(fleet, PULL, ns, "settings") == {"mode": "a"} or None,
        "member-2's deleted ConfigMap back",
    )


def test_a_canary_on_a_pull_member(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "canary"
    label = {"metadata": {"labels": {"canary": "yes"}}}
    custom(fleet).patch_cluster_custom_object(GROUP, VERSION, "memberclusters", PULL, label)
    steps = [{"weight": 50, "manual": True}, {"weight": 100}]
    create(
        fleet,
        application(
            ns,
            [web(ns, 4), service("web", ns)],
            canary={"clusterSelector": {"matchLabels": {"canary": "yes"}}, "steps": steps},
        ),
    )
    wait_ap(
        fleet,
        ns,
        "first release",
        lambda a: (a["status"].get("canary") or {}).get("phase") == "Succeeded",
    )
    update_spec(
        fleet,
        ns,
        lambda s: s["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
            0
        ].update(image="nginx:1.28"),
    )
    wait_ap(
        fleet,
        ns,
        "at the canary's gate",
        lambda a: (
            ((a["status"].get("canary") or {}).get("phase"), a["status"]["canary"].get("step"))
            == ("Paused", 0)
        ),
    )
    split = {"web": ("nginx:1.27", 2), "web-canary": ("nginx:1.28", 2)}
    eventually(lambda: deployments(fleet, PULL, ns) == split or None, f"{PULL}: {split}")
    assert deployments(fleet, PUSH, ns) == {"web": ("nginx:1.27", 4)}
    kubectl(
        fleet, "annotate", "--overwrite", "-n", ns, "ap/web", "propagator.io/canary-action=promote"
    )
    wait_ap(fleet, ns, "promoted", lambda a: a["status"]["canary"].get("phase") == "Succeeded")
    for cluster in (PUSH, PULL):
        eventually(
            lambda c=cluster: deployments(fleet, c, ns) == {"web": ("nginx:1.28", 4)} or None,  # type: ignore[misc]
            f"{cluster}: all on nginx:1.28",
        )
    unlabel = {"metadata": {"labels": {"canary": None}}}
    custom(fleet).patch_cluster_custom_object(GROUP, VERSION, "memberclusters", PULL, unlabel)


def test_the_agent_refuses_what_its_member_does_not_allow(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "propagator-system"  # a platform namespace: may send anything
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "grab-the-member"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "User", "name": "intruder"}],
    }
    create(fleet, application(ns, [binding, config_map("grab", ns, x="1")]))

    def refused(app: dict[str, Any]) -> bool:
        return "refused by the member's agent" in line(app, PULL).get("lastError", "")

    app = wait_ap(fleet, ns, "refused on member-2 alone", refused)
    message = line(app, PULL)["lastError"]
    refusal = "kind ClusterRoleBinding.rbac.authorization.k8s.io is not allowed"
    assert f"ClusterRoleBinding grab-the-member: {refusal}" in message
    assert line(app, PUSH).get("applied") is True
    rbac = k8s.RbacAuthorizationV1Api(fleet.api(PULL))
    with pytest.raises(k8s.ApiException) as absent:
        rbac.read_cluster_role_binding("grab-the-member")
    assert absent.value.status == 404
    assert config_data(fleet, PULL, ns, "grab") is None  # refused whole: nothing written
    custom(fleet).delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "web")


def test_a_work_too_large_for_the_hub_fails_the_pull_member_alone(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "large"
    fleet.ensure_namespace(ns)
    # ~1.7 MiB of selected hub objects for each member: within what the controller renders
    # (4 MiB for all clusters), beyond what one Work may hold
    for i in range(2):
        fleet.core(HUB).create_namespaced_config_map(
            ns,
            {
                "metadata": {"name": f"big-{i}", "labels": {"size": "big"}},
                "data": {"blob": "x" * 900_000},
            },
        )
    app = application(ns, [])
    app["spec"]["resources"] = {
        "selectors": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "labelSelector": {"matchLabels": {"size": "big"}},
            }
        ]
    }
    create(fleet, app)

    def too_large(a: dict[str, Any]) -> bool:
        return "a Work holds at most 1 MiB" in line(a, PULL).get("lastError", "")

    done = wait_ap(fleet, ns, "refused for member-2, applied on member-1", too_large)
    said = line(done, PULL)["lastError"]
    assert re.match(rf"its objects for Pull member {PULL} are 1\.\d MiB; a Work holds", said)
    eventually(lambda: line(get_ap(fleet, ns), PUSH).get("applied") is True or None, "on member-1")
    assert config_data(fleet, PUSH, ns, "big-1") is not None
    assert config_data(fleet, PULL, ns, "big-0") is None
    with pytest.raises(k8s.ApiException) as absent:
        custom(fleet).get_namespaced_custom_object(
            GROUP, VERSION, pull_namespace(PULL), "works", f"{ns}.web"
        )
    assert absent.value.status == 404
    custom(fleet).delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "web")


def test_a_stopped_agent_fails_over_and_back(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "failover"
    create(
        fleet,
        application(
            ns,
            [web(ns, 4)],
            placement={"replicas": {"mode": "Divided"}},
            # (failing back 15 s after it is Ready: its removal there shows first)
            failover={
                "clusterUnreachableAfter": "2s",
                "failback": "WhenReady",
                "failbackAfter": "15s",
            },
        ),
    )
    wait_ap(fleet, ns, "2:2", lambda a: placed(a) == {PUSH: 2, PULL: 2} and available(a))
    agent.stop()
    eventually(lambda: ready_condition(fleet, PULL).get("status") == "False" or None, "NotReady")
    assert "has not renewed Lease" in ready_condition(fleet, PULL)["message"]
    wait_ap(fleet, ns, "all 4 on member-1", lambda a: placed(a) == {PUSH: 4} and available(a))
    # its Work now empty: what ran on member-2 is removed once its agent is back
    work = custom(fleet).get_namespaced_custom_object(
        GROUP, VERSION, pull_namespace(PULL), "works", f"{ns}.web"
    )
    assert work["spec"].get("objects", []) == []
    agent.start()
    eventually(lambda: ready_condition(fleet, PULL).get("status") == "True" or None, "Ready again")
    eventually(lambda: "web" not in deployments(fleet, PULL, ns) or None, "removed from member-2")
    wait_ap(fleet, ns, "2:2 again", lambda a: placed(a) == {PUSH: 2, PULL: 2} and available(a))


def test_the_agent_keeps_heals_and_catches_up_while_the_hub_is_away(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet, ns = mixed.fleet, "away"
    create(
        fleet,
        application(
            ns,
            [config_map("settings", ns, mode="a")],
            failover={"clusterUnreachableAfter": "1h"},
        ),
    )
    wait_ap(fleet, ns, "applied", lambda a: condition(a, "Applied").get("status") == "True")
    eventually(lambda: config_data(fleet, PULL, ns, "settings") == {"mode": "a"} or None, "there")
    mixed.relay.cut()
    try:
        eventually(
            lambda: ready_condition(fleet, PULL).get("status") == "False" or None, "NotReady"
        )
        fleet.core(PULL).patch_namespaced_config_map("settings", ns, {"data": {"mode": "hacked"}})
        eventually(
            lambda: config_data(fleet, PULL, ns, "settings") == {"mode": "a"} or None,
            "healed with the hub away",
        )
        update_spec(fleet, ns, lambda s: s["resources"]["manifests"][0]["data"].update(mode="b"))
        until = time.monotonic() + HUB_AWAY_S
        while time.monotonic() < until:  # what runs stays as it is, all along
            assert config_data(fleet, PULL, ns, "settings") == {"mode": "a"}
            time.sleep(min(15.0, max(0.0, until - time.monotonic())))
    finally:
        mixed.relay.restore()
    eventually(
        lambda: config_data(fleet, PULL, ns, "settings") == {"mode": "b"} or None,
        "caught up with the change made while away",
    )
    eventually(lambda: ready_condition(fleet, PULL).get("status") == "True" or None, "Ready again")
    wait_ap(fleet, ns, "applied everywhere", lambda a: line(a, PULL).get("applied") is True)
    assert agent.proc is not None
    assert agent.proc.poll() is None, agent.log_tail()


def test_unjoin_revokes_the_agents_identity(
    mixed: Mixed, controller: Controller, agent: AgentProcess
) -> None:
    fleet = mixed.fleet
    token = agent.token
    agent.stop()
    result = propagator("fleet", "unjoin", PULL, "--hub-kubeconfig", str(fleet.kubeconfig(HUB)))
    assert result.returncode == 0, result.stderr
    assert f"Namespace {pull_namespace(PULL)}: delete" in result.stdout
    client = as_agent(fleet, token)
    try:

        def refused() -> bool | None:
            try:
                k8s.CustomObjectsApi(client).list_namespaced_custom_object(
                    GROUP, VERSION, pull_namespace(PULL), "works"
                )
            except k8s.ApiException as exc:
                return exc.status == 401 or None
            return None

        eventually(refused, "the agent's token refused (401)")
    finally:
        client.close()
