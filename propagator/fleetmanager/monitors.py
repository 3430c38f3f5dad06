"""The member monitors, one per MemberCluster: made from the kubeconfig in its Secret
(in the controller namespace), made again when that Secret or ``spec.namespaces``
changes, dropped with the MemberCluster."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from api.work import AGENT_LEASE, WORK_LABEL, pull_name_problem, pull_namespace
from fleet.member import MemberMonitor, namespaces_of
from fleet.pullmember import PullMonitor
from fleet.readiness import HealthPolicy
from kube.informer import Informer
from propagator.fleetmanager.memberstatus import recorded_health
from propagator.settings import Settings


@dataclass
class Changes:
    """What a :meth:`Monitors.sync` changed: monitors made (new, or rebuilt) and dropped."""

    made: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.made or self.dropped)


class Monitors:
    """The monitors by member name; the one owner of that map (others read it)."""

    def __init__(
        self,
        settings: Settings,
        policy: HealthPolicy,
        member_clusters: Informer,
        secrets: Informer,
        on_change: Callable[[], None],
        leases: Informer | None = None,
    ) -> None:
        """``member_clusters``, ``secrets``: the hub's MemberClusters and the controller
        namespace's Secrets; ``leases``: the Pull members' agent Leases; ``on_change``:
        called when a monitor's member changes (a probe's verdict, discovery, capacity)."""
        self.settings = settings
        self.policy = policy
        self.member_clusters = member_clusters
        self.secrets = secrets
        self.leases = leases
        self.on_change = on_change
        self.monitors: dict[str, MemberMonitor] = {}

    def _kubeconfig_of(self, member: dict[str, Any]) -> tuple[str | None, str]:
        """The member's kubeconfig as its Secret holds it (base64: every pass asks, and
        only a changed version is decoded) and the version of that Secret."""
        ref = (member.get("spec") or {}).get("secretRef") or {}
        if ref.get("namespace") != self.settings.namespace:
            return None, f"outside:{ref.get('namespace')}"
        secret = self.secrets.get(f"{ref['namespace']}/{ref.get('name')}")
        if secret is None:
            return None, "missing"
        data = (secret.get("data") or {}).get(ref.get("key", "kubeconfig"))
        return data, str(secret["metadata"].get("resourceVersion"))

    def sync(self) -> Changes:
        """Create, rebuild (Secret or spec.namespaces changed) or drop monitors to match
        the MemberClusters; returns which."""
        wanted = {m["metadata"]["name"]: m for m in self.member_clusters.snapshot()}
        changes = Changes()
        for name in list(self.monitors):
            if name not in wanted:
                del self.monitors[name]  # its registry unit stops its watches, closes it
                changes.dropped.add(name)
        for name, member in wanted.items():
            namespaces = namespaces_of(member)
            current = self.monitors.get(name)
            if (member.get("spec") or {}).get("mode") == "Pull":
                if self._pull(name, member, namespaces, current):
                    changes.made.add(name)
                continue
            encoded, version = self._kubeconfig_of(member)
            if current is not None and (current.secret_version, current.namespaces) == (
                version,
                namespaces,
            ):
                continue
            monitor = self._monitor(name, encoded, version, namespaces)
            if monitor.config_error and version.startswith("outside:"):
                monitor.config_error = (
                    f"secretRef namespace {version.removeprefix('outside:')!r} is not the "
                    f"controller namespace {self.settings.namespace!r}"
                )
            if current is not None:
                monitor.health = current.health  # a new Secret does not reset readiness
            else:  # taken over: from the last verdict on the hub, until probes say more
                monitor.health = recorded_health(member, time.monotonic())
            self.monitors[name] = monitor
            changes.made.add(name)
        return changes

    def _pull(
        self,
        name: str,
        member: dict[str, Any],
        namespaces: tuple[str, ...],
        current: MemberMonitor | None,
    ) -> bool:
        """Keep (or make: True) the monitor of Pull member ``name``, with its agent's
        report and Lease as the hub holds them."""
        made = not isinstance(current, PullMonitor) or current.namespaces != namespaces
        if isinstance(current, PullMonitor) and not made:
            monitor = current
        else:
            monitor = PullMonitor(name, "pull", self.policy, namespaces=namespaces)
            monitor.config_error = pull_name_problem(name)
            monitor.health = (
                current.health if current is not None else recorded_health(member, time.monotonic())
            )
            self.monitors[name] = monitor
            if self.leases is not None:
                monitor.lease_seen(self.leases.get(f"{pull_namespace(name)}/{AGENT_LEASE}"))
        monitor.report_seen((member.get("status") or {}).get("agent"))
        return made

    def lease_changed(self, lease: dict[str, Any] | None) -> None:
        """An agent's Lease changed on the hub: its member's heartbeat (a Lease outside the
        namespace of the cluster its label names is nobody's)."""
        meta = (lease or {}).get("metadata") or {}
        cluster = str((meta.get("labels") or {}).get(WORK_LABEL) or "")
        monitor = self.monitors.get(cluster)
        if (
            not isinstance(monitor, PullMonitor)
            or meta.get("namespace") != pull_namespace(cluster)
            or meta.get("name") != AGENT_LEASE
        ):
            return
        monitor.lease_seen(lease)

    def _monitor(
        self, name: str, encoded: str | None, version: str, namespaces: tuple[str, ...]
    ) -> MemberMonitor:
        """A monitor for member ``name`` from its Secret's kubeconfig (base64); whatever
        that holds, a monitor (one that says why it cannot connect, at worst)."""
        try:
            kubeconfig = (
                None
                if encoded is None
                else base64.b64decode(encoded, validate=True).decode(errors="replace")
            )
        except ValueError:  # (the hub's API server never stores that)
            error = "the kubeconfig Secret's data is not base64"
            return MemberMonitor(
                name, version, self.policy, config_error=error, namespaces=namespaces
            )
        return MemberMonitor.from_kubeconfig(
            name,
            kubeconfig,
            version,
            options=self.settings.member_connection(),
            policy=self.policy,
            allow_exec=self.settings.allow_exec_kubeconfigs,
            on_change=self.on_change,
            namespaces=namespaces,
        )
