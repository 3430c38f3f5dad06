"""A hub and three member clusters of real control planes, started once per test session.

If they cannot start, every e2e test errors with the failing component and its log: the
tests never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from kubernetes import client as k8s

from fleet import local
from fleet.local import cluster as local_cluster


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
def hub_kubeconfig(fleet: Fleet) -> Path:
    return fleet.kubeconfig(local.HUB)


@pytest.fixture(scope="session")
def member_kubeconfigs(fleet: Fleet) -> dict[str, Path]:
    return {name: fleet.kubeconfig(name) for name in fleet.member_names}
