"""``kubectl propagator`` through kubectl itself (the plugin found on the PATH) against the
live hub: explain, join and unjoin (status, canary and rebalance are exercised in the
canary and failover tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, running
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    ready_everywhere,
    wait_ap,
)
from tests.e2e.waiting import eventually

NS = "plugin"
EXTRA = "plugin-extra"
"""A second name for member-1's cluster, joined and unjoined by the test."""


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("plugin"), ENV) as controller:
        yield controller
        if not ap_gone(fleet, NS, "web"):
            delete_ap(fleet, NS, "web")
            eventually(lambda: ap_gone(fleet, NS, "web") or None, "plugin/web gone")


def _member_cluster(fleet: Fleet, name: str) -> dict[str, Any] | None:
    try:
        found: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
            "propagator.io", "v1alpha1", "memberclusters", name
        )
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(found)


def test_help_lists_the_commands_in_kubectls_style(fleet: Fleet) -> None:
    result = kubectl_propagator(fleet, "--help")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("Available Commands:\n", 1)[1].split("\n\n", 1)[0]
    assert [line.split()[0] for line in listed.splitlines()] == [
        "rebalance",
        "sync",
        "canary",
        "rollout",
        "status",
        "explain",
        "join",
        "unjoin",
    ]
    options = result.stdout.split("\nOptions:\n", 1)[1]
    assert "    --kubeconfig=KUBECONFIG:\n\tthe hub's kubeconfig" in options
    assert 'Use "kubectl propagator <command> --help"' in result.stdout


def test_explain_says_why_each_cluster_is_in_or_out(fleet: Fleet, controller: Controller) -> None:
    app = application(
        "web",
        NS,
        [config_map("settings", NS, mode="explained")],
        placement={"excludeClusters": [MEMBERS[2]]},
    )
    create(fleet, app)
    wait_ap(fleet, NS, "web", "ready on two", lambda a: ready_everywhere(a, total=2))
    result = kubectl_propagator(fleet, "-n", NS, "explain", "web")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "excluded" in lines[MEMBERS[2]].lower(), result.stdout
    for cluster in MEMBERS[:2]:
        assert cluster in lines, result.stdout
    decision = json.loads(kubectl_propagator(fleet, "explain", "web", "-n", NS, "--json").stdout)
    assert decision["schedulable"] is True
    assert sorted(p["cluster"] for p in decision["placement"]) == MEMBERS[:2]
    assert set(decision["current"]) == set(MEMBERS[:2])  # where it runs now
    assert decision["clusters"][MEMBERS[2]]["filteredBy"]
    missing = kubectl_propagator(fleet, "-n", NS, "explain", "nothing-here")
    assert missing.returncode == 1
    assert f"applicationpropagation {NS}/nothing-here: not found" in missing.stderr


def test_join_then_unjoin_a_member(fleet: Fleet, controller: Controller) -> None:
    member_kubeconfig = str(fleet.kubeconfig(MEMBERS[0]))
    dry = kubectl_propagator(
        fleet, "join", EXTRA, "--member-kubeconfig", member_kubeconfig, "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "Would write:" in dry.stdout
    assert _member_cluster(fleet, EXTRA) is None
    joined = kubectl_propagator(
        fleet,
        "join",
        EXTRA,
        "--member-kubeconfig",
        member_kubeconfig,
        "--layer",
        "edge",
        "--label",
        "team=plugin",
    )
    assert joined.returncode == 0, joined.stderr
    assert f"MemberCluster {EXTRA}: layer edge" in joined.stdout
    member = _member_cluster(fleet, EXTRA)
    assert member is not None
    assert member["metadata"]["labels"]["team"] == "plugin"
    # the controller takes it up: it probes the member and says it is Ready
    eventually(
        lambda: (
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in ((_member_cluster(fleet, EXTRA) or {}).get("status") or {}).get(
                    "conditions"
                )
                or []
            )
            or None
        ),
        f"{EXTRA} Ready",
    )
    unjoined = kubectl_propagator(fleet, "unjoin", EXTRA)
    assert unjoined.returncode == 0, unjoined.stderr
    eventually(lambda: _member_cluster(fleet, EXTRA) is None or None, f"{EXTRA} gone")


def test_join_refuses_bad_input_naming_it(fleet: Fleet, tmp_path: Any) -> None:
    missing = kubectl_propagator(
        fleet, "join", EXTRA, "--member-kubeconfig", str(tmp_path / "nope")
    )
    assert missing.returncode == 1
    assert f"--member-kubeconfig {tmp_path / 'nope'}: No such file" in missing.stderr
    bad_ns = kubectl_propagator(
        fleet,
        "join",
        EXTRA,
        "--member-kubeconfig",
        str(fleet.kubeconfig(MEMBERS[0])),
        "--controller-namespace",
        "Not_A_Namespace",
    )
    assert bad_ns.returncode == 2
    assert "--controller-namespace 'Not_A_Namespace'" in bad_ns.stderr
    assert _member_cluster(fleet, EXTRA) is None
