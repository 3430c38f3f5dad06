"""One member as the hub sees it: its connection, its probes, its nodes and pods.

The connection is built from the kubeconfig in the member's Secret (refused if it would
run a command, read local files or skip TLS verification). Its watches of nodes and pods
(run by the member's unit in the controller's registry) keep capacity current without
listing on every probe.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

import anyio

from fleet.capacity import quota_usage, same_but_version, slim_node, slim_pod, summarize
from fleet.readiness import Health, HealthPolicy
from kube.connection import KubeConnection
from kube.credentials import tls_problem
from kube.errors import ApiError
from kube.informer import Informer
from kube.kubeconfig import KubeconfigError, check_not_expired, load_kubeconfig
from kube.redact import unforeseen
from kube.session import ConnectionOptions

log = logging.getLogger(__name__)

_DISCOVERY_EVERY = 30  # probes between two discovery refreshes
POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
"""Pods not terminated: those bound to a node hold its resources (capacity); all count
against their namespace's quota (see :meth:`MemberMonitor.quota_usage`)."""


@dataclass
class ProbeResult:
    ok: bool
    error: str | None = None


def namespaces_of(member: Mapping[str, Any]) -> tuple[str, ...]:
    """A MemberCluster's spec.namespaces (as the hub returns it), sorted, once each."""
    listed = (member.get("spec") or {}).get("namespaces") or []
    return tuple(sorted({n for n in listed if isinstance(n, str)}))


@dataclass
class MemberMonitor:
    """Connection, watches and health of one member cluster."""

    mode: ClassVar[str] = "Push"
    """How the member gets its work (``fleet.pullmember.PullMonitor``: Pull)."""
    name: str
    secret_version: str
    policy: HealthPolicy
    connection: KubeConnection | None = None
    config_error: str | None = None
    health: Health = field(default_factory=Health)
    version: str | None = None
    enablements: list[dict[str, Any]] = field(default_factory=list)
    informers: list[Informer] = field(default_factory=list)
    namespaces: tuple[str, ...] = ()
    """The only namespaces the member may be used in (MemberCluster spec.namespaces;
    empty: the whole cluster)."""
    _probes: int = field(default_factory=lambda: random.randrange(_DISCOVERY_EVERY))
    """Probes so far, from a random start: members added together (a controller
    starting) read their discovery again in different rounds, not all in one."""
    _readyz_at: float | None = None
    """When ``/readyz`` last passed (time.monotonic())."""
    _capacity: dict[str, Any] | None = None
    _unsummable: bool = False
    """Summing the watched nodes and pods failed (a member made them up): not tried again,
    nor logged again, until one of them changes."""
    """What :meth:`capacity` summed last; dropped when a node or pod changes."""
    pods_changed: Callable[[str], None] | None = None
    """Told the namespace of each pod that comes, goes or starts being deleted (set by
    whoever runs the watches: the controller's member registry)."""

    @property
    def usable(self) -> bool:
        """Whether the member can be used: a Push member's kubeconfig gave a connection; a
        Pull member needs none, only a name its hub namespace can carry."""
        if self.mode == "Pull":
            return self.config_error is None
        return self.connection is not None

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
        namespaces: tuple[str, ...] = (),
    ) -> MemberMonitor:
        """Build the monitor; a missing or unusable kubeconfig gives a monitor that reports
        why in ``config_error`` instead of raising."""
        monitor = cls(
            name=name, secret_version=secret_version, policy=policy, namespaces=namespaces
        )
        if kubeconfig is None:
            monitor.config_error = "the kubeconfig Secret (or its key) does not exist"
            return monitor
        source = f"kubeconfig Secret of MemberCluster {name}"
        try:
            loaded = load_kubeconfig(kubeconfig, source=source, allow_exec=allow_exec)
            check_not_expired(loaded.credentials, source)
            if problem := tls_problem(loaded.credentials):
                raise KubeconfigError(f"{source}: {problem}")
            conn = KubeConnection(name, loaded.credentials, options)
        except KubeconfigError as exc:
            monitor.config_error = str(exc)
            return monitor
        except Exception as exc:  # whatever the Secret holds: this member only
            log.exception("MemberCluster %s: its kubeconfig cannot be used", name)
            monitor.config_error = f"{source} cannot be used: {unforeseen(exc)}"
            return monitor
        monitor.watch(conn, on_change)
        return monitor

    def watch(self, conn: KubeConnection, on_change: Callable[[], None]) -> None:
        """Use ``conn`` for this member, with watches of its nodes and pods (for whoever
        runs :attr:`informers`); ``on_change``: told when capacity must be summed again."""
        monitor = self  # (what the closures below change)
        monitor.connection = conn

        def resum() -> None:
            monitor._capacity = None
            monitor._unsummable = False
            on_change()

        def node_changed(_event: str, old: Any, new: Any) -> None:
            if old is None or new is None or not same_but_version(old, new):
                resum()  # (not for a heartbeat: nothing to sum)

        def pod_changed(_event: str, old: Any, new: Any) -> None:
            if old is not None and new is not None and same_but_version(old, new):
                return  # (a container's status)
            if monitor.pods_changed is not None:
                monitor.pods_changed(str((new or old)["metadata"].get("namespace")))
            if any(o is not None and o["spec"].get("nodeName") for o in (old, new)):
                resum()  # (one waiting for a node holds no node's resources)

        monitor.informers = [
            Informer(conn, "v1", "Node", node_changed, transform=slim_node),
            Informer(
                conn,
                "v1",
                "Pod",
                pod_changed,
                transform=slim_pod,
                field_selector=POD_SELECTOR,
                index=lambda pod: str(pod["metadata"].get("namespace")),
            ),
        ]

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
            return ProbeResult(False, (exc.message.splitlines() or [""])[0][:300])
        except Exception as exc:  # an answer nobody foresaw: this member fails its probe
            log.exception("MemberCluster %s: probe failed", self.name)
            return ProbeResult(False, f"probe failed: {unforeseen(exc)}")
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

    def quota_usage(self, namespace: str) -> dict[str, Decimal] | None:
        """What the pods in ``namespace`` that a quota there counts request together, as
        the pod watch holds them (:func:`fleet.capacity.quota_usage`); None until the
        watch has listed."""
        if len(self.informers) < 2 or not self.informers[1].synced:
            return None
        try:
            return quota_usage(self.informers[1].indexed(namespace))
        except Exception:  # pods a member made up: their use is not known
            log.exception("MemberCluster %s: pods in %s cannot be summed", self.name, namespace)
            return None

    def capacity(self) -> dict[str, Any] | None:
        """``nodes`` and ``resources`` from the watched nodes and pods, once both listed
        (summed again only after a change: every status pass reads it for every member;
        the same dict until then, not to be modified)."""
        if not self.informers or not all(i.synced for i in self.informers) or self._unsummable:
            return None
        if self._capacity is None:
            nodes, pods = self.informers
            try:
                self._capacity = summarize(nodes.snapshot(), pods.snapshot())
            except Exception:  # nodes or pods a member made up: its room is not known
                log.exception("MemberCluster %s: capacity cannot be summed", self.name)
                self._unsummable = True
                return None
        return self._capacity
