"""One member as the hub sees it: its connection, its probes, its nodes and pods.

The connection is built from the kubeconfig in the member's Secret (refused if it would
run a command, read local files or skip TLS verification). Its watches of nodes and pods
(run by the member's unit in the controller's registry) keep capacity current without
listing on every probe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet.capacity import same_but_version, slim_node, slim_pod, summarize
from fleet.connection import ApiError, ConnectionOptions, KubeConnection, tls_problem
from fleet.health import Health, HealthPolicy
from fleet.informer import Informer
from fleet.kubeconfig import KubeconfigError, check_not_expired, load_kubeconfig

_DISCOVERY_EVERY = 30  # probes between two discovery refreshes
POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="
"""The pods capacity counts: bound to a node and not terminated. A pod enters the watch
once bound, not while it waits for a node (each new pod: 2 events instead of 3, on a
Kubernetes 1.37 member); one never bound is not heard of."""


@dataclass
class ProbeResult:
    ok: bool
    error: str | None = None


@dataclass
class MemberMonitor:
    """Connection, watches and health of one member cluster."""

    name: str
    secret_version: str
    policy: HealthPolicy
    connection: KubeConnection | None = None
    config_error: str | None = None
    health: Health = field(default_factory=Health)
    version: str | None = None
    enablements: list[dict[str, Any]] = field(default_factory=list)
    informers: list[Informer] = field(default_factory=list)
    _probes: int = field(default_factory=lambda: random.randrange(_DISCOVERY_EVERY))
    """Probes so far, from a random start: members added together (a controller
    starting) read their discovery again in different rounds, not all in one."""
    _readyz_at: float | None = None
    """When ``/readyz`` last passed (time.monotonic())."""
    _capacity: dict[str, Any] | None = None
    """What :meth:`capacity` summed last; dropped when a node or pod changes."""

    @classmethod
    def from_kubeconfig(
        cls,
        name: str,
        kubeconfig: str | None,
        secret_version: str,
        *,
        options: ConnectionOptions,
        policy: HealthPolicy,
        allow_exec: bool,
        on_change: Callable[[], None],
    ) -> MemberMonitor:
        """Build the monitor; a missing or unusable kubeconfig gives a monitor that reports
        why in ``config_error`` instead of raising."""
        monitor = cls(name=name, secret_version=secret_version, policy=policy)
        if kubeconfig is None:
            monitor.config_error = "the kubeconfig Secret (or its key) does not exist"
            return monitor
        source = f"kubeconfig Secret of MemberCluster {name}"
        try:
            loaded = load_kubeconfig(kubeconfig, source=source, allow_exec=allow_exec)
            check_not_expired(loaded.credentials, source)
            if problem := tls_problem(loaded.credentials):
                raise KubeconfigError(f"{source}: {problem}")
        except KubeconfigError as exc:
            monitor.config_error = str(exc)
            return monitor
        conn = KubeConnection(name, loaded.credentials, options)
        monitor.connection = conn

        def changed(_event: str, old: Any, new: Any) -> None:
            if old is not None and new is not None and same_but_version(old, new):
                return  # (a node's heartbeat, a pod's container status: nothing to sum)
            monitor._capacity = None
            on_change()

        monitor.informers = [
            Informer(conn, "v1", "Node", changed, transform=slim_node),
            Informer(
                conn,
                "v1",
                "Pod",
                changed,
                transform=slim_pod,
                field_selector=POD_SELECTOR,
            ),
        ]
        return monitor

    async def probe(self, timeout_s: float, now: float | None = None) -> ProbeResult:
        """Probe the member — ``/readyz``, or, when its health allows, what arrived from
        it since the last probe or a PING (:meth:`_answering`) — and fold the result
        into ``health``."""
        started = time.monotonic() if now is None else now
        if self.connection is None:
            result = ProbeResult(False, self.config_error)
        else:
            # The timeout bounds the whole probe: each step's own (connecting, the TLS
            # handshake, the answer) would add up past it. A step gets nine tenths of
            # it, so a request that hears nothing times out itself first, and its
            # connection is checked (and dropped if dead) as any other call's.
            result = ProbeResult(False, f"no answer within {timeout_s:g} s")
            with anyio.move_on_after(timeout_s):
                result = await self._probe(self.connection, timeout_s * 0.9, started)
            self._probes += 1
        now = time.monotonic() if now is None else now
        self.health = self.health.observe(result.ok, now, self.policy, result.error)
        return result

    async def _probe(self, conn: KubeConnection, timeout_s: float, started: float) -> ProbeResult:
        try:
            if not await self._answering(conn, timeout_s, started):
                await conn.readyz(timeout_s)
                self._readyz_at = started
            if self.version is None or self._probes % _DISCOVERY_EVERY == 0:
                version = str((await conn.version()).get("gitVersion"))
                await conn.discovery.refresh()
                # Both at once: a status pass between the two awaits would write the
                # version with no kinds served, and the scheduler would read that.
                self.enablements = await conn.discovery.enablements()
                self.version = version
        except ApiError as exc:
            # /readyz failures carry every check; the first line says which failed.
            return ProbeResult(False, exc.message.splitlines()[0][:300])
        return ProbeResult(True)

    async def _answering(self, conn: KubeConnection, timeout_s: float, now: float) -> bool:
        """True when this probe passes without ``/readyz``: the member's health allows it
        (:meth:`Health.may_ping`) and its API server sent something since the last probe
        (a watch event, a bookmark, an answer: nothing to send then, as client-go's
        HTTP/2 health check) or answers a PING now."""
        if not self.health.may_ping(self._readyz_at, now, self.policy):
            return False
        last = self.health.last_probe_at
        if conn.answered_at is not None and last is not None and conn.answered_at > last:
            return True
        return await conn.ping(timeout_s)

    def capacity(self) -> dict[str, Any] | None:
        """``nodes`` and ``resources`` from the watched nodes and pods, once both listed
        (summed again only after a change: every status pass reads it for every member;
        the same dict until then, not to be modified)."""
        if not self.informers or not all(i.synced for i in self.informers):
            return None
        if self._capacity is None:
            nodes, pods = self.informers
            self._capacity = summarize(nodes.snapshot(), pods.snapshot())
        return self._capacity
