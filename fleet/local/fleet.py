"""A local fleet: one hub and N member clusters of real control planes on loopback.

The state directory holds everything: ``state.json`` (ports, processes), each cluster's
certificates, data and logs, and ``kubeconfigs/<name>.yaml`` for users and tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, Field, ValidationError

from fleet.local import cluster as local_cluster
from fleet.local import process
from fleet.local.cluster import ClusterState, NodeShape

HUB = "hub"
REGIONS = ("eu-west", "us-east", "ap-south")
STATE_FILE = "state.json"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/propagator/local``, i.e. ``~/.local/state/propagator/local``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "propagator" / "local"


class LocalFleetError(RuntimeError):
    """The local fleet cannot be started, found or stopped as asked."""


class FleetOptions(BaseModel):
    """What ``local up`` builds; bounds keep it within what one machine can run."""

    members: int = Field(3, ge=0, le=20)
    nodes_per_cluster: int = Field(2, ge=1, le=500)
    node_cpu: str = "8"
    node_memory: str = "32Gi"
    node_pods: int = Field(110, ge=1)
    timeout_s: float = Field(300.0, gt=0)


class FleetState(BaseModel):
    """The saved description of a running local fleet."""

    state_dir: Path
    clusters: list[ClusterState]

    def cluster(self, name: str) -> ClusterState:
        for c in self.clusters:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.clusters)
        raise LocalFleetError(f"no cluster named {name!r} in this fleet (clusters: {known})")

    @property
    def hub(self) -> ClusterState:
        return self.cluster(HUB)

    @property
    def members(self) -> list[ClusterState]:
        return [c for c in self.clusters if c.role == "member"]

    def save(self) -> None:
        path = self.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, state_dir: Path) -> FleetState:
        path = state_dir / STATE_FILE
        if not path.exists():
            raise LocalFleetError(f"no local fleet in {state_dir} (no {STATE_FILE})")
        try:
            return cls.model_validate_json(path.read_bytes())
        except (ValidationError, OSError) as exc:
            first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise LocalFleetError(
                f"{path} is not a local fleet's state ({first}); stop what it started by "
                f"hand, or remove {state_dir} if nothing runs"
            ) from None

    def running_components(self) -> list[str]:
        return [
            f"{c.name}/{r.name}"
            for c in self.clusters
            for r in c.components.values()
            if process.is_running(r)
        ]


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (sockets held open together so none repeats)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((local_cluster.LOOPBACK, 0))
            ports.append(s.getsockname()[1])
        return ports


def _cluster_names(members: int) -> list[tuple[str, Literal["hub", "member"]]]:
    names: list[tuple[str, Literal["hub", "member"]]] = [(HUB, "hub")]
    return names + [(f"member-{i}", "member") for i in range(1, members + 1)]


def _prepare(state_dir: Path, binaries: Path, options: FleetOptions) -> FleetState:
    names = _cluster_names(options.members)
    ports = _free_ports(3 * len(names))
    clusters = []
    for i, (name, role) in enumerate(names):
        shape = NodeShape(
            count=options.nodes_per_cluster,
            cpu=options.node_cpu,
            memory=options.node_memory,
            pods=options.node_pods,
            region=REGIONS[i % len(REGIONS)],
        )
        state = local_cluster.prepare(
            name,
            role,
            state_dir / "clusters" / name,
            binaries,
            (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]),
            shape,
            state_dir / "kubeconfigs" / f"{name}.yaml",
        )
        clusters.append(state)
    return FleetState(state_dir=state_dir, clusters=clusters)


async def up(state_dir: Path, binaries: Path, options: FleetOptions) -> FleetState:
    """Start a hub and ``options.members`` members in parallel and wait until all are ready.

    On any failure everything started is stopped again and :class:`LocalFleetError` names the
    failing component with the tail of its log.
    """
    if (state_dir / STATE_FILE).exists():
        previous = FleetState.load(state_dir)
        if running := previous.running_components():
            raise LocalFleetError(
                f"a local fleet is already running in {state_dir} ({len(running)} processes, "
                f"e.g. {running[0]}); run `propagator local down --state-dir {state_dir}` first"
            )
        shutil.rmtree(state_dir)
    (state_dir / "kubeconfigs").mkdir(parents=True)
    state = _prepare(state_dir, binaries, options)
    state.save()
    deadline = time.monotonic() + options.timeout_s
    try:
        async with anyio.create_task_group() as tg:
            for c in state.clusters:
                tg.start_soon(local_cluster.start, c, deadline)
    except BaseException as exc:
        state.save()
        down(state, keep_state=True)
        failures = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
        first = next(
            (e for e in failures if isinstance(e, local_cluster.ComponentFailed)), failures[0]
        )
        if isinstance(first, Exception):
            raise LocalFleetError(
                f"the local fleet did not come up; stopped everything it started "
                f"(logs kept in {state_dir}).\n{first}"
            ) from exc
        raise
    state.save()
    return state


def down(state: FleetState, keep_state: bool = False) -> None:
    """Stop every process of the fleet and, unless ``keep_state``, delete its directory."""
    for c in reversed(state.clusters):
        local_cluster.stop(c)
    if not keep_state:
        shutil.rmtree(state.state_dir, ignore_errors=True)
