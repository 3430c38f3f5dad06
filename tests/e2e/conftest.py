"""A hub and three member clusters of real control planes, started once per test session.

If they cannot start, every e2e test errors with the failing component and its log: the
tests never skip.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from kubernetes import client as k8s

from api.crd import crds
from fleet import local
from fleet.local import cluster as local_cluster
from tests.e2e.waiting import eventually


@dataclass
class Fleet:
    """The running session fleet, with ready-made clients per cluster."""

    state: local.FleetState
    binaries: Path

    def kubeconfig(self, name: str) -> Path:
        return self.state.cluster(name).kubeconfig

    def api(self, name: str) -> Any:
        return self._clients[name]

    def core(self, name: str) -> Any:
        return k8s.CoreV1Api(self.api(name))

    def apps(self, name: str) -> Any:
        return k8s.AppsV1Api(self.api(name))

    @property
    def member_names(self) -> list[str]:
        return [m.name for m in self.state.members]

    def __post_init__(self) -> None:
        self._clients = {c.name: local_cluster.api_client(c) for c in self.state.clusters}

    def ensure_namespace(self, name: str, cluster: str = local.HUB) -> None:
        """Create the namespace on ``cluster`` unless it exists."""
        try:
            self.core(cluster).create_namespace({"metadata": {"name": name}})
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise

    def close(self) -> None:
        for api in self._clients.values():
            api.close()


@pytest.fixture(scope="session")
def testbin() -> Path:
    """The Kubernetes binaries; built on first use from a checkout (fails loudly if not)."""
    return local.testbin_dir()


@pytest.fixture(scope="session")
def fleet(testbin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    state_dir = tmp_path_factory.mktemp("fleet")
    options = local.FleetOptions(members=3, nodes_per_cluster=2)
    state = anyio.run(local.up, state_dir, testbin, options)
    running = Fleet(state, testbin)
    try:
        yield running
    finally:
        running.close()
        local.down(state)


@pytest.fixture(scope="session")
def faketime() -> Path:
    """libfaketime, to shift a process's wall clock (hack/faketime.sh unpacks it once)."""
    script = Path(__file__).resolve().parents[2] / "hack" / "faketime.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"hack/faketime.sh failed: {done.stderr}"
    return Path(done.stdout.strip())


@pytest.fixture(scope="session")
def hub_kubeconfig(fleet: Fleet) -> Path:
    return fleet.kubeconfig(local.HUB)


@pytest.fixture(scope="session")
def member_kubeconfigs(fleet: Fleet) -> dict[str, Path]:
    return {name: fleet.kubeconfig(name) for name in fleet.member_names}


def _established(ext: Any, name: str) -> bool:
    conditions = ext.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


@pytest.fixture(scope="session")
def hub_crds(fleet: Fleet) -> list[str]:
    """Install Propagator's CRDs on the hub (as `propagator crds | kubectl apply -f -` does)."""
    return install_crds(fleet)


def install_crds(fleet: Fleet) -> list[str]:
    """Install Propagator's CRDs on ``fleet``'s hub; their names, once established."""
    ext = k8s.ApiextensionsV1Api(fleet.api(local.HUB))
    names = []
    for crd in crds():
        try:
            ext.create_custom_resource_definition(crd)  # type: ignore[arg-type]
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
        names.append(crd["metadata"]["name"])
    for name in names:
        eventually(partial(_established, ext, name), f"CRD {name} established")
    return names


MEMBER_LAYERS = {"member-1": "high-performance", "member-2": "high-performance", "member-3": "edge"}
FLEET_NAME = "local"


@pytest.fixture(scope="session")
def joined(fleet: Fleet, hub_crds: list[str]) -> list[str]:
    """The three members joined into Fleet ``local`` with the real ``propagator fleet join``
    (layers as in MEMBER_LAYERS, their kwok region, label env=test)."""
    from tests.e2e.controller import propagator  # imports this module

    hub = str(fleet.kubeconfig(local.HUB))
    for name, layer in MEMBER_LAYERS.items():
        result = propagator(
            "fleet",
            "join",
            name,
            "--kubeconfig",
            str(fleet.kubeconfig(name)),
            "--fleet",
            FLEET_NAME,
            "--layer",
            layer,
            "--region",
            fleet.state.cluster(name).nodes.region,
            "--label",
            "env=test",
            "--hub-kubeconfig",
            hub,
        )
        assert result.returncode == 0, result.stderr
        assert f"MemberCluster {name}: layer {layer}" in result.stdout
    return list(MEMBER_LAYERS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that ran beside a controller shows the end of its log: an e2e
    failure that does not repeat can only be understood from what the controller did."""
    report = yield
    controller = getattr(item, "funcargs", {}).get("controller")
    log = getattr(controller, "log", None)
    if report.failed and isinstance(log, Path) and log.exists():
        report.sections.append(
            ("controller log (last 20,000 characters)", log.read_text(errors="replace")[-20_000:])
        )
    return report
